// Loading YAML and JSON config files with errors that point at the file, line and field.
//
// yaml-cpp and nlohmann-json report problems by throwing; these helpers catch at the edge and
// return a Status whose message an operator can act on without a debugger:
//
//   cluster.yaml:14:7: field 'nodes[3].name': expected a string, got a sequence
//   cluster.yaml:12:3: field 'nodes[3]': missing required key 'name'
//   state.json:3:14: error: syntax error while parsing object - unexpected '}'
//
// A FieldContext carries the file name and the path of the value being read; pass it down
// while walking a document and extend it with Child() and Index():
//
//   RY_ASSIGN_OR_RETURN(YAML::Node root, LoadYamlFile(path));
//   FieldContext ctx(path);
//   RY_ASSIGN_OR_RETURN(YAML::Node nodes, RequireSequence(root, "nodes", ctx));
//   for (size_t i = 0; i < nodes.size(); ++i) {
//     FieldContext node_ctx = ctx.Child("nodes").Index(i);
//     RY_RETURN_IF_ERROR(RejectUnknownKeys(nodes[i], {"name", "gpus"}, node_ctx));
//     RY_ASSIGN_OR_RETURN(std::string name, RequireString(nodes[i], "name", node_ctx));
//     RY_ASSIGN_OR_RETURN(int64_t gpus, OptionalInt(nodes[i], "gpus", 0, node_ctx));
//   }
//
// For checks of your own (a size that ParseBytes rejects, a duplicate name), build the error
// with ctx.Child(key).Error(value_node, why) so it carries the same location.
//
// All errors are INVALID_ARGUMENT except a missing file (NOT_FOUND) and other read failures
// (see ReadFile). Thread-safety: free functions are safe to call concurrently; a YAML::Node
// must not be shared between threads without a lock (yaml-cpp nodes share mutable state).
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <utility>

#include "railyard/base/status.h"

namespace railyard::base {

// The file and the path of a value inside it, for error messages. Paths look like
// "nodes[3].links[0].peer"; the document root has an empty path.
class FieldContext {
 public:
  explicit FieldContext(std::string source, std::string path = {})
      : source_(std::move(source)), path_(std::move(path)) {}

  // The value under `key` of this map.
  FieldContext Child(std::string_view key) const;
  // Element `i` of this sequence.
  FieldContext Index(size_t i) const;

  const std::string& source() const { return source_; }
  const std::string& path() const { return path_; }

  // INVALID_ARGUMENT "<source>:<line>:<col>: field '<path>': <what>", the position taken from
  // `at` (1-based) and left out when `at` has none (an undefined node, or one built in code).
  // At the root "field ''" reads "top level".
  Status Error(const YAML::Node& at, std::string_view what) const;
  // The same without a position, for JSON and other sources that do not keep them.
  Status Error(std::string_view what) const;

