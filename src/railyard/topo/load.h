// Loading a topology from any supported format, recognised by its content.
//
// The extension says little (topology.yaml is Slurm's name, and AWS output is often saved as
// .txt), so the format is read from the text:
//
//   JSON object with "Instances" (or an array of them)   -> AWS DescribeInstanceTopology
//   lines starting with SwitchName= / BlockName=          -> Slurm topology.conf
//   YAML map with "version"                               -> Railyard topology YAML
//   YAML list whose entries have "topology"               -> Slurm topology.yaml
//
// Anything else is rejected with a message that says what was found and lists the accepted
// formats. Empty files, binary data and unreadable paths are errors naming the path.
//
//   RY_ASSIGN_OR_RETURN(Cluster cluster, LoadTopology(flags.topology));
//
// Thread-safety: pure functions (LoadTopology reads the file once).
#pragma once

#include <string>
#include <string_view>

#include "railyard/base/status.h"
#include "railyard/topo/model.h"

namespace railyard::topo {

enum class TopologyFormat { kUnknown, kRailyardYaml, kSlurmConf, kSlurmYaml, kAwsJson };

// "Railyard topology YAML", "Slurm topology.conf", "Slurm topology.yaml",
// "AWS instance topology JSON", or "unknown".
std::string_view TopologyFormatName(TopologyFormat format);

// The format `text` looks like, without validating it; kUnknown when none fits.
TopologyFormat DetectTopologyFormat(std::string_view text);

// Detects the format and parses. `source` (usually the path) prefixes every error.
Result<Cluster> ParseTopology(std::string_view text, std::string_view source);

// Reads `path` and parses it. NOT_FOUND / PERMISSION_DENIED / ... name the path when the file
// cannot be read; parse errors are INVALID_ARGUMENT.
Result<Cluster> LoadTopology(const std::string& path);

}  // namespace railyard::topo
