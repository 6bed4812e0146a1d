// `railyard bench comm`: starts N rank processes (on this host, or one per virtual host
// with --vcluster), each running comm::RunCommBench, and prints its rows in nccl-tests'
// layout (comm/bench.h), so that scripts written for nccl-tests' output read them.
//
// The ranks are a launch::Gang (launch/gang.h: job secret, store address, each rank's
// environment, supervision) of this same binary with the hidden --worker flag; rank 0 serves
// the rendezvous store. If a rank dies, the survivors fail naming it (comm's failure
// attribution) and the launcher exits non-zero naming the rank, its host and how it ended. A row
// with wrong values (comm/bench.h, Checking) makes rank 0 fail naming the row, after printing every
// row, so the run exits non-zero.
//
// Test only: RAILYARD_BENCH_CORRUPT_FOR_TEST=RANK:SIZE:ITERATION has rank RANK invert every
// byte of its result after timed iteration ITERATION (0-based) of the row of SIZE bytes, to
// show that a wrong timed result fails the run.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <optional>
#include <span>

#include "railyard/base/units.h"
#include "railyard/cli/cli_common.h"
#include "railyard/comm/bench.h"
#include "railyard/comm/bootstrap.h"
#include "railyard/comm/communicator.h"
#include "railyard/launch/gang.h"
#include "railyard/net/interfaces.h"
#include "railyard/net/select.h"
#include "railyard/net/tcp/congestion.h"
#include "railyard/vcluster/command_runner.h"
#include "railyard/vcluster/spec.h"
#include "railyard/vcluster/state.h"
#include "railyard/vcluster/vcluster.h"

