#include "testing/fake_cuda/fake_cuda_api.h"

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "testing/fake_cuda/odd_blocks.h"

namespace hyper_parallel::shmem::cuda {
namespace {

bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Asserts a BACKEND_ERROR naming `call` and `error`, as the real runtime words it.
void ExpectCudaFailure(const Status& status, const std::string& call, const std::string& error) {
  EXPECT_EQ(status.code(), ErrorCode::kBackendError) << status.ToString();
  EXPECT_TRUE(Contains(status.message(), "CUDA call failed: call=" + call + ",")) << status.message();
  EXPECT_TRUE(Contains(status.message(), "error=" + error)) << status.message();
}

int OpenDescriptors() {
  int count = 0;
  DIR* directory = opendir("/proc/self/fd");
  while (readdir(directory) != nullptr) ++count;
  closedir(directory);
  return count;
}

constexpr std::uint64_t kTenSeconds = 10'000'000'000;

// ---- memory -------------------------------------------------------------------------------

TEST(FakeCudaApi, MemoryRoundTripsThroughMemcpyAsync) {
  FakeCudaApi api;
  void* stream = nullptr;
  ASSERT_TRUE(api.StreamCreate(&stream).ok());
  constexpr std::size_t kBytes = 1 << 20;
  std::vector<unsigned char> in(kBytes), out(kBytes, 0);
  for (std::size_t i = 0; i < kBytes; ++i) in[i] = static_cast<unsigned char>(i * 7 + 3);
  void* device = nullptr;
  void* pinned = nullptr;
  ASSERT_TRUE(api.Malloc(kBytes, &device).ok());
  ASSERT_TRUE(api.MallocHost(kBytes, &pinned).ok());
  ASSERT_TRUE(api.MemcpyAsync(device, in.data(), kBytes, stream).ok());
  ASSERT_TRUE(api.MemcpyAsync(pinned, device, kBytes, stream).ok());
  ASSERT_TRUE(api.MemcpyAsync(out.data(), pinned, kBytes, stream).ok());
  ASSERT_TRUE(api.StreamSynchronize(stream).ok());
  EXPECT_EQ(in, out);
  EXPECT_TRUE(api.FreeHost(pinned).ok());
  EXPECT_TRUE(api.Free(device).ok());
  ASSERT_TRUE(api.StreamDestroy(stream).ok());
}

// The reductions' element-wise steps run the CPU's arithmetic; a pointer the real kernel could
// not use (misaligned for its element type) is refused, as the GPU would fault on it.
TEST(FakeCudaApi, ElementwiseAsyncWidensCombinesAndNarrowsAlignedMemory) {
  FakeCudaApi api;
  void* memory = nullptr;
  ASSERT_TRUE(api.Malloc(256, &memory).ok());
  auto* halves = static_cast<std::uint16_t*>(memory);            // 4 float16 at 0
  auto* wide = reinterpret_cast<float*>(static_cast<char*>(memory) + 64);
  auto* other = reinterpret_cast<float*>(static_cast<char*>(memory) + 128);
  const std::uint16_t one_to_four[] = {0x3c00, 0x4000, 0x4200, 0x4400};  // 1, 2, 3, 4
  std::memcpy(halves, one_to_four, sizeof(one_to_four));
  using Kind = data_plane::ElementwiseStep::Kind;
  using data_plane::ElementType;
  using data_plane::ReduceOp;
  ASSERT_TRUE(api.ElementwiseAsync(nullptr, {Kind::kWiden, ElementType::kFloat16, ReduceOp::kSum,
                                             halves, nullptr, wide, 4}).ok());
  for (int i = 0; i < 4; ++i) other[i] = 0.5f;
  ASSERT_TRUE(api.ElementwiseAsync(nullptr, {Kind::kCombine, ElementType::kFloat16,
                                             ReduceOp::kSum, wide, other, wide, 4}).ok());
  ASSERT_TRUE(api.ElementwiseAsync(nullptr, {Kind::kNarrow, ElementType::kFloat16, ReduceOp::kSum,
                                             wide, nullptr, halves, 4}).ok());
  const std::uint16_t expected[] = {0x3e00, 0x4100, 0x4300, 0x4480};  // 1.5, 2.5, 3.5, 4.5
  EXPECT_EQ(std::memcmp(halves, expected, sizeof(expected)), 0);
  const Status misaligned = api.ElementwiseAsync(
      nullptr, {Kind::kCombine, ElementType::kFloat32, ReduceOp::kSum, wide, other,
                static_cast<char*>(memory) + 2, 4});
  EXPECT_EQ(misaligned.code(), ErrorCode::kBackendError) << misaligned.ToString();
  EXPECT_NE(misaligned.message().find("cudaErrorInvalidValue"), std::string::npos);
  ASSERT_TRUE(api.Free(memory).ok());
}

TEST(FakeCudaApi, FreeingWhatWasNotAllocatedFails) {
  FakeCudaApi api;
  void* device = nullptr;
  ASSERT_TRUE(api.Malloc(64, &device).ok());
  ASSERT_TRUE(api.Free(device).ok());
  ExpectCudaFailure(api.Free(device), "cudaFree", "cudaErrorInvalidValue");
  int local = 0;
  ExpectCudaFailure(api.FreeHost(&local), "cudaFreeHost", "cudaErrorInvalidValue");
  // As in CUDA: null frees nothing, and zero bytes allocate nothing.
  EXPECT_TRUE(api.Free(nullptr).ok());
  EXPECT_TRUE(api.FreeHost(nullptr).ok());
  void* none = &local;
  ASSERT_TRUE(api.Malloc(0, &none).ok());
  EXPECT_EQ(none, nullptr);
}

TEST(FakeCudaApi, CopyBlocksAsyncCopiesEveryBlockExactly) {
  FakeCudaApi api;
  void* stream = nullptr;
  ASSERT_TRUE(api.StreamCreate(&stream).ok());
  for (const int count : {0, 1, 64, 65, 200}) {
    std::size_t dst_bytes = 0, src_bytes = 0;
    const std::vector<BlockAt> layout = OddBlocks(count, &dst_bytes, &src_bytes);
    void* dst = nullptr;
    void* src = nullptr;
    ASSERT_TRUE(api.Malloc(dst_bytes, &dst).ok());
    ASSERT_TRUE(api.Malloc(src_bytes, &src).ok());
    auto* in = static_cast<unsigned char*>(src);
    auto* out = static_cast<unsigned char*>(dst);
    for (std::size_t i = 0; i < src_bytes; ++i) in[i] = static_cast<unsigned char>(i * 7 + 1);
    std::memset(out, 0xEE, dst_bytes);
    std::vector<unsigned char> expected(out, out + dst_bytes);
    std::vector<CopyBlock> blocks;
    for (const BlockAt& at : layout) {
      blocks.push_back({out + at.dst, in + at.src, at.bytes});
      std::memcpy(expected.data() + at.dst, in + at.src, at.bytes);
    }
    ASSERT_TRUE(api.CopyBlocksAsync(stream, blocks.data(), blocks.size()).ok()) << count;
    ASSERT_TRUE(api.StreamSynchronize(stream).ok());
    EXPECT_TRUE(std::equal(expected.begin(), expected.end(), out)) << count << " blocks";
    EXPECT_TRUE(api.Free(dst).ok());
    EXPECT_TRUE(api.Free(src).ok());
  }
  ASSERT_TRUE(api.StreamDestroy(stream).ok());
}

TEST(FakeCudaApi, CopyBlocksAndAddAsyncCopiesEveryBlockThenAddsItsSignal) {
  FakeCudaApi api;
  void* stream = nullptr;
  ASSERT_TRUE(api.StreamCreate(&stream).ok());
  for (const int count : {0, 1, 64, 65, 200}) {
    std::size_t dst_bytes = 0, src_bytes = 0;
    const std::vector<BlockAt> layout = OddBlocks(count, &dst_bytes, &src_bytes);
    std::vector<unsigned char> in(src_bytes), out(dst_bytes, 0xEE);
    for (std::size_t i = 0; i < src_bytes; ++i) in[i] = static_cast<unsigned char>(i * 7 + 1);
    std::vector<unsigned char> expected = out;
    alignas(8) std::int64_t counters[3] = {10, 20, 30};
    std::int64_t sums[3] = {10, 20, 30};
    std::vector<SignalledCopyBlock> blocks;
    for (int i = 0; i < count; ++i) {
      const BlockAt& at = layout[static_cast<std::size_t>(i)];
      blocks.push_back({out.data() + at.dst, in.data() + at.src, at.bytes,
                        &counters[CounterOf(i)], AdditionOf(i)});
      std::memcpy(expected.data() + at.dst, in.data() + at.src, at.bytes);
      sums[CounterOf(i)] += AdditionOf(i);
    }
    ASSERT_TRUE(api.CopyBlocksAndAddAsync(stream, blocks.data(), blocks.size()).ok()) << count;
    EXPECT_EQ(out, expected) << count << " blocks";
    for (int c = 0; c < 3; ++c) EXPECT_EQ(counters[c], sums[c]) << count << " blocks, counter " << c;
  }
  // Refused before anything moves: a misaligned counter, overlapping destinations.
  alignas(8) unsigned char buffer[64] = {};
  const SignalledCopyBlock misaligned[] = {{buffer, buffer + 32, 8, buffer + 4, 1}};
  ExpectCudaFailure(api.CopyBlocksAndAddAsync(stream, misaligned, 1),
                    "cudaLaunchKernelEx(CopyBlocksAndAdd)", "cudaErrorInvalidValue");
  alignas(8) std::int64_t word = 0;
  const SignalledCopyBlock overlapping[] = {{buffer, buffer + 32, 8, &word, 1},
                                            {buffer + 4, buffer + 48, 8, &word, 1}};
  ExpectCudaFailure(api.CopyBlocksAndAddAsync(stream, overlapping, 2),
                    "cudaLaunchKernelEx(CopyBlocksAndAdd)", "cudaErrorInvalidValue");
  EXPECT_EQ(word, 0);
  ASSERT_TRUE(api.StreamDestroy(stream).ok());
}

TEST(FakeCudaApi, CopyBlocksAsyncRefusesBatchesTheKernelCouldNotCopy) {
  FakeCudaApi api;
  unsigned char buffer[256] = {};
  for (int i = 0; i < 256; ++i) buffer[i] = static_cast<unsigned char>(i);
  const auto refused = [&](std::vector<CopyBlock> blocks) {
    ExpectCudaFailure(api.CopyBlocksAsync(nullptr, blocks.data(), blocks.size()),
                      "cudaLaunchKernelEx(CopyBlocks)", "cudaErrorInvalidValue");
  };
  refused({{buffer, nullptr, 4}});
  refused({{nullptr, buffer, 4}});
  refused({{buffer, buffer + 64, 16}, {buffer + 8, buffer + 128, 16}});   // destinations
  refused({{buffer, buffer + 64, 16}, {buffer + 128, buffer + 15, 16}});  // a source
  refused({{buffer, buffer + 8, 16}});                                    // its own source
  ExpectCudaFailure(api.CopyBlocksAsync(nullptr, nullptr, 1), "cudaLaunchKernelEx(CopyBlocks)",
                    "cudaErrorInvalidValue");
  for (int i = 0; i < 256; ++i) ASSERT_EQ(buffer[i], i) << "a refused batch copies nothing";
  // Allowed: sources shared between blocks, a block onto itself, empty blocks anywhere.
  const std::vector<CopyBlock> allowed = {{buffer, buffer + 64, 16},
                                          {buffer + 16, buffer + 64, 16},
                                          {buffer + 200, buffer + 200, 8},
                                          {nullptr, nullptr, 0},
                                          {buffer + 1, buffer + 2, 0}};
  ASSERT_TRUE(api.CopyBlocksAsync(nullptr, allowed.data(), allowed.size()).ok());
  EXPECT_EQ(buffer[0], 64);
  EXPECT_EQ(buffer[31], 79);
  EXPECT_EQ(buffer[32], 32);
  EXPECT_TRUE(api.CopyBlocksAsync(nullptr, nullptr, 0).ok());
}

// ---- IPC ----------------------------------------------------------------------------------

TEST(FakeCudaApi, SelfOpenIsASecondMappingOfTheSamePages) {
  FakeCudaApi api;
  void* memory = nullptr;
  ASSERT_TRUE(api.Malloc(8192, &memory).ok());
  std::string handle;
  // Any address inside the allocation exports all of it.
  ASSERT_TRUE(api.IpcExport(static_cast<char*>(memory) + 4096, &handle).ok());
  EXPECT_EQ(handle.size(), 64u);

  void* opened = nullptr;
  ASSERT_TRUE(api.IpcOpen(handle, &opened).ok());
  EXPECT_NE(opened, memory);
  static_cast<char*>(memory)[8191] = 'x';
  EXPECT_EQ(static_cast<char*>(opened)[8191], 'x');
  static_cast<char*>(opened)[0] = 'y';
  EXPECT_EQ(static_cast<char*>(memory)[0], 'y');

  EXPECT_TRUE(api.IpcClose(opened).ok());
  ExpectCudaFailure(api.IpcClose(opened), "cudaIpcCloseMemHandle", "cudaErrorInvalidValue");
  ExpectCudaFailure(api.IpcClose(memory), "cudaIpcCloseMemHandle", "cudaErrorInvalidValue");
  EXPECT_TRUE(api.Free(memory).ok());
}

TEST(FakeCudaApi, MalformedOrStaleHandlesDoNotOpen) {
  FakeCudaApi api;
  void* opened = nullptr;
  ExpectCudaFailure(api.IpcOpen("short", &opened), "cudaIpcOpenMemHandle",
                    "cudaErrorInvalidResourceHandle");
  ExpectCudaFailure(api.IpcOpen(std::string(64, 'z'), &opened), "cudaIpcOpenMemHandle",
                    "cudaErrorInvalidResourceHandle");

  void* memory = nullptr;
  ASSERT_TRUE(api.Malloc(4096, &memory).ok());
  std::string handle;
  ASSERT_TRUE(api.IpcExport(memory, &handle).ok());
  ASSERT_TRUE(api.Free(memory).ok());  // closes the descriptor the handle names
  ExpectCudaFailure(api.IpcOpen(handle, &opened), "cudaIpcOpenMemHandle",
                    "cudaErrorInvalidResourceHandle");
  EXPECT_EQ(opened, nullptr);
  // A later allocation that gets the same descriptor number is not what the handle named.
  void* later = nullptr;
  ASSERT_TRUE(api.Malloc(4096, &later).ok());
  ExpectCudaFailure(api.IpcOpen(handle, &opened), "cudaIpcOpenMemHandle",
                    "cudaErrorInvalidResourceHandle");
  EXPECT_TRUE(api.Free(later).ok());

  int local = 0;
  ExpectCudaFailure(api.IpcExport(&local, &handle), "cudaIpcGetMemHandle",
                    "cudaErrorInvalidValue");
}

// The lifetime check: memory still open through IpcOpen (here a second mapping in this
// process; another process's mapping holds the same lock) cannot be freed until it is closed.
TEST(FakeCudaApi, FreeRefusesMemoryStillOpenThroughIpc) {
  FakeCudaApi api;
  void* memory = nullptr;
  ASSERT_TRUE(api.Malloc(4096, &memory).ok());
  std::string handle;
  ASSERT_TRUE(api.IpcExport(memory, &handle).ok());
  void* opened = nullptr;
  ASSERT_TRUE(api.IpcOpen(handle, &opened).ok());
  ExpectCudaFailure(api.Free(memory), "cudaFree", "freed while open elsewhere");
  ASSERT_TRUE(api.IpcClose(opened).ok());
  EXPECT_TRUE(api.Free(memory).ok());
}

TEST(FakeCudaApi, IpcHandleOpensInAnotherProcess) {
  FakeCudaApi api;
  void* memory = nullptr;
  ASSERT_TRUE(api.Malloc(4096, &memory).ok());
  auto* words = static_cast<std::int64_t*>(memory);
  words[0] = 1234;  // the child checks it sees this
  words[1] = 0;     // the child adds to this
  std::string handle;
  ASSERT_TRUE(api.IpcExport(memory, &handle).ok());

  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(pipe_fds[1]);
    std::string received(64, '\0');
    std::size_t got = 0;
    while (got < received.size()) {
      const ssize_t n = read(pipe_fds[0], received.data() + got, received.size() - got);
      if (n <= 0) _exit(10);
      got += static_cast<std::size_t>(n);
    }
    FakeCudaApi peer;
    void* opened = nullptr;
    if (!peer.IpcOpen(received, &opened).ok()) _exit(11);
    auto* peer_words = static_cast<std::int64_t*>(opened);
    if (peer_words[0] != 1234) _exit(12);
    if (!peer.AddValue64(nullptr, &peer_words[1], 5).ok()) _exit(13);
    if (!peer.WriteValue64(nullptr, &peer_words[2], 77).ok()) _exit(14);
    if (!peer.IpcClose(opened).ok()) _exit(15);
    _exit(0);
  }
  close(pipe_fds[0]);
  ASSERT_EQ(write(pipe_fds[1], handle.data(), handle.size()),
            static_cast<ssize_t>(handle.size()));
  close(pipe_fds[1]);

