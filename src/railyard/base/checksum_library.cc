// XXH3 through the system's libxxhash (Debian's is built for SSE2 only): the reference the
// tests compare every variant with, and a choice for benchmarks (UseXxh3Implementation).
#define XXH_STATIC_LINKING_ONLY  // the state's layout, to allocate it in place
#include <xxhash.h>

#include "railyard/base/checksum_variants.h"

namespace railyard::base::checksum_internal {
namespace {

uint64_t Hash(const void* data, size_t n) { return XXH3_64bits(data, n); }

void Reset(void* state) { (void)XXH3_64bits_reset(static_cast<XXH3_state_t*>(state)); }

void Update(void* state, const void* data, size_t n) {
  (void)XXH3_64bits_update(static_cast<XXH3_state_t*>(state), data, n);
}

uint64_t Digest(const void* state) {
  return XXH3_64bits_digest(static_cast<const XXH3_state_t*>(state));
}

}  // namespace

const Xxh3Variant& Xxh3Library() {
  static constexpr Xxh3Variant kVariant = {
      "library", sizeof(XXH3_state_t), alignof(XXH3_state_t), &Hash, &Reset, &Update, &Digest};
  return kVariant;
}

}  // namespace railyard::base::checksum_internal