namespace railyard::cli {
namespace {

// Whole-number flags are kept as text and parsed here (ParseIntFlag), so that `--ranks abc`
// is one line naming the flag, like every other bad input of this command.
struct CommFlags {
  std::string ranks = "2";
  std::string transport = "auto";
  bool transport_given = false;  // --transport on the command line (beats RAILYARD_TRANSPORT)
  std::string op = "allreduce";
  std::string type = "f32";
  std::string redop = "sum";
  std::string sizes = "4KiB:64MiB";
  std::string algorithm = "auto";
  std::string iters = "20";
  std::string warmup = "5";
  std::string timeout = "30s";
  std::string setup_timeout = "60s";
  bool json = false;
  bool check = false;
  std::string vcluster_prefix;
  bool use_vcluster = false;
  bool worker = false;
  std::string local_hosts = "1";
  // Tuning for measurements (empty: the library's choice); passed to every rank as flags.
  std::string piece;
  std::string tcp_streams;
  std::string tcp_buffer;
  bool no_reduce_on_receive = false;
};

Result<int> ParseIntFlag(std::string_view flag, const std::string& text, int lo, int hi) {
  int v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || p != end || v < lo || v > hi) {
    return InvalidArgument("{} {}: expected a whole number from {} to {}", flag, text, lo, hi);
  }
  return v;
}

Result<comm::CommBenchOptions> ParseBenchOptions(const CommFlags& f) {
  comm::CommBenchOptions o;
  RY_ASSIGN_OR_RETURN(o.op, comm::ParseBenchOp(f.op));
  RY_ASSIGN_OR_RETURN(o.type, comm::ParseDataType(f.type));
  RY_ASSIGN_OR_RETURN(o.redop, comm::ParseReduceOp(f.redop));
  auto sizes = comm::ParseSizes(f.sizes);
  if (!sizes.ok()) return sizes.status().WithContext("--sizes");
  o.sizes = *sizes;
  auto algo = comm::ParseAlgorithm(f.algorithm);
  if (!algo.ok()) return algo.status().WithContext("--algorithm");
  o.algorithm = *algo;
  RY_RETURN_IF_ERROR(
      comm::CheckAlgorithm(comm::BenchOpName(o.op), o.algorithm)
          .WithContext(fmt::format("--algorithm {} with --op {}", f.algorithm, f.op)));
  RY_ASSIGN_OR_RETURN(o.iters, ParseIntFlag("--iters", f.iters, 1, 100000));
  RY_ASSIGN_OR_RETURN(o.warmup, ParseIntFlag("--warmup", f.warmup, 0, 10000));
  return o;
}

// RAILYARD_BENCH_CORRUPT_FOR_TEST (test only, see the top of this file): rank, row size in
// bytes, timed iteration. nullopt when unset.
struct CorruptionForTest {
  int rank = 0;
  uint64_t size = 0;
  int iteration = 0;
};

Result<std::optional<CorruptionForTest>> CorruptionFromEnvironment() {
  const char* env = std::getenv("RAILYARD_BENCH_CORRUPT_FOR_TEST");
  if (env == nullptr || *env == '\0') return std::optional<CorruptionForTest>();
  std::string_view text = env;
  CorruptionForTest c;
  auto take = [&](auto& out) {
    auto colon = std::min(text.find(':'), text.size());
    auto [p, ec] = std::from_chars(text.data(), text.data() + colon, out);
    bool ok = colon > 0 && ec == std::errc() && p == text.data() + colon;
    text.remove_prefix(std::min(colon + 1, text.size()));
    return ok;
  };
  if (!take(c.rank) || !take(c.size) || !take(c.iteration) || !text.empty() || c.rank < 0 ||
      c.iteration < 0) {
    return InvalidArgument(
        "RAILYARD_BENCH_CORRUPT_FOR_TEST '{}': expected RANK:SIZE:ITERATION "
        "in whole numbers (a test-only fault)",
        env);
  }
  return std::optional<CorruptionForTest>(c);
}

// The transport the ranks use: --transport, else RAILYARD_TRANSPORT, else auto; resolved
// here, so that a bad name is one line naming where it came from instead of N failing ranks.
Result<std::string> ChooseTransport(const CommFlags& f, const comm::TransportEnvironment& te,
                                    int local_hosts) {
  std::string source = "--transport", requested = f.transport;
  if (!f.transport_given && !te.transport.empty()) {
    source = "RAILYARD_TRANSPORT", requested = te.transport;
  }
  const bool one_host = !f.use_vcluster && local_hosts == 1;
  if (requested == "shm" && !one_host) {
    return InvalidArgument(
        "{} shm: shared memory needs every rank on one host, but {}; use tcp, ofi or auto", source,
        f.use_vcluster
            ? "--vcluster runs one rank per virtual host"
            : fmt::format("--local-hosts {} spreads them over {} hosts", local_hosts, local_hosts));
  }
  auto resolved = net::ResolveTransport(requested, one_host);
  if (!resolved.ok()) return resolved.status().WithContext(source);
  return resolved;
}

std::string Title(const CommFlags& f, const std::string& transport, int ranks) {
  return fmt::format(
      "railyard bench comm: {} {}{}, {} ranks{}, transport {}, {} iterations "
      "({} warm-up), sizes {}",
      f.op, f.type, f.op == "allreduce" || f.op == "reduce_scatter" ? " " + f.redop : std::string(),
      ranks, f.use_vcluster ? " (one per virtual host)" : "", transport, f.iters, f.warmup,
      f.sizes);
}

// Where nccl-tests names its binary (all_reduce_perf) in the '#' lines.
constexpr std::string_view kProgram = "railyard bench comm";

// The tuning flags into a rank's configuration; INVALID_ARGUMENT naming the flag.
Status ApplyTuningFlags(const CommFlags& f, comm::BootstrapConfig& cfg) {
  if (!f.piece.empty()) {
    auto b = base::ParseBytes(f.piece);
    if (!b.ok() || *b < 4096 || *b > (uint64_t{1} << 30)) {
      return InvalidArgument("--piece {}: expected a size from 4KiB to 1GiB", f.piece);
    }
    cfg.comm.piece_bytes = *b;
  }
  if (!f.tcp_streams.empty()) {
    RY_ASSIGN_OR_RETURN(cfg.tcp.streams_per_peer,
                        ParseIntFlag("--tcp-streams", f.tcp_streams, 1, 64));
  }
  if (!f.tcp_buffer.empty()) {
    auto b = base::ParseBytes(f.tcp_buffer);
    if (!b.ok() || *b > (uint64_t{1} << 30)) {
      return InvalidArgument("--tcp-buffer {}: expected a size up to 1GiB (0: kernel autotuning)",
                             f.tcp_buffer);
    }
    cfg.tcp.socket_buffer_bytes = *b;
  }
  cfg.comm.reduce_on_receive = !f.no_reduce_on_receive;
  return Status::Ok();
}

// One rank: bootstrap from the environment, run, rank 0 prints.
Outcome RunWorker(const CommFlags& f) {
  RY_ASSIGN_OR_RETURN(comm::CommBenchOptions o, ParseBenchOptions(f));
  RY_ASSIGN_OR_RETURN(comm::BootstrapConfig cfg, comm::BootstrapConfigFromEnvironment());
  auto timeout = base::ParseDuration(f.timeout);
  if (!timeout.ok()) return timeout.status().WithContext("--timeout");
  cfg.comm.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*timeout);
  cfg.comm.check_consistency = cfg.comm.check_consistency || f.check;
  RY_RETURN_IF_ERROR(ApplyTuningFlags(f, cfg));
  // Start-up (store, every rank publishing, transports) has its own deadline: ranks start at
  // different times, so it is usually longer than an operation's.
  auto setup = base::ParseDuration(f.setup_timeout);
  if (!setup.ok()) return setup.status().WithContext("--setup-timeout");
  RY_ASSIGN_OR_RETURN(comm::Bootstrapped b, comm::Bootstrap(cfg, base::Deadline::After(*setup)));
  comm::Communicator& c = *b.comm;
  RY_ASSIGN_OR_RETURN(auto corrupt, CorruptionFromEnvironment());
  if (corrupt && corrupt->rank == c.rank()) {
    o.after_timed_iteration_for_test = [want = *corrupt](uint64_t size, int iteration,
                                                         std::span<char> result) {
      if (size != want.size || iteration != want.iteration) return;
      for (char& byte : result) byte = static_cast<char>(~byte);
    };
  }
  CommFlags shown = f;
  shown.use_vcluster = cfg.virtual_host;
  if (c.rank() == 0 && !f.json) {
    o.on_timing_start = [](uint64_t size) {
      fmt::print("# timing {} bytes\n", size);
      std::fflush(stdout);
    };
    fmt::print("# {}\n# Collective test starting: {}\n", Title(shown, b.transport, c.size()),
               kProgram);
    std::fflush(stdout);
  }
  auto rows = comm::RunCommBench(c, o);
  if (!rows.ok()) return rows.status();
  if (c.rank() == 0) {
    if (f.json) {
      fmt::print("{}", comm::CommBenchJson(*rows));
    } else {
      fmt::print("{}", comm::FormatCommBenchTable(*rows, kProgram));
    }
    std::fflush(stdout);
  }
  // Everyone leaves together: a rank that exits early looks like a crash to a peer still
  // finishing its last operation.
  RY_RETURN_IF_ERROR(c.Barrier());
  // Every rank holds the same rows; rank 0 alone reports wrong ones.
  if (c.rank() == 0) return comm::CheckCommBenchRows(*rows, o.op);
  return Status::Ok();
}