  // The parent's stream waits on the child's write.
  WaitReport report;
  ASSERT_TRUE(api.WaitValue64(nullptr, &words[2], WaitComparison::kEq, 77, kTenSeconds, &report)
                  .ok());
  int exit_status = 0;
  ASSERT_EQ(waitpid(child, &exit_status, 0), child);
  ASSERT_TRUE(WIFEXITED(exit_status));
  EXPECT_EQ(WEXITSTATUS(exit_status), 0);
  EXPECT_EQ(report.timed_out, 0u);
  EXPECT_EQ(words[1], 5);
  EXPECT_EQ(words[2], 77);
  EXPECT_TRUE(api.Free(memory).ok());
}

// ---- signals --------------------------------------------------------------------------------

TEST(FakeCudaApi, WriteAndAddChangeTheWord) {
  FakeCudaApi api;
  void* stream = nullptr;
  ASSERT_TRUE(api.StreamCreate(&stream).ok());
  alignas(8) std::int64_t word = 0;
  ASSERT_TRUE(api.WriteValue64(stream, &word, 40).ok());
  EXPECT_EQ(word, 40);
  ASSERT_TRUE(api.AddValue64(stream, &word, 3).ok());
  ASSERT_TRUE(api.AddValue64(stream, &word, -1).ok());
  EXPECT_EQ(word, 42);
  // Wraps like the kernel's unsigned atomicAdd.
  word = std::numeric_limits<std::int64_t>::max();
  ASSERT_TRUE(api.AddValue64(stream, &word, 1).ok());
  EXPECT_EQ(word, std::numeric_limits<std::int64_t>::min());
}

struct WaitCase {
  WaitComparison comparison;
  std::int64_t holds;  // a value the word 42 satisfies
  std::int64_t fails;  // a value it does not
};

constexpr WaitCase kWaitCases[] = {
    {WaitComparison::kEq, 42, 41}, {WaitComparison::kNe, 41, 42}, {WaitComparison::kGt, 41, 42},
    {WaitComparison::kGe, 42, 43}, {WaitComparison::kLt, 43, 42}, {WaitComparison::kLe, 42, 41},
};

TEST(FakeCudaApi, SatisfiedWaitsReturnAndLeaveTheReport) {
  FakeCudaApi api;
  alignas(8) std::int64_t word = 42;
  for (const WaitCase& wait : kWaitCases) {
    WaitReport report;
    // The longest timeout there is: a satisfied wait must not even compute a deadline wrongly.
    ASSERT_TRUE(api.WaitValue64(nullptr, &word, wait.comparison, wait.holds,
                                std::numeric_limits<std::uint64_t>::max(), &report)
                    .ok());
    EXPECT_EQ(report.timed_out, 0u) << static_cast<int>(wait.comparison);
    EXPECT_EQ(report.observed, 0);
  }
}

TEST(FakeCudaApi, AWaitThatTimesOutReportsWhatItSawAndReturnsOk) {
  FakeCudaApi api;
  alignas(8) std::int64_t word = 42;
  for (const WaitCase& wait : kWaitCases) {
    WaitReport report;
    ASSERT_TRUE(
        api.WaitValue64(nullptr, &word, wait.comparison, wait.fails, 2'000'000, &report).ok());
    EXPECT_EQ(report.timed_out, 1u) << static_cast<int>(wait.comparison);
    EXPECT_EQ(report.observed, 42);
  }
  // A zero timeout checks once.
  WaitReport report;
  ASSERT_TRUE(api.WaitValue64(nullptr, &word, WaitComparison::kEq, 0, 0, &report).ok());
  EXPECT_EQ(report.timed_out, 1u);
  EXPECT_EQ(report.observed, 42);
}

TEST(FakeCudaApi, AWaitWakesWhenAnotherThreadWrites) {
  FakeCudaApi api;
  alignas(8) std::int64_t word = 0;
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(api.AddValue64(nullptr, &word, 1).ok());
  });
  WaitReport report;
  ASSERT_TRUE(api.WaitValue64(nullptr, &word, WaitComparison::kGe, 1,
                              std::numeric_limits<std::uint64_t>::max(), &report)
                  .ok());
  writer.join();
  EXPECT_EQ(report.timed_out, 0u);
  EXPECT_EQ(word, 1);
}

