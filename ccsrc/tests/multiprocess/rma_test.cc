// Put/get/signal/wait/barrier across real PE processes on the host backend.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <numeric>
#include <thread>

#include "backends/host/host_stream.h"
#include "tests/multiprocess/pe_helpers.h"

namespace hyper_parallel::shmem::testing {
namespace {

using namespace std::chrono_literals;

PeLaunch Launch(int size, std::string timeout_sec = "20") {
  return LaunchPes(size, timeout_sec, 64 << 20);
}

class RmaTest : public ::testing::TestWithParam<int> {};

TEST_P(RmaTest, PutGetRing) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    constexpr int kCount = 4096;
    Allocation inbox = MustAllocate(ctx, kCount * sizeof(std::int32_t));
    const int next = (ctx.rank + 1) % ctx.size;
    const int previous = (ctx.rank + ctx.size - 1) % ctx.size;
    std::vector<std::int32_t> mine(kCount);
    for (int i = 0; i < kCount; ++i) mine[i] = ctx.rank * 100000 + i;
    CHECK_PE_OK(ctx, Rt().Put(View(inbox), mine.data(), next, {}));
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    for (int i = 0; i < kCount; ++i) {
      if (As<std::int32_t>(inbox)[i] != previous * 100000 + i) {
        CHECK_PE(ctx, false, "put from PE " + std::to_string(previous) + " wrong at " +
                                 std::to_string(i));
        break;
      }
    }
    // Get the next PE's inbox (which holds this PE's data) back, and a sub-view of it.
    std::vector<std::int32_t> fetched(kCount, -1);
    CHECK_PE_OK(ctx, Rt().Get(fetched.data(), View(inbox), next, {}));
    CHECK_PE(ctx, fetched == mine, "get from the next PE returns what this PE put there");
    std::vector<std::int32_t> part(10, -1);
    CHECK_PE_OK(ctx, Rt().Get(part.data(), Sub(inbox, 100 * sizeof(std::int32_t),
                                                10 * sizeof(std::int32_t)),
                              next, {}));
    for (int i = 0; i < 10; ++i) {
      CHECK_PE(ctx, part[i] == mine[100 + i], "sub-view get at offset 100");
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST_P(RmaTest, SignalSetAddAndEveryComparison) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation words = MustAllocate(ctx, 16);
    std::memset(words.data, 0, 16);
    SymmetricView sig64 = Sub(words, 0, 8);
    SymmetricView sig32 = Sub(words, 8, 4);
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    const int next = (ctx.rank + 1) % ctx.size;
    const int previous = (ctx.rank + ctx.size - 1) % ctx.size;

    // set: the previous PE sets this PE's words; wait blocks until it lands.
    CHECK_PE_OK(ctx, Rt().Signal(sig64, SignalWidth::k64, (1ll << 40) + next, next,
                                 SignalOp::kSet, {}));
    CHECK_PE_OK(ctx, Rt().Signal(sig32, SignalWidth::k32, -1000 - next, next, SignalOp::kSet, {}));
    const std::int64_t v64 = (1ll << 40) + ctx.rank;
    const std::int64_t v32 = -1000 - ctx.rank;
    CHECK_PE_OK(ctx, Rt().WaitSignal(sig64, SignalWidth::k64, v64, Comparison::kEq, {}));
    CHECK_PE_OK(ctx, Rt().WaitSignal(sig32, SignalWidth::k32, v32, Comparison::kEq, {}));
    for (auto [sig, width, v] : {std::tuple{sig64, SignalWidth::k64, v64},
                                 std::tuple{sig32, SignalWidth::k32, v32}}) {
      CHECK_PE_OK(ctx, Rt().WaitSignal(sig, width, v - 1, Comparison::kNe, {}));
      CHECK_PE_OK(ctx, Rt().WaitSignal(sig, width, v - 1, Comparison::kGt, {}));
      CHECK_PE_OK(ctx, Rt().WaitSignal(sig, width, v, Comparison::kGe, {}));
      CHECK_PE_OK(ctx, Rt().WaitSignal(sig, width, v + 1, Comparison::kLt, {}));
      CHECK_PE_OK(ctx, Rt().WaitSignal(sig, width, v, Comparison::kLe, {}));
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));

