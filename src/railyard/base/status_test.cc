#include "railyard/base/status.h"

#include <gtest/gtest.h>

#include <cerrno>

namespace railyard {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgument("{} is odd", x);
  return x / 2;
}

Result<int> Quarter(int x) {
  RY_ASSIGN_OR_RETURN(int h, Half(x));
  RY_ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  RY_RETURN_IF_ERROR(Half(x));
  return Status::Ok();
}

TEST(StatusTest, OkByDefault) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s.ExitCode(), 0);
}

TEST(StatusTest, ContextPrependsAndKeepsCode) {
  Status s = NotFound("host 'node9' is not in the cluster").WithContext("vcluster exec");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.message(), "vcluster exec: host 'node9' is not in the cluster");
  EXPECT_EQ(s.ToString(), "NOT_FOUND: vcluster exec: host 'node9' is not in the cluster");
  EXPECT_TRUE(Status::Ok().WithContext("ignored").ok());
}

TEST(StatusTest, ExitCodesSeparateBadInputFromFailures) {
  EXPECT_EQ(InvalidArgument("x").ExitCode(), 2);
  EXPECT_EQ(AlreadyExists("x").ExitCode(), 2);
  EXPECT_EQ(Unavailable("x").ExitCode(), 1);
  EXPECT_EQ(DeadlineExceeded("x").ExitCode(), 1);
}

TEST(StatusTest, MacrosPropagateFirstError) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);  // 6 -> 3 -> odd
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "3 is odd");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).code(), StatusCode::kInvalidArgument);
}

TEST(StatusTest, ResultFromOkStatusIsAnError) {
  Result<int> r{Status::Ok()};
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInternal);
  EXPECT_EQ(r.value_or(7), 7);
}

TEST(StatusTest, ErrnoMapping) {
  EXPECT_EQ(ErrnoStatus(ENOENT, "open x").code(), StatusCode::kNotFound);
  EXPECT_EQ(ErrnoStatus(ECONNREFUSED, "connect").code(), StatusCode::kUnavailable);
  EXPECT_EQ(ErrnoStatus(ENOSPC, "write").code(), StatusCode::kResourceExhausted);
  Status s = ErrnoStatus(EACCES, "open '/etc/shadow'");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("open '/etc/shadow': Permission denied (EACCES)"), std::string::npos)
      << s.message();
}

TEST(StatusTest, ReadOnlyFileSystemIsPermissionDeniedAndSaysSo) {
  Status s = ErrnoStatus(EROFS, "create '/scratch/ry-ior-0.dat'");
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("create '/scratch/ry-ior-0.dat': Read-only file system (EROFS)"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace railyard
