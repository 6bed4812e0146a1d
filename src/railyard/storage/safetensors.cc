#include "railyard/storage/safetensors.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <nlohmann/json.hpp>

namespace railyard::storage {
namespace {

static_assert(std::endian::native == std::endian::little,
              "shards and safetensors are little-endian; a big-endian host would need swaps");

constexpr uint64_t kSliceBytes = 256 << 20;
std::atomic<uint64_t> g_export_counter{0};

std::string BuildHeader(const Manifest& m) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  uint64_t offset = 0;
  for (const TensorInfo& t : m.tensors) {
    uint64_t bytes = *ElementCount(t.shape) * DTypeSize(t.dtype);
    header[t.name] = {{"dtype", DTypeName(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  for (const auto& [k, v] : m.metadata) meta[k] = v;
  meta["railyard.step"] = std::to_string(m.step);
  meta["railyard.world_size"] = std::to_string(m.world_size);
  header["__metadata__"] = meta;
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

// Streams one tensor into `file`, in slices along dimension 0 when it is large.
Status WriteTensor(const CheckpointReader& reader, const TensorInfo& t, WritableFile& file) {
  const uint64_t esz = DTypeSize(t.dtype);
  const uint64_t total = *ElementCount(t.shape) * esz;
  if (total == 0) return Status::Ok();
  std::vector<int64_t> offsets(t.shape.size(), 0);
  std::vector<int64_t> sizes = t.shape;
  int64_t rows_per_slice = 1;
  if (!t.shape.empty()) {
    uint64_t row_bytes = total / static_cast<uint64_t>(t.shape[0]);
    rows_per_slice = static_cast<int64_t>(std::max<uint64_t>(1, kSliceBytes / row_bytes));
  }
  const int64_t rows = t.shape.empty() ? 1 : t.shape[0];
  std::vector<uint8_t> buf;
  for (int64_t r = 0; r < rows; r += rows_per_slice) {
    if (!t.shape.empty()) {
      offsets[0] = r;
      sizes[0] = std::min(rows_per_slice, rows - r);
    }
    buf.resize(*ElementCount(sizes) * esz);
    RY_RETURN_IF_ERROR(reader.ReadSlice(t.name, offsets, sizes, buf.data(), buf.size()));
    RY_RETURN_IF_ERROR(file.Write({reinterpret_cast<const char*>(buf.data()), buf.size()}));
  }
  return Status::Ok();
}

}  // namespace

Status ExportSafetensors(const CheckpointReader& reader, const std::string& out_path, Fs* fs) {
  if (fs == nullptr) fs = DefaultFs();
  const Manifest& m = reader.manifest();
  if (m.FindTensor("__metadata__") != nullptr) {
    return InvalidArgument(
        "step {}: a tensor named '__metadata__' cannot be exported to "
        "safetensors (the name is reserved)",
        m.step);
  }
  const std::string header = BuildHeader(m);
  const std::string tmp =
      fmt::format("{}.tmp.{}.{}", out_path, ::getpid(), g_export_counter.fetch_add(1));
  auto attempt = [&]() -> Status {
    RY_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, fs->NewWritableFile(tmp, {}));
    char len[8];
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    RY_RETURN_IF_ERROR(file->Write({len, 8}));
    RY_RETURN_IF_ERROR(file->Write(header));
    for (const TensorInfo& t : m.tensors) RY_RETURN_IF_ERROR(WriteTensor(reader, t, *file));
    RY_RETURN_IF_ERROR(file->Sync());
    RY_RETURN_IF_ERROR(file->Close());
    return fs->Rename(tmp, out_path);
  };
  Status st = attempt();
  if (!st.ok()) {
    fs->RemoveFile(tmp).IgnoreError();
    return st.WithContext(fmt::format("export of step {} to '{}'", m.step, out_path));
  }
  return Status::Ok();
}

}  // namespace railyard::storage
