#include "railyard/base/config.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "railyard/base/temp_dir_testing.h"

namespace railyard::base {
namespace {

// The message of an expected INVALID_ARGUMENT, or a marker when it unexpectedly succeeded.
template <typename T>
std::string ErrorOf(const Result<T>& r) {
  if (r.ok()) return "<OK>";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << r.status().ToString();
  return r.status().message();
}

std::string ErrorOf(const Status& s) {
  if (s.ok()) return "<OK>";
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  return s.message();
}

YAML::Node Yaml(std::string_view text) {
  Result<YAML::Node> r = ParseYaml(text, "test.yaml");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : YAML::Node();
}

nlohmann::json Json(std::string_view text) {
  Result<nlohmann::json> r = ParseJson(text, "test.json");
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : nlohmann::json();
}

// A temporary directory removed at the end of the test, pass or fail.
class TempDir {
 public:
  TempDir() { EXPECT_FALSE(dir_.path().empty()); }
  std::string Write(const std::string& name, std::string_view text) const {
    std::string file = dir_.Sub(name);
    std::ofstream(file) << text;
    return file;
  }
  const std::string& path() const { return dir_.path(); }

 private:
  ScopedTempDir dir_{"config-test"};
};

constexpr std::string_view kCluster = R"(name: lab
nodes:
  - name: n0
    gpus: 8
  - name: [a, b]
    gpus: lots
  - gpus: 4
    weight: 0.5
    enabled: true
  - nmae: n3
)";

TEST(FieldContext, Paths) {
  FieldContext root("c.yaml");
  EXPECT_EQ(root.path(), "");
  EXPECT_EQ(root.Child("nodes").path(), "nodes");
  EXPECT_EQ(root.Child("nodes").Index(3).path(), "nodes[3]");
  EXPECT_EQ(root.Child("nodes").Index(3).Child("links").Index(0).Child("peer").path(),
            "nodes[3].links[0].peer");
  EXPECT_EQ(root.Index(1).path(), "[1]");
  EXPECT_EQ(root.Child("nodes").source(), "c.yaml");
}

TEST(FieldContext, ErrorsWithAndWithoutPosition) {
  YAML::Node doc = Yaml("a:\n  b: 1\n");
  FieldContext ctx("test.yaml");
  EXPECT_EQ(ErrorOf(ctx.Child("a").Child("b").Error(doc["a"]["b"], "too small")),
            "test.yaml:2:6: field 'a.b': too small");
  EXPECT_EQ(ErrorOf(ctx.Error(YAML::Node(), "built in code")),
            "test.yaml: top level: built in code");
  EXPECT_EQ(ErrorOf(ctx.Child("x").Error("no position")), "test.yaml: field 'x': no position");
}

TEST(ParseYaml, SyntaxErrorNamesSourceLineAndColumn) {
  Result<YAML::Node> r = ParseYaml("a: 1\nb: [1, 2\nc: 3\n", "topo.yaml");
  std::string msg = ErrorOf(r);
  EXPECT_TRUE(msg.starts_with("topo.yaml:")) << msg;
  EXPECT_NE(msg.find(": error: "), std::string::npos) << msg;

  EXPECT_EQ(ErrorOf(ParseYaml("a: 1\n  b: 2\n", "topo.yaml")),
            "topo.yaml:2:4: error: illegal map value");
}

TEST(ParseYaml, EmptyDocumentIsNull) {
  YAML::Node doc = Yaml("");
  EXPECT_TRUE(doc.IsNull());
}

TEST(LoadYamlFile, ReadsFileAndReportsItsPath) {
  TempDir dir;
  std::string good = dir.Write("good.yaml", "a: 1\n");
  Result<YAML::Node> r = LoadYamlFile(good);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["a"].Scalar(), "1");

  std::string bad = dir.Write("bad.yaml", "a: 1\n  b: 2\n");
  EXPECT_EQ(ErrorOf(LoadYamlFile(bad)), bad + ":2:4: error: illegal map value");
}

