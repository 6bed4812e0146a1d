// GPUs from NVML, loaded with dlopen so that neither its header nor the library is needed to
// build, and a machine without an NVIDIA driver falls back to PCI class codes.
#include <dlfcn.h>

#include <cstring>
#include <memory>
#include <utility>

#include "railyard/topo/discover/sources.h"

namespace railyard::topo::internal {
namespace {

// The few NVML declarations used, from NVIDIA's documented C ABI (nvml.h), so neither the
// header nor the library is needed at build time.
using NvmlReturn = int;  // nvmlReturn_t; NVML_SUCCESS == 0
constexpr NvmlReturn kNvmlSuccess = 0;
struct NvmlDeviceOpaque;
using NvmlDevice = NvmlDeviceOpaque*;  // nvmlDevice_t
struct NvmlPciInfo {                   // nvmlPciInfo_t, as filled by nvmlDeviceGetPciInfo_v3
  char bus_id_legacy[16];              // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
};
constexpr unsigned int kNvmlUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

struct DlCloser {
  void operator()(void* handle) const {
    if (handle) dlclose(handle);
  }
};

}  // namespace

// GPUs as NVML numbers them, or an explanation of why NVML cannot be used.
Result<std::vector<Gpu>> GpusFromNvml(const std::string& library) {
  std::unique_ptr<void, DlCloser> lib(dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!lib) return NotFound("NVML not found ({})", library);

  using InitFn = NvmlReturn (*)();
  using CountFn = NvmlReturn (*)(unsigned int*);
  using HandleFn = NvmlReturn (*)(unsigned int, NvmlDevice*);
  using UuidFn = NvmlReturn (*)(NvmlDevice, char*, unsigned int);
  using PciFn = NvmlReturn (*)(NvmlDevice, NvmlPciInfo*);
  using ErrorFn = const char* (*)(NvmlReturn);
  auto sym = [&](const char* name) { return dlsym(lib.get(), name); };
  auto init = reinterpret_cast<InitFn>(sym("nvmlInit_v2"));
  auto shutdown = reinterpret_cast<InitFn>(sym("nvmlShutdown"));
  auto count_fn = reinterpret_cast<CountFn>(sym("nvmlDeviceGetCount_v2"));
  auto handle_fn = reinterpret_cast<HandleFn>(sym("nvmlDeviceGetHandleByIndex_v2"));
  auto uuid_fn = reinterpret_cast<UuidFn>(sym("nvmlDeviceGetUUID"));
  auto pci_fn = reinterpret_cast<PciFn>(sym("nvmlDeviceGetPciInfo_v3"));
  auto error_fn = reinterpret_cast<ErrorFn>(sym("nvmlErrorString"));
  const std::pair<const char*, bool> required[] = {
      {"nvmlInit_v2", init != nullptr},
      {"nvmlShutdown", shutdown != nullptr},
      {"nvmlDeviceGetCount_v2", count_fn != nullptr},
      {"nvmlDeviceGetHandleByIndex_v2", handle_fn != nullptr},
      {"nvmlDeviceGetUUID", uuid_fn != nullptr},
      {"nvmlDeviceGetPciInfo_v3", pci_fn != nullptr}};
  for (const auto& [name, present] : required) {
    if (!present) return Unimplemented("NVML ({}) lacks {} (driver too old?)", library, name);
  }
  auto err = [&](NvmlReturn rc) {
    const char* text = error_fn ? error_fn(rc) : nullptr;
    return text ? fmt::format("{} (NVML error {})", text, rc) : fmt::format("NVML error {}", rc);
  };

  NvmlReturn rc = init();
  if (rc != kNvmlSuccess) return Unavailable("NVML init failed: {}", err(rc));
  std::vector<Gpu> gpus;
  Status status;
  unsigned int count = 0;
  rc = count_fn(&count);
  if (rc != kNvmlSuccess) status = Unavailable("nvmlDeviceGetCount_v2: {}", err(rc));
  for (unsigned int i = 0; status.ok() && i < count; ++i) {
    NvmlDevice device = nullptr;
    rc = handle_fn(i, &device);
    if (rc != kNvmlSuccess) {
      status = Unavailable("nvmlDeviceGetHandleByIndex_v2({}): {}", i, err(rc));
      break;
    }
    Gpu gpu;
    gpu.index = static_cast<int>(i);
    char uuid[kNvmlUuidBufferSize] = {};
    if (uuid_fn(device, uuid, sizeof uuid) == kNvmlSuccess) {
      gpu.uuid.assign(uuid, strnlen(uuid, sizeof uuid));
    }
    NvmlPciInfo pci = {};
    if (pci_fn(device, &pci) == kNvmlSuccess) {
      gpu.pci_bus_id = NormalizePciBusId(std::string_view(pci.bus_id, strnlen(pci.bus_id, 32)));
    }
    gpus.push_back(std::move(gpu));
  }
  shutdown();
  if (!status.ok()) return status;
  return gpus;
}

}  // namespace railyard::topo::internal