TEST(FakeCudaApi, MisalignedWordsAndMissingReportsAreRefused) {
  FakeCudaApi api;
  alignas(8) std::int64_t words[2] = {0, 0};
  void* misaligned = reinterpret_cast<char*>(words) + 4;
  ExpectCudaFailure(api.WriteValue64(nullptr, misaligned, 1), "cuStreamWriteValue64",
                    "cudaErrorInvalidValue");
  ExpectCudaFailure(api.AddValue64(nullptr, misaligned, 1), "cudaLaunchKernelEx(AddValue64)",
                    "cudaErrorInvalidValue");
  WaitReport report;
  ExpectCudaFailure(api.WaitValue64(nullptr, misaligned, WaitComparison::kEq, 0, 0, &report),
                    "cudaLaunchKernelEx(WaitValue64)", "cudaErrorInvalidValue");
  ExpectCudaFailure(api.WaitValue64(nullptr, words, WaitComparison::kEq, 1, 0, nullptr),
                    "cudaLaunchKernelEx(WaitValue64)", "cudaErrorInvalidValue");
  EXPECT_EQ(words[0], 0);
  EXPECT_EQ(words[1], 0);
}

// ---- streams ------------------------------------------------------------------------------

TEST(FakeCudaApi, UnknownStreamsAreRefusedAndRunNothing) {
  FakeCudaApi api;
  void* first = nullptr;
  void* second = nullptr;
  ASSERT_TRUE(api.StreamCreate(&first).ok());
  ASSERT_TRUE(api.StreamCreate(&second).ok());
  EXPECT_NE(first, second);
  EXPECT_TRUE(api.StreamSynchronize(nullptr).ok());  // CUDA's default stream
  ASSERT_TRUE(api.StreamDestroy(first).ok());

  ExpectCudaFailure(api.StreamSynchronize(first), "cudaStreamSynchronize",
                    "cudaErrorInvalidResourceHandle");
  ExpectCudaFailure(api.StreamDestroy(first), "cudaStreamDestroy",
                    "cudaErrorInvalidResourceHandle");
  alignas(8) std::int64_t word = 3;
  const std::int64_t source = 9;
  ExpectCudaFailure(api.MemcpyAsync(&word, &source, sizeof word, first), "cudaMemcpyAsync",
                    "cudaErrorInvalidResourceHandle");
  const CopyBlock block{&word, &source, sizeof word};
  ExpectCudaFailure(api.CopyBlocksAsync(first, &block, 1), "cudaLaunchKernelEx(CopyBlocks)",
                    "cudaErrorInvalidResourceHandle");
  ExpectCudaFailure(api.WriteValue64(first, &word, 9), "cuStreamWriteValue64",
                    "cudaErrorInvalidResourceHandle");
  ExpectCudaFailure(api.AddValue64(first, &word, 9), "cudaLaunchKernelEx(AddValue64)",
                    "cudaErrorInvalidResourceHandle");
  WaitReport report;
  ExpectCudaFailure(api.WaitValue64(first, &word, WaitComparison::kEq, 0, 0, &report),
                    "cudaLaunchKernelEx(WaitValue64)", "cudaErrorInvalidResourceHandle");
  EXPECT_EQ(word, 3);
  EXPECT_EQ(report.timed_out, 0u);
  EXPECT_TRUE(api.StreamSynchronize(second).ok());
}