TEST(LoadYamlFile, MissingFileIsNotFound) {
  TempDir dir;
  std::string path = dir.path() + "/absent.yaml";
  Result<YAML::Node> r = LoadYamlFile(path);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find(path), std::string::npos) << r.status().message();
}

TEST(YamlFields, RequireReadsTypedValues) {
  YAML::Node doc = Yaml(kCluster);
  FieldContext ctx("cluster.yaml");
  EXPECT_EQ(RequireString(doc, "name", ctx).value_or(""), "lab");
  Result<YAML::Node> nodes = RequireSequence(doc, "nodes", ctx);
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 4u);
  FieldContext n0 = ctx.Child("nodes").Index(0);
  EXPECT_EQ(RequireInt((*nodes)[0], "gpus", n0).value_or(-1), 8);
  FieldContext n2 = ctx.Child("nodes").Index(2);
  EXPECT_EQ(RequireDouble((*nodes)[2], "weight", n2).value_or(-1), 0.5);
  EXPECT_EQ(RequireDouble((*nodes)[2], "gpus", n2).value_or(-1), 4.0);
  EXPECT_EQ(RequireBool((*nodes)[2], "enabled", n2).value_or(false), true);
  EXPECT_TRUE(RequireMap(Yaml("m: {a: 1}"), "m", ctx).ok());
}

TEST(YamlFields, WrongTypeNamesFieldAndPosition) {
  YAML::Node doc = Yaml(kCluster);
  FieldContext ctx("cluster.yaml");
  YAML::Node nodes = doc["nodes"];
  FieldContext n1 = ctx.Child("nodes").Index(1);
  EXPECT_EQ(ErrorOf(RequireString(nodes[1], "name", n1)),
            "cluster.yaml:5:11: field 'nodes[1].name': expected a string, got a sequence");
  EXPECT_EQ(ErrorOf(RequireInt(nodes[1], "gpus", n1)),
            "cluster.yaml:6:11: field 'nodes[1].gpus': expected an integer, got 'lots'");
  EXPECT_EQ(ErrorOf(RequireSequence(doc, "name", ctx)),
            "cluster.yaml:1:7: field 'name': expected a sequence, got a scalar");
  EXPECT_EQ(ErrorOf(RequireMap(doc, "nodes", ctx)),
            "cluster.yaml:3:3: field 'nodes': expected a map, got a sequence");
  EXPECT_EQ(ErrorOf(RequireString(nodes, "name", ctx.Child("nodes"))),
            "cluster.yaml:3:3: field 'nodes': expected a map, got a sequence");
}

TEST(YamlFields, MissingKeyNamesTheMap) {
  YAML::Node doc = Yaml(kCluster);
  FieldContext ctx("cluster.yaml");
  FieldContext n2 = ctx.Child("nodes").Index(2);
  EXPECT_EQ(ErrorOf(RequireString(doc["nodes"][2], "name", n2)),
            "cluster.yaml:7:5: field 'nodes[2]': missing required key 'name'");
  EXPECT_EQ(ErrorOf(RequireString(doc, "owner", ctx)),
            "cluster.yaml:1:1: top level: missing required key 'owner'");
  // A lookup through a missing parent has no position to report.
  EXPECT_EQ(ErrorOf(RequireString(doc["absent"], "x", ctx.Child("absent"))),
            "cluster.yaml: field 'absent': missing required key 'x'");
}

TEST(YamlFields, NullValueIsReportedAsNull) {
  YAML::Node doc = Yaml("name:\nport: ~\n");
  FieldContext ctx("c.yaml");
  EXPECT_EQ(ErrorOf(RequireString(doc, "name", ctx)),
            "c.yaml:1:1: field 'name': expected a string, got null");
  EXPECT_EQ(ErrorOf(RequireInt(doc, "port", ctx)),
            "c.yaml:2:1: field 'port': expected an integer, got null");
  EXPECT_EQ(ErrorOf(RequireMap(doc, "port", ctx)),
            "c.yaml:2:1: field 'port': expected a map, got null");
  EXPECT_EQ(OptionalInt(doc, "port", 99, ctx).value_or(0), 99);
}

