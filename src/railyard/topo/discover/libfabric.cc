// Fabric providers from libfabric's fi_getinfo, through the process-wide loader in
// base/fabric_library.h (compiled when CMake finds libfabric; libfabric_off.cc otherwise).
#include <fmt/format.h>
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

#include "railyard/base/fabric_library.h"
#include "railyard/topo/discover/sources.h"

namespace railyard::topo::internal {
namespace {

struct FabricProbe {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::vector<std::string> providers;
  std::string error;
};

void RunFabricProbe(const base::FabricLibrary& fi, FabricProbe& probe) {
  std::vector<std::string> providers;
  std::string error;
  fi_info* hints = fi.AllocInfo();
  if (hints == nullptr) {
    error = "fi_allocinfo failed";
  } else {
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG | FI_TAGGED;
    // What Railyard's transport handles; offering no mr_mode bits would hide verbs and efa.
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    fi_info* info = nullptr;
    int rc = fi.getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0, hints,
                        &info);
    if (rc == 0) {
      // One entry per interface and address format: keep each provider once, in rank order.
      for (fi_info* i = info; i != nullptr; i = i->next) {
        if (i->fabric_attr == nullptr || i->fabric_attr->prov_name == nullptr) continue;
        std::string name = i->fabric_attr->prov_name;
        if (std::find(providers.begin(), providers.end(), name) == providers.end()) {
          providers.push_back(std::move(name));
        }
      }
      fi.freeinfo(info);
    } else if (rc != -FI_ENODATA) {
      error = "fi_getinfo: " + fi.Error(rc);
    }
    fi.freeinfo(hints);
  }
  std::lock_guard<std::mutex> lock(probe.mu);
  probe.providers = std::move(providers);
  probe.error = std::move(error);
  probe.done = true;
  probe.cv.notify_all();
}

}  // namespace

void ListFabricProviders(const DiscoverOptions& options, Discovery& d) {
  Result<const base::FabricLibrary*> loaded = base::LoadFabricLibrary();
  if (!loaded.ok()) {
    d.sources.fabric = "unavailable";
    d.notes.push_back("libfabric: " + loaded.status().message() + "; no fabric providers listed");
    return;
  }
  const base::FabricLibrary* api = *loaded;
  uint32_t v = api->version();
  d.sources.fabric = fmt::format("libfabric {}.{}", FI_MAJOR(v), FI_MINOR(v));
  auto probe = std::make_shared<FabricProbe>();
  // A provider can block in fi_getinfo (a stuck daemon, an unreachable fabric manager); the
  // thread owns a reference so it can outlive this call if it has to be abandoned.
  std::thread worker([api, probe] { RunFabricProbe(*api, *probe); });
  std::unique_lock<std::mutex> lock(probe->mu);
  if (!probe->cv.wait_for(lock, options.fabric_timeout, [&] { return probe->done; })) {
    lock.unlock();
    worker.detach();
    d.notes.push_back(
        fmt::format("libfabric: fi_getinfo did not answer within {} ms; "
                    "fabric providers not listed",
                    options.fabric_timeout.count()));
    return;
  }
  lock.unlock();
  worker.join();
  d.fabric_providers = probe->providers;
  if (!probe->error.empty()) {
    d.notes.push_back("libfabric: " + probe->error);
  } else if (d.fabric_providers.empty()) {
    d.notes.push_back("libfabric: no provider offers FI_EP_RDM with FI_MSG|FI_TAGGED");
  }
}

}  // namespace railyard::topo::internal
