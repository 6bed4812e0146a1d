// main() of every test binary: gtest's, plus an exit code that tells ctest a skip from a pass.
//
// ctest runs each test case as its own process (cmake/railyard.cmake). A case that called
// GTEST_SKIP exits with kSkipExitCode, which the registration declares as SKIP_RETURN_CODE;
// a failure exits 1 whatever else the case printed, so nothing in a test's output can turn a
// failure into a skip. Run by hand over many cases, the binary exits kSkipExitCode only when
// every selected case was skipped and none failed.
#include <gtest/gtest.h>

namespace {

// The automake convention for "skipped"; cmake/railyard.cmake uses the same number.
constexpr int kSkipExitCode = 77;

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const int result = RUN_ALL_TESTS();
  const ::testing::UnitTest& run = *::testing::UnitTest::GetInstance();
  if (result == 0 && run.skipped_test_count() > 0 && run.successful_test_count() == 0) {
    return kSkipExitCode;
  }
  return result;
}
