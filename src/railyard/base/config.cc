#include "railyard/base/config.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "railyard/base/files.h"

namespace railyard::base {
namespace {

// yaml-cpp throws from Mark() and Type() on an invalid node (a lookup that missed on a
// temporary), so every inspection goes through these guards.
YAML::Mark MarkOf(const YAML::Node& node) {
  if (!node.IsDefined()) return YAML::Mark::null_mark();
  return node.Mark();
}

std::string_view YamlTypeName(const YAML::Node& node) {
  if (!node.IsDefined()) return "nothing";
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return "a scalar";
    case YAML::NodeType::Sequence:
      return "a sequence";
    case YAML::NodeType::Map:
      return "a map";
    case YAML::NodeType::Undefined:
      return "nothing";
  }
  return "an unknown node";
}

bool IsNullOrMissing(const YAML::Node& node) { return !node.IsDefined() || node.IsNull(); }

std::string Position(std::string_view source, const YAML::Mark& mark) {
  if (mark.is_null() || mark.line < 0 || mark.column < 0) return std::string(source);
  return fmt::format("{}:{}:{}", source, mark.line + 1, mark.column + 1);
}

std::string FieldName(const FieldContext& ctx) {
  return ctx.path().empty() ? std::string("top level") : fmt::format("field '{}'", ctx.path());
}

// A key and its value in a map; both undefined when the key is absent.
struct Entry {
  YAML::Node key{YAML::NodeType::Undefined};
  YAML::Node value{YAML::NodeType::Undefined};