TEST(YamlFields, ScalarConversions) {
  YAML::Node doc = Yaml(
      "big: 9223372036854775807\ntoo_big: 9223372036854775808\nneg: -5\nplus: +7\n"
      "hex: 0x10\nfloat: 1.5\nexp: 1e3\ninf: .inf\nyes: yes\nupper: TRUE\nquoted: '12'\n");
  FieldContext ctx("c.yaml");
  EXPECT_EQ(RequireInt(doc, "big", ctx).value_or(0), INT64_MAX);
  EXPECT_EQ(ErrorOf(RequireInt(doc, "too_big", ctx)),
            "c.yaml:2:10: field 'too_big': integer '9223372036854775808' is out of range for 64 "
            "bits");
  EXPECT_EQ(RequireInt(doc, "neg", ctx).value_or(0), -5);
  EXPECT_EQ(RequireInt(doc, "plus", ctx).value_or(0), 7);
  EXPECT_EQ(ErrorOf(RequireInt(doc, "hex", ctx)),
            "c.yaml:5:6: field 'hex': expected an integer, got '0x10'");
  EXPECT_EQ(ErrorOf(RequireInt(doc, "float", ctx)),
            "c.yaml:6:8: field 'float': expected an integer, got '1.5'");
  EXPECT_EQ(RequireDouble(doc, "exp", ctx).value_or(0), 1000.0);
  EXPECT_EQ(ErrorOf(RequireDouble(doc, "inf", ctx)),
            "c.yaml:8:6: field 'inf': expected a finite number, got '.inf'");
  EXPECT_EQ(ErrorOf(RequireBool(doc, "yes", ctx)),
            "c.yaml:9:6: field 'yes': expected true or false, got 'yes'");
  EXPECT_EQ(RequireBool(doc, "upper", ctx).value_or(false), true);
  EXPECT_EQ(RequireString(doc, "quoted", ctx).value_or(""), "12");
  EXPECT_EQ(RequireString(doc, "neg", ctx).value_or(""), "-5");  // scalars read as text
}

TEST(YamlFields, OptionalUsesFallbackOnlyWhenAbsent) {
  YAML::Node doc = Yaml("a: 3\nb: x\nempty:\n");
  FieldContext ctx("c.yaml");
  EXPECT_EQ(OptionalInt(doc, "a", 1, ctx).value_or(0), 3);
  EXPECT_EQ(OptionalInt(doc, "missing", 1, ctx).value_or(0), 1);
  EXPECT_EQ(OptionalString(doc, "missing", "dflt", ctx).value_or(""), "dflt");
  EXPECT_EQ(OptionalString(doc, "b", "dflt", ctx).value_or(""), "x");
  EXPECT_EQ(OptionalDouble(doc, "missing", 2.5, ctx).value_or(0), 2.5);
  EXPECT_EQ(OptionalBool(doc, "missing", true, ctx).value_or(false), true);
  EXPECT_EQ(ErrorOf(OptionalInt(doc, "b", 1, ctx)),
            "c.yaml:2:4: field 'b': expected an integer, got 'x'");
  // An empty section reads as an empty map.
  EXPECT_EQ(OptionalInt(doc["empty"], "x", 5, ctx.Child("empty")).value_or(0), 5);
  EXPECT_EQ(ErrorOf(OptionalInt(doc["b"], "x", 5, ctx.Child("b"))),
            "c.yaml:2:4: field 'b': expected a map, got a scalar");
}

TEST(YamlFields, ExpectMapAndSequence) {
  YAML::Node doc = Yaml("- 1\n- {a: 1}\n");
  FieldContext ctx("c.yaml");
  EXPECT_TRUE(ExpectSequence(doc, ctx).ok());
  EXPECT_TRUE(ExpectMap(doc[1], ctx.Index(1)).ok());
  EXPECT_EQ(ErrorOf(ExpectMap(doc[0], ctx.Index(0))),
            "c.yaml:1:3: field '[0]': expected a map, got a scalar");
  EXPECT_EQ(ErrorOf(ExpectSequence(doc[1], ctx.Index(1))),
            "c.yaml:2:3: field '[1]': expected a sequence, got a map");
}

