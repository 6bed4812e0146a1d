// AWS EC2 instance topology (the JSON of `aws ec2 describe-instance-topology`).
//
// Each instance lists its network nodes top first ("NetworkNodes": [layer 1, layer 2,
// layer 3(, layer 4)]). Railyard turns that into a tree with levels {"layer1", "layer2",
// "layer3"[, "layer4"]} (EKS labels them topology.k8s.aws/network-node-layer-N), one switch per
// network node id and one node per instance. GPU counts come from the instance type for the
// GPU types Railyard knows (p4d, p5, p5e, p5en, p6...); other types get 0.
//
// As AWS documents (EC2 User Guide, "How Amazon EC2 instance topology works" and its
// prerequisites page), instances attach at or below the third layer: most types list 3
// network nodes, some (p6-b200, p6-b300) 4, and one fleet may hold both. Railyard's tree has
// one leaf level, so in a mixed fleet an instance with 3 nodes hangs off a layer-4 switch
// named "<its layer-3 node>-direct" under that layer-3 node: instances on the same layer-3
// node share it, as close as the layer-3 node makes them. AWS leaves NetworkNodes null or
// empty for instances that are not running and for types without instance topology; those
// are skipped and listed in AwsImport::skipped.
//
// Node names: Slurm and Kubernetes know nodes by host name, not instance id, and the output
// holds no host name or address. AwsImportOptions::hosts maps ids to names (ParseAwsHostMap
// reads "<instance-id> <host-name>" lines, the text output of `aws ec2 describe-instances
// --query 'Reservations[].Instances[].[InstanceId,PrivateDnsName]' --output text`); an
// instance missing from a given map is an error naming it. Without a map nodes keep the
// instance ids.
//
// The input is one DescribeInstanceTopology response or a JSON array of responses (pages),
// which are concatenated. Fields other than InstanceId, InstanceType and NetworkNodes are
// ignored, so later additions to the API do not break the import.
//
//   RY_ASSIGN_OR_RETURN(auto hosts, ParseAwsHostMap(hosts_text, "hosts.txt"));
//   RY_ASSIGN_OR_RETURN(AwsImport in, ImportAwsInstanceTopology(text, "topology.json",
//                                                                {.hosts = &hosts}));
//
// Errors are INVALID_ARGUMENT naming the file, the line of the instance where it can be
// found, and the instance or network node. Thread-safety: pure functions.
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/topo/model.h"

namespace railyard::topo {

struct AwsImportOptions {
  // Instance id -> node name. When set, every imported instance must be in it; when null,
  // nodes are named by instance id. Not owned; must outlive the call.
  const std::map<std::string, std::string>* hosts = nullptr;
  std::string hosts_source;  // names the map's file in errors
};

struct AwsImport {
  Cluster cluster;
  // One line per instance left out for listing no network nodes:
  // "i-0abc (t3.micro, line 12): no network nodes".
  std::vector<std::string> skipped;
};

// Parses DescribeInstanceTopology output. Errors: an instance without an id, NetworkNodes
// that is not a list of strings, a layer count other than 3 or 4, a network node under two
// parents or at two layers, an instance listed twice, no instance with network nodes, an
// instance missing from options.hosts, two instances mapped to one host name.
Result<AwsImport> ImportAwsInstanceTopology(std::string_view text, std::string_view source,
                                            const AwsImportOptions& options = {});

// The same for a parsed document; `text` is only used to find line numbers (may be empty).
Result<AwsImport> ImportAwsInstanceTopologyJson(const nlohmann::json& doc, std::string_view text,
                                                std::string_view source,
                                                const AwsImportOptions& options = {});

// Only the cluster, nodes named by instance id (skipped instances are dropped silently; use
// ImportAwsInstanceTopology to report them).
Result<Cluster> ParseAwsInstanceTopology(std::string_view text, std::string_view source);
Result<Cluster> AwsTopologyFromJson(const nlohmann::json& doc, std::string_view text,
                                    std::string_view source);

// "<instance-id> <host-name>" per line, separated by spaces or tabs; blank lines and lines
// starting with '#' are ignored. Errors (INVALID_ARGUMENT, "<source>:<line>: ..."): a line
// without exactly two fields, an id not starting with "i-", one id given two names.
Result<std::map<std::string, std::string>> ParseAwsHostMap(std::string_view text,
                                                           std::string_view source);

// GPUs of an EC2 instance type, 0 when unknown or not a GPU type.
int AwsInstanceGpus(std::string_view instance_type);

}  // namespace railyard::topo
