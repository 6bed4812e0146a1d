// The fabric objects, the address exchange and memory registration; see ofi_transport_impl.h.
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "railyard/base/hmac.h"
#include "railyard/base/logging.h"
#include "railyard/net/ofi/ofi_transport_impl.h"
#include "railyard/net/peer_directory.h"

namespace railyard::net::ofi {
namespace {

const base::Logger kLog("ofi");

std::string Hex(std::string_view bytes) { return base::ToHex(bytes); }

Result<std::string> Unhex(std::string_view hex) {
  if (hex.size() % 2 != 0) return InvalidArgument("odd-length hex '{}'", hex);
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    int v = 0;
    for (char c : hex.substr(2 * i, 2)) {
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else
        return InvalidArgument("bad hex digit '{}'", c);
    }
    out[i] = static_cast<char>(v);
  }
  return out;
}

}  // namespace

Status OfiTransport::Open() {
  int rc = fi_->fabric(info_->fabric_attr, fabric_.out(), nullptr);
  if (rc != 0) return Unavailable("{}: fi_fabric: {}", Self(), fi_->Error(rc));
  rc = fi_domain(fabric_.get(), info_, domain_.out(), nullptr);
  if (rc != 0) {
    return Unavailable("{}: fi_domain {}: {}", Self(), info_->domain_attr->name, fi_->Error(rc));
  }
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.wait_obj = FI_WAIT_UNSPEC;
  rc = fi_cq_open(domain_.get(), &cq_attr, cq_.out(), nullptr);
  if (rc != 0) {  // a CQ without a wait object still works: WaitAll naps instead of sleeping
    cq_attr.wait_obj = FI_WAIT_NONE;
    cq_waitable_ = false;
    rc = fi_cq_open(domain_.get(), &cq_attr, cq_.out(), nullptr);
  }
  if (rc != 0) return Unavailable("{}: fi_cq_open: {}", Self(), fi_->Error(rc));
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = static_cast<size_t>(options_.size);
  rc = fi_av_open(domain_.get(), &av_attr, av_.out(), nullptr);
  if (rc != 0) return Unavailable("{}: fi_av_open: {}", Self(), fi_->Error(rc));
  rc = fi_endpoint(domain_.get(), info_, ep_.out(), nullptr);
  if (rc != 0) return Unavailable("{}: fi_endpoint: {}", Self(), fi_->Error(rc));
  if ((rc = fi_ep_bind(ep_.get(), &cq_.get()->fid, FI_TRANSMIT | FI_RECV)) != 0 ||
      (rc = fi_ep_bind(ep_.get(), &av_.get()->fid, 0)) != 0 || (rc = fi_enable(ep_.get())) != 0) {
    return Unavailable("{}: binding and enabling the endpoint: {}", Self(), fi_->Error(rc));
  }
  char name[256];
  size_t len = sizeof(name);
  rc = fi_getname(&ep_.get()->fid, name, &len);
  if (rc != 0) return Internal("{}: fi_getname: {}", Self(), fi_->Error(rc));
  ep_name_.assign(name, len);
  nonce_ = base::RandomBytes(16);
  return Status::Ok();
}