  bool found() const { return value.IsDefined(); }
  // Where to point at the value: yaml-cpp marks an empty value ("name:") at the start of the
  // next line, so for null point at the key instead.
  const YAML::Node& position() const { return value.IsNull() ? key : value; }
};

// Finds `key` in `map`. Errors when `map` is not a map; null counts as an empty map
// ("section:" with nothing under it).
Result<Entry> Lookup(const YAML::Node& map, std::string_view key, const FieldContext& ctx) {
  if (IsNullOrMissing(map)) return Entry{};
  if (!map.IsMap()) {
    return ctx.Error(map, fmt::format("expected a map, got {}", YamlTypeName(map)));
  }
  try {
    for (const auto& kv : map) {
      if (kv.first.IsScalar() && kv.first.Scalar() == key) return Entry{kv.first, kv.second};
    }
  } catch (const YAML::Exception& e) {
    return ctx.Error(map, fmt::format("cannot read key '{}': {}", key, e.msg));
  }
  return Entry{};
}

// Lookup that fails when the key is missing. A null value is left to the type check, which
// says "expected a string, got null".
Result<Entry> LookupRequired(const YAML::Node& map, std::string_view key, const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(Entry entry, Lookup(map, key, ctx));
  if (!entry.found()) return ctx.Error(map, fmt::format("missing required key '{}'", key));
  return entry;
}

Result<std::string> ScalarOf(const Entry& entry, std::string_view expected,
                             const FieldContext& ctx) {
  if (!entry.value.IsScalar()) {
    return ctx.Error(entry.position(),
                     fmt::format("expected {}, got {}", expected, YamlTypeName(entry.value)));
  }
  return entry.value.Scalar();
}

Result<std::string> AsString(const Entry& entry, const FieldContext& ctx) {
  return ScalarOf(entry, "a string", ctx);
}

Result<int64_t> AsInt(const Entry& entry, const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(std::string text, ScalarOf(entry, "an integer", ctx));
  std::string_view digits = text;
  if (digits.starts_with('+')) digits.remove_prefix(1);
  int64_t out = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
  if (ec == std::errc::result_out_of_range) {
    return ctx.Error(entry.value, fmt::format("integer '{}' is out of range for 64 bits", text));
  }
  if (ec != std::errc() || ptr != digits.data() + digits.size() || digits.empty()) {
    return ctx.Error(entry.value, fmt::format("expected an integer, got '{}'", text));
  }
  return out;
}

Result<double> AsDouble(const Entry& entry, const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(std::string text, ScalarOf(entry, "a number", ctx));
  std::string_view digits = text;
  if (digits.starts_with('+')) digits.remove_prefix(1);
  double out = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
  if (ec != std::errc() || ptr != digits.data() + digits.size() || digits.empty() ||
      !std::isfinite(out)) {
    return ctx.Error(entry.value, fmt::format("expected a finite number, got '{}'", text));
  }
  return out;
}

Result<bool> AsBool(const Entry& entry, const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(std::string text, ScalarOf(entry, "true or false", ctx));
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (lower == "true") return true;
  if (lower == "false") return false;
  return ctx.Error(entry.value, fmt::format("expected true or false, got '{}'", text));
}

// The value of `entry` when it has the wanted container type.
Result<YAML::Node> AsContainer(const Entry& entry, YAML::NodeType::value type,
                               const FieldContext& ctx) {
  if (entry.value.Type() == type) return entry.value;
  return ctx.Error(
      entry.position(),
      fmt::format("expected {}, got {}", type == YAML::NodeType::Map ? "a map" : "a sequence",
                  YamlTypeName(entry.value)));
}

// "unknown key 'nmae' (did you mean 'name'? allowed: name, gpus)".
std::string UnknownKeyMessage(std::string_view key,
                              std::initializer_list<std::string_view> allowed) {
  std::string_view best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (std::string_view candidate : allowed) {
    size_t d = EditDistance(key, candidate);
    if (d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  // Beyond two edits (or most of a short word) the "suggestion" is noise.
  bool close = best_distance <= 2 && best_distance < std::max<size_t>(key.size(), 2);
  std::string hint = close ? fmt::format("did you mean '{}'? ", best) : "";
  return fmt::format("unknown key '{}' ({}allowed: {})", key, hint, fmt::join(allowed, ", "));
}

bool IsAllowed(std::string_view key, std::initializer_list<std::string_view> allowed) {
  return std::find(allowed.begin(), allowed.end(), key) != allowed.end();
}

// nlohmann's what() is "[json.exception.parse_error.101] parse error at line 3, column 14:
// <detail>"; we print our own position, so keep only the detail.
std::string_view JsonErrorDetail(std::string_view what) {
  if (!what.starts_with("[json.exception.")) return what;
  size_t colon = what.find(": ");
  if (colon == std::string_view::npos) return what;
  return what.substr(colon + 2);
}

// 1-based line and column of the byte at `offset` (0-based), clamped to the text.
std::pair<size_t, size_t> LineColumn(std::string_view text, size_t offset) {
  std::string_view before = text.substr(0, std::min(offset, text.size()));
  size_t line = 1 + static_cast<size_t>(std::count(before.begin(), before.end(), '\n'));
  size_t last_newline = before.rfind('\n');
  size_t column =
      last_newline == std::string_view::npos ? before.size() + 1 : before.size() - last_newline;
  return {line, column};
}

// object[key] for a JSON object; nullptr when missing. A null object counts as empty.
Result<const nlohmann::json*> JsonLookup(const nlohmann::json& object, std::string_view key,
                                         const FieldContext& ctx) {
  if (object.is_null()) return nullptr;
  if (!object.is_object()) {
    return ctx.Error(fmt::format("expected an object, got {}", object.type_name()));
  }
  auto it = object.find(key);
  if (it == object.end()) return nullptr;
  return &*it;
}

Result<const nlohmann::json*> JsonLookupRequired(const nlohmann::json& object, std::string_view key,
                                                 const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(const nlohmann::json* value, JsonLookup(object, key, ctx));
  if (value == nullptr) return ctx.Error(fmt::format("missing required key '{}'", key));
  return value;
}

Status JsonTypeError(const nlohmann::json& value, std::string_view expected,
                     const FieldContext& ctx) {
  return ctx.Error(fmt::format("expected {}, got {}", expected, value.type_name()));
}

Result<std::string> JsonAsString(const nlohmann::json& value, const FieldContext& ctx) {
  if (!value.is_string()) return JsonTypeError(value, "a string", ctx);
  return value.get<std::string>();
}

Result<int64_t> JsonAsInt(const nlohmann::json& value, const FieldContext& ctx) {
  if (value.is_number_unsigned()) {
    uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return ctx.Error(fmt::format("integer {} is out of range for 64 bits", u));
    }
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  if (value.is_number_float()) {
    return ctx.Error(fmt::format("expected an integer, got {}", value.dump()));
  }
  return JsonTypeError(value, "an integer", ctx);
}

}  // namespace

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t substitute = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitute});
    }
  }
  return row[b.size()];
}

int YamlLine(const YAML::Node& node) {
  if (!node.IsDefined()) return 0;
  const YAML::Mark m = node.Mark();
  return m.is_null() || m.line < 0 ? 0 : m.line + 1;
}

