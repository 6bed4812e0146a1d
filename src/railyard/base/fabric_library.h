// FabricLibrary: libfabric.so.1 loaded with dlopen, and the few entry points it really exports.
// The one loader for the process: topo's discovery lists providers through it and net/ofi
// builds its transport on it (net/ofi/fabric_library.h adds the transport's RxM default).
// It lives in base because both of those modules use it and neither may include the other;
// it is compiled only when libfabric's headers are found (RAILYARD_WITH_OFI).
//
// Railyard does not link libfabric: loading it runs every provider library's constructors
// (libinfinipath's polls for ~0.2 s), a cost every `railyard` process would pay. Only
// fi_getinfo, fi_freeinfo, fi_dupinfo, fi_fabric, fi_strerror and fi_version are real
// symbols; every other fi_* call (fi_domain, fi_endpoint, fi_tsend, fi_cq_read, ...) is a
// static inline function in the headers that dispatches through the ops tables of objects
// those entry points created, so it works unchanged on a dlopen'ed library. Code that
// includes <rdma/fabric.h> must therefore never call the exported names directly (including
// fi_allocinfo, which is fi_dupinfo(NULL)): it calls them through FabricLibrary.
//
//   RY_ASSIGN_OR_RETURN(const FabricLibrary* fi, LoadFabricLibrary());
//   fi_info* hints = fi->AllocInfo();
//
// Thread-safety: LoadFabricLibrary may be called from any thread; the library stays loaded
// for the life of the process.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_domain.h>

#include <cstdint>
#include <string>
#include <utility>

#include "railyard/base/status.h"

namespace railyard::base {

struct FabricLibrary {
  int (*getinfo)(uint32_t version, const char* node, const char* service, uint64_t flags,
                 const fi_info* hints, fi_info** info) = nullptr;
  void (*freeinfo)(fi_info* info) = nullptr;
  fi_info* (*dupinfo)(const fi_info* info) = nullptr;
  int (*fabric)(fi_fabric_attr* attr, fid_fabric** fabric, void* context) = nullptr;
  const char* (*strerror)(int errnum) = nullptr;
  uint32_t (*version)() = nullptr;

  fi_info* AllocInfo() const { return dupinfo(nullptr); }
  // "Connection refused (-111)": fi_strerror of a negative libfabric return code.
  std::string Error(int rc) const;
};

// Owns one libfabric object: fi_close on destruction.
template <typename T>
class FidOwner {  // works for any fid_* type whose first member is `struct fid fid`
 public:
  FidOwner() = default;
  FidOwner(const FidOwner&) = delete;
  FidOwner& operator=(const FidOwner&) = delete;
  ~FidOwner() { Reset(); }
  T* get() const { return p_; }
  T** out() {
    Reset();
    return &p_;
  }
  void Reset() {
    if (p_ != nullptr) fi_close(&p_->fid);
    p_ = nullptr;
  }

 private:
  T* p_ = nullptr;
};

// The process-wide library, loaded on first use. FAILED_PRECONDITION naming the dlopen
// error when libfabric.so.1 is missing or lacks an entry point.
Result<const FabricLibrary*> LoadFabricLibrary();

}  // namespace railyard::base
