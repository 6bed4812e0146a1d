// RunValidation end to end inside one process: agents on threads (RunAgent) over an in-memory
// store, with fake probes that answer from a rate matrix, so the coordinator's phases,
// deadlines and attribution are tested without a network; and once with the real probes on
// loopback.
#include "railyard/validate/coordinator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <thread>

#include "railyard/base/temp_dir_testing.h"
#include "railyard/net/store/tcp_store_client.h"
#include "railyard/net/store/tcp_store_server.h"
#include "railyard/validate/agent.h"
#include "railyard/validate/node_env_testing.h"
#include "railyard/validate/schedule_testing.h"

namespace railyard::validate {
namespace {

using std::chrono::milliseconds;
constexpr double kRate = 200e6;

using RateFn = std::function<double(int src, int dst)>;

int HostIndex(const std::string& name) { return std::stoi(name.substr(1)); }

// Bandwidth from `rate`, a fixed 100 us round trip, storage at 100 MB/s and 1000 ops/s
// (writes refused on the host `read_only`), an allreduce at 20 MB/s busbw.
class FakeProbes final : public AgentProbes {
 public:
  FakeProbes(int self, RateFn rate, int read_only)
      : self_(self), rate_(std::move(rate)), read_only_(read_only) {}
  Result<int> StartSink(const std::string&, base::Deadline) override { return 20000 + self_; }
  Result<double> Send(const Peer& peer, base::Duration, base::Deadline) override {
    return rate_(self_, HostIndex(peer.host));
  }
  Result<double> RoundTrip(const Peer&, base::Deadline) override { return 100e-6; }
  Status Storage(const Task& task, base::Deadline, TaskResult& r) override {
    if (task.kind == TaskKind::kStorageWrite && self_ == read_only_) {
      return PermissionDenied("{}: Read-only file system (EROFS)", task.dir);
    }
    if (task.kind == TaskKind::kStorageRead && HostIndex(Base(task.neighbour_dir)) == read_only_) {
      return NotFound("{}/ry-ior-0.dat: no such file", task.neighbour_dir);
    }
    r.bytes_per_s = 100e6;
    r.ops_per_s = task.kind == TaskKind::kMetadata ? 1000 : 0;
    return Status::Ok();
  }
  Result<std::vector<CollectiveFigure>> Allreduce(net::Store&, const Task&, const AgentInvocation&,
                                                  const std::string&, base::Deadline) override {
    return std::vector<CollectiveFigure>{
        {.bytes = 1 << 20, .seconds = 0.1, .algbw_bytes_per_s = 1e7, .busbw_bytes_per_s = 20e6}};
  }

 private:
  static std::string Base(const std::string& dir) { return dir.substr(dir.rfind('/') + 1); }
  int self_;
  RateFn rate_;
  int read_only_;
};

// Forwards to the run's store, but an agent's task `die_after` + 1 never comes: Get fails,
// as a store connection of a killed agent would, and RunAgent ends; or, with `hang`, Get waits
// out its deadline as a hung agent would.
class DyingStore final : public net::Store {
 public:
  DyingStore(net::Store& base, std::string prefix, bool hang)
      : base_(base), prefix_(std::move(prefix)), hang_(hang) {}
  Status Set(std::string_view k, std::string_view v, base::Deadline d) override {
    return base_.Set(k, v, d);
  }
  Result<std::string> Get(std::string_view k, base::Deadline d) override {
    if (k.starts_with(prefix_) && hang_) return base_.Get("never/" + std::string(k), d);
    if (k.starts_with(prefix_)) return Aborted("agent killed by the test");
    return base_.Get(k, d);
  }
  Result<int64_t> Add(std::string_view k, int64_t delta, base::Deadline d) override {
    return base_.Add(k, delta, d);
  }
  Result<std::string> CompareAndSet(std::string_view k, std::string_view e, std::string_view v,
                                    base::Deadline d) override {
    return base_.CompareAndSet(k, e, v, d);
  }
  Status Wait(std::span<const std::string> keys, base::Deadline d,
              std::vector<std::string>* missing) override {
    return base_.Wait(keys, d, missing);
  }
  std::string Describe() const override { return "dying " + base_.Describe(); }

