#include "backends/cann/call_sites.h"

#include <set>
#include <string>

#include <gtest/gtest.h>

namespace hyper_parallel::shmem::cann {
namespace {

// A few rules, checked by the compiler.
static_assert(IsCallable(VendorCall::kInitAttr, CallSite::kHostThread, FeatureSet::kV1_0));
static_assert(!IsCallable(VendorCall::kInitAttr, CallSite::kCustomOp, FeatureSet::kV1_5));
static_assert(!IsCallable(VendorCall::kQuietOnStream, CallSite::kHostThread, FeatureSet::kV1_0));
static_assert(IsCallable(VendorCall::kQuietOnStream, CallSite::kCustomOp, FeatureSet::kV1_5));
static_assert(IsCallable(VendorCall::kPutmemOnStream, CallSite::kCustomOp, FeatureSet::kV1_0));
static_assert(!IsCallable(VendorCall::kPutmemOnStream, CallSite::kDeviceKernel,
                          FeatureSet::kV1_5));
static_assert(!IsCallable(VendorCall::kMalloc, CallSite::kCustomOp, FeatureSet::kV1_5));
static_assert(!IsCallable(VendorCall::kAclrtSynchronizeStream, CallSite::kStreamCallback,
                          FeatureSet::kV1_5));

constexpr FeatureSet kAllFeatureSets[] = {FeatureSet::kShmemGen, FeatureSet::kAclGen,
                                          FeatureSet::kV1_0, FeatureSet::kV1_5};

// The whole table, entry by entry: what it allows passes, what it refuses is
// UNSUPPORTED_CAPABILITY naming the call, the context and the feature set.
TEST(CannCallability, EveryEntryOfTheTableIsEnforced) {
  int allowed = 0;
  int refused = 0;
  for (int index = 0; index < static_cast<int>(VendorCall::kCount); ++index) {
    const auto call = static_cast<VendorCall>(index);
    const CallRule& rule = kCallRules[index];
    for (FeatureSet features : kAllFeatureSets) {
      for (CallSite context : kCannSites) {
        const bool expected = (rule.allowed[static_cast<int>(features)] &
                               static_cast<std::uint8_t>(context)) != 0;
        ASSERT_EQ(IsCallable(call, context, features), expected);
        const Status status = CheckCallable(call, context, features);
        const std::string where = std::string(rule.vendor_name) + " from " +
                                  std::string(CallSiteName(context)) + " on " +
                                  std::string(FeatureSetName(features));
        if (expected) {
          ++allowed;
          EXPECT_TRUE(status.ok()) << where << ": " << status.ToString();
        } else {
          ++refused;
          EXPECT_EQ(status.code(), ErrorCode::kUnsupportedCapability) << where;
          EXPECT_NE(status.message().find("call=" + std::string(rule.vendor_name)),
                    std::string::npos) << status.message();
          EXPECT_NE(status.message().find("context=" + std::string(CallSiteName(context))),
                    std::string::npos) << status.message();
          EXPECT_NE(status.message().find(std::string(FeatureSetName(features))),
                    std::string::npos) << status.message();
        }
      }
    }
  }
  EXPECT_EQ(allowed + refused, static_cast<int>(VendorCall::kCount) * 4 * 4);
  EXPECT_GT(allowed, 0);
  EXPECT_GT(refused, 0);
}

TEST(CannCallability, EveryCallHasAVendorNameAndIsCallableSomewhereOnV15) {
  std::set<std::string_view> names;
  for (const CallRule& rule : kCallRules) {
    EXPECT_TRUE(rule.vendor_name.starts_with("aclshmem") || rule.vendor_name.starts_with("aclrt"))
        << rule.vendor_name;
    EXPECT_TRUE(names.insert(rule.vendor_name).second) << "duplicate " << rule.vendor_name;
    EXPECT_TRUE(IsCallable(rule.call, CallSite::kHostThread, FeatureSet::kV1_5))
        << rule.vendor_name;
  }
}

TEST(CannCallability, RefusedGenerationsAllowNothing) {
  for (const CallRule& rule : kCallRules) {
    EXPECT_EQ(rule.allowed[static_cast<int>(FeatureSet::kShmemGen)], 0) << rule.vendor_name;
    EXPECT_EQ(rule.allowed[static_cast<int>(FeatureSet::kAclGen)], 0) << rule.vendor_name;
  }
}

TEST(CannCallability, NothingIsCalledFromADeviceKernel) {
  for (const CallRule& rule : kCallRules) {
    for (FeatureSet features : kAllFeatureSets) {
      EXPECT_FALSE(IsCallable(rule.call, CallSite::kDeviceKernel, features))
          << rule.vendor_name;
    }
  }
  const Status twin =
      CheckCallable(VendorCall::kPutmemOnStream, CallSite::kDeviceKernel, FeatureSet::kV1_5);
  EXPECT_NE(twin.message().find("device twin"), std::string::npos) << twin.message();
}

TEST(CannCallability, ControlPlaneIsHostThreadOnly) {
  for (VendorCall call : {VendorCall::kSetConfStoreTls, VendorCall::kGetUniqueId,
                          VendorCall::kInitAttr, VendorCall::kFinalize, VendorCall::kMalloc,
                          VendorCall::kAlign, VendorCall::kFree,
                          VendorCall::kAclrtSynchronizeStream, VendorCall::kAclrtSetDevice}) {
    for (FeatureSet features : {FeatureSet::kV1_0, FeatureSet::kV1_5}) {
      EXPECT_TRUE(IsCallable(call, CallSite::kHostThread, features)) << VendorCallName(call);
      EXPECT_FALSE(IsCallable(call, CallSite::kCustomOp, features)) << VendorCallName(call);
      EXPECT_FALSE(IsCallable(call, CallSite::kStreamCallback, features))
          << VendorCallName(call);
    }
  }
}

TEST(CannCallability, V15OnlyCallsAreRefusedOnV10) {
  for (VendorCall call : {VendorCall::kQuietOnStream, VendorCall::kFinalizeX}) {
    const Status status = CheckCallable(call, CallSite::kHostThread, FeatureSet::kV1_0);
    EXPECT_EQ(status.code(), ErrorCode::kUnsupportedCapability);
    EXPECT_NE(status.message().find("does not exist in this feature set"), std::string::npos)
        << status.message();
  }
}

TEST(CannCallability, ScopeSetsAndRestoresTheThreadsContext) {
  EXPECT_EQ(CurrentCallSite(), CallSite::kHostThread);
  {
    CallSiteScope op(CallSite::kCustomOp);
    EXPECT_EQ(CurrentCallSite(), CallSite::kCustomOp);
    {
      CallSiteScope callback(CallSite::kStreamCallback);
      EXPECT_EQ(CurrentCallSite(), CallSite::kStreamCallback);
    }
    EXPECT_EQ(CurrentCallSite(), CallSite::kCustomOp);
  }
  EXPECT_EQ(CurrentCallSite(), CallSite::kHostThread);
}

}  // namespace
}  // namespace hyper_parallel::shmem::cann