    // add: every PE adds its rank + 1 to every PE's word (itself included).
    for (int pe = 0; pe < ctx.size; ++pe) {
      CHECK_PE_OK(ctx, Rt().Signal(sig64, SignalWidth::k64, ctx.rank + 1, pe, SignalOp::kAdd, {}));
      CHECK_PE_OK(ctx, Rt().Signal(sig32, SignalWidth::k32, ctx.rank + 1, pe, SignalOp::kAdd, {}));
    }
    const std::int64_t added = static_cast<std::int64_t>(ctx.size) * (ctx.size + 1) / 2;
    CHECK_PE_OK(ctx, Rt().WaitSignal(sig64, SignalWidth::k64, v64 + added, Comparison::kGe, {}));
    CHECK_PE_OK(ctx, Rt().WaitSignal(sig32, SignalWidth::k32, v32 + added, Comparison::kGe, {}));
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    CHECK_PE(ctx, As<std::int64_t>(words)[0] == v64 + added, "64-bit adds summed exactly");
    CHECK_PE(ctx, As<std::int32_t>(words)[2] == v32 + added, "32-bit adds summed exactly");

    // lt / le / ne block until the value moves down.
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    CHECK_PE_OK(ctx, Rt().Signal(sig32, SignalWidth::k32, -5, next, SignalOp::kSet, {}));
    CHECK_PE_OK(ctx, Rt().WaitSignal(sig32, SignalWidth::k32, 0, Comparison::kLt, {}));
    CHECK_PE_OK(ctx, Rt().WaitSignal(sig32, SignalWidth::k32, -5, Comparison::kLe, {}));
    (void)previous;
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST_P(RmaTest, DataBeforeSignal) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    constexpr std::uint64_t kBytes = 1 << 20;
    Allocation data = MustAllocate(ctx, kBytes);
    Allocation flag = MustAllocate(ctx, 8);
    *As<std::int64_t>(flag) = 0;
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    const int next = (ctx.rank + 1) % ctx.size;
    const int previous = (ctx.rank + ctx.size - 1) % ctx.size;
    std::vector<std::uint64_t> payload(kBytes / 8);
    for (int round = 1; round <= 20; ++round) {
      for (std::size_t i = 0; i < payload.size(); ++i) {
        payload[i] = (static_cast<std::uint64_t>(round) << 48) | (ctx.rank << 24) | i;
      }
      if (round % 2 == 0) {
        CHECK_PE_OK(ctx, Rt().Put(View(data), payload.data(), next, {}));
        CHECK_PE_OK(ctx, Rt().Signal(View(flag), SignalWidth::k64, round, next, SignalOp::kSet, {}));
      } else {  // the fused form: one call, the same ordering
        CHECK_PE_OK(ctx, Rt().PutSignal(View(data), payload.data(), View(flag), SignalWidth::k64,
                                        round, next, SignalOp::kSet, {}));
      }
      CHECK_PE_OK(ctx, Rt().WaitSignal(View(flag), SignalWidth::k64, round, Comparison::kGe, {}));
      // The whole message must be visible once the signal is.
      const auto* got = As<std::uint64_t>(data);
      for (std::size_t i = 0; i < payload.size(); i += 4093) {
        const std::uint64_t expected =
            (static_cast<std::uint64_t>(round) << 48) | (previous << 24) | i;
        if (got[i] != expected) {
          CHECK_PE(ctx, false, "stale data after the signal in round " + std::to_string(round));
          break;
        }
      }
      CHECK_PE(ctx, got[payload.size() - 1] ==
                        ((static_cast<std::uint64_t>(round) << 48) | (previous << 24) |
                         (payload.size() - 1)),
               "last word of round " + std::to_string(round));
      CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // the peer may overwrite only after we read
    }
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

// Puts to one PE may land in any order; a fence orders them (docs/scale-out.md, "Transports").
// Each round, every PE puts 32 words to the next PE, fences, then puts a flag word (a plain
// put, no signal): once the flag shows the round, every word must too. Under
// HYPER_PARALLEL_SHMEM_REMOTE_TRANSPORT=reordering the puts before the fence were held and
// sent shuffled, which the transport's counters must show.
TEST_P(RmaTest, FenceOrdersPutsToEachPe) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    constexpr int kWords = 32;
    Allocation words = MustAllocate(ctx, kWords * 8);
    Allocation flag = MustAllocate(ctx, 8);
    *As<std::int64_t>(flag) = 0;
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    const int next = (ctx.rank + 1) % ctx.size;
    for (std::int64_t round = 1; round <= 30; ++round) {
      for (int i = 0; i < kWords; ++i) {
        const std::int64_t value = round * 1000 + i;
        CHECK_PE_OK(ctx, Rt().Put(Sub(words, i * 8, 8), &value, next, {}));
      }
      CHECK_PE_OK(ctx, Rt().Fence({}));
      CHECK_PE_OK(ctx, Rt().Put(View(flag), &round, next, {}));
      CHECK_PE_OK(ctx, Rt().WaitSignal(View(flag), SignalWidth::k64, round, Comparison::kGe, {}));
      for (int i = 0; i < kWords; ++i) {
        if (As<std::int64_t>(words)[i] != round * 1000 + i) {
          CHECK_PE(ctx, false, "word " + std::to_string(i) + " of round " +
                                   std::to_string(round) + " is stale after the fenced flag");
          break;
        }
      }
      CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // the peer writes round+1 only after we read
    }
    const char* transport = std::getenv("HYPER_PARALLEL_SHMEM_REMOTE_TRANSPORT");
    if (transport != nullptr && std::string(transport) == "reordering") {
      std::uint64_t reordered = 0;
      for (const auto& [name, value] : Rt().Snapshot().network.counters) {
        if (name == "reordered") reordered = value;
      }
      CHECK_PE(ctx, reordered > 0, "the reordering transport sent nothing out of order");
    }
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST_P(RmaTest, BarrierMakesEveryEarlierPutVisible) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation slots = MustAllocate(ctx, ctx.size * sizeof(std::int64_t));
    for (int round = 0; round < 50; ++round) {
      const std::int64_t value = round * 1000 + ctx.rank;
      for (int pe = 0; pe < ctx.size; ++pe) {
        CHECK_PE_OK(ctx, Rt().Put(Sub(slots, ctx.rank * 8, 8), &value, pe, {}));
      }
      CHECK_PE_OK(ctx, Barrier(Rt(), {}));
      for (int pe = 0; pe < ctx.size; ++pe) {
        if (As<std::int64_t>(slots)[pe] != round * 1000 + pe) {
          CHECK_PE(ctx, false, "round " + std::to_string(round) + " slot of PE " +
                                   std::to_string(pe));
        }
      }
      CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // nobody writes round+1 before all have read
    }
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST_P(RmaTest, AsyncStreamsOrderWithEvents) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    constexpr std::uint64_t kBytes = 4 << 20;
    Allocation inbox = MustAllocate(ctx, kBytes);
    Allocation flag = MustAllocate(ctx, 8);
    *As<std::int64_t>(flag) = 0;
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    const int next = (ctx.rank + 1) % ctx.size;
    const int previous = (ctx.rank + ctx.size - 1) % ctx.size;
    auto copy_stream = host::HostStream::Create<CallSite::kHostThread>();
    auto signal_stream = host::HostStream::Create<CallSite::kHostThread>();
    std::vector<std::uint8_t> payload(kBytes, static_cast<std::uint8_t>(ctx.rank + 1));

