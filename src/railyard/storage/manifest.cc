#include "railyard/storage/manifest.h"

#include <algorithm>
#include <array>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "railyard/base/checksum.h"
#include "railyard/base/config.h"
#include "railyard/storage/fs.h"
#include "railyard/storage/fs_util.h"

namespace railyard::storage {
namespace {

using base::FieldContext;
using nlohmann::json;
using nlohmann::ordered_json;

struct DTypeEntry {
  DType dtype;
  std::string_view name;
  size_t size;
};

constexpr std::array<DTypeEntry, 13> kDTypes = {{
    {DType::kBool, "BOOL", 1},
    {DType::kU8, "U8", 1},
    {DType::kI8, "I8", 1},
    {DType::kU16, "U16", 2},
    {DType::kI16, "I16", 2},
    {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2},
    {DType::kU32, "U32", 4},
    {DType::kI32, "I32", 4},
    {DType::kF32, "F32", 4},
    {DType::kU64, "U64", 8},
    {DType::kI64, "I64", 8},
    {DType::kF64, "F64", 8},
}};

// Dimensions and byte counts stay below 2^62 so that sums and products of two never overflow.
constexpr uint64_t kMaxCount = uint64_t{1} << 62;

Result<std::vector<int64_t>> ParseIntArray(const json& parent, std::string_view key,
                                           const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(const json* array, base::RequireArray(parent, key, ctx));
  std::vector<int64_t> out;
  FieldContext field = ctx.Child(key);
  for (size_t i = 0; i < array->size(); ++i) {
    const json& v = (*array)[i];
    if (!v.is_number_integer()) {
      return field.Index(i).Error(fmt::format("expected an integer, got {}", v.dump()));
    }
    if (v.is_number_unsigned() && v.get<uint64_t>() >= kMaxCount) {
      return field.Index(i).Error(fmt::format("{} is too large", v.dump()));
    }
    int64_t n = v.get<int64_t>();
    if (n < 0) return field.Index(i).Error(fmt::format("expected >= 0, got {}", n));
    out.push_back(n);
  }
  return out;
}

Result<uint64_t> RequireCount(const json& parent, std::string_view key, const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(int64_t n, base::RequireInt(parent, key, ctx));
  if (n < 0 || static_cast<uint64_t>(n) >= kMaxCount) {
    return ctx.Child(key).Error(fmt::format("expected 0 <= n < 2^62, got {}", n));
  }
  return static_cast<uint64_t>(n);
}

bool IsPlainFileName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

Result<TensorInfo> ParseTensor(const json& t, const FieldContext& ctx) {
  if (!t.is_object()) return ctx.Error(fmt::format("expected an object, got {}", t.type_name()));
  TensorInfo info;
  RY_ASSIGN_OR_RETURN(info.name, base::RequireString(t, "name", ctx));
  if (info.name.empty()) return ctx.Child("name").Error("must not be empty");
  RY_ASSIGN_OR_RETURN(std::string dtype, base::RequireString(t, "dtype", ctx));
  auto parsed = ParseDType(dtype);
  if (!parsed.ok()) return ctx.Child("dtype").Error(parsed.status().message());
  info.dtype = *parsed;
  RY_ASSIGN_OR_RETURN(info.shape, ParseIntArray(t, "shape", ctx));
  auto count = ElementCount(info.shape);
  if (!count.ok() || *count > kMaxCount / DTypeSize(info.dtype)) {
    return ctx.Child("shape").Error("tensor is too large");
  }
  return info;
}

Result<PieceInfo> ParsePiece(const json& p, const Manifest& m, const FieldContext& ctx) {
  if (!p.is_object()) return ctx.Error(fmt::format("expected an object, got {}", p.type_name()));
  PieceInfo piece;
  RY_ASSIGN_OR_RETURN(piece.tensor, base::RequireString(p, "tensor", ctx));
  const TensorInfo* t = m.FindTensor(piece.tensor);
  if (t == nullptr) {
    return ctx.Child("tensor").Error(
        fmt::format("unknown tensor '{}' (not in 'tensors')", piece.tensor));
  }
  RY_ASSIGN_OR_RETURN(piece.offsets, ParseIntArray(p, "offsets", ctx));
  RY_ASSIGN_OR_RETURN(piece.sizes, ParseIntArray(p, "sizes", ctx));
  if (piece.offsets.size() != t->shape.size() || piece.sizes.size() != t->shape.size()) {
    return ctx.Error(fmt::format("tensor '{}' has {} dimensions but offsets has {} and sizes {}",
                                 t->name, t->shape.size(), piece.offsets.size(),
                                 piece.sizes.size()));
  }
  for (size_t d = 0; d < t->shape.size(); ++d) {
    if (piece.offsets[d] + piece.sizes[d] > t->shape[d]) {
      return ctx.Error(fmt::format("piece {} lies outside tensor '{}' of shape [{}] (dim {})",
                                   FormatExtent(piece.offsets, piece.sizes), t->name,
                                   fmt::join(t->shape, ", "), d));
    }
  }
  RY_ASSIGN_OR_RETURN(piece.file, base::RequireString(p, "file", ctx));
  if (!IsPlainFileName(piece.file)) {
    return ctx.Child("file").Error(
        fmt::format("'{}' is not a plain file name inside the step directory", piece.file));
  }
  RY_ASSIGN_OR_RETURN(piece.byte_offset, RequireCount(p, "byte_offset", ctx));
  RY_ASSIGN_OR_RETURN(piece.length, RequireCount(p, "length", ctx));
  uint64_t expected = *ElementCount(piece.sizes) * DTypeSize(t->dtype);
  if (piece.length != expected) {
    return ctx.Child("length").Error(fmt::format("{} bytes, but {} elements of {} need {}",
                                                 piece.length, *ElementCount(piece.sizes),
                                                 DTypeName(t->dtype), expected));
  }
  RY_ASSIGN_OR_RETURN(std::string sum, base::RequireString(p, "xxh3", ctx));
  auto parsed = base::ParseChecksumHex(sum);
  if (!parsed.ok()) return ctx.Child("xxh3").Error(parsed.status().message());
  piece.xxh3 = *parsed;
  return piece;
}

bool Overlap(const PieceInfo& a, const PieceInfo& b) {
  for (size_t d = 0; d < a.offsets.size(); ++d) {
    if (a.offsets[d] >= b.offsets[d] + b.sizes[d] || b.offsets[d] >= a.offsets[d] + a.sizes[d]) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string_view DTypeName(DType dtype) {
  for (const auto& e : kDTypes) {
    if (e.dtype == dtype) return e.name;
  }
  return "?";
}

size_t DTypeSize(DType dtype) {
  for (const auto& e : kDTypes) {
    if (e.dtype == dtype) return e.size;
  }
  return 1;
}

Result<DType> ParseDType(std::string_view name) {
  std::vector<std::string_view> names;
  for (const auto& e : kDTypes) {
    if (e.name == name) return e.dtype;
    names.push_back(e.name);
  }
  return InvalidArgument("unknown dtype '{}' (expected one of {})", name, fmt::join(names, ", "));
}

const TensorInfo* Manifest::FindTensor(std::string_view name) const {
  for (const TensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

Result<uint64_t> ElementCount(std::span<const int64_t> shape) {
  uint64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return InvalidArgument("negative dimension {}", d);
    if (d != 0 && n > kMaxCount / static_cast<uint64_t>(d)) {
      return InvalidArgument("shape [{}] has more than 2^62 elements", fmt::join(shape, ", "));
    }
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

std::string FormatExtent(std::span<const int64_t> offsets, std::span<const int64_t> sizes) {
  std::string out = "[";
  for (size_t d = 0; d < offsets.size() && d < sizes.size(); ++d) {
    if (d > 0) out += ", ";
    out += fmt::format("{}:{}", offsets[d], offsets[d] + sizes[d]);
  }
  return out + "]";
}

std::string NowIso8601() {
  std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

std::string ManifestToJson(const Manifest& m) {
  auto line = [](const ordered_json& j) { return j.dump(); };
  std::string out = "{\n";
  out += fmt::format("  \"format_version\": {},\n", m.format_version);
  out += fmt::format("  \"step\": {},\n", m.step);
  out += fmt::format("  \"world_size\": {},\n", m.world_size);
  if (m.rank >= 0) out += fmt::format("  \"rank\": {},\n", m.rank);
  out += fmt::format("  \"created\": {},\n", json(m.created).dump());
  out += "  \"tensors\": [";
  for (size_t i = 0; i < m.tensors.size(); ++i) {
    const TensorInfo& t = m.tensors[i];
    ordered_json j;
    j["name"] = t.name;
    j["dtype"] = DTypeName(t.dtype);
    j["shape"] = t.shape;
    out += (i == 0 ? "\n    " : ",\n    ") + line(j);
  }
  out += m.tensors.empty() ? "],\n" : "\n  ],\n";
  out += "  \"pieces\": [";
  for (size_t i = 0; i < m.pieces.size(); ++i) {
    const PieceInfo& p = m.pieces[i];
    ordered_json j;
    j["tensor"] = p.tensor;
    j["offsets"] = p.offsets;
    j["sizes"] = p.sizes;
    j["file"] = p.file;
    j["byte_offset"] = p.byte_offset;
    j["length"] = p.length;
    j["xxh3"] = base::ChecksumHex(p.xxh3);
    out += (i == 0 ? "\n    " : ",\n    ") + line(j);
  }
  out += m.pieces.empty() ? "],\n" : "\n  ],\n";
  ordered_json meta = ordered_json::object();
  for (const auto& [k, v] : m.metadata) meta[k] = v;
  out += fmt::format("  \"metadata\": {}\n", meta.dump());
  out += "}\n";
  return out;
}

Result<Manifest> ParseManifest(std::string_view text, const std::string& source) {
  auto parsed = base::ParseJson(text, source);
  if (!parsed.ok()) {
    return parsed.status().WithContext("cannot parse checkpoint manifest (truncated or not JSON)");
  }
  const json& root = *parsed;
  FieldContext ctx(source);
  if (!root.is_object()) {
    return InvalidArgument("{}: not a checkpoint manifest: expected a JSON object, got {}", source,
                           root.type_name());
  }
  if (!root.contains("format_version")) {
    return InvalidArgument("{}: not a checkpoint manifest: missing required key 'format_version'",
                           source);
  }
  Manifest m;
  RY_ASSIGN_OR_RETURN(m.format_version, base::RequireInt(root, "format_version", ctx));
  if (m.format_version > kManifestFormatVersion) {
    return InvalidArgument("{}: format_version {} is newer than this railyard understands ({})",
                           source, m.format_version, kManifestFormatVersion);
  }
  if (m.format_version < 1) {
    return InvalidArgument("{}: format_version {} is invalid (expected {})", source,
                           m.format_version, kManifestFormatVersion);
  }
  RY_ASSIGN_OR_RETURN(m.step, base::RequireInt(root, "step", ctx));
  if (m.step < 0) return ctx.Child("step").Error(fmt::format("expected >= 0, got {}", m.step));
  RY_ASSIGN_OR_RETURN(int64_t world, base::RequireInt(root, "world_size", ctx));
  if (world < 1 || world > (1 << 24)) {
    return ctx.Child("world_size").Error(fmt::format("expected 1..16777216, got {}", world));
  }
  m.world_size = static_cast<int>(world);
  RY_ASSIGN_OR_RETURN(int64_t rank, base::OptionalInt(root, "rank", -1, ctx));
  if (rank < -1 || rank >= world) {
    return ctx.Child("rank").Error(fmt::format("expected 0..{}, got {}", world - 1, rank));
  }
  m.rank = static_cast<int>(rank);
  RY_ASSIGN_OR_RETURN(m.created, base::OptionalString(root, "created", "", ctx));

  RY_ASSIGN_OR_RETURN(const json* tensors, base::RequireArray(root, "tensors", ctx));
  std::set<std::string> names;
  for (size_t i = 0; i < tensors->size(); ++i) {
    FieldContext tctx = ctx.Child("tensors").Index(i);
    RY_ASSIGN_OR_RETURN(TensorInfo t, ParseTensor((*tensors)[i], tctx));
    if (!names.insert(t.name).second) {
      return tctx.Child("name").Error(fmt::format("duplicate tensor '{}'", t.name));
    }
    m.tensors.push_back(std::move(t));
  }
  RY_ASSIGN_OR_RETURN(const json* pieces, base::RequireArray(root, "pieces", ctx));
  for (size_t i = 0; i < pieces->size(); ++i) {
    RY_ASSIGN_OR_RETURN(PieceInfo p, ParsePiece((*pieces)[i], m, ctx.Child("pieces").Index(i)));
    m.pieces.push_back(std::move(p));
  }
  if (root.contains("metadata") && !root["metadata"].is_null()) {
    RY_ASSIGN_OR_RETURN(const json* meta, base::RequireObject(root, "metadata", ctx));
    for (const auto& [k, v] : meta->items()) {
      m.metadata[k] = v.is_string() ? v.get<std::string>() : v.dump();
    }
  }
  return m;
}

Result<Manifest> LoadManifest(Fs& fs, const std::string& path) {
  RY_ASSIGN_OR_RETURN(std::string text, ReadWholeFile(fs, path));
  return ParseManifest(text, path);
}

Status ValidateCoverage(const Manifest& m, const std::string& source) {
  std::map<std::string, std::vector<const PieceInfo*>> by_tensor;
  for (const PieceInfo& p : m.pieces) by_tensor[p.tensor].push_back(&p);
  for (const TensorInfo& t : m.tensors) {
    uint64_t total = *ElementCount(t.shape);
    // Distinct extents only: the same extent from several ranks is a replica.
    std::set<std::pair<std::vector<int64_t>, std::vector<int64_t>>> seen;
    std::vector<const PieceInfo*> extents;
    for (const PieceInfo* p : by_tensor[t.name]) {
      if (*ElementCount(p->sizes) == 0) continue;
      if (seen.insert({p->offsets, p->sizes}).second) extents.push_back(p);
    }
    uint64_t covered = 0;
    for (const PieceInfo* p : extents) covered += *ElementCount(p->sizes);
    if (t.shape.empty()) {
      if (total == 1 && extents.empty()) {
        return InvalidArgument("{}: scalar tensor '{}' has no piece", source, t.name);
      }
      continue;
    }
    // Sorted by the start in dimension 0, a piece can only overlap those that start before
    // it ends there: this keeps the check near-linear for the usual row-split tensors.
    std::sort(extents.begin(), extents.end(),
              [](const PieceInfo* a, const PieceInfo* b) { return a->offsets < b->offsets; });
    for (size_t i = 0; i < extents.size(); ++i) {
      for (size_t j = i + 1; j < extents.size(); ++j) {
        if (extents[j]->offsets[0] >= extents[i]->offsets[0] + extents[i]->sizes[0]) break;
        if (Overlap(*extents[i], *extents[j])) {
          return InvalidArgument(
              "{}: tensor '{}': pieces {} (file {}) and {} (file {}) overlap", source, t.name,
              FormatExtent(extents[i]->offsets, extents[i]->sizes), extents[i]->file,
              FormatExtent(extents[j]->offsets, extents[j]->sizes), extents[j]->file);
        }
      }
    }
    if (covered != total) {
      return InvalidArgument(
          "{}: tensor '{}' of shape [{}]: its pieces cover {} of {} elements (a rank did not "
          "save its part?)",
          source, t.name, fmt::join(t.shape, ", "), covered, total);
    }
  }
  return Status::Ok();
}

}  // namespace railyard::storage
