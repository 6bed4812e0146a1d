// Generated training data: each sample's size and bytes derived from (seed, index), so tests
// and benchmarks can check every byte without storing a reference copy.
//
//   SyntheticSpec spec{.samples = 1000, .min_bytes = 1024, .max_bytes = 4096, .seed = 7};
//   RY_RETURN_IF_ERROR(ValidateSyntheticSpec(spec));
//   std::string sample;
//   FillSyntheticSample(spec, 42, &sample);          // the same bytes on every call
//
// Thread-safety: pure functions, safe to call concurrently (WriteSyntheticFiles on different
// directories).
#pragma once

#include <cstdint>
#include <string>

#include "railyard/base/status.h"

namespace railyard::storage {

// SplitMix64's output function: a bijective, well-mixing 64-bit hash. The synthetic data and
// the reader's shuffle both derive their randomness from it, so they need no library PRNG
// whose sequence could change between standard library versions.
uint64_t Mix64(uint64_t x);

// Parameters of a generated data set: sample i has a size drawn uniformly from
// [min_bytes, max_bytes] and bytes from a PRNG stream, both seeded by (seed, i).
struct SyntheticSpec {
  uint64_t samples = 0;
  uint64_t min_bytes = 1024;
  uint64_t max_bytes = 4096;
  uint64_t seed = 0;
};

// INVALID_ARGUMENT when samples is 0 or above 2^40, min > max, or max above 1 GiB.
Status ValidateSyntheticSpec(const SyntheticSpec& spec);
uint64_t SyntheticSampleSize(const SyntheticSpec& spec, uint64_t index);
// Replaces *out with sample `index`'s bytes. Precondition: ValidateSyntheticSpec is OK.
void FillSyntheticSample(const SyntheticSpec& spec, uint64_t index, std::string* out);
// Relative path of sample `index` as WriteSyntheticFiles names it, e.g. "000012/000012345.bin":
// sorted paths give index order, and no directory holds more than 1000 files.
std::string SyntheticSampleName(uint64_t index);
// Writes every sample as its own file under `dir` (created) on the host file system, named
// SyntheticSampleName: the "many small files" form that PackDirectory turns back into sample
// order. Not fsynced: these are test and benchmark inputs, cheap to regenerate.
Status WriteSyntheticFiles(const SyntheticSpec& spec, const std::string& dir);

}  // namespace railyard::storage
