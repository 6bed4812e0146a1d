#include "railyard/storage/synthetic_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "railyard/base/files.h"
#include "railyard/storage/fs_util.h"

namespace railyard::storage {
namespace {

constexpr uint64_t kMaxSyntheticSamples = uint64_t{1} << 40;
constexpr uint64_t kMaxSyntheticBytes = uint64_t{1} << 30;

}  // namespace

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

Status ValidateSyntheticSpec(const SyntheticSpec& spec) {
  if (spec.samples == 0 || spec.samples > kMaxSyntheticSamples) {
    return InvalidArgument("synthetic samples must be in 1..2^40, got {}", spec.samples);
  }
  if (spec.min_bytes > spec.max_bytes) {
    return InvalidArgument("synthetic min size {} is larger than max size {}", spec.min_bytes,
                           spec.max_bytes);
  }
  if (spec.max_bytes > kMaxSyntheticBytes) {
    return InvalidArgument("synthetic max size {} is above the 1 GiB limit", spec.max_bytes);
  }
  return Status::Ok();
}

uint64_t SyntheticSampleSize(const SyntheticSpec& spec, uint64_t index) {
  const uint64_t span = spec.max_bytes - spec.min_bytes + 1;  // modulo bias < 2^-33: harmless
  return spec.min_bytes + Mix64(spec.seed ^ Mix64(index)) % span;
}

void FillSyntheticSample(const SyntheticSpec& spec, uint64_t index, std::string* out) {
  const uint64_t size = SyntheticSampleSize(spec, index);
  out->resize(size);
  // A counter-mode stream: word w is Mix64(key + w), so any sample is generated on its own.
  const uint64_t key = Mix64(Mix64(spec.seed + 0x5851f42d4c957f2dull) ^ index);
  char* p = out->data();
  uint64_t w = 0;
  for (uint64_t at = 0; at < size; at += 8, ++w) {
    const uint64_t word = Mix64(key + w);
    std::memcpy(p + at, &word, std::min<uint64_t>(8, size - at));
  }
}

std::string SyntheticSampleName(uint64_t index) {
  return fmt::format("{:06d}/{:09d}.bin", index / 1000, index);
}

Status WriteSyntheticFiles(const SyntheticSpec& spec, const std::string& dir) {
  RY_RETURN_IF_ERROR(ValidateSyntheticSpec(spec));
  std::string data;
  for (uint64_t i = 0; i < spec.samples; ++i) {
    const std::string path = fmt::format("{}/{}", dir, SyntheticSampleName(i));
    if (i % 1000 == 0) RY_RETURN_IF_ERROR(base::MakeDirs(base::ParentDir(path)));
    FillSyntheticSample(spec, i, &data);
    // No fsync: these are benchmark and test inputs, cheap to regenerate.
    RY_RETURN_IF_ERROR(WriteNewFile(*DefaultFs(), path, data, /*sync=*/false));
  }
  return Status::Ok();
}

}  // namespace railyard::storage
