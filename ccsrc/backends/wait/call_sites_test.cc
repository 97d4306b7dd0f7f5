#include "backends/wait/call_sites.h"

#include <gtest/gtest.h>

namespace hyper_parallel::shmem::host {
namespace {

// The table itself, checked by the compiler.
static_assert(IsCallable(HostCall::kCreateSegment, CallSite::kHostThread));
static_assert(!IsCallable(HostCall::kCreateSegment, CallSite::kStreamExecutor));
static_assert(!IsCallable(HostCall::kCreateSegment, CallSite::kCustomOp));
static_assert(!IsCallable(HostCall::kExchange, CallSite::kCustomOp));
static_assert(IsCallable(HostCall::kEnqueue, CallSite::kHostThread));
static_assert(!IsCallable(HostCall::kEnqueue, CallSite::kStreamExecutor));
static_assert(IsCallable(HostCall::kCopyBytes, CallSite::kStreamExecutor));
static_assert(!IsCallable(HostCall::kCopyBytes, CallSite::kCustomOp));
static_assert(!IsCallable(HostCall::kSynchronizeStream, CallSite::kStreamExecutor));
static_assert(IsCallable(HostCall::kRecordEvent, CallSite::kHostThread));

// The host backend runs no custom op and no device code: nothing is callable there.
TEST(CallSites, NothingOutsideTheSitesTheHostEnters) {
  for (int call = 0; call < static_cast<int>(HostCall::kCount); ++call) {
    const auto host_call = static_cast<HostCall>(call);
    for (CallSite site :
         {CallSite::kCustomOp, CallSite::kStreamCallback, CallSite::kDeviceKernel}) {
      EXPECT_FALSE(IsCallable(host_call, site))
          << HostCallName(host_call) << " " << CallSiteName(site);
    }
  }
}

TEST(CallSites, EveryCallHasANameAndASite) {
  for (int call = 0; call < static_cast<int>(HostCall::kCount); ++call) {
    const auto host_call = static_cast<HostCall>(call);
    EXPECT_NE(HostCallName(host_call), "unknown") << call;
    EXPECT_NE(kAllowedSites[call], 0) << HostCallName(host_call) << " is callable nowhere";
  }
}

TEST(CallSites, LifecycleCallsAreHostThreadOnly) {
  for (HostCall call : {HostCall::kCreateSegment, HostCall::kOpenPeerSegment,
                        HostCall::kUnmapSegments, HostCall::kCreateStream,
                        HostCall::kPinThread}) {
    EXPECT_TRUE(IsCallable(call, CallSite::kHostThread)) << HostCallName(call);
    EXPECT_FALSE(IsCallable(call, CallSite::kStreamExecutor)) << HostCallName(call);
    EXPECT_FALSE(IsCallable(call, CallSite::kCustomOp)) << HostCallName(call);
  }
}

TEST(CallSites, DataPathRunsOnHostThreadAndExecutorOnly) {
  for (HostCall call : {HostCall::kCopyBytes, HostCall::kAtomicSignal, HostCall::kBoundedWait,
                        HostCall::kExchange}) {
    EXPECT_TRUE(IsCallable(call, CallSite::kHostThread)) << HostCallName(call);
    EXPECT_TRUE(IsCallable(call, CallSite::kStreamExecutor)) << HostCallName(call);
    EXPECT_FALSE(IsCallable(call, CallSite::kCustomOp)) << HostCallName(call);
  }
}

TEST(CallSites, SiteNames) {
  EXPECT_EQ(CallSiteName(CallSite::kHostThread), "host_thread");
  EXPECT_EQ(CallSiteName(CallSite::kStreamExecutor), "stream_executor");
  EXPECT_EQ(CallSiteName(CallSite::kCustomOp), "custom_op");
}

}  // namespace
}  // namespace hyper_parallel::shmem::host
