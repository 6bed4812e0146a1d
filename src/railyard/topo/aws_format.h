// AWS EC2 instance topology (the JSON of `aws ec2 describe-instance-topology`).
//
// Each instance lists its network nodes top first ("NetworkNodes": [layer 1, layer 2,
// layer 3(, layer 4)]). Railyard turns that into a tree with levels {"layer1", "layer2",
// "layer3"[, "layer4"]} (EKS labels them topology.k8s.aws/network-node-layer-N), one switch per
// network node id and one node per InstanceId. GPU counts come from the instance type for the
// GPU types Railyard knows (p4d, p5, p5e, p5en, p6...); other types get 0.
//
// The input is one DescribeInstanceTopology response or a JSON array of responses (pages),
// which are concatenated. Fields other than InstanceId, InstanceType and NetworkNodes are
// ignored, so later additions to the API do not break the import.
//
//   RY_ASSIGN_OR_RETURN(Cluster c, ParseAwsInstanceTopology(text, "topology.json"));
//
// Errors are INVALID_ARGUMENT naming the file, the line of the instance where it can be
// found, and the instance or network node. Thread-safety: pure functions.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string_view>

#include "railyard/base/status.h"
#include "railyard/topo/model.h"

namespace railyard::topo {

// Parses DescribeInstanceTopology output. Errors: an instance without an id or network nodes,
// instances with different layer counts, a layer count other than 3 or 4, a network node under
// two parents or at two layers, an instance listed twice, no instances at all.
Result<Cluster> ParseAwsInstanceTopology(std::string_view text, std::string_view source);

// The same for a parsed document; `text` is only used to find line numbers (may be empty).
Result<Cluster> AwsTopologyFromJson(const nlohmann::json& doc, std::string_view text,
                                    std::string_view source);

// GPUs of an EC2 instance type, 0 when unknown or not a GPU type.
int AwsInstanceGpus(std::string_view instance_type);

}  // namespace railyard::topo
