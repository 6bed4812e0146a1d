// Internal to base/checksum: XXH3 compiled once per instruction set, chosen at run time.
//
// Debian's libxxhash is built for the x86-64 baseline (SSE2); XXH3 over a large buffer runs
// about twice as fast with AVX2. Each variant is xxhash.h inlined into its own translation
// unit (checksum_baseline.cc with the project's flags, checksum_avx2.cc with -mavx2), and
// checksum.cc picks one once, by what the CPU supports. Every variant gives the same digests
// (XXH3's output does not depend on the vector width). Tests call the variants directly;
// everyone else uses checksum.h.
//
// Thread-safety: the functions are pure; a state is used from one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace railyard::base::checksum_internal {

struct Xxh3Variant {
  const char* name;  // xxhash's XXH_VECTOR ("avx2", "sse2", "neon", ...) or "library"
  // The streaming state is opaque memory of this size and alignment.
  size_t state_size;
  size_t state_align;
  uint64_t (*hash)(const void* data, size_t n);
  void (*reset)(void* state);
  void (*update)(void* state, const void* data, size_t n);
  uint64_t (*digest)(const void* state);
};

// The system's libxxhash, as linked.
const Xxh3Variant& Xxh3Library();
// The project's own target (SSE2 on x86-64); runs everywhere the binary runs.
const Xxh3Variant& Xxh3Baseline();
// AVX2; null where it is not compiled in (not x86-64) or the CPU (or OS) lacks it.
const Xxh3Variant* Xxh3Avx2();
// checksum_avx2.cc's accessor, whatever the CPU: Xxh3Avx2 checks first.
const Xxh3Variant& Xxh3Avx2Unchecked();
// The variant checksum.h uses: the one UseXxh3Implementation chose, else Xxh3Best().
const Xxh3Variant& Xxh3Selected();
// AVX2 where compiled in and supported, else the baseline.
const Xxh3Variant& Xxh3Best();
// The variant called `name` ("library", "baseline" or its instruction set, "avx2"); null when
// there is none by that name or this CPU cannot run it.
const Xxh3Variant* Xxh3Named(std::string_view name);

}  // namespace railyard::base::checksum_internal