    // Stream A: the big put. Stream B: waits for A through an event, then signals.
    host::HostEvent copied;
    host::SetCurrentStream(copy_stream.get());
    StreamRef a;
    CHECK_PE_OK(ctx, Rt().CurrentStream(&a));
    CHECK_PE(ctx, a.native == copy_stream.get(), "current stream follows SetCurrentStream");
    CHECK_PE_OK(ctx, Rt().Put(View(inbox), payload.data(), next, a));
    copied.Record<CallSite::kHostThread>(copy_stream.get());
    host::SetCurrentStream(nullptr);
    CHECK_PE_OK(ctx, copied.Wait(signal_stream.get(), 20s));
    CHECK_PE_OK(ctx, Rt().Signal(View(flag), SignalWidth::k64, 1, next, SignalOp::kSet,
                                 StreamRef{signal_stream.get()}));
    // The wait itself is queued too; the caller synchronises the stream afterwards.
    CHECK_PE_OK(ctx, Rt().WaitSignal(View(flag), SignalWidth::k64, 1, Comparison::kEq,
                                     StreamRef{signal_stream.get()}));
    CHECK_PE_OK(ctx, signal_stream->Synchronize<CallSite::kHostThread>(20s));
    const auto* got = As<std::uint8_t>(inbox);
    CHECK_PE(ctx, got[0] == previous + 1 && got[kBytes / 2] == previous + 1 &&
                      got[kBytes - 1] == previous + 1,
             "data put on stream A visible after the signal ordered behind it");
    CHECK_PE_OK(ctx, copy_stream->Synchronize<CallSite::kHostThread>(20s));
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // everyone has checked before inboxes change again