// ---- devices ------------------------------------------------------------------------------

TEST(FakeCudaApi, DevicesAreRangeCheckedAndPerThread) {
  FakeCudaApi api(2);
  int device = -1;
  ASSERT_TRUE(api.GetDevice(&device).ok());
  EXPECT_EQ(device, 0);
  ASSERT_TRUE(api.SetDevice(1).ok());
  ASSERT_TRUE(api.GetDevice(&device).ok());
  EXPECT_EQ(device, 1);
  ExpectCudaFailure(api.SetDevice(2), "cudaSetDevice", "cudaErrorInvalidDevice");
  ExpectCudaFailure(api.SetDevice(-1), "cudaSetDevice", "cudaErrorInvalidDevice");
  ASSERT_TRUE(api.GetDevice(&device).ok());
  EXPECT_EQ(device, 1);

  // As in CUDA, another thread starts on device 0.
  int other = -1;
  std::thread([&] { EXPECT_TRUE(api.GetDevice(&other).ok()); }).join();
  EXPECT_EQ(other, 0);
}

TEST(FakeCudaApi, UuidsAreFixedPerDeviceIndex) {
  FakeCudaApi api(2);
  FakeCudaApi elsewhere(2);  // another process would build the same
  std::string first, second, again;
  ASSERT_TRUE(api.DeviceUuid(0, &first).ok());
  ASSERT_TRUE(api.DeviceUuid(1, &second).ok());
  ASSERT_TRUE(elsewhere.DeviceUuid(1, &again).ok());
  EXPECT_EQ(first, "facec0da000000000000000000000000");
  EXPECT_EQ(second, "facec0da000000000000000000000001");
  EXPECT_EQ(again, second);
  std::string unchanged = "before";
  ExpectCudaFailure(api.DeviceUuid(2, &unchanged), "cudaGetDeviceProperties",
                    "cudaErrorInvalidDevice");
  EXPECT_EQ(unchanged, "before");
}

