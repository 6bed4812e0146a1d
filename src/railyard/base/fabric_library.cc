#include "railyard/base/fabric_library.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <mutex>

namespace railyard::base {

std::string FabricLibrary::Error(int rc) const {
  return fmt::format("{} ({})", strerror(rc < 0 ? -rc : rc), rc);
}

Result<const FabricLibrary*> LoadFabricLibrary() {
  static FabricLibrary library;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [] {
    // Never closed: providers register atexit handlers and threads that outlive any owner.
    void* handle = ::dlopen("libfabric.so.1", RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = ::dlerror();
      error = fmt::format("libfabric.so.1 is not loadable ({}); install libfabric1",
                          why != nullptr ? why : "unknown reason");
      return;
    }
    FabricLibrary l;
    l.getinfo = reinterpret_cast<decltype(l.getinfo)>(::dlsym(handle, "fi_getinfo"));
    l.freeinfo = reinterpret_cast<decltype(l.freeinfo)>(::dlsym(handle, "fi_freeinfo"));
    l.dupinfo = reinterpret_cast<decltype(l.dupinfo)>(::dlsym(handle, "fi_dupinfo"));
    l.fabric = reinterpret_cast<decltype(l.fabric)>(::dlsym(handle, "fi_fabric"));
    l.strerror = reinterpret_cast<decltype(l.strerror)>(::dlsym(handle, "fi_strerror"));
    l.version = reinterpret_cast<decltype(l.version)>(::dlsym(handle, "fi_version"));
    if (!l.getinfo || !l.freeinfo || !l.dupinfo || !l.fabric || !l.strerror || !l.version) {
      error =
          "libfabric.so.1 lacks one of fi_getinfo, fi_freeinfo, fi_dupinfo, fi_fabric, "
          "fi_strerror, fi_version";
      ::dlclose(handle);
      return;
    }
    library = l;
  });
  if (library.getinfo == nullptr) return FailedPrecondition("{}", error);
  return &library;
}

}  // namespace railyard::base