YAML::Node YamlGet(const YAML::Node& map, std::string_view key) {
  if (!map.IsDefined() || !map.IsMap()) return YAML::Node(YAML::NodeType::Undefined);
  for (const auto& kv : map) {
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return kv.second;
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

bool YamlHas(const YAML::Node& map, std::string_view key) {
  YAML::Node v = YamlGet(map, key);
  return v.IsDefined() && !v.IsNull();
}

// ---- FieldContext ----

FieldContext FieldContext::Child(std::string_view key) const {
  return FieldContext(source_, path_.empty() ? std::string(key) : fmt::format("{}.{}", path_, key));
}

FieldContext FieldContext::Index(size_t i) const {
  return FieldContext(source_, fmt::format("{}[{}]", path_, i));
}

Status FieldContext::Error(const YAML::Node& at, std::string_view what) const {
  return InvalidArgument("{}: {}: {}", Position(source_, MarkOf(at)), FieldName(*this), what);
}

Status FieldContext::Error(std::string_view what) const {
  return InvalidArgument("{}: {}: {}", source_, FieldName(*this), what);
}

// ---- YAML ----

Result<YAML::Node> ParseYaml(std::string_view text, std::string_view source_name) {
  try {
    return YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgument("{}: error: {}", Position(source_name, e.mark), e.msg);
  }
}

Result<YAML::Node> LoadYamlFile(const std::string& path) {
  RY_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseYaml(text, path);
}

Result<std::string> RequireString(const YAML::Node& map, std::string_view key,
                                  const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(Entry entry, LookupRequired(map, key, ctx));
  return AsString(entry, ctx.Child(key));
}

Result<int64_t> RequireInt(const YAML::Node& map, std::string_view key, const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(Entry entry, LookupRequired(map, key, ctx));
  return AsInt(entry, ctx.Child(key));
}

Result<double> RequireDouble(const YAML::Node& map, std::string_view key, const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(Entry entry, LookupRequired(map, key, ctx));
  return AsDouble(entry, ctx.Child(key));
}

Result<bool> RequireBool(const YAML::Node& map, std::string_view key, const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(Entry entry, LookupRequired(map, key, ctx));
  return AsBool(entry, ctx.Child(key));
}

Result<YAML::Node> RequireMap(const YAML::Node& map, std::string_view key,
                              const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(Entry entry, LookupRequired(map, key, ctx));
  return AsContainer(entry, YAML::NodeType::Map, ctx.Child(key));
}

Result<YAML::Node> RequireSequence(const YAML::Node& map, std::string_view key,
                                   const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(Entry entry, LookupRequired(map, key, ctx));
  return AsContainer(entry, YAML::NodeType::Sequence, ctx.Child(key));
}

Result<std::string> OptionalString(const YAML::Node& map, std::string_view key,
                                   std::string fallback, const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(Entry entry, Lookup(map, key, ctx));
  if (IsNullOrMissing(entry.value)) return fallback;
  return AsString(entry, ctx.Child(key));
}

Result<int64_t> OptionalInt(const YAML::Node& map, std::string_view key, int64_t fallback,
                            const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(Entry entry, Lookup(map, key, ctx));
  if (IsNullOrMissing(entry.value)) return fallback;
  return AsInt(entry, ctx.Child(key));
}

Result<double> OptionalDouble(const YAML::Node& map, std::string_view key, double fallback,
                              const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(Entry entry, Lookup(map, key, ctx));
  if (IsNullOrMissing(entry.value)) return fallback;
  return AsDouble(entry, ctx.Child(key));
}

Result<bool> OptionalBool(const YAML::Node& map, std::string_view key, bool fallback,
                          const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(Entry entry, Lookup(map, key, ctx));
  if (IsNullOrMissing(entry.value)) return fallback;
  return AsBool(entry, ctx.Child(key));
}

Status ExpectMap(const YAML::Node& node, const FieldContext& ctx) {
  if (node.IsDefined() && node.IsMap()) return Status::Ok();
  return ctx.Error(node, fmt::format("expected a map, got {}", YamlTypeName(node)));
}

Status ExpectSequence(const YAML::Node& node, const FieldContext& ctx) {
  if (node.IsDefined() && node.IsSequence()) return Status::Ok();
  return ctx.Error(node, fmt::format("expected a sequence, got {}", YamlTypeName(node)));
}

Status RejectUnknownKeys(const YAML::Node& map, std::initializer_list<std::string_view> allowed,
                         const FieldContext& ctx) {
  if (IsNullOrMissing(map)) return Status::Ok();
  RY_RETURN_IF_ERROR(ExpectMap(map, ctx));
  for (const auto& entry : map) {
    const YAML::Node& key = entry.first;
    if (!key.IsScalar()) {
      return ctx.Error(key, fmt::format("expected a plain key, got {}", YamlTypeName(key)));
    }
    if (!IsAllowed(key.Scalar(), allowed)) {
      return ctx.Error(key, UnknownKeyMessage(key.Scalar(), allowed));
    }
  }
  return Status::Ok();
}

// ---- JSON ----

Result<nlohmann::json> ParseJson(std::string_view text, std::string_view source_name) {
  try {
    return nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    // e.byte counts the bytes read, so the offending byte is the one before it.
    auto [line, column] = LineColumn(text, e.byte == 0 ? 0 : e.byte - 1);
    return InvalidArgument("{}:{}:{}: error: {}", source_name, line, column,
                           JsonErrorDetail(e.what()));
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("{}: error: {}", source_name, JsonErrorDetail(e.what()));
  }
}

Result<nlohmann::json> LoadJsonFile(const std::string& path) {
  RY_ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ParseJson(text, path);
}

Result<std::string> RequireString(const nlohmann::json& object, std::string_view key,
                                  const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(const nlohmann::json* value, JsonLookupRequired(object, key, ctx));
  return JsonAsString(*value, ctx.Child(key));
}

Result<int64_t> RequireInt(const nlohmann::json& object, std::string_view key,
                           const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(const nlohmann::json* value, JsonLookupRequired(object, key, ctx));
  return JsonAsInt(*value, ctx.Child(key));
}

Result<uint64_t> RequireUint64(const nlohmann::json& object, std::string_view key,
                               const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(const nlohmann::json* value, JsonLookupRequired(object, key, ctx));
  if (!value->is_number_unsigned() && !(value->is_number_integer() && value->get<int64_t>() >= 0)) {
    return ctx.Child(key).Error("expected a non-negative integer");
  }
  return value->get<uint64_t>();
}

Result<double> RequireDouble(const nlohmann::json& object, std::string_view key,
                             const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(const nlohmann::json* value, JsonLookupRequired(object, key, ctx));
  if (!value->is_number()) return JsonTypeError(*value, "a number", ctx.Child(key));
  return value->get<double>();
}

Result<bool> RequireBool(const nlohmann::json& object, std::string_view key,
                         const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(const nlohmann::json* value, JsonLookupRequired(object, key, ctx));
  if (!value->is_boolean()) return JsonTypeError(*value, "true or false", ctx.Child(key));
  return value->get<bool>();
}

Result<std::string> OptionalString(const nlohmann::json& object, std::string_view key,
                                   std::string fallback, const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(const nlohmann::json* value, JsonLookup(object, key, ctx));
  if (value == nullptr || value->is_null()) return fallback;
  return JsonAsString(*value, ctx.Child(key));
}

Result<int64_t> OptionalInt(const nlohmann::json& object, std::string_view key, int64_t fallback,
                            const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(const nlohmann::json* value, JsonLookup(object, key, ctx));
  if (value == nullptr || value->is_null()) return fallback;
  return JsonAsInt(*value, ctx.Child(key));
}

Result<const nlohmann::json*> RequireObject(const nlohmann::json& object, std::string_view key,
                                            const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(const nlohmann::json* value, JsonLookupRequired(object, key, ctx));
  if (!value->is_object()) return JsonTypeError(*value, "an object", ctx.Child(key));
  return value;
}

Result<const nlohmann::json*> RequireArray(const nlohmann::json& object, std::string_view key,
                                           const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(const nlohmann::json* value, JsonLookupRequired(object, key, ctx));
  if (!value->is_array()) return JsonTypeError(*value, "an array", ctx.Child(key));
  return value;
}

Status RejectUnknownKeys(const nlohmann::json& object,
                         std::initializer_list<std::string_view> allowed, const FieldContext& ctx) {
  if (object.is_null()) return Status::Ok();
  if (!object.is_object()) return JsonTypeError(object, "an object", ctx);
  for (const auto& [key, value] : object.items()) {
    if (!IsAllowed(key, allowed)) return ctx.Error(UnknownKeyMessage(key, allowed));
  }
  return Status::Ok();
}

}  // namespace railyard::base