TEST(FakeCudaApi, DriftChangesTheCurrentDeviceUnlogged) {
  FakeCudaApi api(2);
  ASSERT_TRUE(api.SetDevice(0).ok());
  api.DriftCurrentDevice(1);
  int device = -1;
  ASSERT_TRUE(api.GetDevice(&device).ok());
  EXPECT_EQ(device, 1);
  EXPECT_EQ(api.calls(), (std::vector<std::string>{"SetDevice device=0", "GetDevice"}));
}

// ---- test hooks ---------------------------------------------------------------------------

TEST(FakeCudaApi, FailNextFailsTheNextCallsOfThatMethodOnly) {
  FakeCudaApi api;
  const Status first = Status::Assertion(ErrorCode::kBackendError, "injected", {{"n", "1"}});
  const Status second = Status::Assertion(ErrorCode::kTimeout, "injected", {{"n", "2"}});
  api.FailNext("Malloc", first);
  api.FailNext("Malloc", second);
  api.FailNext("WaitValue64", first);

  void* memory = nullptr;
  EXPECT_EQ(api.Malloc(64, &memory), first);
  EXPECT_EQ(memory, nullptr);
  EXPECT_EQ(api.Malloc(64, &memory), second);
  EXPECT_EQ(memory, nullptr);
  ASSERT_TRUE(api.Malloc(64, &memory).ok());
  EXPECT_NE(memory, nullptr);

  // An injected wait failure returns at once, before any polling.
  alignas(8) std::int64_t word = 0;
  WaitReport report;
  EXPECT_EQ(api.WaitValue64(nullptr, &word, WaitComparison::kEq, 1, kTenSeconds, &report), first);
  EXPECT_EQ(report.timed_out, 0u);
  EXPECT_TRUE(api.Free(memory).ok());
}

