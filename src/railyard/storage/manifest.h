// The checkpoint manifest: what a committed checkpoint holds and where each byte of it lies.
//
// A checkpoint step directory holds one shard file per rank and a `manifest.json` listing every
// tensor (name, element type, global shape) and every saved piece of it (global offsets and
// sizes, the shard file, byte offset, length and XXH3-64 checksum), plus small user metadata.
// The format is documented in docs/formats.md ("Checkpoint manifest"). Each rank also writes
// its own piece list `rank-<R>.json` in the same format (with "rank" set); rank 0 merges them
// into the manifest when it commits.
//
//   RY_ASSIGN_OR_RETURN(Manifest m, LoadManifest(*fs, dir + "/manifest.json"));
//   const TensorInfo* t = m.FindTensor("layer0.weight");
//
// Parsing checks everything a reader relies on, so a reader never indexes out of bounds:
// types, shapes, that each piece lies inside its tensor, that its length matches its element
// count, that file names stay inside the directory, and (ValidateCoverage) that the pieces of
// each tensor cover it exactly once (identical pieces saved by several ranks are replicas).
// Errors are INVALID_ARGUMENT naming the file and the field ("pieces[3].sizes").
//
// Thread-safety: values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"

namespace railyard::storage {

class Fs;

inline constexpr int64_t kManifestFormatVersion = 1;

// Element types, named as safetensors names them. Data is stored little-endian, row-major.
enum class DType : uint8_t {
  kBool,
  kU8,
  kI8,
  kU16,
  kI16,
  kF16,
  kBF16,
  kU32,
  kI32,
  kF32,
  kU64,
  kI64,
  kF64
};

std::string_view DTypeName(DType dtype);  // "F32"
size_t DTypeSize(DType dtype);            // bytes per element
// INVALID_ARGUMENT quoting the text and listing the valid names.
Result<DType> ParseDType(std::string_view name);

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // global shape; empty for a scalar
};

struct PieceInfo {
  std::string tensor;
  std::vector<int64_t> offsets;  // global start per dimension
  std::vector<int64_t> sizes;    // extent per dimension
  std::string file;              // shard file name inside the step directory
  uint64_t byte_offset = 0;
  uint64_t length = 0;  // element count * element size
  uint64_t xxh3 = 0;    // XXH3-64 of the `length` bytes
};

struct Manifest {
  int64_t format_version = kManifestFormatVersion;
  int64_t step = 0;
  int world_size = 1;
  int rank = -1;        // set only in a per-rank piece list (rank-<R>.json)
  std::string created;  // UTC, ISO 8601 ("2026-11-30T19:00:01Z")
  std::vector<TensorInfo> tensors;
  std::vector<PieceInfo> pieces;
  // Values are strings; a value that is other JSON (an object, a number) is kept as its
  // compact JSON text.
  std::map<std::string, std::string> metadata;

  const TensorInfo* FindTensor(std::string_view name) const;
};

// Product of the dimensions; INVALID_ARGUMENT when negative or beyond 2^62.
Result<uint64_t> ElementCount(std::span<const int64_t> shape);

// "[0:4, 8:16]": start:end per dimension; "[]" for a scalar.
std::string FormatExtent(std::span<const int64_t> offsets, std::span<const int64_t> sizes);

// Pretty JSON, one tensor and one piece per line (diffs and `grep` stay readable).
std::string ManifestToJson(const Manifest& manifest);

// Parses and validates (see the header comment) without ValidateCoverage, so that a per-rank
// piece list (which covers only that rank's part) parses too. `source` names the file in
// errors. A future format_version is rejected: "format_version 7 is newer than this railyard
// understands (1)".
Result<Manifest> ParseManifest(std::string_view text, const std::string& source);

// Reads and parses a file. NOT_FOUND when it does not exist.
Result<Manifest> LoadManifest(Fs& fs, const std::string& path);

// Checks that the pieces of every tensor tile it exactly: no element missing, no two
// different pieces overlapping (identical offsets+sizes are replicas and allowed).
// INVALID_ARGUMENT naming `source`, the tensor and the problem.
Status ValidateCoverage(const Manifest& manifest, const std::string& source);

// UTC now as ISO 8601 seconds ("2026-11-30T19:00:01Z").
std::string NowIso8601();

}  // namespace railyard::storage
