// The HTML validation report rendered by a real browser: headless Chromium (Debian's
// chromium package, which `scripts/bootstrap --test` installs) loads the sample report from
// a file and dumps the DOM it built, and the test asserts on what the page holds: the title,
// the findings, every host, and the heatmap's cells. A browser reads what a unit test's
// string search cannot: whether the markup and escaping survive an HTML parser intact.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>
#include <string>

#include "railyard/base/subprocess.h"
#include "railyard/base/temp_dir_testing.h"
#include "railyard/validate/report_html.h"
#include "railyard/validate/report_testing.h"

namespace railyard {
namespace {

using validate::CountOccurrences;

TEST(ValidateHtmlChromium, PageShowsFindingsHostsAndHeatmap) {
  const std::string chromium = base::FindInPath("chromium");
  if (chromium.empty())
    GTEST_SKIP() << "chromium not installed (scripts/bootstrap --test installs it)";
  base::ScopedTempDir dir("validate-html");
  ASSERT_FALSE(dir.path().empty());
  const std::string page = dir.Sub("report.html");
  std::ofstream(page) << validate::ReportToHtml(validate::SampleReport());

  // Its own profile and home in the temporary directory; no sandbox (tests run as root).
  base::SpawnOptions opts{
      .argv = {chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--user-data-dir=" + dir.Sub("profile"), "--dump-dom", "file://" + page},
      .env = {{"HOME", dir.path()},
              {"XDG_CONFIG_HOME", dir.Sub("config")},
              {"XDG_CACHE_HOME", dir.Sub("cache")}}};
  Result<base::ExitInfo> done =
      base::RunCommand(opts, base::Deadline::After(std::chrono::seconds(120)));
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  ASSERT_TRUE(done->Succeeded()) << done->Describe() << "\n" << done->stderr_text;
  const std::string& dom = done->stdout_text;
  ASSERT_NE(dom.find("</html>"), std::string::npos) << dom.substr(0, 2000);

  EXPECT_NE(dom.find("<title>Railyard validation full: FAIL</title>"), std::string::npos);
  // The findings, as the page shows them (the browser serialises text with < and > escaped).
  EXPECT_NE(dom.find("<b>node5</b>"), std::string::npos);
  EXPECT_NE(dom.find("<b>node2&lt;-&gt;node6</b>"), std::string::npos);
  EXPECT_EQ(CountOccurrences(dom, "<tr class=\"finding\">"), 2u);
  EXPECT_NE(dom.find("12 of 12"), std::string::npos);
  // Every host has its row.
  for (int i = 0; i < validate::kSampleHosts; ++i) {
    const std::string host = validate::SampleHostName(i);
    EXPECT_NE(dom.find("<tr class=\"host\"><td>" + host + "</td>"), std::string::npos) << host;
  }
  // The escaped reason came back as the same text: nothing in it was taken for markup.
  EXPECT_NE(dom.find("net.core.rmem_max 208 KiB &lt; 16 MiB &amp; \"tcp_rmem\" 'low'"),
            std::string::npos);
  // The heatmap: the browser built its SVG with one rect per ordered pair of hosts, the pairs
  // of the live hosts measured, and each cell's tooltip.
  const size_t svg = dom.find("<svg id=\"heatmap\"");
  ASSERT_NE(svg, std::string::npos);
  const std::string heatmap = dom.substr(svg, dom.find("</svg>", svg) - svg);
  constexpr size_t n = validate::kSampleHosts, live = validate::kSampleLiveHosts;
  EXPECT_EQ(CountOccurrences(heatmap, "<rect class=\"cell "), n * (n - 1));
  EXPECT_EQ(CountOccurrences(heatmap, "<rect class=\"cell measured"), live * (live - 1));
  EXPECT_EQ(CountOccurrences(heatmap, "<title>"), n * (n - 1));
  EXPECT_NE(heatmap.find("<title>node2 -&gt; node6: 40 Mbit/s of 200 Mbit/s (20%)"),
            std::string::npos);
}

}  // namespace
}  // namespace railyard
