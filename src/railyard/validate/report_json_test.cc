#include "railyard/validate/report_json.h"

#include <gtest/gtest.h>

#include "railyard/validate/report_testing.h"

namespace railyard::validate {
namespace {

using nlohmann::json;

TEST(ReportJson, TopLevelFieldsAndOverall) {
  json j = ReportToJson(SampleReport());
  EXPECT_EQ(j["report_version"], 1);
  EXPECT_EQ(j["plan"], "full");
  EXPECT_EQ(j["started"], "2026-12-02T02:00:00Z");
  EXPECT_EQ(j["total_s"].get<double>(), 21.5);
  EXPECT_EQ(j["overall"]["verdict"], "FAIL");
  EXPECT_EQ(j["overall"]["exit_code"], 2);
  EXPECT_FALSE(j["overall"]["reason"].get<std::string>().empty());
  for (const char* key : {"hosts", "fabric", "storage", "collective", "cluster_checks"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
}

TEST(ReportJson, HostsAndChecks) {
  RunReport r = SampleReport();
  json j = ReportToJson(r);
  ASSERT_EQ(j["hosts"].size(), 8u);
  const json& n3 = j["hosts"][3];
  EXPECT_EQ(n3["name"], "node3");
  EXPECT_EQ(n3["address"], "198.18.0.4");
  EXPECT_EQ(n3["profile"], "cpu");
  EXPECT_EQ(n3["overall"]["verdict"], "WARN");
  EXPECT_EQ(n3["overall"]["exit_code"], 1);
  ASSERT_EQ(n3["checks"].size(), r.hosts[3].checks.size());
  const json& sysctl = n3["checks"][3];
  EXPECT_EQ(sysctl["id"], "node.sysctl");
  EXPECT_EQ(sysctl["verdict"], "WARN");
  EXPECT_EQ(sysctl["reason"], kSampleAwkwardReason);  // text kept as it is
  EXPECT_EQ(sysctl["measured"], "208 KiB");
  EXPECT_EQ(sysctl["expected"], "16 MiB");
  EXPECT_EQ(sysctl["elapsed_ms"], 4);
  EXPECT_EQ(j["hosts"][5]["overall"]["verdict"], "FAIL");
  EXPECT_EQ(j["hosts"][7]["overall"]["verdict"], "UNKNOWN");
  EXPECT_EQ(j["hosts"][7]["address"], "");
  EXPECT_EQ(j["hosts"][0]["checks"][0]["verdict"], "SKIPPED");
}

TEST(ReportJson, FabricPairsByNameWithExactNumbers) {
  RunReport r = SampleReport();
  json f = ReportToJson(r)["fabric"];
  EXPECT_EQ(f["schedule"], "all-pairs");
  EXPECT_EQ(f["rounds"], 9);
  EXPECT_EQ(f["stats"]["count"], 42);
  EXPECT_EQ(f["stats"]["median"].get<double>(), 0.945);
  EXPECT_EQ(f["stats"]["mad"].get<double>(), 0.015);
  EXPECT_EQ(f["stats"]["normalised"], true);
  ASSERT_EQ(f["pairs"].size(), r.pairs.size());
  for (size_t i = 0; i < r.pairs.size(); ++i) {
    const PairFigure& p = r.pairs[i];
    const json& jp = f["pairs"][i];
    EXPECT_EQ(jp["src"], r.hosts[p.src].name);
    EXPECT_EQ(jp["dst"], r.hosts[p.dst].name);
    EXPECT_EQ(jp["measured_bits"].get<double>(), p.measured_bits);
    EXPECT_EQ(jp["expected_bits"].get<double>(), p.expected_bits);
    EXPECT_EQ(jp["ratio"].get<double>(), p.measured_bits / p.expected_bits);
    EXPECT_EQ(jp["slow"], p.slow);
    EXPECT_EQ(jp["retest"], p.retest);
    EXPECT_EQ(jp["round"], p.round);
    EXPECT_EQ(jp["error"], "");
  }
}

TEST(ReportJson, RatioIsNullWithoutExpectation) {
  RunReport r = SampleReport();
  r.pairs[0].expected_bits = 0;
  EXPECT_TRUE(ReportToJson(r)["fabric"]["pairs"][0]["ratio"].is_null());
}

TEST(ReportJson, FindingsWithEvidenceAndTheirPairs) {
  RunReport r = SampleReport();
  json findings = ReportToJson(r)["fabric"]["findings"];
  ASSERT_EQ(findings.size(), 2u);
  const json& host = findings[0];
  EXPECT_EQ(host["kind"], "host");
  EXPECT_EQ(host["subject"], "node5");
  EXPECT_EQ(host["host"], "node5");
  EXPECT_TRUE(host["peer"].is_null());
  EXPECT_EQ(host["direction"], "both");
  EXPECT_EQ(host["verdict"], "FAIL");
  EXPECT_EQ(host["evidence"]["measured_bits"].get<double>(), 40e6);
  EXPECT_EQ(host["evidence"]["expected_bits"].get<double>(), 200e6);
  EXPECT_EQ(host["evidence"]["ratio"].get<double>(), 0.2);
  EXPECT_EQ(host["evidence"]["slow"], 12);
  EXPECT_EQ(host["evidence"]["total"], 12);
  ASSERT_EQ(host["evidence"]["tests"].size(), 12u);
  for (const json& t : host["evidence"]["tests"]) {
    const PairFigure& p = r.pairs[t.get<int>()];
    EXPECT_TRUE(p.src == 5 || p.dst == 5);
    EXPECT_FALSE(p.retest);
  }
  ASSERT_EQ(host["evidence"]["retest_tests"].size(), 4u);
  for (const json& t : host["evidence"]["retest_tests"]) {
    const PairFigure& p = r.pairs[t.get<int>()];
    EXPECT_TRUE(p.retest);
    EXPECT_TRUE(p.src == 5 || p.dst == 5);
  }
  ASSERT_EQ(host["retest"].size(), 2u);
  EXPECT_EQ(host["retest"][1]["a"], "node5");
  EXPECT_EQ(host["retest"][1]["b"], "node4");

  const json& link = findings[1];
  EXPECT_EQ(link["kind"], "link");
  EXPECT_EQ(link["subject"], "node2<->node6");
  EXPECT_EQ(link["host"], "node2");
  EXPECT_EQ(link["peer"], "node6");
  ASSERT_EQ(link["evidence"]["tests"].size(), 2u);
  for (const json& t : link["evidence"]["tests"]) {
    const PairFigure& p = r.pairs[t.get<int>()];
    EXPECT_TRUE((p.src == 2 && p.dst == 6) || (p.src == 6 && p.dst == 2));
  }
}

TEST(ReportJson, OutOfRangeIndicesNeverThrow) {
  RunReport r = SampleReport();
  r.pairs[0].src = 99;
  r.findings[0].evidence.tests.push_back(1000);
  json j = ReportToJson(r);
  EXPECT_EQ(j["fabric"]["pairs"][0]["src"], "host#99");
  EXPECT_EQ(j["fabric"]["findings"][0]["evidence"]["tests"].size(), 12u);
}

TEST(ReportJson, StorageCollectiveAndClusterChecks) {
  RunReport r = SampleReport();
  json j = ReportToJson(r);
  const json& s = j["storage"];
  EXPECT_EQ(s["write_bytes_per_s"].get<double>(), r.storage_write_bytes_per_s);
  EXPECT_EQ(s["read_bytes_per_s"].get<double>(), r.storage_read_bytes_per_s);
  EXPECT_EQ(s["metadata_ops_per_s"].get<double>(), r.storage_metadata_ops_per_s);
  ASSERT_EQ(s["hosts"].size(), 8u);
  EXPECT_EQ(s["hosts"][2]["host"], "node2");
  EXPECT_EQ(s["hosts"][2]["write_bytes_per_s"].get<double>(), 92e6);
  EXPECT_EQ(s["hosts"][2]["read_from"], "node3");
  EXPECT_EQ(s["hosts"][6]["read_from"], "node0");
  EXPECT_EQ(s["hosts"][7]["error"], "agent did not connect");
  EXPECT_TRUE(s["hosts"][7]["read_from"].is_null());

  ASSERT_EQ(j["collective"].size(), 4u);
  EXPECT_EQ(j["collective"][3]["bytes"].get<uint64_t>(), 64ull << 20);
  EXPECT_EQ(j["collective"][3]["busbw_bytes_per_s"].get<double>(), 20e6);
  EXPECT_EQ(j["collective"][3]["seconds"].get<double>(), r.collective[3].seconds);

  ASSERT_EQ(j["cluster_checks"].size(), 3u);
  EXPECT_EQ(j["cluster_checks"][1]["id"], "collective.nccl_tests");
  EXPECT_EQ(j["cluster_checks"][1]["verdict"], "SKIPPED");
  EXPECT_EQ(j["cluster_checks"][1]["reason"], "nccl-tests not installed");
}

TEST(ReportJson, RoundTripsThroughText) {
  json j = ReportToJson(SampleReport());
  EXPECT_EQ(json::parse(j.dump()), j);
}

}  // namespace
}  // namespace railyard::validate