TEST(YamlFields, RejectUnknownKeys) {
  YAML::Node doc = Yaml(kCluster);
  FieldContext ctx("cluster.yaml");
  YAML::Node nodes = doc["nodes"];
  EXPECT_TRUE(RejectUnknownKeys(nodes[0], {"name", "gpus"}, ctx.Child("nodes").Index(0)).ok());
  EXPECT_EQ(ErrorOf(RejectUnknownKeys(nodes[3], {"name", "gpus"}, ctx.Child("nodes").Index(3))),
            "cluster.yaml:10:5: field 'nodes[3]': unknown key 'nmae' (did you mean 'name'? "
            "allowed: name, gpus)");
  EXPECT_EQ(ErrorOf(RejectUnknownKeys(nodes[2], {"name", "gpus"}, ctx.Child("nodes").Index(2))),
            "cluster.yaml:8:5: field 'nodes[2]': unknown key 'weight' (allowed: name, gpus)");
  EXPECT_EQ(ErrorOf(RejectUnknownKeys(doc, {"nodes"}, ctx)),
            "cluster.yaml:1:1: top level: unknown key 'name' (allowed: nodes)");
  EXPECT_TRUE(RejectUnknownKeys(Yaml("x:")["x"], {"a"}, ctx.Child("x")).ok());
  EXPECT_EQ(ErrorOf(RejectUnknownKeys(nodes, {"a"}, ctx.Child("nodes"))),
            "cluster.yaml:3:3: field 'nodes': expected a map, got a sequence");
}

TEST(ParseJson, SyntaxErrorGivesLineAndColumn) {
  EXPECT_EQ(ErrorOf(ParseJson("{\n  \"a\": 1,\n  \"b\": tru}\n", "state.json")),
            "state.json:3:11: error: syntax error while parsing value - invalid literal; last "
            "read: '\"b\": tru}'");
  EXPECT_EQ(ErrorOf(ParseJson("{\"a\": 1", "s.json")),
            "s.json:1:8: error: syntax error while parsing object - unexpected end of input; "
            "expected '}'");
  std::string msg = ErrorOf(ParseJson("", "s.json"));
  EXPECT_TRUE(msg.starts_with("s.json:1:1: error: ")) << msg;
}

// Our line:column must agree with the one nlohmann puts in its own message.
TEST(ParseJson, PositionMatchesNlohmann) {
  for (std::string_view text : {"[1,\n2,\n  x]", "{\"k\":\n\n   [1, 2,, 3]}", "\n\n\n  }",
                                "{\"a\": \"\\q\"}", "[1, 2]\n  3"}) {
    std::string expected;
    try {
      nlohmann::json parsed = nlohmann::json::parse(text);
      FAIL() << text << " parsed as " << parsed.dump();
    } catch (const nlohmann::json::parse_error& e) {
      std::string what = e.what();
      size_t at = what.find("at line ");
      ASSERT_NE(at, std::string::npos) << what;
      size_t comma = what.find(", column ", at);
      size_t colon = what.find(':', comma);
      expected = "s.json:" + what.substr(at + 8, comma - at - 8) + ":" +
                 what.substr(comma + 9, colon - comma - 9) + ":";
    }
    std::string msg = ErrorOf(ParseJson(text, "s.json"));
    EXPECT_TRUE(msg.starts_with(expected)) << msg << " vs " << expected;
  }
}

TEST(LoadJsonFile, ReadsAndReportsPath) {
  TempDir dir;
  std::string good = dir.Write("s.json", "{\"a\": [1, 2]}");
  Result<nlohmann::json> r = LoadJsonFile(good);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["a"][1], 2);
  std::string bad = dir.Write("bad.json", "{\"a\" 1}");
  EXPECT_EQ(ErrorOf(LoadJsonFile(bad)),
            bad +
                ":1:6: error: syntax error while parsing object separator - unexpected number "
                "literal; expected ':'");
  Result<nlohmann::json> missing = LoadJsonFile(dir.path() + "/absent.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find(dir.path() + "/absent.json"), std::string::npos);
}

