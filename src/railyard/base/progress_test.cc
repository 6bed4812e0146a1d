#include "railyard/base/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace railyard::base {
namespace {

// Runs `fn` with a Progress writing to a memory stream and returns what it wrote.
template <typename Fn>
std::string Capture(bool terminal, Fn fn) {
  char* buf = nullptr;
  size_t len = 0;
  std::FILE* f = ::open_memstream(&buf, &len);
  {
    Progress p(f, terminal);
    fn(p);
  }
  std::fclose(f);
  std::string out(buf, len);
  std::free(buf);
  return out;
}

TEST(ProgressTest, LogOutputHasWholeLinesAndNoCarriageReturns) {
  std::string out = Capture(false, [](Progress& p) {
    for (size_t i = 1; i <= 1000; ++i) p.Update(i, 1000, "done " + std::to_string(i));
  });
  EXPECT_EQ(out.find('\r'), std::string::npos) << out;
  // One line per tenth of the work (the first update opens the 0th tenth) and the last.
  EXPECT_EQ(out,
            "done 1\ndone 100\ndone 200\ndone 300\ndone 400\ndone 500\ndone 600\ndone 700\n"
            "done 800\ndone 900\ndone 1000\n");
}

TEST(ProgressTest, ShortWorkLogsEveryStep) {
  std::string out = Capture(false, [](Progress& p) {
    for (size_t i = 1; i <= 12; ++i) p.Update(i, 12, std::to_string(i));
  });
  EXPECT_EQ(out, "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n");
}

TEST(ProgressTest, LogOutputWritesTheLastUpdateOnceForSmallTotals) {
  std::string out = Capture(false, [](Progress& p) {
    for (size_t i = 1; i <= 3; ++i) p.Update(i, 3, "pair " + std::to_string(i));
    p.Update(3, 3, "pair 3 again");
  });
  EXPECT_EQ(out, "pair 1\npair 2\npair 3\n");
}

TEST(ProgressTest, TerminalRedrawsInPlaceAndClearsAtTheEnd) {
  std::string out = Capture(true, [](Progress& p) {
    p.Update(1, 2, "longer line");
    p.Update(2, 2, "short");
  });
  EXPECT_EQ(out, "\rlonger line\rshort      \r           \r");
}

TEST(ProgressTest, ZeroTotalCountsAsFinished) {
  std::string out = Capture(false, [](Progress& p) {
    p.Update(5, 0, "five");
    p.Update(6, 0, "six");
  });
  EXPECT_EQ(out, "five\n");
}

}  // namespace
}  // namespace railyard::base
