#include "railyard/validate/collective_probe.h"

#include <fmt/format.h>

#include <algorithm>

#include "railyard/comm/bench.h"
#include "railyard/comm/communicator.h"
#include "railyard/net/interfaces.h"
#include "railyard/net/select.h"

namespace railyard::validate {
namespace {

// The NCCL_SOCKET_IFNAME-style spec of the interface that holds `address`.
Result<std::string> InterfaceHolding(const std::string& address) {
  RY_ASSIGN_OR_RETURN(std::vector<net::NetInterface> all, net::ListInterfaces());
  std::vector<std::string> here;
  for (const net::NetInterface& i : all) {
    if (i.ipv4 == address) return "=" + i.name;
    here.push_back(fmt::format("{} ({})", i.name, i.ipv4));
  }
  return NotFound("no network interface holds this host's address {}; interfaces here: {}", address,
                  fmt::join(here, ", "));
}

// "allreduce sweep of 4 ranks (0 node0, 1 node1, ...)": what a failure's rank numbers mean.
std::string SweepContext(int rank, int world, const std::vector<std::string>& hosts) {
  std::string who;
  if (static_cast<int>(hosts.size()) == world) {
    std::vector<std::string> parts;
    for (int r = 0; r < world; ++r) parts.push_back(fmt::format("{} {}", r, hosts[r]));
    who = fmt::format("; ranks: {}", fmt::join(parts, ", "));
  }
  return fmt::format("allreduce sweep, rank {} of {}{}", rank, world, who);
}

CollectiveFigure Figure(const comm::CommBenchRow& row) {
  return {.bytes = row.size_bytes,
          .seconds = row.out_of_place.time_us * 1e-6,
          .algbw_bytes_per_s = row.out_of_place.algbw_gbps * 1e9,
          .busbw_bytes_per_s = row.out_of_place.busbw_gbps * 1e9};
}

Result<std::vector<CollectiveFigure>> Sweep(net::Store& store, std::string_view key_prefix,
                                            int rank, int world, std::span<const uint64_t> sizes,
                                            base::Deadline deadline,
                                            const CollectiveProbeOptions& o) {
  comm::CommBenchOptions bo;
  bo.op = comm::BenchOp::kAllreduce;
  bo.type = comm::DataType::kF32;
  bo.redop = comm::ReduceOp::kSum;
  bo.warmup = o.warmup;
  bo.iters = o.iters;
  bo.sizes.assign(sizes.begin(), sizes.end());
  RY_RETURN_IF_ERROR(comm::CheckCommBenchSizes(bo, world));

  net::TransportOptions to;
  to.rank = rank;
  to.size = world;
  to.store = &store;
  to.key_prefix = std::string(key_prefix);
  to.secret = o.secret;
  to.host = o.host;
  if (!o.address.empty()) {
    RY_ASSIGN_OR_RETURN(to.socket_ifname, InterfaceHolding(o.address));
  }
  RY_ASSIGN_OR_RETURN(std::unique_ptr<net::Transport> transport, net::NewTransport("tcp", to));
  RY_RETURN_IF_ERROR(transport->Start(deadline));

  // Every operation ends by the deadline; between sizes the deadline is checked again, so
  // the whole sweep ends by it (plus the communicator's second to name a culprit).
  comm::CommOptions co;
  co.timeout =
      std::max(std::chrono::milliseconds(1),
               std::chrono::duration_cast<std::chrono::milliseconds>(deadline.Remaining()));
  RY_ASSIGN_OR_RETURN(std::unique_ptr<comm::Communicator> c,
                      comm::Communicator::Create(std::move(transport), co));

  std::vector<CollectiveFigure> figures;
  for (uint64_t bytes : sizes) {
    if (deadline.Expired()) {
      return DeadlineExceeded("the deadline passed after {} of {} sizes (next: {} bytes)",
                              figures.size(), sizes.size(), bytes);
    }
    bo.sizes = {bytes};
    RY_ASSIGN_OR_RETURN(std::vector<comm::CommBenchRow> rows, comm::RunCommBench(*c, bo));
    RY_RETURN_IF_ERROR(comm::CheckCommBenchRows(rows, bo.op));
    for (const comm::CommBenchRow& row : rows) figures.push_back(Figure(row));
  }
  return figures;
}

}  // namespace

Result<std::vector<CollectiveFigure>> RunAllreduceSweep(net::Store& store,
                                                        std::string_view key_prefix, int rank,
                                                        int world, std::span<const uint64_t> sizes,
                                                        base::Deadline deadline,
                                                        const CollectiveProbeOptions& options) {
  if (world < 1 || rank < 0 || rank >= world) {
    return InvalidArgument("allreduce sweep: rank {} of {} ranks is not a rank", rank, world);
  }
  if (sizes.empty()) return InvalidArgument("allreduce sweep: no message size given");
  if (options.warmup < 0 || options.iters < 1) {
    return InvalidArgument("allreduce sweep: warm-up {} and timed iterations {} (need >= 0, >= 1)",
                           options.warmup, options.iters);
  }
  Result<std::vector<CollectiveFigure>> figures =
      Sweep(store, key_prefix, rank, world, sizes, deadline, options);
  if (!figures.ok()) return figures.status().WithContext(SweepContext(rank, world, options.hosts));
  return figures;
}

}  // namespace railyard::validate
