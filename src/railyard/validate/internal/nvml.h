// The GPU health node checks read, from NVML loaded with dlopen at run time (never linked, so
// Railyard builds and runs without NVIDIA's driver), and how GPU checks report its absence.
// Internal to node_env.cc and checks/.
//
// Thread-safety: may run concurrently with itself (NVML's init/shutdown are reference-counted).
#pragma once

#include <string>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/validate/node_env.h"
#include "railyard/validate/verdict.h"

namespace railyard::validate::internal {

// Every GPU with its name, ECC mode, volatile uncorrected ECC count and row-remapping state
// (each left unset where the GPU or driver does not support it). NOT_FOUND "NVML not found
// (<library>)" when dlopen fails; UNIMPLEMENTED when a required entry point is missing;
// UNAVAILABLE naming the call that failed.
Result<std::vector<GpuState>> GpusFromNvml(const std::string& library);

// What a GPU check says when NodeEnv::Gpus failed with `status`: SKIPPED "NVML not found
// (...)" without the library (a host without NVIDIA's driver), UNKNOWN otherwise.
Outcome NvmlUnavailable(const Status& status);

}  // namespace railyard::validate::internal
