#include "railyard/base/fabric_library.h"

#include <gtest/gtest.h>
#include <rdma/fi_errno.h>

#include <string>

namespace railyard::base {
namespace {

// Whether libfabric is installed is the machine's business; what is checked is that the
// loader either hands back every entry point or says which library it could not load.
TEST(FabricLibraryTest, LoadsEveryEntryPointOrNamesTheLibrary) {
  Result<const FabricLibrary*> fi = LoadFabricLibrary();
  if (!fi.ok()) {
    EXPECT_EQ(fi.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(fi.status().message().find("libfabric.so.1"), std::string::npos);
    GTEST_SKIP() << fi.status().ToString();
  }
  const FabricLibrary& l = **fi;
  EXPECT_NE(l.getinfo, nullptr);
  EXPECT_NE(l.freeinfo, nullptr);
  EXPECT_NE(l.dupinfo, nullptr);
  EXPECT_NE(l.fabric, nullptr);
  EXPECT_NE(l.strerror, nullptr);
  EXPECT_GE(FI_MAJOR(l.version()), 1);
  // The same process-wide library on every call.
  EXPECT_EQ(*LoadFabricLibrary(), *fi);
}

TEST(FabricLibraryTest, AllocInfoAndErrorText) {
  Result<const FabricLibrary*> fi = LoadFabricLibrary();
  if (!fi.ok()) GTEST_SKIP() << fi.status().ToString();
  fi_info* info = (*fi)->AllocInfo();
  ASSERT_NE(info, nullptr);
  EXPECT_NE(info->ep_attr, nullptr);
  (*fi)->freeinfo(info);
  EXPECT_NE((*fi)->Error(-FI_ENODATA).find(std::to_string(-FI_ENODATA)), std::string::npos);
}

}  // namespace
}  // namespace railyard::base