    // A barrier queued on a stream orders like one on the default stream.
    const std::int64_t value = 77 + ctx.rank;
    CHECK_PE_OK(ctx, Rt().Put(Sub(inbox, 0, 8), &value, next, StreamRef{copy_stream.get()}));
    CHECK_PE_OK(ctx, Barrier(Rt(), StreamRef{copy_stream.get()}));
    CHECK_PE_OK(ctx, copy_stream->Synchronize<CallSite::kHostThread>(20s));
    CHECK_PE(ctx, As<std::int64_t>(inbox)[0] == 77 + previous, "put before a stream barrier");
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST_P(RmaTest, CollectiveMismatchFailsOnEveryPe) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation out;
    // Size disagrees on the last PE.
    const std::uint64_t bytes = ctx.rank == ctx.size - 1 ? 2048 : 1024;
    Status size_mismatch = Rt().Allocate(bytes, 64, &out);
    CHECK_PE(ctx, size_mismatch.code() == ErrorCode::kCollectiveMismatch,
             size_mismatch.ToString());
    // Every PE names the same field and every PE's call.
    const std::string last = std::to_string(ctx.size - 1);
    CHECK_PE(ctx, Contains(size_mismatch.message(),
                           "collective calls differ across PEs (allocation bytes: 1024 on PE") &&
                      Contains(size_mismatch.message(), "2048 on PE " + last + "): sequence=1, "
                                                                            "field=bytes"),
             size_mismatch.message());
    CHECK_PE(ctx, Contains(size_mismatch.message(), "pe 0: empty #1 bytes=1024 alignment=64"),
             size_mismatch.message());
    CHECK_PE(ctx, Contains(size_mismatch.message(),
                           "pe " + last + ": empty #1 bytes=2048 alignment=64"),
             size_mismatch.message());
    // Alignment disagrees.
    Status align_mismatch = Rt().Allocate(1024, ctx.rank == 0 ? 4096 : 64, &out);
    CHECK_PE(ctx, align_mismatch.code() == ErrorCode::kCollectiveMismatch,
             align_mismatch.ToString());
    CHECK_PE(ctx, Contains(align_mismatch.message(), "sequence=2, field=alignment"),
             align_mismatch.message());
    // Order disagrees: PE 0 frees while the others allocate.
    Allocation a = MustAllocate(ctx, 512);
    Status order_mismatch = ctx.rank == 0 ? Rt().Free(View(a)) : Rt().Allocate(512, 64, &out);
    CHECK_PE(ctx, order_mismatch.code() == ErrorCode::kCollectiveMismatch,
             order_mismatch.ToString());
    CHECK_PE(ctx, Contains(order_mismatch.message(), "field=kind"), order_mismatch.message());
    CHECK_PE(ctx, Contains(order_mismatch.message(), "pe 0: free #4 bytes=512"),
             order_mismatch.message());
    // Nothing was half-done: one live allocation, and the heap still works in agreement.
    CHECK_PE(ctx, Rt().Snapshot().live.size() == 1, "only the agreed allocation is live");
    Allocation b = MustAllocate(ctx, 1024);
    CHECK_PE(ctx, b.data != nullptr, "agreed allocation after mismatches");
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST_P(RmaTest, NoProcessesOrSegmentsLeftBehind) {
  std::vector<PeOutcome> outcomes = RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE(ctx, OwnSegmentCount() == 0, "no segment before init");
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    // One mapping per PE, plus the descriptor of the own segment (peers reopen it).
    CHECK_PE(ctx, OwnSegmentCount() == ctx.size + 1,
             "mappings and descriptors while ready: " + std::to_string(OwnSegmentCount()));
    Allocation a = MustAllocate(ctx, 1 << 20);
    std::memset(a.data, 1, a.bytes);
    FreeAllAndShutdown(ctx);
    CHECK_PE(ctx, OwnSegmentCount() == 0,
             "shutdown unmapped and closed everything, got " + std::to_string(OwnSegmentCount()));
    return 0;
  });
  ASSERT_TRUE(AllPesPassed(outcomes));
  std::vector<int> pids;
  for (const PeOutcome& outcome : outcomes) pids.push_back(outcome.pid);
  EXPECT_TRUE(LiveSegmentsOf(pids).empty());
  EXPECT_TRUE(LiveChildrenOf(::getpid()).empty());
}

