// The validation agent protocol: what a coordinator (coordinator.h) asks of the agent on each
// host (agent.h) and what the agent answers, as JSON values in the rendezvous store.
//
// Keys live under "<run_id>/":
//   hello/<host>          agent -> Hello {"address","probe_port","pid","version"}
//   task/<host>/<seq>     coordinator -> Task {"kind": "node"|"clock"|..., ...}, seq from 1
//   result/<host>/<seq>   agent -> TaskResult {"ok": bool, "error", "code", ...figures}
// An agent executes its tasks in seq order, one at a time, and leaves on "exit" or when no
// task comes within its idle timeout. Only the fields of a task's kind are written; readers
// take absent fields as their defaults and reject present ones of the wrong type, naming the
// key and the field ("validate/result/n3/4: field 'checks[2].verdict': ...").
//
// A node task carries the checks to run with their settings and the host's resolved profile
// rather than a plan's name or text, so the agent needs no plan file and runs exactly what the
// coordinator planned, thresholds included.
//
// Thread-safety: values and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/validate/node_run.h"
#include "railyard/validate/profile.h"
#include "railyard/validate/report.h"

namespace railyard::validate {

inline constexpr int kAgentProtocolVersion = 1;

std::string HelloKey(std::string_view run_id, std::string_view host);
std::string TaskKey(std::string_view run_id, std::string_view host, int seq);
std::string ResultKey(std::string_view run_id, std::string_view host, int seq);

struct Hello {
  std::string address;  // IPv4 address peers reach this host's probe sink at
  int probe_port = 0;
  int64_t pid = 0;
  int version = kAgentProtocolVersion;
  friend bool operator==(const Hello&, const Hello&) = default;
};

enum class TaskKind {
  kNode,          // run node and GPU checks (checks, profile, shared_dir)
  kClock,         // answer CLOCK_REALTIME now
  kReach,         // connect once to each of `peers`' probe sinks
  kLatency,       // TCP connect round trip to each of `peers`, `samples` times, median
  kSend,          // stream to peers[0] for duration_ms: bits/s measured at the receiver
  kStorageWrite,  // IOR-easy: write own files in `dir`
  kStorageRead,   // read the files of `neighbour_dir`
  kMetadata,      // mdtest-easy: `items` files in `dir`; `cleanup` removes the probe files
  kAllreduce,     // allreduce sweep as `rank` of `world` over `sizes`
  kExit,          // leave
};
std::string_view TaskKindName(TaskKind kind);  // "node", "clock", ..., "storage_write", "exit"
Result<TaskKind> ParseTaskKind(std::string_view name);

// One check of a node task: the plan's settings as text, parsed again by the agent.
struct NodeCheckSpec {
  std::string id;
  std::string warn;  // threshold text; empty: none
  std::string fail;
  std::map<std::string, std::string> params;
  int64_t timeout_ms = 0;
  std::vector<std::string> profiles;  // empty: every profile
  friend bool operator==(const NodeCheckSpec&, const NodeCheckSpec&) = default;
};

struct Peer {
  std::string host;
  std::string address;
  int port = 0;
  friend bool operator==(const Peer&, const Peer&) = default;
};

struct Task {
  TaskKind kind = TaskKind::kExit;
  int64_t timeout_ms = 0;  // how long the coordinator waits for the answer
  // node
  std::string plan;  // the plan's name, for messages
  std::vector<NodeCheckSpec> checks;
  Profile profile;
  bool shared_dir = false;
  // reach, latency, send (peers[0])
  std::vector<Peer> peers;
  int samples = 0;
  int64_t duration_ms = 0;
  // storage
  std::string dir;
  std::string neighbour_dir;
  uint64_t bytes_per_file = 0;
  uint64_t block_bytes = 0;
  int files = 0;
  int items = 0;  // metadata: 0 runs no probe, only the cleanup
  bool cleanup = false;
  // allreduce
  std::string key_prefix;
  int rank = 0;
  int world = 0;
  std::vector<uint64_t> sizes;
  std::vector<std::string> hosts;
  int warmup = 0;
  int iters = 0;
  friend bool operator==(const Task&, const Task&) = default;
};

// One peer of a reach or latency task.
struct PeerResult {
  std::string host;
  bool ok = false;
  double seconds = 0;  // latency: median round trip
  std::string error;
  friend bool operator==(const PeerResult&, const PeerResult&) = default;
};

struct TaskResult {
  bool ok = false;
  std::string error;  // why not ok
  std::string code;   // StatusCodeName of the failure ("PERMISSION_DENIED"); empty when ok
  // node
  std::vector<CheckResult> checks;
  int abandoned = 0;
  // clock
  int64_t realtime_ns = 0;
  // reach, latency
  std::vector<PeerResult> peers;
  // send
  double bits_per_s = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  // storage
  double bytes_per_s = 0;
  double ops_per_s = 0;
  std::string note;
  // allreduce
  std::vector<CollectiveFigure> figures;

  // A failed result carrying `status`'s message and code.
  static TaskResult Failed(const Status& status);
  // The failure as a Status again (OK when ok): the coordinator reads the code back.
  Status AsStatus() const;
};

std::string ToJson(const Hello& hello);
std::string ToJson(const Task& task);
std::string ToJson(const TaskResult& result);

// `key` names the value in errors. INVALID_ARGUMENT for malformed JSON, a missing required
// field ("kind", "ok", "address") or a field of the wrong type.
Result<Hello> HelloFromJson(std::string_view text, std::string_view key);
Result<Task> TaskFromJson(std::string_view text, std::string_view key);
Result<TaskResult> TaskResultFromJson(std::string_view text, std::string_view key);

// The name of a verdict back ("PASS" -> kPass). INVALID_ARGUMENT otherwise.
Result<Verdict> ParseVerdict(std::string_view name);

}  // namespace railyard::validate
