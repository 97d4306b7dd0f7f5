// The real CUDA runtime behind CudaApi. On a machine without a usable GPU (or in a build without
// CUDA) MakeCudaRuntimeApi must say why; with one, every call is driven on the device (the copy
// kernel over device, pinned and pageable memory; IPC-opened peers are the Runtime test's).
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cuda/copy_unit.h"
#include "backends/cuda/cuda_api.h"
#include "backends/cuda/device_probe.h"
#include "backends/cuda/write_value.h"
#include "testing/fake_cuda/odd_blocks.h"
#include "testing/fake_cuda/require_cuda.h"

namespace hyper_parallel::shmem::cuda {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// What the runtime can answer when asked for devices, and what each means: only "nothing
// here" is UNSUPPORTED_CAPABILITY (auto falls back); a driver or device that is present but
// unusable is BACKEND_ERROR, saying what to fix.
TEST(JudgeDeviceProbe, OnlyNothingHereIsUnsupported) {
  struct Case {
    int driver;
    std::string error;
    int count;
    ErrorCode code;
    std::string says;
  };
  const Case cases[] = {
      {12040, "cudaSuccess", 1, ErrorCode::kOk, ""},
      {12040, "cudaSuccess", 0, ErrorCode::kUnsupportedCapability, "devices=0"},
      {0, "cudaErrorInsufficientDriver", 0, ErrorCode::kUnsupportedCapability,
       "driver=none installed"},
      {12040, "cudaErrorNoDevice", 0, ErrorCode::kUnsupportedCapability,
       "error=cudaErrorNoDevice"},
      {12040, "cudaErrorInsufficientDriver", 0, ErrorCode::kBackendError,
       "the CUDA driver is older than the CUDA runtime this build links"},
      {12040, "cudaErrorDevicesUnavailable", 0, ErrorCode::kBackendError, "EXCLUSIVE_PROCESS"},
      {12040, "cudaErrorInitializationError", 0, ErrorCode::kBackendError,
       "before this process was forked"},
      {12040, "cudaErrorSystemDriverMismatch", 0, ErrorCode::kBackendError,
       "a CUDA driver is present but the runtime cannot use it"},
  };
  for (const Case& c : cases) {
    DeviceProbe probe;
    probe.driver_version = c.driver;
    probe.runtime_version = 13000;
    probe.count_error = c.error;
    probe.count_message = "as the runtime words it";
    probe.count = c.count;
    const Status status = JudgeDeviceProbe(probe);
    EXPECT_EQ(status.code(), c.code) << c.error << ": " << status.ToString();
    EXPECT_TRUE(Contains(status.message(), c.says)) << status.message();
    if (!status.ok() && c.count == 0 && c.error != "cudaSuccess") {
      EXPECT_TRUE(Contains(status.message(), "call=cudaGetDeviceCount, error=" + c.error))
          << status.message();
    }
  }
  DeviceProbe old_driver;
  old_driver.driver_version = 12040;
  old_driver.runtime_version = 13000;
  old_driver.count_error = "cudaErrorInsufficientDriver";
  EXPECT_TRUE(Contains(JudgeDeviceProbe(old_driver).message(), "driver=12.4, runtime=13.0"));
}

// The copy kernel's word: the widest in which both addresses are equally aligned. bf16 rows of
// an odd element count (addresses differing by 2 modulo 4) move in 2-byte words, not bytes.
TEST(CopyUnitBytes, TheWidestWordBothAddressesShare) {
  constexpr std::uintptr_t kBase = 0x7f0000000000;
  EXPECT_EQ(CopyUnitBytes(kBase, kBase + 4096), 16u);
  EXPECT_EQ(CopyUnitBytes(kBase + 3, kBase + 4096 + 3), 16u);  // equally misaligned
  EXPECT_EQ(CopyUnitBytes(kBase, kBase + 8), 8u);
  EXPECT_EQ(CopyUnitBytes(kBase, kBase + 12), 4u);
  // bf16: a row of 7 elements (14 bytes) after the first.
  EXPECT_EQ(CopyUnitBytes(kBase, kBase + 14), 2u);
  EXPECT_EQ(CopyUnitBytes(kBase + 2, kBase + 4096), 2u);
  EXPECT_EQ(CopyUnitBytes(kBase, kBase + 1), 1u);
  EXPECT_EQ(CopyUnitBytes(kBase + 5, kBase + 4096 + 2), 1u);
  static_assert(CopyUnitBytes(0, 6) == 2, "usable where the kernel uses it, at compile time too");
}

// Every refusal of the driver's stream write falls back to the store kernel, not only
// CUDA_ERROR_NOT_SUPPORTED; the write fails only when the kernel fails too.
TEST(WriteValueWithFallback, AnyRefusalOfTheDriverFallsBackToTheKernel) {
  for (const std::string refusal :
       {"CUDA_ERROR_NOT_SUPPORTED", "CUDA_ERROR_INVALID_VALUE", "CUDA_ERROR_INVALID_CONTEXT",
        "CUDA_ERROR_INVALID_HANDLE"}) {
    int kernels = 0;
    const Status written = WriteValueWithFallback(
        true, [&] { return refusal; }, [&] { ++kernels; return Status::Ok(); });
    EXPECT_TRUE(written.ok()) << refusal << ": " << written.ToString();
    EXPECT_EQ(kernels, 1) << refusal;
  }
  // The driver wrote it: no kernel. No driver entry point: the kernel, without asking.
  int kernels = 0;
  int asked = 0;
  EXPECT_TRUE(WriteValueWithFallback(
                  true, [&] { ++asked; return std::string(); },
                  [&] { ++kernels; return Status::Ok(); })
                  .ok());
  EXPECT_EQ(kernels, 0);
  EXPECT_TRUE(WriteValueWithFallback(
                  false, [&] { ++asked; return std::string("unused"); },
                  [&] { ++kernels; return Status::Ok(); })
                  .ok());
  EXPECT_EQ(asked, 1);
  EXPECT_EQ(kernels, 1);
  // Both refuse: an error naming both.
  const Status failed = WriteValueWithFallback(
      true, [] { return std::string("CUDA call failed: error=CUDA_ERROR_INVALID_CONTEXT"); },
      [] {
        return Status::Assertion(ErrorCode::kBackendError, "CUDA call failed",
                                 {{"call", "cudaLaunchKernelEx(WriteValue64)"}});
      });
  EXPECT_EQ(failed.code(), ErrorCode::kBackendError);
  EXPECT_TRUE(
      Contains(failed.message(), "driver=CUDA call failed: error=CUDA_ERROR_INVALID_CONTEXT"))
      << failed.message();
  EXPECT_TRUE(Contains(failed.message(), "kernel=CUDA call failed: call=cudaLaunchKernelEx"))
      << failed.message();
  // No driver and a failing kernel: the kernel's own error.
  const Status kernel_only = WriteValueWithFallback(
      false, [] { return std::string(); },
      [] { return Status::Assertion(ErrorCode::kBackendError, "CUDA call failed"); });
  EXPECT_EQ(kernel_only.message(), "CUDA call failed");
}

TEST(MakeCudaRuntimeApi, AnswersTheRuntimeOrSaysWhyNot) {
  std::unique_ptr<CudaApi> api;
  const Status status = MakeCudaRuntimeApi(&api);
  if (testing::CudaRequired()) {
    ASSERT_TRUE(status.ok()) << status.ToString();
  }
  if (status.ok()) {
    ASSERT_NE(api, nullptr);
    EXPECT_EQ(api->name(), "cuda");
    return;
  }
  EXPECT_EQ(status.code(), ErrorCode::kUnsupportedCapability) << status.ToString();
  EXPECT_EQ(api, nullptr);
#if defined(HPS_HAVE_CUDA)
  EXPECT_TRUE(Contains(status.message(), "call=cudaGetDeviceCount")) << status.message();
  // Either the CUDA error the runtime named, or a runtime that counted no device.
  EXPECT_TRUE(Contains(status.message(), "error=cudaError") ||
              Contains(status.message(), "devices=0"))
      << status.message();
#else
  EXPECT_TRUE(Contains(status.message(), "this build has no CUDA toolkit")) << status.message();
#endif
}

// The tests below need a GPU; they are skipped, saying so, where MakeCudaRuntimeApi says no
// (failed where HPS_TEST_REQUIRE_CUDA=1).
class CudaRuntimeApiOnDevice : public ::testing::Test {
 protected:
  void SetUp() override {
    const Status status = MakeCudaRuntimeApi(&api_);
    if (!status.ok()) HPS_SKIP_UNLESS_CUDA_REQUIRED("no usable CUDA device: " + status.message());
    ASSERT_TRUE(api_->SetDevice(0).ok());
    ASSERT_TRUE(api_->StreamCreate(&stream_).ok());
  }
  void TearDown() override {
    if (stream_ != nullptr) {
      EXPECT_TRUE(api_->StreamDestroy(stream_).ok());
    }
  }