// Atomics, non-blocking puts, quiet and the waits on several words (docs/atomics.md); the
// ucx_loopback ctest runs it with every peer through UCX.
TEST_P(RmaTest, AtomicsNonBlockingPutsQuietAndWaitsOnSeveralWords) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(GetParam()), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    constexpr int kAdds = 500;
    Allocation words = MustAllocate(ctx, 64);
    Allocation inbox = MustAllocate(ctx, 256 * sizeof(std::int64_t));
    Allocation flags = MustAllocate(ctx, 8 * sizeof(std::int64_t));
    std::memset(words.data, 0, 64);
    std::memset(flags.data, 0, 8 * sizeof(std::int64_t));
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    auto atomic = [&](std::uint64_t offset, std::uint8_t width, AtomicOp op, std::uint64_t value,
                      std::uint64_t compare, int pe, std::uint64_t* old) {
      return Rt().Atomic(Sub(words, offset, width), width, op, value, compare, pe, old, {});
    };
    // Fetch-add on PE 0's word from every PE: each PE sees its old values rise.
    std::uint64_t last = 0;
    for (int i = 0; i < kAdds; ++i) {
      std::uint64_t old = ~0ull;
      CHECK_PE_OK(ctx, atomic(0, 8, AtomicOp::kAdd, 1, 0, 0, &old));
      CHECK_PE(ctx, i == 0 || old > last, "fetch_add's old values rise");
      last = old;
    }
    // A 32-bit or on PE 0: every PE's bit; a compare-and-swap only one PE wins.
    CHECK_PE_OK(ctx, atomic(8, 4, AtomicOp::kOr, 1u << ctx.rank, 0, 0, nullptr));
    std::uint64_t won = 0;
    CHECK_PE_OK(ctx, atomic(16, 8, AtomicOp::kCompareSwap, ctx.rank + 1, 0, 0, &won));
    CHECK_PE_OK(ctx, Rt().Quiet({}));
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    std::uint64_t sum = 0, bits = 0, owner = 0;
    CHECK_PE_OK(ctx, atomic(0, 8, AtomicOp::kFetch, 0, 0, 0, &sum));
    CHECK_PE_OK(ctx, atomic(8, 4, AtomicOp::kFetch, 0, 0, 0, &bits));
    CHECK_PE_OK(ctx, atomic(16, 8, AtomicOp::kFetch, 0, 0, 0, &owner));
    CHECK_PE(ctx, sum == static_cast<std::uint64_t>(kAdds) * ctx.size, "every add counted");
    CHECK_PE(ctx, bits == (1u << ctx.size) - 1, "every PE's bit is set");
    CHECK_PE(ctx, owner >= 1 && owner <= static_cast<std::uint64_t>(ctx.size) &&
                      (won == 0) == (owner == static_cast<std::uint64_t>(ctx.rank) + 1),
             "one compare-and-swap won, and its PE saw the old value 0");
    // Non-blocking puts to the next PE, a quiet, then a flag word each.
    const int next = (ctx.rank + 1) % ctx.size;
    const int previous = (ctx.rank + ctx.size - 1) % ctx.size;
    std::vector<std::int64_t> values(256);
    for (int i = 0; i < 256; ++i) values[i] = ctx.rank * 1000 + i;
    for (int i = 0; i < 256; ++i) {
      CHECK_PE_OK(ctx, Rt().PutNbi(Sub(inbox, i * sizeof(std::int64_t), sizeof(std::int64_t)),
                                   &values[i], next, {}));
    }
    CHECK_PE_OK(ctx, Rt().Quiet({}));
    const int slot = ctx.rank % 8;
    CHECK_PE_OK(ctx, Rt().Signal(Sub(flags, slot * 8, 8), SignalWidth::k64, 1, next,
                                 SignalOp::kSet, {}));
    // Wait for the previous PE's flag among the eight words: any, then all of those masked in.
    std::vector<std::uint8_t> satisfied(8, 0);
    CHECK_PE_OK(ctx, Rt().WaitSignals(View(flags), SignalWidth::k64, 1, Comparison::kEq, {},
                                      WaitSet::kAny, satisfied.data(), {}));
    CHECK_PE(ctx, satisfied[previous % 8] == 1, "the previous PE's flag satisfies");
    std::vector<std::uint8_t> mask(8, 0);
    mask[previous % 8] = 1;
    CHECK_PE_OK(ctx, Rt().WaitSignals(View(flags), SignalWidth::k64, 1, Comparison::kEq, mask,
                                      WaitSet::kAll, satisfied.data(), {}));
    for (int i = 0; i < 256; ++i) {
      if (As<std::int64_t>(inbox)[i] != previous * 1000 + i) {
        CHECK_PE(ctx, false, "put_nbi's data is there before the flag after quiet");
        break;
      }
    }
    bool now = false;
    CHECK_PE_OK(ctx, Rt().TestSignal(Sub(flags, (previous % 8) * 8, 8), SignalWidth::k64, 1,
                                     Comparison::kEq, &now));
    CHECK_PE(ctx, now, "test_signal sees the flag");
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

