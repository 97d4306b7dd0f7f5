#include "runtime/runtime.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "base/log.h"
#include "testing/collectives.h"
#include "testing/fake_backend.h"
#include "testing/eventually.h"

namespace hyper_parallel::shmem {
namespace {

using testing::AllGather;
using testing::Barrier;
using testing::Eventually;

using testing::FakeCall;
using testing::FakeInitOptions;
using testing::FakePanel;

class RuntimeTest : public ::testing::Test {
 protected:
  void TearDown() override {
    panel_->ReleaseQueued();
    if (runtime_.state() == RuntimeState::kReady) {
      for (const AllocationRecord& record : runtime_.Snapshot().live) {
        runtime_.Free(SymmetricView{record.id, Base() + record.offset, record.bytes});
      }
      runtime_.Shutdown();
    }
    log::SetSink(nullptr);
    log::SetLevel(LogLevel::kError);
  }

  // Sends log lines to log_lines_ until TearDown.
  void CaptureLog() {
    log::SetSink([this](std::string_view line) { log_lines_.emplace_back(line); });
  }

  Status Init(std::map<std::string, std::string> env = {{"HYPER_PARALLEL_SHMEM_HEAP_SIZE",
                                                         "1048576"}}) {
    return runtime_.Init(FakeInitOptions(panel_, std::move(env)));
  }
  std::byte* Base() { return static_cast<std::byte*>(const_cast<void*>(runtime_.Snapshot().heap_base)); }

  Allocation MustAllocate(std::uint64_t bytes, std::uint64_t alignment = 64) {
    Allocation allocation;
    Status status = runtime_.Allocate(bytes, alignment, &allocation);
    EXPECT_TRUE(status.ok()) << status.ToString();
    return allocation;
  }
  static SymmetricView View(const Allocation& a) { return SymmetricView{a.id, a.data, a.bytes}; }

  std::shared_ptr<FakePanel> panel_ = std::make_shared<FakePanel>();
  Runtime runtime_;
  std::vector<std::string> log_lines_;
};

TEST_F(RuntimeTest, InitThenShutdownReturnsToUninitialized) {
  EXPECT_EQ(runtime_.state(), RuntimeState::kUninitialized);
  ASSERT_TRUE(Init().ok());
  EXPECT_EQ(runtime_.state(), RuntimeState::kReady);
  const Diagnostics ready = runtime_.Snapshot();
  EXPECT_EQ(ready.rank, 0);
  EXPECT_EQ(ready.size, 1);
  EXPECT_EQ(ready.global_ranks, std::vector<int>{0});
  EXPECT_EQ(ready.backend, "fake");
  EXPECT_EQ(ready.device, "cpu:0");
  EXPECT_EQ(ready.heap.heap_bytes, 1048576u);
  EXPECT_EQ(ready.lifecycle, 1u);
  ASSERT_TRUE(runtime_.Shutdown().ok());
  EXPECT_EQ(runtime_.state(), RuntimeState::kUninitialized);
  EXPECT_EQ(panel_->heaps_created, 1);
  EXPECT_EQ(panel_->heaps_destroyed, 1);
  EXPECT_EQ(panel_->count(FakeCall::kQuiesce), 1);
  // The close descriptor's exchange is the barrier: the bootstrap is not used after init.
  EXPECT_EQ(panel_->count(FakeCall::kBootstrapBarrier), 0);
  ASSERT_EQ(panel_->descriptors.size(), 1u);
  EXPECT_EQ(panel_->descriptors[0].kind_name(), "close");
  EXPECT_EQ(panel_->descriptors[0].sequence, 1u);
}

TEST_F(RuntimeTest, SecondInitIsRejected) {
  ASSERT_TRUE(Init().ok());
  Status again = Init();
  EXPECT_EQ(again.code(), ErrorCode::kInvalidState);
  EXPECT_EQ(again.operation(), "init");
  EXPECT_EQ(runtime_.state(), RuntimeState::kReady);
}

class InitFailureTest : public RuntimeTest, public ::testing::WithParamInterface<FakeCall> {};

TEST_P(InitFailureTest, RollsBackAndCanBeRetried) {
  const FakeCall failing = GetParam();
  panel_->fail_once[failing] = Status::Assertion(ErrorCode::kBackendError, "injected failure");
  Status failed = Init();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.code(), ErrorCode::kBackendError) << failed.ToString();
  EXPECT_EQ(failed.operation(), "init");
  EXPECT_EQ(runtime_.state(), RuntimeState::kUninitialized);
  EXPECT_EQ(panel_->heaps_created, panel_->heaps_destroyed) << "heap leaked by rollback";
  EXPECT_EQ(runtime_.Snapshot().latest_failure.code(), ErrorCode::kBackendError);

