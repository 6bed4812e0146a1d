// One-sided writes (RmaWriter): registered regions and their remote key blobs (wire.h).
#include "railyard/base/logging.h"
#include "railyard/net/ofi/ofi_transport_impl.h"

namespace railyard::net::ofi {
Result<RmaWriter::RmaRegion> OfiTransport::RegisterRma(void* data, size_t len) {
  std::lock_guard lock(mu_);
  RY_RETURN_IF_ERROR(Usable());
  if (!rma_) {
    return Unimplemented("{}: provider {} offers no RMA", Self(), info_->fabric_attr->prov_name);
  }
  if (mr_mode_ & FI_MR_RAW) {
    return Unimplemented("{}: provider {} uses raw memory keys (FI_MR_RAW), not supported", Self(),
                         info_->fabric_attr->prov_name);
  }
  auto region = std::make_unique<RmaRegionState>();
  RY_RETURN_IF_ERROR(Register(data, len, FI_REMOTE_WRITE | FI_WRITE, &region->mr).status());
  region->base = (mr_mode_ & FI_MR_VIRT_ADDR) ? reinterpret_cast<uint64_t>(data) : 0;
  region->len = len;
  std::string key(kRemoteKeyBytes, '\0');
  PutU32(key.data(), kKeyMagic);
  PutU64(key.data() + 8, fi_mr_key(region->mr.get()));
  PutU64(key.data() + 16, region->base);
  PutU64(key.data() + 24, len);
  uint64_t id = next_region_++;
  regions_.emplace(id, std::move(region));
  return RmaRegion{id, std::move(key)};
}

Status OfiTransport::DeregisterRma(uint64_t region_id) {
  std::lock_guard lock(mu_);
  if (regions_.erase(region_id) == 0) {
    return NotFound("{}: no RMA region {} registered", Self(), region_id);
  }
  return Status::Ok();
}

Result<Request> OfiTransport::PostWrite(int peer, const void* data, size_t len,
                                        std::string_view remote_key, uint64_t offset) {
  std::lock_guard lock(mu_);
  RY_RETURN_IF_ERROR(Usable());
  RY_RETURN_IF_ERROR(CheckPeer(peer));
  if (!rma_) {
    return Unimplemented("{}: provider {} offers no RMA", Self(), info_->fabric_attr->prov_name);
  }
  if (remote_key.size() != kRemoteKeyBytes || GetU32(remote_key.data()) != kKeyMagic) {
    return InvalidArgument("{}: remote key for {} is not an ofi RMA key ({} bytes)", Self(),
                           Who(peer), remote_key.size());
  }
  uint64_t region_len = GetU64(remote_key.data() + 24);
  if (offset > region_len || len > region_len - offset) {
    return InvalidArgument("{}: write of {} bytes at offset {} exceeds {}'s {}-byte region", Self(),
                           len, offset, Who(peer), region_len);
  }
  Op* op = NewOp(Op::Kind::kWrite, peer, 0, const_cast<void*>(data), len);
  op->remote_key = GetU64(remote_key.data() + 8);
  op->remote_addr = GetU64(remote_key.data() + 16) + offset;
  return Submit(op);
}

}  // namespace railyard::net::ofi