 private:
  std::string source_;
  std::string path_;
};

// ---- YAML ----

// Parses one YAML document. `source_name` (usually the path) prefixes errors:
// "topo.yaml:12:5: error: <yaml-cpp's message>". An empty document is a null node.
Result<YAML::Node> ParseYaml(std::string_view text, std::string_view source_name);

// Reads and parses a YAML file. NOT_FOUND (naming the path) when it does not exist.
Result<YAML::Node> LoadYamlFile(const std::string& path);

// Typed access to `map[key]`, where ctx is the context of `map`. Require* fail when the key is
// missing and when its value is null; Optional* return `fallback` for both. Both fail when the
// value has the wrong type, and when `map` is neither a map nor null (an empty section). Integers
// are decimal, optionally signed; doubles also accept integers and exponents but not inf/nan;
// booleans are true/false in any case (not yes/no/on/off, which YAML 1.1 readers disagree on).
Result<std::string> RequireString(const YAML::Node& map, std::string_view key,
                                  const FieldContext& ctx);
Result<int64_t> RequireInt(const YAML::Node& map, std::string_view key, const FieldContext& ctx);
Result<double> RequireDouble(const YAML::Node& map, std::string_view key, const FieldContext& ctx);
Result<bool> RequireBool(const YAML::Node& map, std::string_view key, const FieldContext& ctx);
Result<YAML::Node> RequireMap(const YAML::Node& map, std::string_view key, const FieldContext& ctx);
Result<YAML::Node> RequireSequence(const YAML::Node& map, std::string_view key,
                                   const FieldContext& ctx);

Result<std::string> OptionalString(const YAML::Node& map, std::string_view key,
                                   std::string fallback, const FieldContext& ctx);
Result<int64_t> OptionalInt(const YAML::Node& map, std::string_view key, int64_t fallback,
                            const FieldContext& ctx);
Result<double> OptionalDouble(const YAML::Node& map, std::string_view key, double fallback,
                              const FieldContext& ctx);
Result<bool> OptionalBool(const YAML::Node& map, std::string_view key, bool fallback,
                          const FieldContext& ctx);

// Checks the node itself (e.g. a sequence element) rather than a key of it.
Status ExpectMap(const YAML::Node& node, const FieldContext& ctx);
Status ExpectSequence(const YAML::Node& node, const FieldContext& ctx);

// Fails on the first key of `map` not in `allowed`, naming it, its position, a close match
// when there is one, and the allowed keys. Catches typos that would otherwise silently
// leave a setting at its default. OK when `map` is null.
Status RejectUnknownKeys(const YAML::Node& map, std::initializer_list<std::string_view> allowed,
                         const FieldContext& ctx);

// ---- JSON ----

// Parses JSON. Errors give the line and column of the offending byte:
// "state.json:3:14: error: syntax error while parsing value - invalid literal; last read: 'tru}'".
Result<nlohmann::json> ParseJson(std::string_view text, std::string_view source_name);

// Reads and parses a JSON file. NOT_FOUND (naming the path) when it does not exist.
Result<nlohmann::json> LoadJsonFile(const std::string& path);

// Typed access to `object[key]`, where ctx is the context of `object`. JSON keeps no
// positions, so errors read "state.json: field 'ranks[2].host': expected a string, got
// number". Missing and null are treated as for YAML. Integers must be JSON integers within
// int64 (3.0 is rejected).
Result<std::string> RequireString(const nlohmann::json& object, std::string_view key,
                                  const FieldContext& ctx);
// A non-negative integer up to 2^64-1 (sizes, offsets, counts in index files).
Result<uint64_t> RequireUint64(const nlohmann::json& object, std::string_view key,
                               const FieldContext& ctx);
Result<int64_t> RequireInt(const nlohmann::json& object, std::string_view key,
                           const FieldContext& ctx);
Result<double> RequireDouble(const nlohmann::json& object, std::string_view key,
                             const FieldContext& ctx);
Result<bool> RequireBool(const nlohmann::json& object, std::string_view key,
                         const FieldContext& ctx);
Result<std::string> OptionalString(const nlohmann::json& object, std::string_view key,
                                   std::string fallback, const FieldContext& ctx);
Result<int64_t> OptionalInt(const nlohmann::json& object, std::string_view key, int64_t fallback,
                            const FieldContext& ctx);
// Return a pointer into `object` (valid while it lives), never null on success.
Result<const nlohmann::json*> RequireObject(const nlohmann::json& object, std::string_view key,
                                            const FieldContext& ctx);
Result<const nlohmann::json*> RequireArray(const nlohmann::json& object, std::string_view key,
                                           const FieldContext& ctx);
Status RejectUnknownKeys(const nlohmann::json& object,
                         std::initializer_list<std::string_view> allowed, const FieldContext& ctx);

// Levenshtein distance, for "did you mean" suggestions.
size_t EditDistance(std::string_view a, std::string_view b);

// 1-based line of a YAML node, 0 when unknown.
int YamlLine(const YAML::Node& node);
// map[key] without yaml-cpp's throw (or insertion) on a non-map; Undefined when absent.
YAML::Node YamlGet(const YAML::Node& map, std::string_view key);
// True when `key` is present with a non-null value.
bool YamlHas(const YAML::Node& map, std::string_view key);

}  // namespace railyard::base