 private:
  net::Store& base_;
  std::string prefix_;
  bool hang_;
};

class ThreadHandle final : public AgentHandle {
 public:
  explicit ThreadHandle(std::function<Status()> body) {
    thread_ = std::thread([this, body = std::move(body)] {
      status_ = body();
      done_ = true;
    });
  }
  ThreadHandle() = default;  // an agent that never starts
  ~ThreadHandle() override { Stop(); }
  bool Running() override { return !done_; }
  std::string ExitReason() override {
    return done_ ? "exited: " + status_.ToString() : "still running";
  }
  void Stop() override {
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::thread thread_;
  std::atomic<bool> done_{false};
  Status status_;
};

struct Faults {
  std::set<std::string> never_start;
  std::set<std::string> exit_at_start;   // the agent process ends before it says hello
  std::map<std::string, int> die_after;  // host -> tasks it answers
  bool hang = false;                     // die_after hangs instead
  milliseconds idle_timeout{10'000};
  bool real_probes = false;
  int read_only = -1;    // the host whose storage refuses writes
  bool tcp = false;      // a TcpStoreServer on loopback, a client per agent
  bool dial_in = false;  // agents started before the run, no starter
};

class ThreadStarter final : public AgentStarter {
 public:
  ThreadStarter(net::Store& store, const CheckRegistry& registry, RateFn rate, Faults faults)
      : store_(store), registry_(registry), rate_(std::move(rate)), faults_(std::move(faults)) {
    auto env = std::make_shared<FakeNodeEnv>();
    env->files["/proc/meminfo"] = "SwapTotal: 0 kB\nSwapFree: 0 kB\n";
    env_ = env;
  }

  Result<std::unique_ptr<AgentHandle>> Start(const AgentInvocation& inv) override {
    if (faults_.never_start.contains(inv.host))
      return std::unique_ptr<AgentHandle>(std::make_unique<ThreadHandle>());
    if (faults_.exit_at_start.contains(inv.host)) {
      auto handle = std::make_unique<ThreadHandle>(
          [] { return Unavailable("cannot reach the store at 198.18.0.1:29400"); });
      handle->Stop();  // joined: it has ended before the coordinator looks
      return std::unique_ptr<AgentHandle>(std::move(handle));
    }
    net::Store* store = &store_;
    if (faults_.tcp) {
      Result<std::unique_ptr<net::Store>> client = net::ConnectTcpStore(
          inv.store_address, inv.secret, base::Deadline::After(std::chrono::seconds(10)));
      if (!client.ok()) return client.status();
      clients_.push_back(std::move(*client));
      store = clients_.back().get();
    }
    if (auto it = faults_.die_after.find(inv.host); it != faults_.die_after.end()) {
      dying_.push_back(std::make_unique<DyingStore>(
          *store, TaskKey(inv.run_id, inv.host, it->second + 1), faults_.hang));
      store = dying_.back().get();
    }
    AgentProbes* probes = nullptr;
    if (!faults_.real_probes) {
      probes_.push_back(
          std::make_unique<FakeProbes>(HostIndex(inv.host), rate_, faults_.read_only));
      probes = probes_.back().get();
    }
    AgentOptions o{.invocation = inv,
                   .env = env_,
                   .registry = &registry_,
                   .probes = probes,
                   .address = "127.0.0.1",
                   .idle_timeout = faults_.idle_timeout,
                   .deadline = base::Deadline::After(std::chrono::seconds(60))};
    return std::unique_ptr<AgentHandle>(
        std::make_unique<ThreadHandle>([o, store] { return RunAgent(o, *store); }));
  }
  std::string Describe() const override { return "threads"; }

 private:
  net::Store& store_;
  const CheckRegistry& registry_;
  RateFn rate_;
  Faults faults_;
  std::shared_ptr<NodeEnv> env_;
  std::vector<std::unique_ptr<FakeProbes>> probes_;
  std::vector<std::unique_ptr<DyingStore>> dying_;
  std::vector<std::unique_ptr<net::Store>> clients_;
};

// Healthy rates with a fixed spread of -5%..+4% per pair.
double Healthy(int s, int d) { return kRate * (0.95 + ((s * 7 + d * 3) % 10) * 0.01); }

constexpr const char* kPlan = R"(version: 1
name: test
checks:
  - {id: node.swap}
  - {id: node.clock_offset}
  - {id: fabric.reachability}
  - {id: fabric.latency}
  - {id: fabric.pair_bandwidth, params: {duration: 200ms}}
)";

// The above with storage and collective checks, small sizes.
constexpr const char* kFullPlan = R"(version: 1
name: test-full
checks:
  - {id: node.swap}
  - {id: fabric.reachability}
  - {id: fabric.latency}
  - {id: fabric.pair_bandwidth, params: {duration: 200ms}}
  - {id: storage.throughput, params: {size: 1MiB}}
  - {id: storage.metadata, params: {items: 50}}
  - {id: collective.allreduce, params: {sizes: 64KiB, iters: 2}}
  - {id: collective.nccl_tests}
)";

class CoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(RegisterBuiltinChecks(registry_).ok());
    UsePlan(kPlan);
  }
  void UsePlan(const char* text) {
    Result<Plan> plan = ParsePlan(text, "test.yaml", registry_);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    plan_ = std::move(*plan);
  }

