#include "railyard/net/store.h"

namespace railyard::net {

Status CheckStoreKey(std::string_view store, std::string_view key) {
  if (key.size() <= kMaxStoreKeyBytes) return Status::Ok();
  // Only the start of an oversized key: the message is for a person, not a dump.
  return InvalidArgument("{}: key '{}...' has {} bytes, the limit is {}", store, key.substr(0, 64),
                         key.size(), kMaxStoreKeyBytes);
}

Status CheckStoreValue(std::string_view store, std::string_view key, std::string_view value) {
  if (value.size() <= kMaxStoreValueBytes) return Status::Ok();
  return InvalidArgument("{}: value for key '{}' has {} bytes, the limit is {}", store, key,
                         value.size(), kMaxStoreValueBytes);
}

}  // namespace railyard::net
