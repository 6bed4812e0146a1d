// The JSON form of one node's hardware, shared by `railyard discover` (its "node" object) and
// the topology YAML version 2 (each entry of `nodes`), plus Linux cpu-list strings.
//
//   {"name": "gpu07", "address": "10.0.0.7", "link_rate": "400 Gbit/s", "gpu_count": 2,
//    "gpus": [{"index": 0, "uuid": "GPU-…", "pci_bus_id": "0000:17:00.0", "numa_node": 0,
//              "nvlink_domain": "nvl0"}, …],
//    "nics": [{"name": "mlx5_0", "pci_bus_id": "0000:18:00.0", "numa_node": 0, "rail": 0,
//              "rate": "400 Gbit/s", "rdma": true}, …],
//    "numa": [{"id": 0, "cpus": "0-15,32-47"}, …],
//    "gpu_nic_paths": [{"gpu": 0, "nic": "mlx5_0", "path": "PIX"}, …]}
//
// Only "name" is required. Unknown values are left out when writing (an empty string, a -1
// NUMA node or rail, a zero rate, an empty list), and absent keys read back as unknown, so
// NodeFromJson(NodeToJson(n)) == n for every node whose cpu lists are sorted and unique (the
// form ParseCpuList returns). Rates are written as FormatRateBits text ("400 Gbit/s") and,
// when that text would round, as exact "<n> bit/s"; readers also take an integer (bits/s).
// Node::leaf is not part of the description: the caller attaches the node to its switch.
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/config.h"
#include "railyard/base/status.h"
#include "railyard/topo/model.h"

namespace railyard::topo {

// The node as above. Key order is fixed, so dumps diff cleanly.
nlohmann::json NodeToJson(const Node& node);

// Reads a node written by NodeToJson (or by hand). `source` names the document in errors:
// "gpu07.json: field 'nics[1].rate': ..." (JSON keeps no line numbers). Unknown keys are
// rejected, naming the key. Checks: GPU indices, NIC names and NUMA ids are unique; every
// gpu_nic_paths entry names a listed GPU and NIC; gpu_count equals the number of listed GPUs
// when both are given. Errors are INVALID_ARGUMENT.
Result<Node> NodeFromJson(const nlohmann::json& json, std::string_view source);

// The same for a node embedded in a larger document (the topology YAML's `nodes[3]`): errors
// carry `ctx`'s source and path, and the keys in `extra_keys` (e.g. "switch") are allowed
// beside the node's own and ignored.
Result<Node> NodeFromJson(const nlohmann::json& json, const base::FieldContext& ctx,
                          const std::vector<std::string>& extra_keys);

// Linux cpu-list text ("0-3,8,10-11", as in /sys/devices/system/node/node0/cpulist): sorted,
// duplicates dropped, runs of 2 or more consecutive ids as ranges ("4-5"). Negative ids are
// a programming error and are skipped. {} -> "".
std::string FormatCpuList(const std::vector<int>& cpus);

// Parses cpu-list text: comma-separated ids and ranges "a-b" (a <= b), including the kernel's
// stride form "a-b:used/group" (e.g. "0-15:2/4" = 0,1,4,5,8,9,12,13); spaces around items are
// allowed; "" gives {}. The result is sorted and unique. Ids above 65535 are rejected (no
// machine has that many CPUs, and it bounds the memory a typo can ask for). Errors are
// INVALID_ARGUMENT quoting the text and the offending item.
Result<std::vector<int>> ParseCpuList(std::string_view text);

}  // namespace railyard::topo