TEST(JsonFields, TypedAccessAndErrors) {
  nlohmann::json doc = Json(R"({"host": "n0", "rank": 3, "big": 18446744073709551615,
      "ratio": 0.25, "ok": true, "f": 3.0, "ranks": [{"host": 7}], "opts": {}, "nil": null})");
  FieldContext ctx("state.json");
  EXPECT_EQ(RequireString(doc, "host", ctx).value_or(""), "n0");
  EXPECT_EQ(RequireInt(doc, "rank", ctx).value_or(0), 3);
  EXPECT_EQ(RequireDouble(doc, "ratio", ctx).value_or(0), 0.25);
  EXPECT_EQ(RequireDouble(doc, "rank", ctx).value_or(0), 3.0);
  EXPECT_EQ(RequireBool(doc, "ok", ctx).value_or(false), true);
  EXPECT_TRUE(RequireObject(doc, "opts", ctx).ok());
  Result<const nlohmann::json*> ranks = RequireArray(doc, "ranks", ctx);
  ASSERT_TRUE(ranks.ok());
  EXPECT_EQ(ErrorOf(RequireString((**ranks)[0], "host", ctx.Child("ranks").Index(0))),
            "state.json: field 'ranks[0].host': expected a string, got number");
  EXPECT_EQ(ErrorOf(RequireString(doc, "user", ctx)),
            "state.json: top level: missing required key 'user'");
  EXPECT_EQ(ErrorOf(RequireInt(doc, "big", ctx)),
            "state.json: field 'big': integer 18446744073709551615 is out of range for 64 bits");
  EXPECT_EQ(ErrorOf(RequireInt(doc, "f", ctx)),
            "state.json: field 'f': expected an integer, got 3.0");
  EXPECT_EQ(ErrorOf(RequireInt(doc, "host", ctx)),
            "state.json: field 'host': expected an integer, got string");
  EXPECT_EQ(ErrorOf(RequireBool(doc, "rank", ctx)),
            "state.json: field 'rank': expected true or false, got number");
  EXPECT_EQ(ErrorOf(RequireObject(doc, "ranks", ctx)),
            "state.json: field 'ranks': expected an object, got array");
  EXPECT_EQ(ErrorOf(RequireArray(doc, "opts", ctx)),
            "state.json: field 'opts': expected an array, got object");
  EXPECT_EQ(ErrorOf(RequireString(doc, "nil", ctx)),
            "state.json: field 'nil': expected a string, got null");
  EXPECT_EQ(ErrorOf(RequireString(doc["ranks"], "x", ctx.Child("ranks"))),
            "state.json: field 'ranks': expected an object, got array");
  EXPECT_EQ(OptionalString(doc, "nil", "d", ctx).value_or(""), "d");
  EXPECT_EQ(OptionalString(doc, "absent", "d", ctx).value_or(""), "d");
  EXPECT_EQ(OptionalInt(doc, "absent", 4, ctx).value_or(0), 4);
  EXPECT_EQ(OptionalInt(doc, "rank", 4, ctx).value_or(0), 3);
}

TEST(JsonFields, RejectUnknownKeys) {
  nlohmann::json doc = Json(R"({"host": "n0", "prot": 1})");
  FieldContext ctx("state.json");
  EXPECT_TRUE(RejectUnknownKeys(doc, {"host", "prot"}, ctx).ok());
  EXPECT_EQ(ErrorOf(RejectUnknownKeys(doc, {"host", "port"}, ctx)),
            "state.json: top level: unknown key 'prot' (did you mean 'port'? allowed: host, port)");
  EXPECT_EQ(ErrorOf(RejectUnknownKeys(nlohmann::json::array(), {"a"}, ctx.Child("x"))),
            "state.json: field 'x': expected an object, got array");
}

}  // namespace
}  // namespace railyard::base
