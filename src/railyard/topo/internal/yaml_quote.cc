#include "railyard/topo/internal/yaml_quote.h"

#include <fmt/format.h>

#include <array>

namespace railyard::topo::internal {
namespace {

bool IsLetter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// YAML 1.1's bool and null words (yaml.org/type/bool.html, /null.html), which include YAML
// 1.2's core-schema true/false/null. Anything starting with a digit, a sign, '.' or '~' is
// quoted by the first-character rule, which covers every int, float, base-60 and timestamp
// form and the .inf/.nan words.
constexpr std::array<std::string_view, 25> kReservedWords = {
    "y",  "Y",    "yes",  "Yes",  "YES",   "n",     "N",     "no", "No",
    "NO", "true", "True", "TRUE", "false", "False", "FALSE", "on", "On",
    "ON", "off",  "Off",  "OFF",  "null",  "Null",  "NULL"};

}  // namespace

bool YamlNeedsQuotes(std::string_view s) {
  if (s.empty()) return true;
  if (!(IsLetter(s[0]) || s[0] == '_' || s[0] == '/')) return true;
  for (char c : s) {
    if (!(IsLetter(c) || IsDigit(c) || c == '-' || c == '_' || c == '.' || c == '/')) return true;
  }
  for (std::string_view w : kReservedWords) {
    if (s == w) return true;
  }
  return false;
}

std::string YamlScalar(std::string_view s) {
  if (!YamlNeedsQuotes(s)) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += fmt::format("\\x{:02x}", u);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void EmitYamlString(YAML::Emitter& out, std::string_view s) {
  if (YamlNeedsQuotes(s)) out << YAML::DoubleQuoted;
  out << std::string(s);
}

}  // namespace railyard::topo::internal
