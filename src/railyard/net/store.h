// Store: the rendezvous key-value store through which the ranks of one job find each other.
//
// Ranks publish their endpoint addresses under agreed keys and wait for everyone else's;
// launchers and validation agents use it for small counters and flags. Every call takes a
// Deadline: a store that cannot be reached, or a key that never appears, ends in
// DEADLINE_EXCEEDED or UNAVAILABLE with a message that names the store (its address or
// directory) and the key, never in a hang.
//
// Implementations, all in net/store/: InMemoryStore (threads of one process; tests;
// NewInMemoryStore below), TcpStore (a server run by the launcher or by rank 0, clients
// prove the per-job secret; tcp_store_server.h, tcp_store_client.h) and FileStore (a
// directory on a shared file system; file_store.h).
//
//   RY_RETURN_IF_ERROR(store.Set("job/addr/3", addr, deadline));
//   RY_ASSIGN_OR_RETURN(std::string peer, store.Get("job/addr/0", deadline));
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"

namespace railyard::net {

// Keys are at most this long and values at most kMaxStoreValueBytes: both are checked at
// the client and again by servers, which never trust a length from the network.
inline constexpr size_t kMaxStoreKeyBytes = 1024;
inline constexpr size_t kMaxStoreValueBytes = 16 << 20;

// OK when `key` (or `value`, stored under `key`) is within its limit; otherwise
// INVALID_ARGUMENT naming `store` (the store's Describe() text), the key and the limit.
Status CheckStoreKey(std::string_view store, std::string_view key);
Status CheckStoreValue(std::string_view store, std::string_view key, std::string_view value);

class Store {
 public:
  virtual ~Store() = default;

  // Sets key to value, replacing any previous value.
  virtual Status Set(std::string_view key, std::string_view value, base::Deadline deadline) = 0;

  // The value of key, waiting until it is set. DEADLINE_EXCEEDED names the key and the store.
  virtual Result<std::string> Get(std::string_view key, base::Deadline deadline) = 0;

  // Adds delta to the integer stored at key (absent counts as 0) and returns the new value.
  // INVALID_ARGUMENT when the present value is not an integer.
  virtual Result<int64_t> Add(std::string_view key, int64_t delta, base::Deadline deadline) = 0;

  // Sets key to `desired` only if its present value equals `expected` (an absent key matches
  // an empty `expected`). Returns the value the key holds afterwards: `desired` on success,
  // the unchanged present value otherwise.
  virtual Result<std::string> CompareAndSet(std::string_view key, std::string_view expected,
                                            std::string_view desired, base::Deadline deadline) = 0;

  // Returns when every key is set. DEADLINE_EXCEEDED names the keys still missing and, when
  // `missing` is given, lists them there too: only keys the store knows to be unset (a tcp
  // store that does not answer before the deadline leaves it empty), so that callers can
  // name the ranks that never published without guessing.
  virtual Status Wait(std::span<const std::string> keys, base::Deadline deadline,
                      std::vector<std::string>* missing) = 0;
  Status Wait(std::span<const std::string> keys, base::Deadline deadline) {
    return Wait(keys, deadline, nullptr);
  }

  // For messages: "tcp store 10.0.0.1:29400", "file store /lustre/job/rdzv".
  virtual std::string Describe() const = 0;
};

// A store shared by threads of one process. Tests and the single-process paths use it.
std::unique_ptr<Store> NewInMemoryStore();

}  // namespace railyard::net
