#include "railyard/validate/report_junit.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "railyard/validate/report_testing.h"

namespace railyard::validate {
namespace {

// A minimal XML reader, enough to prove the output well-formed: one prolog, nested elements
// with quoted attributes, text, and the five predefined entities. Anything else is an error.
struct Element {
  std::string name;
  std::map<std::string, std::string> attrs;
  std::vector<std::unique_ptr<Element>> children;
  std::string text;

  std::vector<const Element*> All(const std::string& tag) const {
    std::vector<const Element*> out;
    for (const auto& c : children) {
      if (c->name == tag) out.push_back(c.get());
    }
    return out;
  }
  const Element* First(const std::string& tag) const {
    auto all = All(tag);
    return all.empty() ? nullptr : all.front();
  }
};

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}

  std::unique_ptr<Element> Document() {
    if (s_.rfind("<?xml", 0) == 0) pos_ = s_.find("?>") + 2;
    Space();
    auto root = ElementAt();
    Space();
    if (root && pos_ != s_.size()) return Fail("content after the root element");
    return root;
  }
  const std::string& error() const { return error_; }

 private:
  std::unique_ptr<Element> Fail(std::string why) {
    if (error_.empty()) error_ = why + " at offset " + std::to_string(pos_);
    return nullptr;
  }
  void Space() {
    while (pos_ < s_.size() && isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  std::string Name() {
    size_t start = pos_;
    while (pos_ < s_.size() && (isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_' ||
                                s_[pos_] == '-' || s_[pos_] == ':' || s_[pos_] == '.')) {
      ++pos_;
    }
    return s_.substr(start, pos_ - start);
  }
  // Text up to `stop`, entities decoded; false on a bare '<' or '&' or a bad entity.
  bool Text(char stop, std::string* out) {
    while (pos_ < s_.size() && s_[pos_] != stop) {
      char c = s_[pos_];
      if (c == '<' || (stop == '<' && c == '>')) return false;
      if (c == '&') {
        size_t semi = s_.find(';', pos_);
        if (semi == std::string::npos) return false;
        std::string ent = s_.substr(pos_ + 1, semi - pos_ - 1);
        static const std::map<std::string, char> kEntities = {
            {"amp", '&'}, {"lt", '<'}, {"gt", '>'}, {"quot", '"'}, {"apos", '\''}};
        auto it = kEntities.find(ent);
        if (it == kEntities.end()) return false;
        *out += it->second;
        pos_ = semi + 1;
        continue;
      }
      *out += c;
      ++pos_;
    }
    return true;
  }
  std::unique_ptr<Element> ElementAt() {
    if (pos_ >= s_.size() || s_[pos_] != '<') return Fail("expected '<'");
    ++pos_;
    auto e = std::make_unique<Element>();
    e->name = Name();
    if (e->name.empty()) return Fail("expected an element name");
    for (;;) {
      Space();
      if (s_.compare(pos_, 2, "/>") == 0) {
        pos_ += 2;
        return e;
      }
      if (pos_ < s_.size() && s_[pos_] == '>') {
        ++pos_;
        break;
      }
      std::string attr = Name();
      if (attr.empty() || s_.compare(pos_, 2, "=\"") != 0) return Fail("bad attribute");
      pos_ += 2;
      std::string value;
      if (!Text('"', &value) || pos_ >= s_.size()) return Fail("bad attribute value");
      ++pos_;
      if (!e->attrs.emplace(attr, value).second) return Fail("duplicate attribute " + attr);
    }
    for (;;) {
      if (!Text('<', &e->text)) return Fail("bad text in <" + e->name + ">");
      if (pos_ >= s_.size()) return Fail("unclosed <" + e->name + ">");
      if (s_.compare(pos_, 2, "</") == 0) {
        pos_ += 2;
        if (Name() != e->name || pos_ >= s_.size() || s_[pos_] != '>') {
          return Fail("mismatched end of <" + e->name + ">");
        }
        ++pos_;
        return e;
      }
      auto child = ElementAt();
      if (!child) return nullptr;
      e->children.push_back(std::move(child));
    }
  }

  const std::string& s_;
  size_t pos_ = 0;
  std::string error_;
};

TEST(ReportJunitReader, RejectsMalformedXml) {
  for (std::string bad : {"<a><b></a>", "<a x=\"1\" x=\"2\"/>", "<a>&bogus;</a>", "<a>1 < 2</a>",
                          "<a>", "<a/><b/>"}) {
    Reader reader(bad);
    EXPECT_EQ(reader.Document(), nullptr) << bad;
  }
}

std::unique_ptr<Element> Parse(const RunReport& r) {
  std::string xml = ReportToJUnit(r);
  Reader reader(xml);
  auto root = reader.Document();
  EXPECT_NE(root, nullptr) << reader.error() << "\n" << xml;
  return root;
}

TEST(ReportJunit, WellFormedWithOneSuitePerHostAndCluster) {
  RunReport r = SampleReport();
  auto root = Parse(r);
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->name, "testsuites");
  auto suites = root->All("testsuite");
  ASSERT_EQ(suites.size(), 9u);
  for (int i = 0; i < kSampleHosts; ++i) {
    EXPECT_EQ(suites[i]->attrs.at("name"), SampleHostName(i));
    EXPECT_EQ(suites[i]->All("testcase").size(), r.hosts[i].checks.size());
  }
  EXPECT_EQ(suites[8]->attrs.at("name"), "cluster");
  // 3 cluster checks and 2 findings.
  EXPECT_EQ(suites[8]->All("testcase").size(), 5u);
}

TEST(ReportJunit, CountsMatchTheVerdicts) {
  RunReport r = SampleReport();
  auto root = Parse(r);
  ASSERT_NE(root, nullptr);
  int tests = 0, failures = 0, errors = 0, skipped = 0;
  for (const Element* suite : root->All("testsuite")) {
    int t = 0, f = 0, e = 0, s = 0;
    for (const Element* c : suite->All("testcase")) {
      ++t;
      f += c->First("failure") != nullptr;
      e += c->First("error") != nullptr;
      s += c->First("skipped") != nullptr;
    }
    EXPECT_EQ(suite->attrs.at("tests"), std::to_string(t));
    EXPECT_EQ(suite->attrs.at("failures"), std::to_string(f));
    EXPECT_EQ(suite->attrs.at("errors"), std::to_string(e));
    EXPECT_EQ(suite->attrs.at("skipped"), std::to_string(s));
    tests += t;
    failures += f;
    errors += e;
    skipped += s;
  }
  // node5's fabric check, the cluster's fabric check, both findings.
  EXPECT_EQ(failures, 4);
  EXPECT_EQ(errors, 5);  // node7: every check
  // gpu.count on 7 live hosts, collective.nccl_tests.
  EXPECT_EQ(skipped, 8);
  EXPECT_EQ(root->attrs.at("tests"), std::to_string(tests));
  EXPECT_EQ(root->attrs.at("failures"), "4");
  EXPECT_EQ(root->attrs.at("errors"), "5");
  EXPECT_EQ(root->attrs.at("skipped"), "8");
}

TEST(ReportJunit, VerdictsMapToElementsWithReasons) {
  auto root = Parse(SampleReport());
  ASSERT_NE(root, nullptr);
  auto suites = root->All("testsuite");
  auto find = [&](int suite, const std::string& name) -> const Element* {
    for (const Element* c : suites[suite]->All("testcase")) {
      if (c->attrs.at("name") == name) return c;
    }
    ADD_FAILURE() << "no testcase " << name;
    return nullptr;
  };
  const Element* warn = find(3, "node.sysctl");
  ASSERT_NE(warn, nullptr);
  ASSERT_NE(warn->First("system-out"), nullptr);
  // Escaped on the way out, the same text on the way in.
  EXPECT_EQ(warn->First("system-out")->text,
            std::string("WARN: ") + kSampleAwkwardReason + " (measured 208 KiB, expected 16 MiB)");
  EXPECT_EQ(warn->attrs.at("classname"), "railyard.validate.node3");
  EXPECT_TRUE(find(0, "node.cpus")->children.empty());

  const Element* fail = find(5, "fabric.pair_bandwidth");
  ASSERT_NE(fail->First("failure"), nullptr);
  EXPECT_NE(fail->First("failure")->attrs.at("message").find("20% of expected"), std::string::npos);
  const Element* unknown = find(7, "node.cpus");
  ASSERT_NE(unknown->First("error"), nullptr);
  EXPECT_NE(unknown->First("error")->attrs.at("message").find("agent did not connect"),
            std::string::npos);
  const Element* skipped = find(0, "gpu.count");
  ASSERT_NE(skipped->First("skipped"), nullptr);
  EXPECT_EQ(skipped->First("skipped")->attrs.at("message"), "no GPU expected on profile cpu");
  EXPECT_EQ(find(3, "storage.throughput")->attrs.at("time"), "2.100");

  const Element* link = find(8, "finding link node2<->node6");
  ASSERT_NE(link->First("failure"), nullptr);
  EXPECT_NE(link->First("failure")->text.find("40 Mbit/s"), std::string::npos);
}

TEST(ReportJunit, EscapesMarkupAndControlCharacters) {
  RunReport r = SampleReport();
  r.hosts[0].name = "odd<&>\"host";
  r.hosts[1].checks[1].outcome = Outcome::Fail(std::string("tool said \x1b[31mno\x1b[0m"));
  auto root = Parse(r);
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->All("testsuite")[0]->attrs.at("name"), "odd<&>\"host");
}

}  // namespace
}  // namespace railyard::validate