  ASSERT_TRUE(Init().ok()) << "retry after rollback must succeed";
  EXPECT_EQ(runtime_.state(), RuntimeState::kReady);
  EXPECT_TRUE(runtime_.Snapshot().latest_failure.ok()) << "a new lifecycle starts clean";
  Allocation a = MustAllocate(128);
  EXPECT_NE(a.data, nullptr);
}

INSTANTIATE_TEST_SUITE_P(EveryInitCall, InitFailureTest,
                         ::testing::Values(FakeCall::kAllGather, FakeCall::kCreateHeap,
                                           FakeCall::kOpenPeers),
                         [](const ::testing::TestParamInfo<FakeCall>& param) {
                           return std::string(testing::FakeCallName(param.param));
                         });

TEST_F(RuntimeTest, BadConfigCreatesNothing) {
  Status status = Init({{"HYPER_PARALLEL_SHMEM_HEAP_SIZE", "12abc"}});
  EXPECT_EQ(status.code(), ErrorCode::kInvalidConfig);
  EXPECT_NE(status.ToString().find("HYPER_PARALLEL_SHMEM_HEAP_SIZE"), std::string::npos);
  EXPECT_EQ(panel_->heaps_created, 0);
  EXPECT_EQ(runtime_.state(), RuntimeState::kUninitialized);
}

TEST_F(RuntimeTest, UnsupportedBackendInThisBuild) {
  InitOptions options = FakeInitOptions(panel_, {{"HYPER_PARALLEL_SHMEM_BACKEND", "cann"}});
  options.backend_factory = nullptr;  // the real factory of this build
  Status status = runtime_.Init(std::move(options));
  EXPECT_EQ(status.code(), ErrorCode::kUnsupportedCapability) << status.ToString();
  EXPECT_EQ(runtime_.state(), RuntimeState::kUninitialized);
}

TEST_F(RuntimeTest, ShutdownRefusedWithLiveAllocations) {
  ASSERT_TRUE(Init().ok());
  Allocation a = MustAllocate(256);
  Status refused = runtime_.Shutdown();
  EXPECT_EQ(refused.code(), ErrorCode::kInvalidState);
  EXPECT_NE(refused.message().find("shutdown refused: live allocations remain"),
            std::string::npos);
  EXPECT_NE(refused.message().find("live_ids=[" + std::to_string(a.id) + "]"),
            std::string::npos)
      << refused.message();
  EXPECT_EQ(runtime_.state(), RuntimeState::kReady);
  ASSERT_TRUE(runtime_.Free(View(a)).ok());
  EXPECT_TRUE(runtime_.Shutdown().ok());
}

TEST_F(RuntimeTest, ShutdownReclaimsLeaksWhenNothingElseIsLive) {
  CaptureLog();
  ASSERT_TRUE(Init().ok());
  Allocation leaked = MustAllocate(128);
  Allocation kept = MustAllocate(64);
  const std::uint64_t lifecycle = runtime_.Snapshot().lifecycle;
  runtime_.ReportOrphan(OrphanReport{leaked.id, lifecycle, leaked.data, 128, 0});
  // One live allocation that is not a leak: refused, nothing reclaimed.
  EXPECT_EQ(runtime_.Shutdown().code(), ErrorCode::kInvalidState);
  EXPECT_EQ(runtime_.Snapshot().live.size(), 2u);
  ASSERT_TRUE(runtime_.Free(View(kept)).ok());
  // Only leaks left: reclaimed after an ERROR line naming them.
  ASSERT_TRUE(runtime_.Shutdown().ok());
  EXPECT_EQ(runtime_.state(), RuntimeState::kUninitialized);
  bool reclaimed_logged = false;
  for (const std::string& line : log_lines_) {
    if (line.find("reclaimed leaked allocations") != std::string::npos &&
        line.find("ids=[" + std::to_string(leaked.id) + "]") != std::string::npos) {
      reclaimed_logged = true;
    }
  }
  EXPECT_TRUE(reclaimed_logged);
}

TEST_F(RuntimeTest, ReleasedAllocationIsRefusedThenReclaimedWithoutAnError) {
  CaptureLog();
  ASSERT_TRUE(Init().ok());
  Allocation released = MustAllocate(256);
  Allocation kept = MustAllocate(64);
  const std::uint64_t lifecycle = runtime_.Snapshot().lifecycle;
  const std::uint64_t before = runtime_.Snapshot().heap.allocated_bytes;
  runtime_.Release(OrphanReport{released.id, lifecycle, released.data, 256, 0});
  // Adopted at the next entry: listed as released (no error), and a use is a use after free.
  const Diagnostics d = runtime_.Snapshot();
  ASSERT_EQ(d.leaks.size(), 1u);
  EXPECT_TRUE(d.leaks[0].released);
  std::vector<std::byte> source(256);
  EXPECT_EQ(runtime_.Put(View(released), source.data(), 0, StreamRef{}).code(),
            ErrorCode::kUseAfterFree);
  EXPECT_TRUE(runtime_.Put(View(kept), source.data(), 0, StreamRef{}).ok());
  // Every PE (here the one) released it: the agreed reclaim gives it back.
  std::vector<AllocationId> reclaimed;
  ASSERT_TRUE(runtime_.ReclaimReleased("test", &reclaimed).ok());
  EXPECT_EQ(reclaimed, std::vector<AllocationId>{released.id});
  EXPECT_LT(runtime_.Snapshot().heap.allocated_bytes, before);
  EXPECT_EQ(runtime_.Snapshot().live.size(), 1u);
  ASSERT_TRUE(runtime_.ReclaimReleased("test", &reclaimed).ok());
  EXPECT_TRUE(reclaimed.empty()) << "nothing is reclaimed twice";
  for (const std::string& line : log_lines_) {
    EXPECT_EQ(line.find("level=ERROR"), std::string::npos) << line;
  }
}

TEST_F(RuntimeTest, ShutdownReclaimsReleasedAllocationsWithoutAnError) {
  CaptureLog();
  ASSERT_TRUE(Init().ok());
  Allocation released = MustAllocate(128);
  runtime_.Release(OrphanReport{released.id, runtime_.Snapshot().lifecycle, released.data, 128, 0});
  ASSERT_TRUE(runtime_.Shutdown().ok());
  EXPECT_EQ(runtime_.state(), RuntimeState::kUninitialized);
  for (const std::string& line : log_lines_) {
    EXPECT_EQ(line.find("reclaimed leaked"), std::string::npos) << line;
  }
}

TEST_F(RuntimeTest, ReinitReadsANewHeapSize) {
  ASSERT_TRUE(Init({{"HYPER_PARALLEL_SHMEM_HEAP_SIZE", "1048576"}}).ok());
  ASSERT_TRUE(runtime_.Shutdown().ok());
  ASSERT_TRUE(Init({{"HYPER_PARALLEL_SHMEM_HEAP_SIZE", "4194304"}}).ok());
  EXPECT_EQ(runtime_.Snapshot().heap.heap_bytes, 4194304u);
  // The backend maps the reductions' workspaces past the heap: one per team slot.
  EXPECT_EQ(panel_->last_heap_bytes,
            4194304u + Config::kDefaultMaxTeams * Config::kDefaultReduceWorkspace);
  EXPECT_EQ(runtime_.Snapshot().lifecycle, 2u);
  Allocation big = MustAllocate(3 << 20);  // would not fit the first heap
  EXPECT_NE(big.data, nullptr);
}

TEST_F(RuntimeTest, FailedNativeShutdownIsTerminal) {
  ASSERT_TRUE(Init().ok());
  panel_->fail_once[FakeCall::kDestroyHeap] =
      Status::Assertion(ErrorCode::kBackendError, "munmap failed");
  Status failed = runtime_.Shutdown();
  EXPECT_EQ(failed.code(), ErrorCode::kBackendError);
  EXPECT_EQ(failed.phase(), "native_shutdown");
  EXPECT_EQ(runtime_.state(), RuntimeState::kFailed);
  // Terminal: every later call, a new Init included, repeats the failure.
  const Status again = Init();
  EXPECT_EQ(again.code(), ErrorCode::kBackendError);
  EXPECT_EQ(again.message(), failed.message());
  EXPECT_EQ(again.operation(), "init");
  Allocation a;
  EXPECT_EQ(runtime_.Allocate(8, 64, &a).code(), ErrorCode::kBackendError);
  EXPECT_EQ(runtime_.Shutdown().code(), ErrorCode::kBackendError);
  EXPECT_EQ(runtime_.Snapshot().terminal_failure.code(), ErrorCode::kBackendError);
}

TEST_F(RuntimeTest, DeviceDriftIsRejectedAtEveryEntry) {
  ASSERT_TRUE(Init().ok());
  Allocation a = MustAllocate(64);
  panel_->device = DeviceId{DeviceType::kCpu, 1};
  Allocation b;
  Status drift = runtime_.Allocate(64, 64, &b);
  EXPECT_EQ(drift.code(), ErrorCode::kDeviceMismatch);
  EXPECT_NE(drift.message().find("device must be cpu:0, but got cpu:1"),
            std::string::npos)
      << drift.message();
  std::vector<std::byte> local(64);
  EXPECT_EQ(runtime_.Put(View(a), local.data(), 0, {}).code(), ErrorCode::kDeviceMismatch);
  EXPECT_EQ(runtime_.Get(local.data(), View(a), 0, {}).code(), ErrorCode::kDeviceMismatch);
  EXPECT_EQ(Barrier(runtime_, {}).code(), ErrorCode::kDeviceMismatch);
  EXPECT_EQ(runtime_.Free(View(a)).code(), ErrorCode::kDeviceMismatch);
  EXPECT_EQ(runtime_.Shutdown().code(), ErrorCode::kDeviceMismatch);
  EXPECT_EQ(runtime_.Snapshot().live.size(), 1u);  // nothing changed
  panel_->device = DeviceId{DeviceType::kCpu, 0};
  EXPECT_TRUE(runtime_.Free(View(a)).ok());
}

TEST_F(RuntimeTest, AllocationIdsIncreaseAcrossLifecycles) {
  ASSERT_TRUE(Init().ok());
  Allocation first = MustAllocate(64);
  ASSERT_TRUE(runtime_.Free(View(first)).ok());
  ASSERT_TRUE(runtime_.Shutdown().ok());
  ASSERT_TRUE(Init().ok());
  Allocation second = MustAllocate(64);
  EXPECT_GT(second.id, first.id);
  // A stale tensor whose address now lies on a live allocation of the new heap is still
  // recognised by its id as belonging to the old lifecycle.
  const SymmetricView stale_view{first.id, second.data, 64};
  std::vector<std::byte> local(64);
  Status stale = runtime_.Put(stale_view, local.data(), 0, {});
  EXPECT_EQ(stale.code(), ErrorCode::kStaleLifecycle) << stale.ToString();
  EXPECT_EQ(runtime_.Free(stale_view).code(), ErrorCode::kStaleLifecycle);
  EXPECT_EQ(runtime_.Snapshot().live.size(), 1u);
}

TEST_F(RuntimeTest, PutGetRoundTripAndValidation) {
  ASSERT_TRUE(Init().ok());
  Allocation a = MustAllocate(64);
  std::vector<std::uint8_t> out(64), in(64);
  for (int i = 0; i < 64; ++i) out[i] = static_cast<std::uint8_t>(i * 3);
  ASSERT_TRUE(runtime_.Put(View(a), out.data(), 0, {}).ok());
  ASSERT_TRUE(runtime_.Get(in.data(), View(a), 0, {}).ok());
  EXPECT_EQ(in, out);

  EXPECT_EQ(runtime_.Put(View(a), out.data(), 1, {}).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(runtime_.Put(View(a), out.data(), -1, {}).code(), ErrorCode::kInvalidArgument);
  SymmetricView past_end{a.id, static_cast<std::byte*>(a.data) + 32, 64};
  EXPECT_EQ(runtime_.Put(past_end, out.data(), 0, {}).code(), ErrorCode::kInvalidArgument);
  SymmetricView foreign{a.id, out.data(), 8};
  Status outside = runtime_.Put(foreign, in.data(), 0, {});
  EXPECT_EQ(outside.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(outside.message().find("symmetric operand must be inside the symmetric heap"),
            std::string::npos);
  EXPECT_EQ(runtime_.Put(View(a), nullptr, 0, {}).code(), ErrorCode::kInvalidArgument);

  const int puts = panel_->count(FakeCall::kPut);
  SymmetricView empty{a.id, a.data, 0};
  EXPECT_TRUE(runtime_.Put(empty, nullptr, 0, {}).ok());  // zero bytes: validated no-op
  EXPECT_TRUE(runtime_.Get(nullptr, empty, 0, {}).ok());
  EXPECT_EQ(panel_->count(FakeCall::kPut), puts);
  EXPECT_EQ(runtime_.Put(empty, nullptr, 5, {}).code(), ErrorCode::kInvalidArgument);
}

TEST_F(RuntimeTest, SignalOperandValidation) {
  ASSERT_TRUE(Init().ok());
  Allocation a = MustAllocate(16);
  auto* base = static_cast<std::byte*>(a.data);
  SymmetricView word32{a.id, base, 4};
  SymmetricView word64{a.id, base + 8, 8};
  EXPECT_TRUE(runtime_.Signal(word32, SignalWidth::k32, 5, 0, SignalOp::kSet, {}).ok());
  EXPECT_TRUE(runtime_.Signal(word32, SignalWidth::k32, 2, 0, SignalOp::kAdd, {}).ok());
  EXPECT_TRUE(runtime_.WaitSignal(word32, SignalWidth::k32, 7, Comparison::kEq, {}).ok());
  EXPECT_TRUE(runtime_.Signal(word64, SignalWidth::k64, 1ll << 40, 0, SignalOp::kSet, {}).ok());
  EXPECT_TRUE(runtime_.WaitSignal(word64, SignalWidth::k64, 1ll << 40, Comparison::kGe, {}).ok());

  Status overflow = runtime_.Signal(word32, SignalWidth::k32, 1ll << 31, 0, SignalOp::kSet, {});
  EXPECT_EQ(overflow.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(overflow.message().find("signal value must be representable as int32"),
            std::string::npos);
  SymmetricView wide{a.id, base, 8};
  EXPECT_EQ(runtime_.Signal(wide, SignalWidth::k32, 1, 0, SignalOp::kSet, {}).code(),
            ErrorCode::kInvalidArgument);
  SymmetricView misaligned{a.id, base + 4, 8};
  EXPECT_EQ(runtime_.Signal(misaligned, SignalWidth::k64, 1, 0, SignalOp::kSet, {}).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(runtime_.Signal(word32, SignalWidth::k32, 1, 3, SignalOp::kSet, {}).code(),
            ErrorCode::kInvalidArgument);
}

TEST_F(RuntimeTest, AllGatherValidation) {
  ASSERT_TRUE(Init().ok());
  Allocation out = MustAllocate(64);
  std::vector<std::uint8_t> in(64, 9);
  ASSERT_TRUE(AllGather(runtime_, View(out), in.data(), 64, {}).ok());
  EXPECT_EQ(static_cast<std::uint8_t*>(out.data)[63], 9);
  Status size = AllGather(runtime_, View(out), in.data(), 32, {});
  EXPECT_EQ(size.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(size.message().find("output byte size must be input byte size * root size (32 * 1)"),
            std::string::npos)
      << size.message();
  Status overlap = AllGather(runtime_, SymmetricView{out.id, out.data, 32},
                             static_cast<std::byte*>(out.data) + 16, 32, {});
  EXPECT_EQ(overlap.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(AllGather(runtime_, View(out), nullptr, 64, {}).code(), ErrorCode::kInvalidArgument);
  // Zero bytes: the call keeps its place (one exchange) and moves nothing.
  const int calls = panel_->count(FakeCall::kLaunchCollective);
  EXPECT_TRUE(AllGather(runtime_, SymmetricView{out.id, out.data, 0}, nullptr, 0, {}).ok());
  EXPECT_EQ(panel_->count(FakeCall::kLaunchCollective), calls + 1);
  ASSERT_TRUE(runtime_.Free(View(out)).ok());
  EXPECT_EQ(AllGather(runtime_, View(out), in.data(), 64, {}).code(), ErrorCode::kUseAfterFree);
}

// A collective the Runtime has never heard of runs through the same path as the build's: its
// checks, its "moves nothing" rule, the fields it declares, its kernel.
class ProbeCollective final : public data_plane::Collective {
 public:
  std::string_view name() const override { return "probe"; }
  Status Check(const data_plane::CollectiveCall& call) const override {
    ++checks;
    if (call.input_bytes % 3 != 0) {
      return Status::Contract(ErrorCode::kInvalidArgument, "probe input bytes", "a multiple of 3",
                              std::to_string(call.input_bytes));
    }
    return Status::Ok();
  }
  unsigned AgreedFields() const override { return data_plane::kAgreeBytes; }
  Status Run(data_plane::KernelApi& api, const data_plane::CollectivePlan& plan) const override {
    ++runs;
    last_sequence = plan.sequence;
    api.PutBlock(plan.group.pe(plan.group.index), plan.output_offset, plan.input,
                 plan.input_bytes);
    return Status::Ok();
  }
  mutable int checks = 0;
  mutable int runs = 0;
  mutable std::uint64_t last_sequence = 0;
};

TEST_F(RuntimeTest, AnyCollectiveRunsThroughTheOnePath) {
  ASSERT_TRUE(Init().ok());
  const ProbeCollective probe;
  Allocation out = MustAllocate(64);
  std::vector<std::uint8_t> in(6, 7);
  const SymmetricView six{out.id, out.data, 6};
  const auto operands = [](SymmetricView output, const void* input, std::uint64_t bytes) {
    CollectiveOperands result;
    result.output = output;
    result.input = input;
    result.input_bytes = bytes;
    return result;
  };
  ASSERT_TRUE(runtime_.RunCollective(probe, operands(six, in.data(), 6), {}).ok());
  EXPECT_EQ(probe.runs, 1);
  EXPECT_EQ(static_cast<std::uint8_t*>(out.data)[5], 7);
  ASSERT_FALSE(panel_->descriptors.empty());
  const CollectiveDescriptor& published = panel_->descriptors.back();
  EXPECT_EQ(published.kind_name(), "probe");
  EXPECT_EQ(published.fields, data_plane::kAgreeBytes);
  EXPECT_EQ(published.bytes, 6u);
  EXPECT_EQ(published.sequence, probe.last_sequence);
  // Its own check refuses, tagged with its name; the call keeps its place with a refusal
  // (docs/architecture.md, "A refused call keeps its place"), and the kernel does not run.
  const std::size_t exchanged = panel_->descriptors.size();
  const Status refused = runtime_.RunCollective(probe, operands(six, in.data(), 5), {});
  EXPECT_EQ(refused.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(refused.operation(), "probe");
  EXPECT_EQ(refused.phase(), "validate");
  ASSERT_EQ(panel_->descriptors.size(), exchanged + 1);
  EXPECT_TRUE(panel_->descriptors.back().refused);
  EXPECT_EQ(panel_->descriptors.back().kind_name(), "probe");
  EXPECT_EQ(probe.runs, 1);
  // Zero bytes: checked, one exchange, no kernel.
  const int checks = probe.checks;
  EXPECT_TRUE(runtime_.RunCollective(probe, operands({out.id, out.data, 0}, nullptr, 0), {})
                  .ok());
  EXPECT_EQ(probe.checks, checks + 1);
  EXPECT_EQ(panel_->descriptors.size(), exchanged + 2);
  EXPECT_EQ(probe.runs, 1);
  // A peer that disagrees in a declared field: COLLECTIVE_MISMATCH, the kernel does not run.
  panel_->exchange_size = 2;
  panel_->tamper_peers = [](std::vector<CollectiveDescriptor>* all) {
    if ((*all)[0].kind_name() == "probe") (*all)[1].bytes = 9;
  };
  const Status mismatch = runtime_.RunCollective(probe, operands(six, in.data(), 6), {});
  EXPECT_EQ(mismatch.code(), ErrorCode::kCollectiveMismatch);
  EXPECT_NE(mismatch.message().find("field=bytes"), std::string::npos) << mismatch.message();
  EXPECT_EQ(probe.runs, 1);
  panel_->tamper_peers = nullptr;
  panel_->exchange_size = 1;
  // The protection chain is the Runtime's, before the collective's own checks.
  ASSERT_TRUE(runtime_.Free(View(out)).ok());
  EXPECT_EQ(runtime_.RunCollective(probe, operands(six, in.data(), 6), {}).code(),
            ErrorCode::kUseAfterFree);
}

TEST_F(RuntimeTest, PutSignalCopiesThenSignals) {
  ASSERT_TRUE(Init().ok());
  Allocation data = MustAllocate(32);
  Allocation sig = MustAllocate(8);
  std::vector<std::uint8_t> payload(32, 5);
  ASSERT_TRUE(runtime_.PutSignal(View(data), payload.data(), View(sig), SignalWidth::k64, 9, 0,
                                 SignalOp::kSet, {})
                  .ok());
  EXPECT_EQ(static_cast<std::uint8_t*>(data.data)[31], 5);
  EXPECT_EQ(*static_cast<std::int64_t*>(sig.data), 9);
  ASSERT_TRUE(runtime_.PutSignal(View(data), payload.data(), View(sig), SignalWidth::k64, 1, 0,
                                 SignalOp::kAdd, {})
                  .ok());
  EXPECT_EQ(*static_cast<std::int64_t*>(sig.data), 10);
  EXPECT_EQ(runtime_.PutSignal(View(data), payload.data(), View(sig), SignalWidth::k64, 1, 1,
                               SignalOp::kSet, {})
                .code(),
            ErrorCode::kInvalidArgument);  // bad PE
  EXPECT_EQ(runtime_.PutSignal(View(data), payload.data(), View(data), SignalWidth::k64, 1, 0,
                               SignalOp::kSet, {})
                .code(),
            ErrorCode::kInvalidArgument);  // the signal must be one word
  EXPECT_EQ(runtime_.PutSignal(View(data), nullptr, View(sig), SignalWidth::k64, 1, 0,
                               SignalOp::kSet, {})
                .code(),
            ErrorCode::kInvalidArgument);
  ASSERT_TRUE(runtime_.Free(View(sig)).ok());
  EXPECT_EQ(runtime_.PutSignal(View(data), payload.data(), View(sig), SignalWidth::k64, 1, 0,
                               SignalOp::kSet, {})
                .code(),
            ErrorCode::kUseAfterFree);
  EXPECT_EQ(static_cast<std::uint8_t*>(data.data)[0], 5);
}

TEST_F(RuntimeTest, FreeRejectsViewsAndDoubleFree) {
  ASSERT_TRUE(Init().ok());
  Allocation a = MustAllocate(256);
  SymmetricView half{a.id, a.data, 128};
  Status view = runtime_.Free(half);
  EXPECT_EQ(view.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(view.operation(), "free");
  ASSERT_TRUE(runtime_.Free(View(a)).ok());
  Status twice = runtime_.Free(View(a));
  EXPECT_EQ(twice.code(), ErrorCode::kDoubleFree);
  EXPECT_EQ(runtime_.Snapshot().latest_failure.code(), ErrorCode::kDoubleFree);
  std::vector<std::byte> local(256);
  EXPECT_EQ(runtime_.Put(View(a), local.data(), 0, {}).code(), ErrorCode::kUseAfterFree);
}

TEST_F(RuntimeTest, OutOfMemoryLeavesStateUnchanged) {
  ASSERT_TRUE(Init().ok());
  Allocation a = MustAllocate(1000);
  const Diagnostics before = runtime_.Snapshot();
  Allocation huge;
  Status oom = runtime_.Allocate(2 << 20, 64, &huge);
  EXPECT_EQ(oom.code(), ErrorCode::kOutOfMemory);
  EXPECT_EQ(oom.operation(), "empty");
  const Diagnostics after = runtime_.Snapshot();
  EXPECT_EQ(after.heap, before.heap);
  EXPECT_EQ(after.live, before.live);
  (void)a;
}

TEST_F(RuntimeTest, EmptyOfZeroBytesIsARealAllocation) {
  ASSERT_TRUE(Init().ok());
  Allocation a = MustAllocate(0);
  Allocation b = MustAllocate(0);
  EXPECT_NE(a.data, b.data);
  EXPECT_NE(a.id, b.id);
  EXPECT_TRUE(runtime_.Free(View(a)).ok());
  EXPECT_TRUE(runtime_.Free(View(b)).ok());
}

TEST_F(RuntimeTest, OrphanIsLoggedAtOnceAndEntersTheLeakTable) {
  CaptureLog();
  ASSERT_TRUE(Init().ok());
  Allocation a = MustAllocate(96);
  const std::vector<std::string>& lines = log_lines_;
  const std::uint64_t lifecycle = runtime_.Snapshot().lifecycle;
  runtime_.ReportOrphan(OrphanReport{a.id, lifecycle, a.data, 96, 0});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find("level=ERROR"), std::string::npos);
  EXPECT_NE(lines[0].find("id=" + std::to_string(a.id)), std::string::npos);
  EXPECT_NE(lines[0].find("base=" + Hex(a.data)), std::string::npos);
  EXPECT_NE(lines[0].find("bytes=96"), std::string::npos);
  EXPECT_NE(lines[0].find("rank=0"), std::string::npos);
  const Diagnostics d = runtime_.Snapshot();
  ASSERT_EQ(d.leaks.size(), 1u);
  EXPECT_EQ(d.leaks[0].id, a.id);
}

TEST_F(RuntimeTest, DebugLogAtLevelZeroRecordsEmptyAndFree) {
  CaptureLog();
  ASSERT_TRUE(Init({{"HYPER_PARALLEL_SHMEM_LOG_LEVEL", "0"}}).ok());
  const std::vector<std::string>& lines = log_lines_;
  Allocation a = MustAllocate(40);
  ASSERT_TRUE(runtime_.Free(View(a)).ok());
  bool empty_seen = false, free_seen = false;
  for (const std::string& line : lines) {
    if (line.find("op=Empty") != std::string::npos && line.find(Hex(a.data)) != std::string::npos &&
        line.find("bytes=40") != std::string::npos) {
      empty_seen = true;
    }
    if (line.find("op=Free") != std::string::npos && line.find(Hex(a.data)) != std::string::npos) {
      free_seen = true;
    }
  }
  EXPECT_TRUE(empty_seen);
  EXPECT_TRUE(free_seen);
}

TEST_F(RuntimeTest, EntriesBeforeInitAreInvalidState) {
  Allocation a;
  Status status = runtime_.Allocate(8, 64, &a);
  EXPECT_EQ(status.code(), ErrorCode::kInvalidState);
  EXPECT_NE(status.message().find("runtime is not initialised"), std::string::npos);
  EXPECT_EQ(Barrier(runtime_, {}).code(), ErrorCode::kInvalidState);
  EXPECT_EQ(runtime_.Shutdown().code(), ErrorCode::kInvalidState);
}

TEST_F(RuntimeTest, GlobalRanksMustBeIncreasing) {
  InitOptions options = FakeInitOptions(panel_);
  options.global_ranks = {3};
  EXPECT_TRUE(runtime_.Init(std::move(options)).ok());
  EXPECT_EQ(runtime_.Snapshot().global_ranks, std::vector<int>{3});
  ASSERT_TRUE(runtime_.Shutdown().ok());
  InitOptions wrong = FakeInitOptions(panel_);
  wrong.global_ranks = {0, 1};  // two ranks for a one-PE world
  EXPECT_EQ(runtime_.Init(std::move(wrong)).code(), ErrorCode::kInvalidArgument);
}

// ---- threads, collective numbering and the terminal state ---------------------------------

using namespace std::chrono_literals;

TEST_F(RuntimeTest, AnotherThreadReleasesABlockedWaitAndSnapshotAnswersMeanwhile) {
  panel_->blocking_waits = true;
  ASSERT_TRUE(Init({{"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC", "30"}}).ok());
  Allocation sig = MustAllocate(8);
  std::memset(sig.data, 0, 8);
  std::atomic<bool> done{false};
  Status waited;
  std::thread waiter([&] {
    waited = runtime_.WaitSignal(View(sig), SignalWidth::k64, 1, Comparison::kEq, {});
    done = true;
  });
  // The waiter holds no lock while it waits: a snapshot answers and sees the call in flight.
  ASSERT_TRUE(Eventually([&] { return runtime_.Snapshot().calls_in_flight == 1; }));
  EXPECT_FALSE(done.load());
  ASSERT_TRUE(runtime_.Signal(View(sig), SignalWidth::k64, 1, 0, SignalOp::kSet, {}).ok());
  waiter.join();
  EXPECT_TRUE(waited.ok()) << waited.ToString();
  EXPECT_EQ(runtime_.Snapshot().calls_in_flight, 0);
}

TEST_F(RuntimeTest, EveryCollectiveTakesTheNextNumberRefusedOnesToo) {
  ASSERT_TRUE(Init().ok());
  Allocation a = MustAllocate(64);                                     // #1
  ASSERT_TRUE(Barrier(runtime_, {}).ok());                              // #2
  std::vector<std::byte> in(64);
  ASSERT_TRUE(AllGather(runtime_, View(a), in.data(), 64, {}, nullptr, "uint8").ok());  // #3
  // Refused here, each in its place (docs/architecture.md, "A refused call keeps its place").
  Allocation rejected;
  EXPECT_EQ(runtime_.Allocate(64, 3, &rejected).code(), ErrorCode::kInvalidArgument);     // #4
  EXPECT_EQ(runtime_.Allocate(1ull << 30, 64, &rejected).code(), ErrorCode::kOutOfMemory);  // #5
  EXPECT_EQ(AllGather(runtime_, View(a), in.data(), 32, {}).code(),
            ErrorCode::kInvalidArgument);                                                  // #6
  EXPECT_TRUE(AllGather(runtime_, SymmetricView{a.id, a.data, 0}, nullptr, 0, {}).ok());  // #7
  ASSERT_TRUE(runtime_.Free(View(a)).ok());                                                // #8
  EXPECT_EQ(runtime_.Free(View(a)).code(), ErrorCode::kDoubleFree);                       // #9
  const std::vector<CollectiveDescriptor> d = panel_->descriptors;
  ASSERT_EQ(d.size(), 9u);
  EXPECT_EQ(d[0].Describe(), "empty #1 bytes=64 alignment=64 offset=0x0");
  EXPECT_EQ(d[1].Describe(), "barrier #2");
  EXPECT_EQ(d[2].Describe(), "all_gather #3 bytes=64 dtype=uint8 offset=0x0");
  EXPECT_EQ(d[3].Describe().rfind("empty #4 refused (INVALID_ARGUMENT: ", 0), 0u) << d[3].Describe();
  EXPECT_EQ(d[4].Describe().rfind("empty #5 refused (OUT_OF_MEMORY: ", 0), 0u) << d[4].Describe();
  EXPECT_EQ(d[5].Describe().rfind("all_gather #6 refused (INVALID_ARGUMENT: ", 0), 0u);
  EXPECT_EQ(d[6].Describe(), "all_gather #7 bytes=0 offset=0x0");
  EXPECT_EQ(d[7].Describe(), "free #8 bytes=64 offset=0x0");
  EXPECT_EQ(d[8].Describe().rfind("free #9 refused (DOUBLE_FREE: ", 0), 0u) << d[8].Describe();
  EXPECT_EQ(runtime_.Snapshot().collective_sequence, 9u);
}

TEST_F(RuntimeTest, AMismatchChangesNothingAndKeepsTheSequenceInStep) {
  panel_->exchange_size = 2;
  panel_->tamper_peers = [](std::vector<CollectiveDescriptor>* all) {
    if ((*all)[0].kind_name() == "empty" && (*all)[0].sequence == 1) {
      (*all)[1].bytes = 128;  // the peer asked for another size
    }
  };
  ASSERT_TRUE(Init().ok());
  Allocation a;
  const Status mismatch = runtime_.Allocate(64, 64, &a);
  EXPECT_EQ(mismatch.code(), ErrorCode::kCollectiveMismatch);
  EXPECT_NE(mismatch.message().find("sequence=1, field=bytes, calls=pe 0: empty #1 bytes=64 "
                                    "alignment=64 offset=0x0; pe 1: empty #1 bytes=128"),
            std::string::npos)
      << mismatch.message();
  EXPECT_TRUE(runtime_.Snapshot().live.empty());
  EXPECT_EQ(runtime_.Snapshot().heap.allocated_bytes, 0u);
  Allocation b = MustAllocate(64);  // #2 matches again
  EXPECT_EQ(b.data, Base()) << "the block the mismatch had placed was never committed";
  EXPECT_EQ(panel_->descriptors.back().sequence, 2u);
}

TEST_F(RuntimeTest, CollectivesOnTwoStreamsAtOnceAreRejected) {
  ASSERT_TRUE(Init().ok());
  int stream_a = 0, stream_b = 0;
  const StreamRef a{&stream_a}, b{&stream_b};
  ASSERT_TRUE(Barrier(runtime_, a).ok());  // queued on a: in flight until released
  ASSERT_TRUE(Barrier(runtime_, a).ok());  // the same stream may queue more
  EXPECT_EQ(runtime_.Snapshot().collectives_in_flight, 2);
  const Status other = Barrier(runtime_, b);
  EXPECT_EQ(other.code(), ErrorCode::kInvalidState);
  EXPECT_NE(other.message().find("a collective of this PE is already in flight on another "
                                 "stream"),
            std::string::npos)
      << other.message();
  EXPECT_NE(other.message().find("in_flight=2, latest_sequence=2"), std::string::npos)
      << other.message();
  EXPECT_EQ(Barrier(runtime_, {}).code(), ErrorCode::kInvalidState) << "the caller's stream too";
  EXPECT_EQ(runtime_.Snapshot().collective_sequence, 2u) << "rejections take no number";
  panel_->ReleaseQueued();  // a's work ran
  EXPECT_EQ(runtime_.Snapshot().collectives_in_flight, 0);
  EXPECT_TRUE(Barrier(runtime_, b).ok());
  panel_->ReleaseQueued();
  EXPECT_TRUE(Barrier(runtime_, {}).ok());
  EXPECT_EQ(panel_->descriptors.back().sequence, 4u);
}

TEST_F(RuntimeTest, EmptyWaitsForCollectivesQueuedOnAStream) {
  ASSERT_TRUE(Init({{"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC", "30"}}).ok());
  int stream = 0;
  ASSERT_TRUE(Barrier(runtime_, StreamRef{&stream}).ok());
  std::thread releaser([&] {
    // Released only once the allocation is seen waiting for it.
    Eventually([&] { return !runtime_.Snapshot().blocking.empty(); });
    const std::vector<BlockingOp> blocked = runtime_.Snapshot().blocking;
    EXPECT_EQ(blocked.size(), 1u);
    if (!blocked.empty()) {
      EXPECT_EQ(blocked[0].operation, "empty");
      EXPECT_NE(blocked[0].waiting_for.find("collectives queued on fake stream"),
                std::string::npos)
          << blocked[0].waiting_for;
    }
    panel_->ReleaseQueued();
  });
  EXPECT_NE(MustAllocate(64).data, nullptr);
  releaser.join();
  EXPECT_EQ(panel_->descriptors.back().Describe(), "empty #2 bytes=64 alignment=64 offset=0x0");
  EXPECT_EQ(runtime_.Snapshot().collectives_in_flight, 0);
}

TEST_F(RuntimeTest, ATerminalFailureRepeatsAtEveryCallAndShutdownReleasesLocally) {
  ASSERT_TRUE(Init().ok());
  Allocation a = MustAllocate(64);
  panel_->SetHealth(Status::Assertion(ErrorCode::kPeerLost, "a peer PE exited while this PE "
                                      "depends on it", {{"pe", "1"}, {"pid", "4242"}}));
  std::vector<std::byte> buffer(64);
  const Status put = runtime_.Put(View(a), buffer.data(), 0, {});
  EXPECT_EQ(put.code(), ErrorCode::kPeerLost);
  EXPECT_EQ(put.operation(), "put");
  EXPECT_NE(put.message().find("pe=1, pid=4242"), std::string::npos);
  EXPECT_EQ(runtime_.state(), RuntimeState::kFailed);
  const Diagnostics d = runtime_.Snapshot();
  EXPECT_EQ(d.terminal_failure.code(), ErrorCode::kPeerLost);
  EXPECT_EQ(d.live.size(), 1u) << "nothing is released before close";
  EXPECT_EQ(Barrier(runtime_, {}).code(), ErrorCode::kPeerLost);
  const Status closed = runtime_.Shutdown();
  EXPECT_EQ(closed.code(), ErrorCode::kPeerLost);
  EXPECT_EQ(closed.operation(), "shutdown");
  EXPECT_EQ(panel_->heaps_destroyed, 1) << "close released this process's heap";
  EXPECT_EQ(panel_->count(FakeCall::kExchange), 1) << "nothing collective after the failure";
  EXPECT_EQ(runtime_.Shutdown().code(), ErrorCode::kPeerLost) << "close stays an error";
  EXPECT_EQ(Init().code(), ErrorCode::kPeerLost) << "the process must restart";
}

TEST_F(RuntimeTest, ShutdownIsRefusedWhileAnotherThreadHasACallInFlight) {
  panel_->blocking_waits = true;
  ASSERT_TRUE(Init({{"HYPER_PARALLEL_SHMEM_TIMEOUT_SEC", "30"}}).ok());
  Allocation sig = MustAllocate(8);
  std::memset(sig.data, 0, 8);
  Status waited;
  std::thread waiter([&] {
    waited = runtime_.WaitSignal(View(sig), SignalWidth::k64, 1, Comparison::kEq, {});
  });
  ASSERT_TRUE(Eventually([&] { return runtime_.Snapshot().calls_in_flight == 1; }));
  const Status refused = runtime_.Shutdown();
  EXPECT_EQ(refused.code(), ErrorCode::kInvalidState);
  EXPECT_NE(refused.message().find("shutdown refused: PEs still had calls in flight"),
            std::string::npos)
      << refused.message();
  EXPECT_EQ(runtime_.state(), RuntimeState::kReady) << "a refused close changes nothing";
  ASSERT_TRUE(runtime_.Signal(View(sig), SignalWidth::k64, 1, 0, SignalOp::kSet, {}).ok());
  waiter.join();
  EXPECT_TRUE(waited.ok());
  ASSERT_TRUE(runtime_.Free(View(sig)).ok());
  EXPECT_TRUE(runtime_.Shutdown().ok());
}

TEST_F(RuntimeTest, LeaksAreReclaimedOnlyWhenTheCloseExchangeSucceeded) {
  ASSERT_TRUE(Init().ok());
  const Allocation a = MustAllocate(64);
  runtime_.ReportOrphan(OrphanReport{a.id, a.lifecycle, a.data, a.bytes, 0});
  panel_->fail_once[FakeCall::kExchange] =
      Status::Assertion(ErrorCode::kBackendError, "exchange failed");
  EXPECT_EQ(runtime_.Shutdown().code(), ErrorCode::kBackendError);
  EXPECT_EQ(runtime_.state(), RuntimeState::kReady);
  EXPECT_EQ(runtime_.Snapshot().leaks.size(), 1u) << "the leak is still there: nothing reclaimed";
  EXPECT_TRUE(runtime_.Shutdown().ok());
}

TEST_F(RuntimeTest, HostTensorsOverADeviceHeapAreRefusedNamingTheDevice) {
  ASSERT_TRUE(Init().ok());
  ASSERT_TRUE(runtime_.RequireHostAddressableHeap("empty").ok());
  panel_->host_addressable = false;
  const Status refused = runtime_.RequireHostAddressableHeap("empty");
  EXPECT_EQ(refused.code(), ErrorCode::kUnsupportedCapability) << refused.ToString();
  EXPECT_EQ(refused.operation(), "empty");
  EXPECT_NE(refused.message().find("device=cpu:0"), std::string::npos) << refused.message();
  EXPECT_TRUE(runtime_.Snapshot().live.empty()) << "nothing was allocated";
  panel_->host_addressable = true;
  EXPECT_TRUE(runtime_.Shutdown().ok());
}

}  // namespace
}  // namespace hyper_parallel::shmem