TEST(FakeCudaApi, CallsAreLoggedWithTheirKeyArguments) {
  FakeCudaApi api(2);
  api.FailNext("SetDevice", Status::Assertion(ErrorCode::kBackendError, "injected"));
  EXPECT_FALSE(api.SetDevice(1).ok());
  ASSERT_TRUE(api.SetDevice(1).ok());
  void* memory = nullptr;
  ASSERT_TRUE(api.Malloc(4096, &memory).ok());
  void* stream = nullptr;
  ASSERT_TRUE(api.StreamCreate(&stream).ok());
  ASSERT_TRUE(api.WriteValue64(stream, memory, 7).ok());
  ASSERT_TRUE(api.AddValue64(stream, memory, -2).ok());
  WaitReport report;
  ASSERT_TRUE(api.WaitValue64(stream, memory, WaitComparison::kGe, 5, 1000, &report).ok());
  ASSERT_TRUE(api.MemcpyAsync(memory, memory, 0, stream).ok());
  char* bytes = static_cast<char*>(memory);
  const CopyBlock blocks[] = {{bytes, bytes + 1024, 100}, {bytes + 128, bytes + 2048, 28}};
  ASSERT_TRUE(api.CopyBlocksAsync(stream, blocks, 2).ok());
  ASSERT_TRUE(api.Free(memory).ok());
  EXPECT_EQ(api.calls(), (std::vector<std::string>{
                             "SetDevice device=1",
                             "SetDevice device=1",
                             "Malloc bytes=4096",
                             "StreamCreate",
                             "WriteValue64 value=7",
                             "AddValue64 value=-2",
                             "WaitValue64 comparison=ge value=5 timeout_ns=1000",
                             "MemcpyAsync bytes=0",
                             "CopyBlocksAsync blocks=2 bytes=128",
                             "Free ptr=" + Hex(memory),
                         }));
}

TEST(FakeCudaApi, DestructionReleasesEverythingLeft) {
  const int before = OpenDescriptors();
  {
    FakeCudaApi api;
    void* memory = nullptr;
    void* pinned = nullptr;
    void* opened = nullptr;
    void* stream = nullptr;
    std::string handle;
    ASSERT_TRUE(api.Malloc(1 << 16, &memory).ok());
    ASSERT_TRUE(api.MallocHost(64, &pinned).ok());
    ASSERT_TRUE(api.IpcExport(memory, &handle).ok());
    ASSERT_TRUE(api.IpcOpen(handle, &opened).ok());
    ASSERT_TRUE(api.StreamCreate(&stream).ok());
    // The memfd, and the open mapping's descriptor (which holds its lifetime lock).
    EXPECT_EQ(OpenDescriptors(), before + 2);
  }
  EXPECT_EQ(OpenDescriptors(), before);
}

}  // namespace
}  // namespace hyper_parallel::shmem::cuda