INSTANTIATE_TEST_SUITE_P(Pes, RmaTest, ::testing::Values(2, 4, 8));

TEST(RmaTimeout, WaitSignalTimesOutNamingPeAddressAndValues) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(2, "1"), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation flag = MustAllocate(ctx, 8);
    *As<std::int64_t>(flag) = 3;
    Status timed_out = Rt().WaitSignal(View(flag), SignalWidth::k64, 4, Comparison::kGe, {});
    CHECK_PE(ctx, timed_out.code() == ErrorCode::kTimeout, timed_out.ToString());
    const std::string& m = timed_out.message();
    CHECK_PE(ctx, Contains(m, "wait_signal timed out: pe=" + std::to_string(ctx.rank)), m);
    CHECK_PE(ctx, Contains(m, "address=" + Hex(flag.data)), m);
    CHECK_PE(ctx, Contains(m, "comparison=ge, expected=4, observed=3, timeout_ms=1000"), m);
    CHECK_PE(ctx, timed_out.operation() == "wait_signal", timed_out.operation());
    // A wait_signal timeout is local: the runtime stays usable.
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST(RmaTimeout, WaitSignalsTimesOutNamingTheWords) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(2, "1"), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation flags = MustAllocate(ctx, 3 * 4);
    As<std::int32_t>(flags)[0] = 5;
    As<std::int32_t>(flags)[1] = 1;
    As<std::int32_t>(flags)[2] = 2;
    std::vector<std::uint8_t> satisfied(3, 0);
    Status timed_out = Rt().WaitSignals(View(flags), SignalWidth::k32, 4, Comparison::kGe,
                                        {1, 0, 1}, WaitSet::kAll, satisfied.data(), {});
    CHECK_PE(ctx, timed_out.code() == ErrorCode::kTimeout, timed_out.ToString());
    const std::string& m = timed_out.message();
    CHECK_PE(ctx, Contains(m, "wait_signals timed out: pe=" + std::to_string(ctx.rank)), m);
    CHECK_PE(ctx, Contains(m, "signals=" + Hex(flags.data) + " (3 words), wait=all"), m);
    CHECK_PE(ctx, Contains(m, "comparison=ge, expected=4, observed=[5,-,2]"), m);
    // A mask of the wrong length is refused before anything waits.
    Status refused = Rt().WaitSignals(View(flags), SignalWidth::k32, 4, Comparison::kGe, {1, 1},
                                      WaitSet::kAny, satisfied.data(), {});
    CHECK_PE(ctx, refused.code() == ErrorCode::kInvalidArgument, refused.ToString());
    CHECK_PE(ctx, Contains(refused.message(), "mask length"), refused.message());
    // A timeout of a local wait leaves the runtime usable.
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

