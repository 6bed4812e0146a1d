// Export of a checkpoint step to one safetensors file, for tools outside Railyard (PyTorch,
// Hugging Face, inspection scripts).
//
// The layout is the published one: an 8-byte little-endian header length N, N bytes of JSON
// header (padded with spaces to a multiple of 8), then the tensor data, row-major and
// little-endian, packed in header order with no gaps. The header maps each tensor name to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the data section) and
// "__metadata__" to a string-to-string map: the checkpoint's metadata plus "railyard.step"
// and "railyard.world_size". Each tensor is assembled whole from the pieces of every rank, so
// the file does not depend on the world size that saved it.
//
//   RY_ASSIGN_OR_RETURN(auto reader, CheckpointReader::Open(dir, step));
//   RY_RETURN_IF_ERROR(ExportSafetensors(*reader, "/tmp/model.safetensors"));
//
// Thread-safety: the function may run concurrently with other reads of the same reader.
#pragma once

#include <string>

#include "railyard/base/status.h"
#include "railyard/storage/checkpoint_reader.h"
#include "railyard/storage/fs.h"

namespace railyard::storage {

// Writes `out_path` atomically (a temporary file renamed into place, so a failed export never
// leaves a partial file under that name). Memory use is bounded: large tensors are copied in
// slices of about 256 MiB. Errors: those of reading the checkpoint (DATA_LOSS naming the bad
// piece), of writing `out_path` (named), INVALID_ARGUMENT for a tensor named "__metadata__".
// `fs` null means DefaultFs().
Status ExportSafetensors(const CheckpointReader& reader, const std::string& out_path,
                         Fs* fs = nullptr);

}  // namespace railyard::storage