Outcome RunLauncher(const CommFlags& f) {
  // Everything a rank would reject is checked here first: one line and exit code 2 instead
  // of N ranks failing with theirs.
  RY_ASSIGN_OR_RETURN(const int ranks, ParseIntFlag("--ranks", f.ranks, 1, 256));
  RY_ASSIGN_OR_RETURN(comm::CommBenchOptions o, ParseBenchOptions(f));
  auto sizes_ok = comm::CheckCommBenchSizes(o, ranks);
  if (!sizes_ok.ok()) return sizes_ok.WithContext("--sizes");
  auto timeout = base::ParseDuration(f.timeout);
  if (!timeout.ok()) return timeout.status().WithContext("--timeout");
  if (*timeout < std::chrono::milliseconds(100)) {
    return InvalidArgument("--timeout {}: expected at least 100ms", f.timeout);
  }
  auto setup = base::ParseDuration(f.setup_timeout);
  if (!setup.ok()) return setup.status().WithContext("--setup-timeout");
  // RAILYARD_COMM_TIMEOUT, _ALGO, _CHECK: the ranks read them; a bad one is an error.
  auto env_options = comm::CommOptions::FromEnvironment();
  if (!env_options.ok()) return InvalidArgument("{}", env_options.status().message());
  comm::BootstrapConfig tuning;
  RY_RETURN_IF_ERROR(ApplyTuningFlags(f, tuning));
  // The ranks read the transport variables the same way; a bad one is an error here.
  auto read_te = comm::ReadTransportEnvironment();
  if (!read_te.ok()) return InvalidArgument("{}", read_te.status().message());
  const comm::TransportEnvironment& te = *read_te;
  // RAILYARD_TCP_CC: the ranks set it on their sockets; an unavailable name is an error.
  if (!te.tcp_congestion.empty()) {
    auto parsed = net::CongestionControl::Parse(te.tcp_congestion);
    Status st = parsed.ok() ? parsed->Check() : parsed.status();
    if (!st.ok()) return InvalidArgument("RAILYARD_TCP_CC: {}", st.message());
  }
  auto corrupt = CorruptionFromEnvironment();
  if (!corrupt.ok()) return corrupt.status();
  if (f.use_vcluster && !vcluster::ValidatePrefix(f.vcluster_prefix).ok()) {
    return InvalidArgument(
        "--vcluster '{}': expected the prefix of a virtual cluster that is "
        "up (1 to {} lowercase letters or digits, starting with a letter; "
        "see `railyard vcluster list`)",
        f.vcluster_prefix, vcluster::kMaxPrefixLength);
  }
  auto local_hosts = ParseIntFlag("--local-hosts", f.local_hosts, 1, ranks);
  if (!local_hosts.ok() || (*local_hosts > 1 && f.use_vcluster)) {
    return InvalidArgument(
        "--local-hosts {}: expected 1 to --ranks ({}), and not with "
        "--vcluster",
        f.local_hosts, ranks);
  }
  RY_ASSIGN_OR_RETURN(const std::string transport, ChooseTransport(f, te, *local_hosts));

  // Provider and interface problems: one line here, not one per rank.
  if (transport == "ofi") {
    std::string provider = te.ofi_provider.empty() ? "tcp;ofi_rxm" : te.ofi_provider;
    RY_ASSIGN_OR_RETURN(std::vector<std::string> providers, net::ListOfiProviders());
    if (std::find(providers.begin(), providers.end(), provider) == providers.end()) {
      std::string list;
      for (const auto& p : providers) list += (list.empty() ? "" : ", ") + p;
      return NotFound(
          "RAILYARD_OFI_PROVIDER: libfabric provider '{}' is not available here; "
          "available: {}",
          provider, list);
    }
  }
  if (!te.socket_ifname.empty()) {
    auto iface = net::ChooseInterface(te.socket_ifname);
    if (!iface.ok()) return iface.status().WithContext("RAILYARD_SOCKET_IFNAME");
  }
  launch::GangSpec gang;
  gang.job.transport = te;
  gang.job.transport.transport = transport;
  gang.job.job_id = fmt::format("bench-{}", ::getpid());
  if (f.use_vcluster) {
    auto runner = vcluster::MakeSystemRunner(std::chrono::seconds(20));
    vcluster::VirtualCluster vc(runner.get(), vcluster::DefaultStateDir());
    auto loaded = vc.Load(f.vcluster_prefix);
    if (!loaded.ok()) return loaded.status().WithContext("--vcluster");
    const vcluster::ClusterState& state = *loaded;
    if (ranks > static_cast<int>(state.plan.hosts.size())) {
      return InvalidArgument(
          "--ranks {}: the virtual cluster '{}' has {} hosts (one rank per "
          "host with --vcluster)",
          ranks, state.spec().prefix, state.plan.hosts.size());
    }
    RY_ASSIGN_OR_RETURN(gang.hosts, launch::VirtualHosts(state, ranks));
    gang.rank_hosts = launch::RanksInBlocks(ranks, 1);
    // Inside a host's namespace its one link is eth0; in loopback mode every host is an
    // address on lo.
    bool loopback = gang.hosts[0].netns_path.empty();
    gang.job.transport.socket_ifname = loopback ? "=lo" : "=eth0";
    gang.job.transport.ofi_domain = loopback ? "lo" : "eth0";
  } else {
    // On one host, ranks talk over loopback unless told otherwise.
    gang.hosts = launch::LocalHosts(*local_hosts);
    gang.rank_hosts = launch::RanksInBlocks(ranks, (ranks + *local_hosts - 1) / *local_hosts);
    if (te.socket_ifname.empty()) gang.job.transport.socket_ifname = "=lo";
    if (te.ofi_domain.empty()) gang.job.transport.ofi_domain = "lo";
  }
  gang.argv = {SelfExecutable(),
               "bench",
               "comm",
               "--worker",
               "--op",
               f.op,
               "--type",
               f.type,
               "--redop",
               f.redop,
               "--sizes",
               f.sizes,
               "--algorithm",
               f.algorithm,
               "--iters",
               std::to_string(o.iters),
               "--warmup",
               std::to_string(o.warmup),
               "--timeout",
               f.timeout,
               "--setup-timeout",
               f.setup_timeout};
  if (f.json) gang.argv.push_back("--json");
  if (f.check) gang.argv.push_back("--check");
  for (auto [flag, value] :
       {std::pair{"--piece", &f.piece}, std::pair{"--tcp-streams", &f.tcp_streams},
        std::pair{"--tcp-buffer", &f.tcp_buffer}}) {
    if (!value->empty()) gang.argv.insert(gang.argv.end(), {flag, *value});
  }
  if (f.no_reduce_on_receive) gang.argv.push_back("--no-reduce-on-receive");
  // Rank 0 talks to the terminal; the others' output is shown only if they fail.
  gang.terminal_rank = 0;
  // Once a rank has failed, the others report within --timeout plus about a second; a rank
  // still running well after that is stopped or hung outside communication (it cannot
  // answer, so it will never exit by itself): the gang stops it and says so instead of
  // waiting for the overall deadline.
  gang.failure_grace = *timeout + std::chrono::seconds(3);
  RY_ASSIGN_OR_RETURN(launch::Gang started, launch::Gang::Start(gang));
  // Every rank bounds each operation by --timeout; the whole run by that times the number
  // of operations it issues, plus set-up. A safety net only: ranks bound every operation
  // themselves and never hang.
  launch::GangResult done = started.Wait(
      base::Deadline::After(*setup + *timeout * 4 + std::chrono::seconds(120) * o.sizes.size()));
  if (done.deadline_expired) {
    return DeadlineExceeded(
        "bench comm: ranks still running after the overall deadline; killed them:{}",
        done.Failures());
  }
  if (!done.ok()) return Unavailable("bench comm failed:{}", done.Failures());
  return Status::Ok();
}

}  // namespace