// A collective timeout leaves the PEs' collective sequences out of step: the lifecycle is
// terminal on the PEs that timed out, every later call fails with the same error, and
// Shutdown releases the local resources at once instead of waiting again.
void ExpectTerminalAfterTimeout(PeContext& ctx, const Status& timed_out) {
  CHECK_PE(ctx, Rt().state() == RuntimeState::kFailed, "terminal after a collective timeout");
  Allocation out;
  const Status later = Rt().Allocate(64, 64, &out);
  CHECK_PE(ctx, later.code() == ErrorCode::kTimeout && later.message() == timed_out.message(),
           "a later call repeats the terminal failure: " + later.ToString());
  CHECK_PE(ctx, later.operation() == "empty" && later.phase() == "state", later.ToString());
  const Status barrier = Barrier(Rt(), {});
  CHECK_PE(ctx, barrier.code() == ErrorCode::kTimeout, barrier.ToString());
  const Status closed = Rt().Shutdown();
  CHECK_PE(ctx, closed.code() == ErrorCode::kTimeout && closed.operation() == "shutdown",
           closed.ToString());
  CHECK_PE(ctx, OwnSegmentCount() == 0, "the terminal shutdown released the heap");
  CHECK_PE(ctx, Rt().Shutdown().code() == ErrorCode::kTimeout, "close stays an error");
}

TEST(RmaTimeout, BarrierTimesOutNamingMissingPes) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(3, "1"), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    if (ctx.rank != 2) {
      Status timed_out = Barrier(Rt(), {});
      CHECK_PE(ctx, timed_out.code() == ErrorCode::kTimeout, timed_out.ToString());
      CHECK_PE(ctx, Contains(timed_out.message(), "collective=barrier #1, missing_pes=[2]"),
               timed_out.message());
      ExpectTerminalAfterTimeout(ctx, timed_out);
      // Outlive the other waiter's timeout: exiting first would make it see a lost peer.
      std::this_thread::sleep_for(2s);
    } else {
      // Stays alive (a PE that exits is reported as lost, not as late) and out of step.
      std::this_thread::sleep_for(4s);
    }
    return 0;
  }));
}

TEST(RmaTimeout, CollectiveTimesOutNamingMissingPes) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(2, "1"), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    if (ctx.rank == 0) {
      Allocation out;
      Status timed_out = Rt().Allocate(64, 64, &out);
      CHECK_PE(ctx, timed_out.code() == ErrorCode::kTimeout, timed_out.ToString());
      CHECK_PE(ctx, Contains(timed_out.message(), "missing_pes=[1]"), timed_out.message());
      CHECK_PE(ctx, Rt().Snapshot().live.empty(), "nothing allocated after the timeout");
      ExpectTerminalAfterTimeout(ctx, timed_out);
    } else {
      std::this_thread::sleep_for(4s);
    }
    return 0;
  }));
}

TEST(RmaAsync, FailedQueuedWaitSurfacesAtSynchronize) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(2, "1"), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation flag = MustAllocate(ctx, 4);
    *As<std::int32_t>(flag) = 0;
    auto stream = host::HostStream::Create<CallSite::kHostThread>();
    StreamRef s{stream.get()};
    CHECK_PE_OK(ctx, Rt().WaitSignal(View(flag), SignalWidth::k32, 1, Comparison::kEq, s));
    CHECK_PE(ctx, !stream->Query(), "the wait is queued on the stream, not run by the caller");
    Status failure = stream->Synchronize<CallSite::kHostThread>(20s);
    CHECK_PE(ctx, failure.code() == ErrorCode::kTimeout, failure.ToString());
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

}  // namespace
}  // namespace hyper_parallel::shmem::testing
