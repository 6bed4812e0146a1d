#include "railyard/topo/load.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "railyard/base/config.h"
#include "railyard/base/files.h"
#include "railyard/base/strings.h"
#include "railyard/topo/aws_format.h"
#include "railyard/topo/slurm_format.h"
#include "railyard/topo/yaml_format.h"

namespace railyard::topo {
namespace {

constexpr std::string_view kAccepted =
    "railyard reads Railyard topology YAML (a map with 'version'), Slurm topology.conf "
    "(SwitchName= or BlockName= lines), Slurm topology.yaml (a list of '- topology: NAME' "
    "entries) and AWS DescribeInstanceTopology JSON (an object with \"Instances\")";

// What detection found; the parsed document is kept so it is parsed once.
struct Detected {
  TopologyFormat format = TopologyFormat::kUnknown;
  std::optional<nlohmann::json> json;
  YAML::Node yaml;
  Status error;  // set when the format is unknown or the text is unusable
};

int LineAt(std::string_view text, size_t offset) {
  int line = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) line += text[i] == '\n';
  return line;
}

// Offset of the first character that is not whitespace, a '#' comment or a UTF-8 BOM;
// npos when there is none.
size_t FirstContent(std::string_view text) {
  size_t i = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;
  while (i < text.size()) {
    char c = text[i];
    if (c == '#') {
      size_t nl = text.find('\n', i);
      if (nl == std::string_view::npos) return std::string_view::npos;
      i = nl + 1;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else {
      return i;
    }
  }
  return std::string_view::npos;
}

// Control bytes other than tab, newline and carriage return mean binary data.
std::optional<size_t> FirstBinaryByte(std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7f) return i;
  }
  return std::nullopt;
}

bool IsAwsPage(const nlohmann::json& j) { return j.is_object() && j.contains("Instances"); }

bool IsAws(const nlohmann::json& j) {
  if (IsAwsPage(j)) return true;
  if (!j.is_array() || j.empty()) return false;
  for (const auto& page : j) {
    if (!IsAwsPage(page)) return false;
  }
  return true;
}

bool LooksLikeSlurmConf(std::string_view text) {
  for (std::string_view line : base::SplitLines(text)) {
    line = base::StripLeadingAsciiWhitespace(line);
    std::string head;
    for (char c : line.substr(0, 12)) {
      head += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    for (std::string_view key : {"switchname=", "blockname=", "blocksizes=", "ringname="}) {
      if (head.starts_with(key)) return true;
    }
  }
  return false;
}

std::string Snippet(std::string_view s) {
  std::string out;
  for (char c : s.substr(0, 40)) out += c == '\n' ? ' ' : c;
  return s.size() > 40 ? out + "..." : out;
}

std::string DescribeYaml(const YAML::Node& y) {
  if (y.IsScalar()) return fmt::format("a single value ('{}')", Snippet(y.Scalar()));
  if (y.IsMap()) {
    std::vector<std::string> keys;
    for (const auto& kv : y) {
      if (keys.size() == 6) {
        keys.push_back("...");
        break;
      }
      keys.push_back(kv.first.IsScalar() ? kv.first.Scalar() : "?");
    }
    return fmt::format("a YAML map with keys {} but no 'version'", fmt::join(keys, ", "));
  }
  if (y.IsSequence()) return "a YAML list whose entries are not '- topology: NAME' maps";
  return "nothing usable";
}

Detected Detect(std::string_view text, std::string_view source) {
  Detected d;
  if (std::optional<size_t> bad = FirstBinaryByte(text)) {
    d.error = InvalidArgument(
        "{}:{}: binary data (byte 0x{:02x} at offset {}), not a topology "
        "file; {}",
        source, LineAt(text, *bad), static_cast<unsigned char>(text[*bad]), *bad, kAccepted);
    return d;
  }
  size_t first = FirstContent(text);
  if (first == std::string_view::npos) {
    d.error = InvalidArgument("{}: the file is empty{}; {}", source,
                              text.empty() ? "" : " (only blank lines and comments)", kAccepted);
    return d;
  }
  int first_line = LineAt(text, first);
  if (text[first] == '{' || text[first] == '[') {
    Result<nlohmann::json> json = base::ParseJson(text, source);
    if (json.ok() && IsAws(*json)) {
      d.format = TopologyFormat::kAwsJson;
      d.json = std::move(*json);
      return d;
    }
    if (!json.ok() && text.find("\"Instances\"") != std::string_view::npos) {
      // Broken AWS output: its JSON error is more useful than a YAML one.
      d.format = TopologyFormat::kAwsJson;
      d.error = json.status();
      return d;
    }
  }
  if (LooksLikeSlurmConf(text)) {
    d.format = TopologyFormat::kSlurmConf;
    return d;
  }
  Result<YAML::Node> yaml = base::ParseYaml(text, source);
  if (!yaml.ok()) {
    d.error = InvalidArgument(
        "{} (the file is not JSON, has no SwitchName=/BlockName= lines, and "
        "is not valid YAML); {}",
        yaml.status().message(), kAccepted);
    return d;
  }
  d.yaml = *yaml;
  try {
    const YAML::Node& y = d.yaml;
    if (y.IsMap() &&
        (y["version"].IsDefined() || y["levels"].IsDefined() || y["switches"].IsDefined())) {
      d.format = TopologyFormat::kRailyardYaml;
      return d;
    }
    if (y.IsSequence() && y.size() > 0 && y[0].IsMap() && y[0]["topology"].IsDefined()) {
      d.format = TopologyFormat::kSlurmYaml;
      return d;
    }
    d.error = InvalidArgument("{}:{}: cannot tell what kind of topology this is: it is {}; {}",
                              source, first_line, DescribeYaml(y), kAccepted);
  } catch (const YAML::Exception& e) {
    d.error = InvalidArgument("{}:{}: cannot tell what kind of topology this is ({}); {}", source,
                              first_line, e.what(), kAccepted);
  }
  return d;
}

}  // namespace

std::string_view TopologyFormatName(TopologyFormat format) {
  switch (format) {
    case TopologyFormat::kRailyardYaml:
      return "Railyard topology YAML";
    case TopologyFormat::kSlurmConf:
      return "Slurm topology.conf";
    case TopologyFormat::kSlurmYaml:
      return "Slurm topology.yaml";
    case TopologyFormat::kAwsJson:
      return "AWS instance topology JSON";
    case TopologyFormat::kUnknown:
      break;
  }
  return "unknown";
}

TopologyFormat DetectTopologyFormat(std::string_view text) {
  Detected d = Detect(text, "");
  return d.format;
}

Result<Cluster> ParseTopology(std::string_view text, std::string_view source) {
  Detected d = Detect(text, source);
  if (!d.error.ok()) return d.error;
  switch (d.format) {
    case TopologyFormat::kAwsJson:
      return AwsTopologyFromJson(*d.json, text, source);
    case TopologyFormat::kSlurmConf:
      return ParseSlurmTopologyConf(text, source);
    case TopologyFormat::kRailyardYaml:
      return TopologyFromYaml(d.yaml, source);
    case TopologyFormat::kSlurmYaml:
      return SlurmTopologyFromYaml(d.yaml, source);
    case TopologyFormat::kUnknown:
      break;
  }
  return Internal("{}: topology format detection returned no format", source);
}

Result<Cluster> LoadTopology(const std::string& path) {
  RY_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path));
  return ParseTopology(text, path);
}

}  // namespace railyard::topo