  // A device word set to `value` (freed by the caller).
  void* DeviceWord(std::int64_t value) {
    void* word = nullptr;
    EXPECT_TRUE(api_->Malloc(sizeof value, &word).ok());
    EXPECT_TRUE(api_->MemcpyAsync(word, &value, sizeof value, stream_).ok());
    EXPECT_TRUE(api_->StreamSynchronize(stream_).ok());
    return word;
  }

  std::int64_t Read(const void* word) {
    std::int64_t value = 0;
    EXPECT_TRUE(api_->MemcpyAsync(&value, word, sizeof value, stream_).ok());
    EXPECT_TRUE(api_->StreamSynchronize(stream_).ok());
    return value;
  }

  std::unique_ptr<CudaApi> api_;
  void* stream_ = nullptr;
};

TEST_F(CudaRuntimeApiOnDevice, DeviceAndUuid) {
  int device = -1;
  ASSERT_TRUE(api_->GetDevice(&device).ok());
  EXPECT_EQ(device, 0);
  std::string uuid;
  ASSERT_TRUE(api_->DeviceUuid(0, &uuid).ok());
  ASSERT_EQ(uuid.size(), 32u);
  EXPECT_EQ(uuid.find_first_not_of("0123456789abcdef"), std::string::npos) << uuid;

  const Status bad = api_->SetDevice(1 << 20);
  EXPECT_EQ(bad.code(), ErrorCode::kBackendError);
  EXPECT_TRUE(Contains(bad.message(), "call=cudaSetDevice")) << bad.message();
  EXPECT_TRUE(Contains(bad.message(), "error=cudaErrorInvalidDevice")) << bad.message();
}

TEST_F(CudaRuntimeApiOnDevice, MemoryRoundTripsThroughTheDevice) {
  constexpr std::size_t kBytes = 1 << 20;
  std::vector<unsigned char> in(kBytes), out(kBytes, 0);
  for (std::size_t i = 0; i < kBytes; ++i) in[i] = static_cast<unsigned char>(i * 7 + 3);
  void* device = nullptr;
  void* pinned = nullptr;
  ASSERT_TRUE(api_->Malloc(kBytes, &device).ok());
  ASSERT_TRUE(api_->MallocHost(kBytes, &pinned).ok());
  ASSERT_TRUE(api_->MemcpyAsync(device, in.data(), kBytes, stream_).ok());
  ASSERT_TRUE(api_->MemcpyAsync(pinned, device, kBytes, stream_).ok());
  ASSERT_TRUE(api_->MemcpyAsync(out.data(), pinned, kBytes, stream_).ok());
  ASSERT_TRUE(api_->StreamSynchronize(stream_).ok());
  EXPECT_EQ(in, out);
  EXPECT_TRUE(api_->FreeHost(pinned).ok());
  EXPECT_TRUE(api_->Free(device).ok());
}

// Every memory a copy kernel's block may touch: device memory, mapped pinned host memory, and
// pageable host memory (which CopyBlocksAsync hands to cudaMemcpyAsync instead).
enum class Memory { kDevice, kPinned, kPageable };

TEST_F(CudaRuntimeApiOnDevice, CopyBlocksAsyncCopiesEveryBlockExactly) {
  const struct {
    Memory dst, src;
    const char* name;
  } kinds[] = {{Memory::kDevice, Memory::kDevice, "device <- device"},
               {Memory::kDevice, Memory::kPinned, "device <- pinned"},
               {Memory::kPinned, Memory::kDevice, "pinned <- device"},
               {Memory::kDevice, Memory::kPageable, "device <- pageable"},
               {Memory::kPageable, Memory::kDevice, "pageable <- device"}};
  for (const auto& kind : kinds) {
    for (const int count : {0, 1, 64, 65, 200}) {
      SCOPED_TRACE(std::string(kind.name) + ", " + std::to_string(count) + " blocks");
      std::size_t dst_bytes = 0, src_bytes = 0;
      const std::vector<BlockAt> layout = OddBlocks(count, &dst_bytes, &src_bytes);
      std::vector<unsigned char> dst_pageable, src_pageable;
      const auto allocate = [&](Memory memory, std::size_t bytes,
                                std::vector<unsigned char>* pageable) -> unsigned char* {
        void* ptr = nullptr;
        Status status;
        switch (memory) {
          case Memory::kDevice: status = api_->Malloc(bytes, &ptr); break;
          case Memory::kPinned: status = api_->MallocHost(bytes, &ptr); break;
          case Memory::kPageable:
            pageable->resize(bytes);
            ptr = pageable->data();
            break;
        }
        EXPECT_TRUE(status.ok()) << status.ToString();
        return static_cast<unsigned char*>(ptr);
      };
      const auto release = [&](Memory memory, void* ptr) {
        Status status;
        if (memory == Memory::kDevice) status = api_->Free(ptr);
        if (memory == Memory::kPinned) status = api_->FreeHost(ptr);
        EXPECT_TRUE(status.ok()) << status.ToString();
      };
      unsigned char* dst = allocate(kind.dst, dst_bytes, &dst_pageable);
      unsigned char* src = allocate(kind.src, src_bytes, &src_pageable);
      ASSERT_TRUE(dst != nullptr && src != nullptr);
      std::vector<unsigned char> in(src_bytes), expected(dst_bytes, 0xEE);
      for (std::size_t i = 0; i < src_bytes; ++i) in[i] = static_cast<unsigned char>(i * 7 + 1);
      // Host memory is written and read by the host itself, after the stream ran.
      const auto write = [&](Memory memory, unsigned char* to,
                             const std::vector<unsigned char>& from) {
        if (memory != Memory::kDevice) {
          std::memcpy(to, from.data(), from.size());
          return true;
        }
        return api_->MemcpyAsync(to, from.data(), from.size(), stream_).ok() &&
               api_->StreamSynchronize(stream_).ok();
      };
      ASSERT_TRUE(write(kind.src, src, in));
      ASSERT_TRUE(write(kind.dst, dst, expected));
      std::vector<CopyBlock> blocks;
      for (const BlockAt& at : layout) {
        blocks.push_back({dst + at.dst, src + at.src, at.bytes});
        std::memcpy(expected.data() + at.dst, in.data() + at.src, at.bytes);
      }
      ASSERT_TRUE(api_->CopyBlocksAsync(stream_, blocks.data(), blocks.size()).ok());
      ASSERT_TRUE(api_->StreamSynchronize(stream_).ok());
      std::vector<unsigned char> out(dst_bytes, 0);
      if (kind.dst == Memory::kDevice) {
        ASSERT_TRUE(api_->MemcpyAsync(out.data(), dst, dst_bytes, stream_).ok());
        ASSERT_TRUE(api_->StreamSynchronize(stream_).ok());
      } else {
        std::memcpy(out.data(), dst, dst_bytes);
      }
      std::size_t first_wrong = 0;
      while (first_wrong < dst_bytes && out[first_wrong] == expected[first_wrong]) ++first_wrong;
      EXPECT_EQ(first_wrong, dst_bytes) << "the first byte that differs";
      release(kind.dst, dst);
      release(kind.src, src);
    }
  }
}

TEST_F(CudaRuntimeApiOnDevice, CopyBlocksAndAddAsyncCopiesEveryBlockThenAddsItsSignal) {
  for (const bool pageable_source : {false, true}) {  // the kernel, or copy engine and add
    for (const int count : {0, 1, 64, 65, 200}) {
      SCOPED_TRACE(std::string(pageable_source ? "pageable" : "device") + " source, " +
                   std::to_string(count) + " blocks");
      std::size_t dst_bytes = 0, src_bytes = 0;
      const std::vector<BlockAt> layout = OddBlocks(count, &dst_bytes, &src_bytes);
      std::vector<unsigned char> in(src_bytes), expected(dst_bytes, 0xEE);
      for (std::size_t i = 0; i < src_bytes; ++i) in[i] = static_cast<unsigned char>(i * 7 + 1);
      void* dst = nullptr;
      void* device_src = nullptr;
      ASSERT_TRUE(api_->Malloc(dst_bytes, &dst).ok());
      ASSERT_TRUE(api_->MemcpyAsync(dst, expected.data(), dst_bytes, stream_).ok());
      const unsigned char* src = in.data();
      if (!pageable_source) {
        ASSERT_TRUE(api_->Malloc(src_bytes, &device_src).ok());
        ASSERT_TRUE(api_->MemcpyAsync(device_src, in.data(), src_bytes, stream_).ok());
        src = static_cast<const unsigned char*>(device_src);
      }
      ASSERT_TRUE(api_->StreamSynchronize(stream_).ok());
      void* counters[3] = {DeviceWord(10), DeviceWord(20), DeviceWord(30)};
      std::int64_t sums[3] = {10, 20, 30};
      std::vector<SignalledCopyBlock> blocks;
      for (int i = 0; i < count; ++i) {
        const BlockAt& at = layout[static_cast<std::size_t>(i)];
        blocks.push_back({static_cast<unsigned char*>(dst) + at.dst, src + at.src, at.bytes,
                          counters[CounterOf(i)], AdditionOf(i)});
        std::memcpy(expected.data() + at.dst, in.data() + at.src, at.bytes);
        sums[CounterOf(i)] += AdditionOf(i);
      }
      ASSERT_TRUE(api_->CopyBlocksAndAddAsync(stream_, blocks.data(), blocks.size()).ok());
      ASSERT_TRUE(api_->StreamSynchronize(stream_).ok());
      std::vector<unsigned char> out(dst_bytes, 0);
      ASSERT_TRUE(api_->MemcpyAsync(out.data(), dst, dst_bytes, stream_).ok());
      ASSERT_TRUE(api_->StreamSynchronize(stream_).ok());
      EXPECT_TRUE(out == expected) << "copied bytes";
      for (int c = 0; c < 3; ++c) {
        EXPECT_EQ(Read(counters[c]), sums[c]) << "counter " << c;
        EXPECT_TRUE(api_->Free(counters[c]).ok());
      }
      EXPECT_TRUE(api_->Free(dst).ok());
      if (device_src != nullptr) {
        EXPECT_TRUE(api_->Free(device_src).ok());
      }
    }
  }
}

TEST_F(CudaRuntimeApiOnDevice, CopyBlocksAsyncRefusesNullPointers) {
  void* memory = DeviceWord(0);
  const CopyBlock blocks[] = {{memory, nullptr, 8}};
  const Status refused = api_->CopyBlocksAsync(stream_, blocks, 1);
  EXPECT_EQ(refused.code(), ErrorCode::kBackendError);
  EXPECT_TRUE(Contains(refused.message(), "call=cudaLaunchKernelEx(CopyBlocks)"))
      << refused.message();
  EXPECT_TRUE(Contains(refused.message(), "error=cudaErrorInvalidValue")) << refused.message();
  EXPECT_TRUE(api_->StreamSynchronize(stream_).ok());
  EXPECT_TRUE(api_->Free(memory).ok());
}

TEST_F(CudaRuntimeApiOnDevice, WriteAddAndSatisfiedWaits) {
  void* word = DeviceWord(0);
  void* record = nullptr;
  ASSERT_TRUE(api_->MallocHost(sizeof(WaitReport), &record).ok());
  auto* report = new (record) WaitReport{};

  ASSERT_TRUE(api_->WriteValue64(stream_, word, 40).ok());
  ASSERT_TRUE(api_->AddValue64(stream_, word, 3).ok());
  ASSERT_TRUE(api_->AddValue64(stream_, word, -1).ok());
  EXPECT_EQ(Read(word), 42);

  const std::uint64_t kSecond = 1'000'000'000;
  const struct {
    WaitComparison comparison;
    std::int64_t value;
  } satisfied[] = {{WaitComparison::kEq, 42}, {WaitComparison::kNe, 41},
                   {WaitComparison::kGt, 41}, {WaitComparison::kGe, 42},
                   {WaitComparison::kLt, 43}, {WaitComparison::kLe, 42}};
  for (const auto& wait : satisfied) {
    ASSERT_TRUE(api_->WaitValue64(stream_, word, wait.comparison, wait.value, kSecond, report)
                    .ok());
  }
  ASSERT_TRUE(api_->StreamSynchronize(stream_).ok());
  EXPECT_EQ(report->timed_out, 0u);

  EXPECT_TRUE(api_->FreeHost(record).ok());
  EXPECT_TRUE(api_->Free(word).ok());
}

TEST_F(CudaRuntimeApiOnDevice, AnUnsatisfiedWaitReportsAndTheStreamRunsOn) {
  void* word = DeviceWord(7);
  void* record = nullptr;
  ASSERT_TRUE(api_->MallocHost(sizeof(WaitReport), &record).ok());
  auto* report = new (record) WaitReport{};

  ASSERT_TRUE(
      api_->WaitValue64(stream_, word, WaitComparison::kGe, 8, 1'000'000, report).ok());
  ASSERT_TRUE(api_->WriteValue64(stream_, word, 9).ok());  // runs after the wait gave up
  ASSERT_TRUE(api_->StreamSynchronize(stream_).ok());
  EXPECT_EQ(report->timed_out, 1u);
  EXPECT_EQ(report->observed, 7);
  EXPECT_EQ(Read(word), 9);

  EXPECT_TRUE(api_->FreeHost(record).ok());
  EXPECT_TRUE(api_->Free(word).ok());
}

TEST_F(CudaRuntimeApiOnDevice, IpcHandleOpensInTheExportingProcess) {
  void* memory = DeviceWord(5);
  std::string handle;
  ASSERT_TRUE(api_->IpcExport(memory, &handle).ok());
  EXPECT_EQ(handle.size(), 64u);
  void* opened = nullptr;
  ASSERT_TRUE(api_->IpcOpen(handle, &opened).ok());
  EXPECT_EQ(Read(opened), 5);
  EXPECT_TRUE(api_->IpcClose(opened).ok());
  EXPECT_TRUE(api_->Free(memory).ok());

  const Status wrong = api_->IpcOpen("short", &opened);
  EXPECT_EQ(wrong.code(), ErrorCode::kInvalidArgument) << wrong.message();
}

}  // namespace
}  // namespace hyper_parallel::shmem::cuda
