#include "railyard/validate/internal/nvml.h"

#include <dlfcn.h>

#include <cstring>
#include <memory>

namespace railyard::validate::internal {
namespace {

// NVIDIA's documented C ABI (nvml.h), the few declarations used.
using NvmlReturn = int;  // nvmlReturn_t
constexpr NvmlReturn kSuccess = 0;
struct NvmlDeviceOpaque;
using NvmlDevice = NvmlDeviceOpaque*;
constexpr int kMemoryErrorUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;             // NVML_VOLATILE_ECC
constexpr unsigned kNameSize = 96;          // NVML_DEVICE_NAME_V2_BUFFER_SIZE

struct Closer {
  void operator()(void* h) const { dlclose(h); }
};

}  // namespace

Result<std::vector<GpuState>> GpusFromNvml(const std::string& library) {
  std::unique_ptr<void, Closer> lib(dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!lib) return NotFound("NVML not found ({})", library);
  auto sym = [&]<typename F>(F*& fn, const char* name) {
    fn = reinterpret_cast<F*>(dlsym(lib.get(), name));
  };
  NvmlReturn (*init)() = nullptr, (*shutdown)() = nullptr;
  NvmlReturn (*count_fn)(unsigned*) = nullptr;
  NvmlReturn (*handle_fn)(unsigned, NvmlDevice*) = nullptr;
  NvmlReturn (*name_fn)(NvmlDevice, char*, unsigned) = nullptr;
  NvmlReturn (*ecc_mode_fn)(NvmlDevice, int*, int*) = nullptr;
  NvmlReturn (*ecc_count_fn)(NvmlDevice, int, int, unsigned long long*) = nullptr;
  NvmlReturn (*remap_fn)(NvmlDevice, unsigned*, unsigned*, unsigned*, unsigned*) = nullptr;
  const char* (*error_fn)(NvmlReturn) = nullptr;
  sym(init, "nvmlInit_v2");
  sym(shutdown, "nvmlShutdown");
  sym(count_fn, "nvmlDeviceGetCount_v2");
  sym(handle_fn, "nvmlDeviceGetHandleByIndex_v2");
  sym(name_fn, "nvmlDeviceGetName");
  sym(ecc_mode_fn, "nvmlDeviceGetEccMode");
  sym(ecc_count_fn, "nvmlDeviceGetTotalEccErrors");
  sym(remap_fn, "nvmlDeviceGetRemappedRows");  // Ampere and later
  sym(error_fn, "nvmlErrorString");
  if (!init || !shutdown || !count_fn || !handle_fn) {
    return Unimplemented("NVML ({}) lacks nvmlInit_v2/nvmlDeviceGetCount_v2 (driver too old?)",
                         library);
  }
  auto err = [&](NvmlReturn rc) {
    const char* text = error_fn ? error_fn(rc) : nullptr;
    return text ? fmt::format("{} (NVML error {})", text, rc) : fmt::format("NVML error {}", rc);
  };
  if (NvmlReturn rc = init(); rc != kSuccess) return Unavailable("nvmlInit_v2: {}", err(rc));
  std::vector<GpuState> gpus;
  Status status;
  unsigned count = 0;
  if (NvmlReturn rc = count_fn(&count); rc != kSuccess) {
    status = Unavailable("nvmlDeviceGetCount_v2: {}", err(rc));
  }
  for (unsigned i = 0; status.ok() && i < count; ++i) {
    NvmlDevice dev = nullptr;
    if (NvmlReturn rc = handle_fn(i, &dev); rc != kSuccess) {
      status = Unavailable("nvmlDeviceGetHandleByIndex_v2({}): {}", i, err(rc));
      break;
    }
    GpuState g{.index = static_cast<int>(i)};
    char name[kNameSize] = {};
    if (name_fn && name_fn(dev, name, kNameSize) == kSuccess) g.name = name;
    int current = 0, pending = 0;
    if (ecc_mode_fn && ecc_mode_fn(dev, &current, &pending) == kSuccess) {
      g.ecc_enabled = current != 0;
    }
    unsigned long long errors = 0;
    if (ecc_count_fn &&
        ecc_count_fn(dev, kMemoryErrorUncorrected, kVolatileEcc, &errors) == kSuccess) {
      g.ecc_uncorrected = errors;
    }
    unsigned corr = 0, unc = 0, is_pending = 0, failure = 0;
    if (remap_fn && remap_fn(dev, &corr, &unc, &is_pending, &failure) == kSuccess) {
      g.remap_pending = is_pending != 0;
      g.remap_failure = failure != 0;
    }
    gpus.push_back(std::move(g));
  }
  shutdown();
  if (!status.ok()) return status;
  return gpus;
}

Outcome NvmlUnavailable(const Status& status) {
  if (status.code() == StatusCode::kNotFound) return Outcome::Skipped(status.message());
  return Outcome::Unknown(status.message());
}

}  // namespace railyard::validate::internal