void RegisterBenchCommCommand(CLI::App* bench, Action* action) {
  auto f = std::make_shared<CommFlags>();
  CLI::App* c = bench->add_subcommand(
      "comm", "Collective bandwidth and latency over N rank processes (nccl-tests style rows)");
  c->add_option("--ranks", f->ranks, "rank processes to start (1-256)")
      ->type_name("INT")
      ->capture_default_str();
  c->add_option("--transport", f->transport,
                "auto, tcp, shm or ofi (libfabric; provider from RAILYARD_OFI_PROVIDER, "
                "default tcp;ofi_rxm). auto: shm when every rank is on this host, else ofi "
                "when an RDMA provider (verbs, efa, cxi, psm3, opx) is present, else tcp. "
                "Without this flag RAILYARD_TRANSPORT decides, if set")
      ->capture_default_str();
  c->add_option("--op", f->op, "allreduce, allgather, reduce_scatter, broadcast or alltoall")
      ->capture_default_str();
  c->add_option("--type", f->type,
                "f32, f64, f16, bf16, i32, i64, u8, or nccl-tests' names float, double, half, "
                "bfloat16, int32, int64, uint8 (the table prints these)")
      ->capture_default_str();
  c->add_option("--redop", f->redop, "sum, prod, min, max, avg")->capture_default_str();
  c->add_option("--sizes", f->sizes,
                "bytes of one rank's buffer: MIN:MAX (doubling), a comma "
                "list such as 4KiB,1MiB,64MiB, or one size; each at least one element of "
                "--type (per rank for allgather, reduce_scatter, alltoall)")
      ->capture_default_str();
  c->add_option("--algorithm", f->algorithm,
                "auto, or one that --op can run: allreduce ring, rd, hier or window (through "
                "the shm shared window); broadcast tree or ring; reduce_scatter and allgather "
                "ring; alltoall pairwise")
      ->capture_default_str();
  c->add_option("--iters", f->iters, "timed iterations per size (1-100000)")
      ->type_name("INT")
      ->capture_default_str();
  c->add_option("--warmup", f->warmup, "untimed iterations per size (0-10000)")
      ->type_name("INT")
      ->capture_default_str();
  c->add_option("--timeout", f->timeout,
                "deadline of each operation; a rank that stalls or dies "
                "is named within this plus about 1s")
      ->capture_default_str();
  c->add_option("--setup-timeout", f->setup_timeout,
                "deadline for every rank to start, meet "
                "at the rendezvous store and connect")
      ->capture_default_str();
  c->add_flag("--check", f->check, "ranks compare operation, type and count before each call");
  c->add_flag("--json", f->json,
              "print the rows as a JSON array (size_bytes, count, type, time_us, algbw_gbps, "
              "busbw_gbps, wrong, checked of the out-of-place variant; in_place: the same "
              "five, or null for alltoall)");
  c->add_option("--vcluster", f->vcluster_prefix,
                "one rank per host of this virtual cluster "
                "(its prefix; see `railyard vcluster up`)");
  c->add_option("--local-hosts", f->local_hosts,
                "pretend the ranks run on this many hosts "
                "(consecutive ranks share one), to exercise the hierarchical allreduce "
                "(shm inside a host, the transport across) on one machine")
      ->type_name("INT")
      ->capture_default_str();
  c->add_option("--piece", f->piece,
                "tuning: the ring's piece size (4KiB-1GiB; default 1MiB on one host, 128KiB "
                "across hosts)")
      ->group("Tuning");
  c->add_option("--tcp-streams", f->tcp_streams,
                "tuning: tcp connections per peer and direction (1-64; default 2)")
      ->group("Tuning");
  c->add_option("--tcp-buffer", f->tcp_buffer,
                "tuning: tcp socket buffer size (default 4MiB; 0 = kernel autotuning)")
      ->group("Tuning");
  c->add_flag("--no-reduce-on-receive", f->no_reduce_on_receive,
              "tuning: the ring receives into scratch and reduces afterwards instead of "
              "reducing straight from the transport (A/B measurements)")
      ->group("Tuning");
  c->add_flag("--worker", f->worker, "internal: run as one rank")->group("");
  c->footer(
      "Examples:\n"
      "  railyard bench comm --ranks 4 --transport tcp --op allreduce --sizes 4KiB:64MiB\n"
      "  railyard bench comm --ranks 2 --transport shm --sizes 64MiB --iters 10 --json\n"
      "  railyard bench comm --ranks 4 --op broadcast --algorithm tree --sizes 4KiB,1MiB,64MiB\n"
      "  RAILYARD_TRANSPORT=tcp railyard bench comm --ranks 2 --sizes 4KiB:1MiB\n"
      "  railyard bench comm --vcluster ry --ranks 4 --sizes 1MiB:16MiB\n"
      "Environment: RAILYARD_TRANSPORT (used when --transport is not given),\n"
      "RAILYARD_SOCKET_IFNAME (tcp interface, NCCL syntax; default =lo on one host),\n"
      "RAILYARD_OFI_PROVIDER, RAILYARD_OFI_DOMAIN (default lo on one host), RAILYARD_COMM_ALGO,\n"
      "RAILYARD_COMM_CHECK, RAILYARD_COMM_TIMEOUT (--timeout wins),\n"
      "RAILYARD_TCP_CC (tcp congestion control: auto, system or a name; auto uses cubic\n"
      "between ranks of one kernel); all but RAILYARD_OFI_DOMAIN are checked before any\n"
      "rank starts.\n"
      "The table is nccl-tests' (2.19.6): size, count, type, redop, root, then time, algbw,\n"
      "busbw and #wrong out-of-place and in-place (N/A: alltoall has no in-place form);\n"
      "Railyard's own lines start with '#'. busbw = algbw x 2(n-1)/n for allreduce, (n-1)/n\n"
      "for allgather, reduce_scatter and alltoall, 1 for broadcast. Every timed iteration's\n"
      "result is checked (sampled positions; untimed iterations in full); a row with wrong\n"
      "values makes the command exit 1 naming the row, after printing every row.\n"
      "Docs: docs/comm.md\n");
  c->callback([f, c, action] {
    f->use_vcluster = c->count("--vcluster") > 0;
    f->transport_given = c->count("--transport") > 0;
    *action = [f]() -> Outcome { return f->worker ? RunWorker(*f) : RunLauncher(*f); };
  });
}

}  // namespace railyard::cli
