#include "backends/cuda/call_sites.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "testing/fake_cuda/fake_cuda_api.h"

namespace hyper_parallel::shmem::cuda {
namespace {

TEST(CudaCallSites, EveryEntryOfTheTableIsEnforced) {
  for (int i = 0; i < static_cast<int>(CudaCall::kCount); ++i) {
    const auto call = static_cast<CudaCall>(i);
    for (CallSite context : kCudaSites) {
      const Status checked = CheckCudaCall(call, context);
      const bool allowed = (kCudaCallRules[i].sites & static_cast<std::uint8_t>(context)) != 0;
      EXPECT_EQ(checked.ok(), allowed) << kCudaCallRules[i].name << " in "
                                       << CallSiteName(context);
      if (!allowed) {
        EXPECT_EQ(checked.code(), ErrorCode::kUnsupportedCapability);
        EXPECT_NE(checked.message().find(std::string(kCudaCallRules[i].name)), std::string::npos);
        EXPECT_NE(checked.message().find(std::string(CallSiteName(context))), std::string::npos);
      }
    }
  }
  // The rules that matter most, spelled out: a host thread may do anything, a custom op only
  // enqueue, a stream callback nothing.
  EXPECT_TRUE(IsCallable(CudaCall::kStreamSynchronize, CallSite::kHostThread));
  EXPECT_FALSE(IsCallable(CudaCall::kStreamSynchronize, CallSite::kCustomOp));
  EXPECT_FALSE(IsCallable(CudaCall::kMalloc, CallSite::kCustomOp));
  EXPECT_TRUE(IsCallable(CudaCall::kWaitValue64, CallSite::kCustomOp));
  EXPECT_TRUE(IsCallable(CudaCall::kCopyBlocksAsync, CallSite::kCustomOp));
  EXPECT_TRUE(IsCallable(CudaCall::kCopyBlocksAndAddAsync, CallSite::kCustomOp));
  for (int i = 0; i < static_cast<int>(CudaCall::kCount); ++i) {
    EXPECT_FALSE(IsCallable(static_cast<CudaCall>(i), CallSite::kStreamCallback));
  }
}

// Makes the CudaApi call `call` stands for, with harmless arguments (a switch without a
// default: a new CudaCall must be added here).
Status MakeCall(CudaApi& api, CudaCall call) {
  int device = 0;
  std::string text;
  void* ptr = nullptr;
  alignas(8) std::int64_t word = 0;
  WaitReport report;
  const CopyBlock block{&word, &word, sizeof(word)};
  const SignalledCopyBlock signalled{nullptr, nullptr, 0, &word, 1};
  switch (call) {
    case CudaCall::kGetDevice: return api.GetDevice(&device);
    case CudaCall::kSetDevice: return api.SetDevice(0);
    case CudaCall::kDeviceUuid: return api.DeviceUuid(0, &text);
    case CudaCall::kLoadKernels: return api.LoadKernels();
    case CudaCall::kMalloc: return api.Malloc(64, &ptr);
    case CudaCall::kFree: return api.Free(nullptr);
    case CudaCall::kMallocHost: return api.MallocHost(64, &ptr);
    case CudaCall::kFreeHost: return api.FreeHost(nullptr);
    case CudaCall::kIpcExport: return api.IpcExport(&word, &text);
    case CudaCall::kIpcOpen: return api.IpcOpen(text, &ptr);
    case CudaCall::kIpcClose: return api.IpcClose(&word);
    case CudaCall::kStreamCreate: return api.StreamCreate(&ptr);
    case CudaCall::kStreamDestroy: return api.StreamDestroy(nullptr);
    case CudaCall::kStreamSynchronize: return api.StreamSynchronize(nullptr);
    case CudaCall::kMemcpyAsync: return api.MemcpyAsync(&word, &word, sizeof(word), nullptr);
    case CudaCall::kCopyBlocksAsync: return api.CopyBlocksAsync(nullptr, &block, 1);
    case CudaCall::kCopyBlocksAndAddAsync: return api.CopyBlocksAndAddAsync(nullptr, &signalled, 1);
    case CudaCall::kWriteValue64: return api.WriteValue64(nullptr, &word, 1);
    case CudaCall::kAddValue64: return api.AddValue64(nullptr, &word, 1);
    case CudaCall::kWaitValue64:
      return api.WaitValue64(nullptr, &word, WaitComparison::kEq, 0, 0, &report);
    case CudaCall::kElementwiseAsync:
      return api.ElementwiseAsync(nullptr, data_plane::ElementwiseStep{});
    case CudaCall::kCount: break;
  }
  return Status::Assertion(ErrorCode::kInvalidArgument, "no such call");
}

TEST(CudaCallSites, EveryMethodOfTheCheckedApiChecksItsOwnEntry) {
  auto fake = std::make_unique<FakeCudaApi>();
  FakeCudaApi* inner = fake.get();
  std::unique_ptr<CudaApi> api = CheckedCudaApi(std::move(fake));
  CallSiteScope callback(CallSite::kStreamCallback);  // where the table refuses every call
  for (int i = 0; i < static_cast<int>(CudaCall::kCount); ++i) {
    const Status refused = MakeCall(*api, static_cast<CudaCall>(i));
    EXPECT_EQ(refused, CheckCudaCall(static_cast<CudaCall>(i), CallSite::kStreamCallback))
        << kCudaCallRules[i].name << ": " << refused.ToString();
  }
  EXPECT_TRUE(inner->calls().empty()) << "a refused call never reaches CUDA";
}

TEST(CudaCallSites, TheCheckedApiRefusesBeforeCudaIsCalled) {
  auto fake = std::make_unique<FakeCudaApi>();
  FakeCudaApi* inner = fake.get();
  std::unique_ptr<CudaApi> api = CheckedCudaApi(std::move(fake));
  EXPECT_TRUE(api->HostAddressableMemory());
  void* stream = nullptr;
  void* memory = nullptr;
  ASSERT_TRUE(api->StreamCreate(&stream).ok());
  ASSERT_TRUE(api->Malloc(64, &memory).ok());
  std::int64_t value = 42;
  {
    CallSiteScope captured(CallSite::kCustomOp);
    EXPECT_EQ(CurrentCallSite(), CallSite::kCustomOp);
    ASSERT_TRUE(api->MemcpyAsync(memory, &value, sizeof(value), stream).ok());
    const CopyBlock block{static_cast<char*>(memory) + 8, memory, sizeof(value)};
    ASSERT_TRUE(api->CopyBlocksAsync(stream, &block, 1).ok());
    const Status synced = api->StreamSynchronize(stream);
    EXPECT_EQ(synced.code(), ErrorCode::kUnsupportedCapability) << synced.ToString();
    void* more = nullptr;
    EXPECT_EQ(api->Malloc(64, &more).code(), ErrorCode::kUnsupportedCapability);
  }
  EXPECT_EQ(CurrentCallSite(), CallSite::kHostThread);
  const std::vector<std::string> calls = inner->calls();
  EXPECT_EQ(std::count_if(calls.begin(), calls.end(),
                          [](const std::string& c) { return c.rfind("StreamSynchronize", 0) == 0; }),
            0)
      << "a refused call never reaches CUDA";
  ASSERT_TRUE(api->StreamSynchronize(stream).ok());
  EXPECT_EQ(*static_cast<std::int64_t*>(memory), 42);  // the allowed copies ran
  EXPECT_EQ(static_cast<std::int64_t*>(memory)[1], 42);
  ASSERT_TRUE(api->Free(memory).ok());
  ASSERT_TRUE(api->StreamDestroy(stream).ok());
}

}  // namespace
}  // namespace hyper_parallel::shmem::cuda