Status OfiTransport::Start(base::Deadline deadline) {
  std::lock_guard lock(mu_);
  if (started_) return FailedPrecondition("{}: Start() called twice", Self());
  if (options_.store == nullptr) return InvalidArgument("{}: no store given", Self());
  char host[256] = "";
  std::string my_host = options_.host;
  if (my_host.empty() && ::gethostname(host, sizeof(host) - 1) == 0) my_host = host;
  const std::string prefix = options_.key_prefix + "/ofi/peer/";
  // The boot id last (optional when parsed): peers on this kernel watch this process.
  const std::string boot_id = LocalBootId();
  std::string value = fmt::format("v1 {} {} {} {} {}", my_host, ::getpid(), Hex(ep_name_),
                                  Hex(nonce_), boot_id.empty() ? "-" : boot_id);
  RY_RETURN_IF_ERROR(options_.store->Set(prefix + std::to_string(options_.rank), value, deadline)
                         .WithContext(Self() + ": publishing address"));
  std::vector<std::string> keys;
  for (int r = 0; r < options_.size; ++r) keys.push_back(prefix + std::to_string(r));
  std::vector<std::string> missing_keys;
  Status waited = options_.store->Wait(keys, deadline, &missing_keys);
  if (!waited.ok()) {
    std::vector<int> missing = MissingRanks(keys, missing_keys);
    if (missing.empty()) return waited.WithContext(Self() + ": waiting for every address");
    return DeadlineExceeded("{}: rank(s) {} never published their address under '{}<rank>' in {}",
                            Self(), DescribeRanks(missing), prefix, options_.store->Describe());
  }
  std::string names;
  for (int r = 0; r < options_.size; ++r) {
    RY_ASSIGN_OR_RETURN(std::string v, options_.store->Get(keys[r], deadline));
    char h[256], name_hex[512], nonce_hex[128], boot[64] = "-";
    int pid = 0;
    if (std::sscanf(v.c_str(), "v1 %255s %d %511s %127s %63s", h, &pid, name_hex, nonce_hex, boot) <
        4) {
      return InvalidArgument("{}: malformed address of rank {} under '{}': '{}'", Self(), r,
                             keys[r], v);
    }
    PeerState& p = peers_[r];
    p.info = PeerInfo{r, h, pid, name_hex, JobRankOf(options_, r)};
    if (std::string_view(boot) != "-") p.info.boot_id = boot;
    if (r != options_.rank && pid != ::getpid() && !boot_id.empty() && p.info.boot_id == boot_id) {
      p.watch.emplace(pid);
    }
    RY_ASSIGN_OR_RETURN(std::string name, Unhex(name_hex));
    RY_ASSIGN_OR_RETURN(p.nonce, Unhex(nonce_hex));
    if (name.size() != ep_name_.size()) {
      return InvalidArgument(
          "{}: {} published a {}-byte endpoint name, this rank's is {} bytes: "
          "are both using provider {}?",
          Self(), Who(r), name.size(), ep_name_.size(), info_->fabric_attr->prov_name);
    }
    names += name;
  }
  std::vector<fi_addr_t> addrs(options_.size, FI_ADDR_NOTAVAIL);
  int n = fi_av_insert(av_.get(), names.data(), options_.size, addrs.data(), 0, nullptr);
  if (n != options_.size) {
    return Internal("{}: fi_av_insert accepted {} of {} addresses{}", Self(), n, options_.size,
                    n < 0 ? ": " + fi_->Error(n) : "");
  }
  for (int r = 0; r < options_.size; ++r) peers_[r].addr = addrs[r];
  started_ = true;
  for (int r = 0; r < options_.size; ++r) PostControlRecv(r, Op::Kind::kHelloRecv);
  return Status::Ok();
}

Result<fid_mr*> OfiTransport::Register(void* buf, size_t len, uint64_t access,
                                       FidOwner<fid_mr>* out) {
  for (int attempt = 0;; ++attempt) {
    // Application-chosen keys are random: a writer must have been handed the blob.
    uint64_t key = 0;
    std::string r = base::RandomBytes(sizeof(key));
    std::memcpy(&key, r.data(), sizeof(key));
    if (info_->domain_attr->mr_key_size < 8)
      key &= (uint64_t{1} << (8 * info_->domain_attr->mr_key_size)) - 1;
    int rc = fi_mr_reg(domain_.get(), buf, len, access, 0, key, 0, out->out(), nullptr);
    if (rc == -FI_ENOKEY && attempt < 8) continue;
    if (rc != 0) {
      return Unavailable("{}: registering {} bytes at {}: {}", Self(), len, buf, fi_->Error(rc));
    }
    break;
  }
  if (mr_mode_ & FI_MR_ENDPOINT) {
    int rc = fi_mr_bind(out->get(), &ep_.get()->fid, 0);
    if (rc == 0) rc = fi_mr_enable(out->get());
    if (rc != 0) return Unavailable("{}: binding a memory region: {}", Self(), fi_->Error(rc));
  }
  return out->get();
}

fi_info* Hints(const FabricLibrary& fi, const std::string& provider, bool rma) {
  fi_info* hints = fi.AllocInfo();
  if (hints == nullptr) return nullptr;
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | (rma ? FI_RMA : 0);
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  // What this transport handles; offering fewer mr_mode bits would hide verbs and efa.
  hints->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_SAFE;  // Abort() may come from another thread
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  if (!provider.empty()) hints->fabric_attr->prov_name = ::strdup(provider.c_str());
  return hints;
}

}  // namespace railyard::net::ofi