  RunReport Validate(const topo::Cluster& cluster, RateFn rate, Faults faults = {},
                     const std::string& shared_dir = "") {
    std::unique_ptr<net::TcpStoreServer> server;
    std::string address = "127.0.0.1:1";
    if (faults.tcp) {
      auto started = net::TcpStoreServer::Start({.secret = "s"});
      EXPECT_TRUE(started.ok()) << started.status().ToString();
      if (!started.ok()) return {};
      server = std::move(*started);
      address = server->address();
      auto client =
          net::ConnectTcpStore(address, "s", base::Deadline::After(std::chrono::seconds(10)));
      EXPECT_TRUE(client.ok()) << client.status().ToString();
      if (!client.ok()) return {};
      store_ = std::move(*client);
    }
    const bool dial_in = faults.dial_in;
    ThreadStarter starter(*store_, registry_, std::move(rate), std::move(faults));
    std::vector<std::string> hosts;
    for (const topo::Node& n : cluster.nodes) hosts.push_back(n.name);
    std::vector<std::unique_ptr<AgentHandle>> dialled;
    if (dial_in) {
      for (const std::string& h : hosts) {
        auto handle = starter.Start(
            {.host = h, .store_address = address, .run_id = "validate", .secret = "s"});
        EXPECT_TRUE(handle.ok());
        if (handle.ok()) dialled.push_back(std::move(*handle));
      }
    }
    CoordinatorOptions o{.plan = &plan_,
                         .hosts = hosts,
                         .cluster = &cluster,
                         .shared_dir = shared_dir,
                         .store = store_.get(),
                         .store_address = address,
                         .secret = "s",
                         .starter = dial_in ? nullptr : &starter,
                         .agent_connect_timeout = milliseconds(2'000)};
    Result<RunReport> r = RunValidation(o);
    dialled.clear();  // joins: every agent was told to exit
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : RunReport{};
  }

  static const CheckResult* Find(const HostEntry& h, std::string_view id) {
    for (const CheckResult& c : h.checks) {
      if (c.id == id) return &c;
    }
    return nullptr;
  }

  static std::string Describe(const RunReport& r) {
    std::string s = r.overall.ToString() + "\n";
    for (const HostEntry& h : r.hosts) {
      for (const CheckResult& c : h.checks)
        s += h.name + " " + c.id + " " + c.outcome.ToString() + "\n";
    }
    for (const Finding& f : r.findings) s += f.subject + " " + f.outcome.ToString() + "\n";
    return s;
  }

  CheckRegistry registry_;
  Plan plan_;
  std::unique_ptr<net::Store> store_ = net::NewInMemoryStore();
};

TEST_F(CoordinatorTest, CleanClusterPassesEverything) {
  RunReport r = Validate(LeafCluster({4, 4}, kRate), Healthy);
  EXPECT_EQ(r.overall.verdict, Verdict::kPass) << Describe(r);
  ASSERT_EQ(r.hosts.size(), 8u);
  for (const HostEntry& h : r.hosts) {
    EXPECT_EQ(h.address, "127.0.0.1");
    ASSERT_EQ(h.checks.size(), 5u) << Describe(r);
    for (const CheckResult& c : h.checks) {
      EXPECT_EQ(c.outcome.verdict, Verdict::kPass)
          << h.name << " " << c.id << " " << c.outcome.reason;
    }
  }
  EXPECT_TRUE(r.findings.empty());
  EXPECT_EQ(r.pairs.size(), 56u);  // 7 rounds of 4 pairs, both ways
  EXPECT_EQ(r.rounds, 7);
  for (const PairFigure& p : r.pairs) EXPECT_EQ(p.expected_bits, kRate);
  ASSERT_EQ(r.cluster_checks.size(), 1u);
  EXPECT_EQ(r.cluster_checks[0].id, "fabric.pair_bandwidth");
  EXPECT_EQ(r.ExitCode(), 0);
}

TEST_F(CoordinatorTest, SlowHostIsExactlyThatHost) {
  RunReport r = Validate(LeafCluster({4, 4}, kRate), [](int s, int d) {
    return Healthy(s, d) * (s == 5 || d == 5 ? 0.2 : 1.0);
  });
  ASSERT_EQ(r.findings.size(), 1u) << Describe(r);
  EXPECT_EQ(r.findings[0].kind, FindingKind::kHost);
  EXPECT_EQ(r.findings[0].host, 5);
  EXPECT_EQ(r.findings[0].outcome.verdict, Verdict::kFail);
  for (const HostEntry& h : r.hosts) {
    Verdict want = h.name == "n5" ? Verdict::kFail : Verdict::kPass;
    EXPECT_EQ(h.overall.verdict, want) << h.name << ": " << h.overall.reason;
  }
  EXPECT_GT(r.rounds, 7);  // re-tests ran
  EXPECT_EQ(r.ExitCode(), 2);
}

TEST_F(CoordinatorTest, SlowPathIsExactlyThatLink) {
  RunReport r = Validate(LeafCluster({4, 4}, kRate), [](int s, int d) {
    bool path = (s == 2 && d == 6) || (s == 6 && d == 2);
    return Healthy(s, d) * (path ? 0.2 : 1.0);
  });
  ASSERT_EQ(r.findings.size(), 1u) << Describe(r);
  EXPECT_EQ(r.findings[0].kind, FindingKind::kLink);
  EXPECT_EQ(std::minmax(r.findings[0].host, r.findings[0].peer), std::minmax(2, 6));
  EXPECT_EQ(r.findings[0].outcome.verdict, Verdict::kFail);
  for (const HostEntry& h : r.hosts) {
    EXPECT_EQ(h.overall.verdict, Verdict::kPass) << h.name << ": " << h.overall.reason;
  }
  EXPECT_EQ(r.overall.verdict, Verdict::kFail);
}

TEST_F(CoordinatorTest, SlowUplinkIsTheUplinkNotItsHosts) {
  auto in_leaf1 = [](int h) { return h >= 3 && h < 6; };
  RunReport r = Validate(LeafCluster({3, 3, 3}, kRate), [&](int s, int d) {
    return Healthy(s, d) * (in_leaf1(s) != in_leaf1(d) ? 0.3 : 1.0);
  });
  ASSERT_EQ(r.findings.size(), 1u) << Describe(r);
  EXPECT_EQ(r.findings[0].kind, FindingKind::kUplink);
  EXPECT_EQ(r.findings[0].subject, "uplink of leaf1");
  EXPECT_EQ(r.findings[0].outcome.verdict, Verdict::kFail);
  for (const HostEntry& h : r.hosts) {
    EXPECT_EQ(h.overall.verdict, Verdict::kPass) << h.name << ": " << h.overall.reason;
  }
}

TEST_F(CoordinatorTest, AgentThatNeverStartsIsUnknownAndTheRunCompletes) {
  RunReport r = Validate(LeafCluster({4, 4}, kRate), Healthy, {.never_start = {"n3"}});
  for (const HostEntry& h : r.hosts) {
    if (h.name == "n3") {
      EXPECT_EQ(h.overall.verdict, Verdict::kUnknown);
      EXPECT_NE(h.overall.reason.find("did not connect within 2s"), std::string::npos)
          << h.overall.reason;
      EXPECT_EQ(h.overall.reason.find("still running"), std::string::npos) << h.overall.reason;
      EXPECT_EQ(h.checks.size(), 5u);
      EXPECT_TRUE(h.address.empty());
    } else {
      EXPECT_EQ(h.overall.verdict, Verdict::kPass) << h.name << ": " << h.overall.reason;
    }
  }
  EXPECT_TRUE(r.findings.empty()) << Describe(r);
  EXPECT_EQ(r.pairs.size(), 42u);  // the 7 live hosts only
  EXPECT_EQ(r.ExitCode(), 3);
}

TEST_F(CoordinatorTest, AgentThatEndsBeforeHelloIsUnknownWithHowItEnded) {
  RunReport r = Validate(LeafCluster({2, 2}, kRate), Healthy, {.exit_at_start = {"n1"}});
  ASSERT_EQ(r.hosts.size(), 4u);
  const HostEntry& h = r.hosts[1];
  ASSERT_EQ(h.name, "n1");
  EXPECT_EQ(h.overall.verdict, Verdict::kUnknown);
  EXPECT_NE(h.overall.reason.find("agent ended before it connected: exited: UNAVAILABLE: cannot "
                                  "reach the store at 198.18.0.1:29400"),
            std::string::npos)
      << h.overall.reason;
}

TEST_F(CoordinatorTest, AgentThatDiesAfterTheNodePhaseIsUnknown) {
  // Task 1 is the node checks; the agent is gone before its clock task.
  RunReport r = Validate(LeafCluster({4, 4}, kRate), Healthy, {.die_after = {{"n4", 1}}});
  const HostEntry& n4 = r.hosts[4];
  EXPECT_EQ(Find(n4, "node.swap")->outcome.verdict, Verdict::kPass);
  EXPECT_EQ(Find(n4, "node.clock_offset")->outcome.verdict, Verdict::kUnknown);
  EXPECT_NE(n4.overall.reason.find("agent killed by the test"), std::string::npos)
      << n4.overall.reason;
  EXPECT_EQ(Find(n4, "fabric.pair_bandwidth")->outcome.verdict, Verdict::kUnknown);
  for (const HostEntry& h : r.hosts) {
    if (h.name != "n4") {
      EXPECT_EQ(h.overall.verdict, Verdict::kPass) << h.name << ": " << h.overall.reason;
    }
  }
  EXPECT_TRUE(r.findings.empty()) << Describe(r);
  EXPECT_EQ(r.overall.verdict, Verdict::kUnknown);
}

TEST_F(CoordinatorTest, AgentThatHangsIsUnknownWithinItsCheckTimeout) {
  // n1 answers its node task, then never takes its clock task: the clock check's timeout
  // (2s) plus the store margin (3s) later it is UNKNOWN and left out; it gives up at 6s.
  RunReport r =
      Validate(LeafCluster({2, 2}, kRate), Healthy,
               {.die_after = {{"n1", 1}}, .hang = true, .idle_timeout = milliseconds(6'000)});
  const CheckResult* clock = Find(r.hosts[1], "node.clock_offset");
  EXPECT_EQ(clock->outcome.verdict, Verdict::kUnknown);
  EXPECT_NE(clock->outcome.reason.find("clock offset not measured"), std::string::npos)
      << clock->outcome.reason;
  EXPECT_EQ(Find(r.hosts[1], "fabric.pair_bandwidth")->outcome.verdict, Verdict::kUnknown);
  EXPECT_EQ(r.hosts[0].overall.verdict, Verdict::kPass) << r.hosts[0].overall.reason;
  EXPECT_EQ(r.pairs.size(), 6u);  // the 3 others, all pairs
}

TEST_F(CoordinatorTest, AgentThatDiesMidFabricLeavesItsPairsWithErrors) {
  // Tasks: node, 3 clock, reach, latency, then one send per round: it answers round 1 only.
  RunReport r = Validate(LeafCluster({4, 4}, kRate), Healthy, {.die_after = {{"n6", 7}}});
  EXPECT_EQ(r.hosts[6].overall.verdict, Verdict::kUnknown) << Describe(r);
  int errors = 0;
  for (const PairFigure& p : r.pairs) {
    if (p.src == 6 || p.dst == 6) errors += !p.error.empty();
  }
  // Round 2: its own send fails; its partner's send to it is answered by the fake probes (a
  // real sink would be gone too). Rounds 3..7: left out both ways.
  EXPECT_EQ(errors, 11);
  for (const HostEntry& h : r.hosts) {
    if (h.name != "n6") {
      EXPECT_EQ(h.overall.verdict, Verdict::kPass) << h.name << ": " << h.overall.reason;
    }
  }
  EXPECT_TRUE(r.findings.empty()) << Describe(r);
}

TEST_F(CoordinatorTest, OverATcpStoreAHostThatNeverStartsIsUnknown) {
  RunReport r = Validate(LeafCluster({2, 3}, kRate), Healthy, {.never_start = {"n4"}, .tcp = true});
  for (const HostEntry& h : r.hosts) {
    Verdict want = h.name == "n4" ? Verdict::kUnknown : Verdict::kPass;
    EXPECT_EQ(h.overall.verdict, want) << h.name << ": " << h.overall.reason;
  }
  EXPECT_EQ(r.pairs.size(), 12u);
}

TEST_F(CoordinatorTest, AgentsThatDialInAreUsed) {
  RunReport r = Validate(LeafCluster({2, 2}, kRate), Healthy, {.dial_in = true});
  EXPECT_EQ(r.overall.verdict, Verdict::kPass) << Describe(r);
  EXPECT_EQ(r.pairs.size(), 12u);
}

TEST_F(CoordinatorTest, BadOptionsAreInvalidArgument) {
  CoordinatorOptions o{.plan = &plan_, .store = store_.get()};
  EXPECT_EQ(RunValidation(o).status().code(), StatusCode::kInvalidArgument);
  o.hosts = {"a", "a"};
  EXPECT_EQ(RunValidation(o).status().message(), "host 'a' is listed twice");
}

TEST_F(CoordinatorTest, StorageFailsOnlyTheHostThatCannotWrite) {
  UsePlan(kFullPlan);
  RunReport r = Validate(LeafCluster({2, 2}, kRate), Healthy, {.read_only = 2}, "/shared");
  for (const HostEntry& h : r.hosts) {
    Verdict want = h.name == "n2" ? Verdict::kFail : Verdict::kPass;
    EXPECT_EQ(Find(h, "storage.throughput")->outcome.verdict, want) << Describe(r);
    EXPECT_EQ(Find(h, "storage.metadata")->outcome.verdict, Verdict::kPass);
  }
  EXPECT_NE(Find(r.hosts[2], "storage.throughput")->outcome.reason.find("Read-only"),
            std::string::npos);
  ASSERT_EQ(r.storage.size(), 4u);
  EXPECT_EQ(r.storage[1].read_from, 2);
  EXPECT_FALSE(r.storage[1].error.empty());  // n1 read n2's missing files: not n1's fault
  EXPECT_EQ(r.storage_metadata_ops_per_s, 4000);
  ASSERT_EQ(r.collective.size(), 1u);
  ASSERT_EQ(r.cluster_checks.size(), 3u);
  EXPECT_EQ(r.cluster_checks[0].id, "collective.allreduce");
  // 160 Mbit/s busbw against 200 Mbit/s links: above the warn bound of 50%.
  EXPECT_EQ(r.cluster_checks[0].outcome.verdict, Verdict::kPass)
      << r.cluster_checks[0].outcome.reason;
}

TEST_F(CoordinatorTest, StorageWithoutASharedDirectoryIsSkipped) {
  UsePlan(kFullPlan);
  RunReport r = Validate(LeafCluster({2, 2}, kRate), Healthy);
  for (const HostEntry& h : r.hosts) {
    EXPECT_EQ(Find(h, "storage.throughput")->outcome.verdict, Verdict::kSkipped);
    EXPECT_EQ(h.overall.verdict, Verdict::kPass) << h.overall.reason;
  }
  EXPECT_TRUE(r.storage.empty());
}

TEST_F(CoordinatorTest, RealProbesOnLoopbackMeasureSomething) {
  UsePlan(kFullPlan);
  base::ScopedTempDir shared("validate");
  RunReport r = Validate(LeafCluster({2, 2}), nullptr, {.real_probes = true}, shared.path());
  int first_pass = 0;
  for (const PairFigure& p : r.pairs) {
    if (p.retest) continue;
    ++first_pass;
    EXPECT_TRUE(p.error.empty()) << p.error;
    EXPECT_GT(p.measured_bits, 0);
  }
  EXPECT_EQ(first_pass, 12) << Describe(r);  // 3 rounds of 2 pairs, both ways
  for (const HostEntry& h : r.hosts) {
    const CheckResult* latency = Find(h, "fabric.latency");
    ASSERT_NE(latency, nullptr);
    EXPECT_NE(latency->outcome.verdict, Verdict::kUnknown) << latency->outcome.reason;
    EXPECT_EQ(Find(h, "fabric.reachability")->outcome.verdict, Verdict::kPass);
    EXPECT_NE(Find(h, "fabric.pair_bandwidth")->outcome.verdict, Verdict::kUnknown);
    EXPECT_NE(Find(h, "storage.throughput")->outcome.verdict, Verdict::kUnknown) << Describe(r);
    EXPECT_NE(Find(h, "storage.metadata")->outcome.verdict, Verdict::kUnknown);
  }
  ASSERT_EQ(r.storage.size(), 4u);
  for (const StorageFigure& f : r.storage) {
    EXPECT_GT(f.write_bytes_per_s, 0);
    EXPECT_GT(f.read_bytes_per_s, 0);
    EXPECT_GT(f.metadata_ops_per_s, 0);
  }
  EXPECT_TRUE(std::filesystem::is_empty(shared.path()));  // the probes cleaned up
  ASSERT_FALSE(r.collective.empty()) << Describe(r);
  EXPECT_GT(r.collective.back().busbw_bytes_per_s, 0);
}

}  // namespace
}  // namespace railyard::validate
