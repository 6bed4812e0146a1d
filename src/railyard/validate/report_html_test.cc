#include "railyard/validate/report_html.h"

#include <gtest/gtest.h>

#include <regex>

#include "railyard/validate/report_testing.h"

namespace railyard::validate {
namespace {

TEST(ReportHtml, SelfContained) {
  std::string html = ReportToHtml(SampleReport());
  EXPECT_EQ(html.rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_EQ(html.find("<img"), std::string::npos);
  // No attribute loads anything: every src/href would be local, and there are none.
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(\s(src|href)\s*=)")));
  EXPECT_FALSE(std::regex_search(html, std::regex(R"(url\s*\()")));
}

TEST(ReportHtml, OverallFindingsAndEveryHost) {
  RunReport r = SampleReport();
  std::string html = ReportToHtml(r);
  EXPECT_NE(html.find("<title>Railyard validation full: FAIL</title>"), std::string::npos);
  EXPECT_NE(html.find(R"(<h1>Railyard validation <span class="v FAIL">FAIL</span></h1>)"),
            std::string::npos);
  EXPECT_NE(html.find("<b>node5</b>"), std::string::npos);
  EXPECT_NE(html.find("<b>node2&lt;-&gt;node6</b>"), std::string::npos);
  EXPECT_EQ(CountOccurrences(html, "<tr class=\"finding\">"), 2u);
  // The host finding's evidence: figures, slow/total, its tests and re-tests by pair.
  EXPECT_NE(html.find("40 Mbit/s"), std::string::npos);
  EXPECT_NE(html.find("200 Mbit/s"), std::string::npos);
  EXPECT_NE(html.find("12 of 12"), std::string::npos);
  EXPECT_NE(html.find("node5 -&gt; node0 40 Mbit/s of 200 Mbit/s (20%)"), std::string::npos);
  EXPECT_NE(html.find("re-tests: node5 -&gt; node0 41 Mbit/s of 200 Mbit/s (20%) (round 7)"),
            std::string::npos);
  EXPECT_EQ(CountOccurrences(html, "<tr class=\"host\">"), 8u);
  for (int i = 0; i < kSampleHosts; ++i) {
    EXPECT_NE(html.find("<tr class=\"host\"><td>" + SampleHostName(i) + "</td>"), std::string::npos)
        << i;
  }
  // Worst check named for the hosts that are not PASS.
  EXPECT_NE(html.find("fabric.pair_bandwidth: link at 20% of expected"), std::string::npos);
  EXPECT_NE(html.find("gpu.count: agent did not connect"), std::string::npos);
}

TEST(ReportHtml, HeatmapHasACellPerOrderedPair) {
  RunReport r = SampleReport();
  std::string svg = PairHeatmapSvg(r);
  EXPECT_EQ(CountOccurrences(svg, "<rect class=\"cell "),
            size_t{kSampleHosts * (kSampleHosts - 1)});
  EXPECT_EQ(CountOccurrences(svg, "<rect class=\"cell measured"),
            size_t{kSampleLiveHosts * (kSampleLiveHosts - 1)});
  // node7 never connected: its row and column were not measured.
  EXPECT_EQ(CountOccurrences(svg, "<rect class=\"cell none"), size_t{2 * (kSampleHosts - 1)});
  // Slow: node5's 12 and the link's 2.
  EXPECT_EQ(CountOccurrences(svg, "<rect class=\"cell measured slow\""), 14u);
  EXPECT_EQ(CountOccurrences(svg, "<rect class=\"diag\""), size_t{kSampleHosts});
  EXPECT_NE(svg.find("<title>node2 -&gt; node6: 40 Mbit/s of 200 Mbit/s (20%); re-test: "
                     "39 Mbit/s of 200 Mbit/s (20%)</title>"),
            std::string::npos);
  EXPECT_NE(svg.find("<title>node7 -&gt; node0: not measured</title>"), std::string::npos);
  std::string html = ReportToHtml(r);
  EXPECT_NE(html.find(svg), std::string::npos);
}

TEST(ReportHtml, HeatmapAgainstTheMedianWithoutExpectations) {
  RunReport r = SampleReport();
  for (PairFigure& p : r.pairs) p.expected_bits = 0;
  r.fabric_stats = {.count = 42, .median = 190e6, .mad = 2e6, .normalised = false};
  r.pairs[0].error = "agent of node1 did not answer within 5s";
  std::string svg = PairHeatmapSvg(r);
  EXPECT_NE(svg.find("40 Mbit/s, 21% of the fleet median 190 Mbit/s"), std::string::npos);
  EXPECT_EQ(CountOccurrences(svg, "<rect class=\"cell error\""), 1u);
  EXPECT_NE(svg.find("no figure: agent of node1 did not answer within 5s"), std::string::npos);
}

TEST(ReportHtml, StorageAndCollectiveTables) {
  std::string html = ReportToHtml(SampleReport());
  EXPECT_NE(html.find("<table id=\"storage\">"), std::string::npos);
  EXPECT_NE(html.find("<td>node2</td><td class=\"num\">92 MB/s</td>"), std::string::npos);
  EXPECT_NE(html.find("agent did not connect</td>"), std::string::npos);
  EXPECT_NE(html.find("<table id=\"collective\">"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"num\">64 MiB</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>collective.nccl_tests</td>"), std::string::npos);
}

TEST(ReportHtml, EscapesEveryText) {
  RunReport r = SampleReport();
  r.hosts[1].name = "<b>evil</b>&";
  r.plan = "\"plan\"";
  std::string html = ReportToHtml(r);
  EXPECT_EQ(html.find("<b>evil</b>"), std::string::npos);
  EXPECT_NE(html.find("&lt;b&gt;evil&lt;/b&gt;&amp;"), std::string::npos);
  EXPECT_EQ(html.find(kSampleAwkwardReason), std::string::npos);
  EXPECT_NE(html.find("16 MiB &amp; &quot;tcp_rmem&quot; &apos;low&apos;"), std::string::npos);
}

TEST(ReportHtml, EmptyReport) {
  RunReport r;
  r.overall = Outcome::Unknown("no host answered");
  std::string html = ReportToHtml(r);
  EXPECT_NE(html.find("No host, link or uplink was found slow."), std::string::npos);
  EXPECT_NE(html.find("No pair was measured."), std::string::npos);
}

}  // namespace
}  // namespace railyard::validate