namespace railyard::net {

namespace {

const base::Logger kLog("ofi");

}  // namespace

using ofi::Hints;
using ofi::kApiVersion;
using ofi::OfiTransport;

Result<std::vector<std::string>> ListOfiProviders() {
  RY_ASSIGN_OR_RETURN(const FabricLibrary* fi, LoadFabricForTransport());
  fi_info* hints = Hints(*fi, "", false);
  if (hints == nullptr) return ResourceExhausted("fi_allocinfo failed");
  fi_info* info = nullptr;
  int rc = fi->getinfo(kApiVersion, nullptr, nullptr, 0, hints, &info);
  fi->freeinfo(hints);
  std::vector<std::string> names;
  if (rc == -FI_ENODATA) return names;
  if (rc != 0) return Unavailable("fi_getinfo listing providers: {}", fi->Error(rc));
  for (fi_info* i = info; i != nullptr; i = i->next) {
    std::string name = i->fabric_attr->prov_name;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  fi->freeinfo(info);
  return names;
}

Result<std::unique_ptr<Transport>> NewOfiTransport(const TransportOptions& options,
                                                   const OfiOptions& ofi) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return InvalidArgument("ofi transport: rank {} of size {} is not a valid rank", options.rank,
                           options.size);
  }
  if (ofi.provider.empty()) return InvalidArgument("ofi transport: no provider named");
  RY_ASSIGN_OR_RETURN(const FabricLibrary* fi, LoadFabricForTransport());
  fi_info* info = nullptr;
  int rc = -FI_ENODATA;
  for (bool rma : {true, false}) {  // RMA when the provider has it
    fi_info* hints = Hints(*fi, ofi.provider, rma);
    if (hints == nullptr) return ResourceExhausted("ofi transport: fi_allocinfo failed");
    const char* node = ofi.node.empty() ? nullptr : ofi.node.c_str();
    rc = fi->getinfo(kApiVersion, node, nullptr, node ? FI_SOURCE : 0, hints, &info);
    fi->freeinfo(hints);
    if (rc != -FI_ENODATA) break;
  }
  if (rc == -FI_ENODATA) {
    auto names = ListOfiProviders();
    std::string available =
        names.ok() ? fmt::format("{}", fmt::join(*names, ", ")) : names.status().message();
    return NotFound("ofi provider '{}' is not available here{}; available: {}", ofi.provider,
                    ofi.node.empty() ? "" : " on address " + ofi.node,
                    available.empty() ? "none" : available);
  }
  if (rc != 0) {
    return Unavailable("ofi transport: fi_getinfo for provider '{}': {}", ofi.provider,
                       fi->Error(rc));
  }
  // Deterministic choice among the per-interface duplicates: the named domain, else the
  // first; IPv4 addressing before IPv6 (link-local IPv6 entries are not routable).
  fi_info* chosen = nullptr;
  std::vector<std::string> domains;
  for (int pass = 0; pass < 2 && chosen == nullptr; ++pass) {
    for (fi_info* i = info; i != nullptr && chosen == nullptr; i = i->next) {
      std::string domain = i->domain_attr->name != nullptr ? i->domain_attr->name : "";
      if (pass == 0 && std::find(domains.begin(), domains.end(), domain) == domains.end()) {
        domains.push_back(domain);
      }
      if (!ofi.domain.empty() && domain != ofi.domain) continue;
      if (pass == 0 && i->addr_format != FI_SOCKADDR_IN) continue;
      chosen = i;
    }
  }
  if (chosen == nullptr) {
    fi->freeinfo(info);
    return NotFound("ofi provider '{}' has no domain '{}'; it offers: {}", ofi.provider, ofi.domain,
                    fmt::join(domains, ", "));
  }
  fi_info* mine = fi->dupinfo(chosen);
  fi->freeinfo(info);
  if (mine == nullptr) return ResourceExhausted("ofi transport: fi_dupinfo failed");
  kLog.Debug("rank {}: provider {} domain {} mr_mode {:#x}", options.rank,
             mine->fabric_attr->prov_name, mine->domain_attr->name, mine->domain_attr->mr_mode);
  auto transport = std::make_unique<OfiTransport>(fi, options, mine);
  RY_RETURN_IF_ERROR(transport->Open());
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace railyard::net
