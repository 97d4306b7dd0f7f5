// Several threads per PE: no call waits holding the entry mutex, diagnostics answer while calls
// block, collectives are checked before data moves, and a random mix of one-sided operations
// from 8 threads per PE stays correct.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <random>
#include <thread>

#include "backends/host/host_stream.h"
#include "tests/multiprocess/pe_helpers.h"
#include "testing/eventually.h"

namespace hyper_parallel::shmem::testing {
namespace {

using namespace std::chrono_literals;

PeLaunch Launch(int size) { return LaunchPes(size, "30", 64 << 20); }

std::int64_t Word(const Allocation& a) {
  return std::atomic_ref<std::int64_t>(*As<std::int64_t>(a)).load();
}

TEST(Threads, AThreadReleasesAnotherThreadsWaitOnTheSamePe) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(2), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation sig = MustAllocate(ctx, 8);
    *As<std::int64_t>(sig) = 0;
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    Status waited;
    std::thread waiter([&] {
      waited = Rt().WaitSignal(View(sig), SignalWidth::k64, 7, Comparison::kEq, {});
    });
    // While the waiter blocks, the entry mutex is free: a snapshot answers and names the wait.
    const bool blocked = Eventually([] { return !Rt().Snapshot().blocking.empty(); });
    CHECK_PE(ctx, blocked, "the wait shows up in the snapshot");
    if (blocked) {
      const BlockingOp op = Rt().Snapshot().blocking.front();
      CHECK_PE(ctx, op.operation == "wait_signal", op.operation);
      CHECK_PE(ctx, Contains(op.stream, "default (thread "), op.stream);
      CHECK_PE(ctx, Contains(op.waiting_for, "signal=" + Hex(sig.data) +
                                                 ", comparison=eq, expected=7, observed=0"),
               op.waiting_for);
    }
    // Another thread of the same PE signals its own PE.
    CHECK_PE_OK(ctx, Rt().Signal(View(sig), SignalWidth::k64, 7, ctx.rank, SignalOp::kSet, {}));
    waiter.join();
    CHECK_PE_OK(ctx, waited);
    CHECK_PE(ctx, Rt().Snapshot().blocking.empty(), "nothing blocked once released");
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST(Threads, SnapshotNamesTheCollectiveAndThePesThatHaveNotArrived) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(3), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation gate = MustAllocate(ctx, 8);
    *As<std::int64_t>(gate) = 0;
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // #2
    if (ctx.rank == 2) {
      // Enter the barrier only once PEs 0 and 1 saw themselves blocked in it.
      CHECK_PE_OK(ctx, Rt().WaitSignal(View(gate), SignalWidth::k64, 2, Comparison::kEq, {}));
      CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // #3
    } else {
      Status barrier;
      std::thread blocked([&] { barrier = Barrier(Rt(), {}); });
      const bool seen = Eventually([] {
        const auto ops = Rt().Snapshot().blocking;
        return !ops.empty() && Contains(ops.front().waiting_for, "missing_pes=[2]");
      });
      CHECK_PE(ctx, seen, "the barrier shows up, waiting for PE 2");
      if (seen) {
        const BlockingOp op = Rt().Snapshot().blocking.front();
        CHECK_PE(ctx, op.operation == "barrier", op.operation);
        CHECK_PE(ctx, Contains(op.waiting_for, "collective=barrier #3"), op.waiting_for);
        const Diagnostics d = Rt().Snapshot();
        CHECK_PE(ctx, d.collectives_in_flight == 1 && d.collective_sequence == 3,
                 "one collective in flight, number 3");
      }
      CHECK_PE_OK(ctx, Rt().Signal(View(gate), SignalWidth::k64, 1, 2, SignalOp::kAdd, {}));
      blocked.join();
      CHECK_PE_OK(ctx, barrier);
    }
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST(Threads, CollectivesOfOnePeOnTwoStreamsAtOnceAreRejected) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(2), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation gate = MustAllocate(ctx, 8);
    *As<std::int64_t>(gate) = 0;
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    auto first = host::HostStream::Create<CallSite::kHostThread>();
    auto second = host::HostStream::Create<CallSite::kHostThread>();
    // The barrier is queued behind a local gate: it is in flight until the gate opens.
    CHECK_PE_OK(ctx, Rt().WaitSignal(View(gate), SignalWidth::k64, 1, Comparison::kEq,
                                     StreamRef{first.get()}));
    CHECK_PE_OK(ctx, Barrier(Rt(), StreamRef{first.get()}));
    const Status other = Barrier(Rt(), StreamRef{second.get()});
    CHECK_PE(ctx, other.code() == ErrorCode::kInvalidState, other.ToString());
    CHECK_PE(ctx, Contains(other.message(), "this_stream=stream " + std::to_string(second->id())) &&
                      Contains(other.message(), "in_flight_on=stream " + std::to_string(first->id())),
             other.message());
    const Status caller = Barrier(Rt(), {});
    CHECK_PE(ctx, caller.code() == ErrorCode::kInvalidState, caller.ToString());
    CHECK_PE_OK(ctx, Rt().Signal(View(gate), SignalWidth::k64, 1, ctx.rank, SignalOp::kSet, {}));
    CHECK_PE_OK(ctx, first->Synchronize<CallSite::kHostThread>(30s));
    // In step: the rejected calls took no number.
    CHECK_PE_OK(ctx, Barrier(Rt(), StreamRef{second.get()}));
    CHECK_PE_OK(ctx, second->Synchronize<CallSite::kHostThread>(30s));
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

TEST(Threads, MismatchedCollectivesFailOnEveryPeWithoutMovingData) {
  EXPECT_ALL_PES_PASS(RunPes(Launch(2), [](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation small = MustAllocate(ctx, 2 * 64);   // #1
    Allocation large = MustAllocate(ctx, 2 * 128);  // #2
    std::memset(small.data, 0xee, small.bytes);
    std::memset(large.data, 0xee, large.bytes);
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // #3
    std::vector<std::uint8_t> input(128, static_cast<std::uint8_t>(ctx.rank + 1));
    // PE 0 calls barrier, PE 1 all_gather: both fail at once, naming both calls.
    const Status kind = ctx.rank == 0 ? Barrier(Rt(), {})
                                      : AllGather(Rt(), View(small), input.data(), 64, {},
                                                  nullptr, "uint8");
    CHECK_PE(ctx, kind.code() == ErrorCode::kCollectiveMismatch, kind.ToString());
    CHECK_PE(ctx, Contains(kind.message(), "sequence=4, field=kind, calls=pe 0: barrier #4; "
                                           "pe 1: all_gather #4 bytes=64 dtype=uint8 offset=0x0"),
             kind.message());
    // Outputs of different sizes: each PE's slot would land in another allocation.
    const Status size = ctx.rank == 0
                            ? AllGather(Rt(), View(small), input.data(), 64, {}, nullptr, "uint8")
                            : AllGather(Rt(), View(large), input.data(), 128, {}, nullptr, "uint8");
    CHECK_PE(ctx, size.code() == ErrorCode::kCollectiveMismatch, size.ToString());
    CHECK_PE(ctx, Contains(size.message(), "sequence=5, field=bytes"), size.message());
    // The same call with another dtype.
    const Status dtype = AllGather(Rt(), View(small), input.data(), 64, {}, nullptr,
                                   ctx.rank == 0 ? "uint8" : "int8");
    CHECK_PE(ctx, Contains(dtype.message(), "sequence=6, field=dtype"), dtype.message());
    bool untouched = true;
    for (const Allocation* a : {&small, &large}) {
      for (std::uint64_t i = 0; i < a->bytes; ++i) {
        untouched = untouched && As<std::uint8_t>(*a)[i] == 0xee;
      }
    }
    CHECK_PE(ctx, untouched, "no byte moved on a mismatch");
    // Still in step: a matching call works.
    CHECK_PE_OK(ctx, AllGather(Rt(), View(small), input.data(), 64, {}, nullptr, "uint8"));
    CHECK_PE(ctx, As<std::uint8_t>(small)[0] == 1 && As<std::uint8_t>(small)[64] == 2,
             "slots in rank order");
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    FreeAllAndShutdown(ctx);
    return 0;
  }));
}

// One message of a thread pair: a header (iteration, length, stop flag) and a payload whose
// bytes depend on the sender, thread and iteration.
constexpr int kThreads = 8;
constexpr std::uint64_t kBox = 8192;
constexpr std::uint64_t kHeader = 64;

std::uint8_t PayloadByte(int pe, int thread, std::int64_t iteration, std::uint64_t i) {
  return static_cast<std::uint8_t>(pe * 131 + thread * 31 + iteration * 7 + i);
}

struct ThreadCounts {
  std::int64_t iterations = 0;
  std::int64_t operations = 0;
};

// Thread `t` of PE p exchanges messages with thread `t` of the other PE, in lock step: write
// the message (put + signal, put_signal, or two puts), wait for the peer's, verify it (read
// locally or get from this PE), acknowledge it, and wait for the peer's acknowledgement before
// the box is reused. Between messages it copies through a scratch area of its own PE and
// raises a shared counter of the other PE, so every thread touches every PE.
ThreadCounts RunPair(PeContext& ctx, int t, const Allocation& boxes, const Allocation& counters,
                     const Allocation& scratch, const Allocation& shared,
                     std::chrono::steady_clock::time_point until, std::atomic<int>* failures) {
  const int peer = 1 - ctx.rank;
  std::mt19937_64 rng(static_cast<unsigned>(ctx.rank * 1000 + t));
  auto fail = [&](const std::string& what) {
    failures->fetch_add(1);
    std::fprintf(stderr, "PE %d thread %d: %s\n", ctx.rank, t, what.c_str());
  };
  auto ok = [&](const Status& status, const char* what) {
    if (!status.ok()) fail(std::string(what) + ": " + status.ToString());
    return status.ok();
  };
  // box[src][t] holds what PE src's thread t sent here; counters: arrived[src][t], acked[t].
  auto box = [&](int src) { return Sub(boxes, (src * kThreads + t) * kBox, kBox); };
  auto arrived = [&](int src) { return Sub(counters, (src * kThreads + t) * 64, 8); };
  auto acked = [&] { return Sub(counters, (2 * kThreads + t) * 64, 8); };
  ThreadCounts counts;
  std::vector<std::uint8_t> message(kBox), fetched(kBox);
  for (std::int64_t k = 1;; ++k) {
    const std::uint64_t length = kHeader + rng() % (kBox - kHeader + 1);
    const bool stop = std::chrono::steady_clock::now() >= until;
    auto* header = reinterpret_cast<std::int64_t*>(message.data());
    header[0] = k;
    header[1] = static_cast<std::int64_t>(length);
    header[2] = stop ? 1 : 0;
    for (std::uint64_t i = kHeader; i < length; ++i) message[i] = PayloadByte(ctx.rank, t, k, i);
    const SymmetricView target = Sub(boxes, (ctx.rank * kThreads + t) * kBox, length);
    const SymmetricView signal = arrived(ctx.rank);
    switch (rng() % 3) {
      case 0:
        if (!ok(Rt().Put(target, message.data(), peer, {}), "put")) return counts;
        if (!ok(Rt().Signal(signal, SignalWidth::k64, 1, peer, SignalOp::kAdd, {}), "signal")) {
          return counts;
        }
        counts.operations += 2;
        break;
      case 1:
        if (!ok(Rt().PutSignal(target, message.data(), signal, SignalWidth::k64, 1, peer,
                               SignalOp::kAdd, {}),
                "put_signal")) {
          return counts;
        }
        counts.operations += 1;
        break;
      default: {
        const std::uint64_t half = length / 2;
        if (!ok(Rt().Put(Sub(boxes, (ctx.rank * kThreads + t) * kBox + half, length - half),
                         message.data() + half, peer, {}),
                "put (second half)") ||
            !ok(Rt().Put(Sub(boxes, (ctx.rank * kThreads + t) * kBox, half), message.data(),
                         peer, {}),
                "put (first half)") ||
            !ok(Rt().Signal(signal, SignalWidth::k64, 1, peer, SignalOp::kAdd, {}), "signal")) {
          return counts;
        }
        counts.operations += 3;
      }
    }
    // The peer's message k.
    if (!ok(Rt().WaitSignal(arrived(peer), SignalWidth::k64, k,
                            rng() % 2 ? Comparison::kGe : Comparison::kEq, {}),
            "wait for the message")) {
      return counts;
    }
    const std::uint8_t* received = static_cast<const std::uint8_t*>(box(peer).data);
    if (rng() % 2) {
      if (!ok(Rt().Get(fetched.data(), box(peer), ctx.rank, {}), "get from this PE")) return counts;
      received = fetched.data();
      ++counts.operations;
    }
    const auto* got = reinterpret_cast<const std::int64_t*>(received);
    if (got[0] != k) fail("message " + std::to_string(k) + " has header " + std::to_string(got[0]));
    const std::uint64_t got_length = static_cast<std::uint64_t>(got[1]);
    for (std::uint64_t i = kHeader; i < got_length && i < kBox; ++i) {
      if (received[i] != PayloadByte(peer, t, k, i)) {
        fail("message " + std::to_string(k) + " byte " + std::to_string(i) + " is wrong");
        break;
      }
    }
    const bool peer_stops = got[2] != 0;
    if (!ok(Rt().Signal(acked(), SignalWidth::k64, k, peer, SignalOp::kSet, {}), "ack")) {
      return counts;
    }
    // Traffic through this PE's own heap and a counter every thread of every PE adds to.
    const std::uint64_t bytes = 1 + rng() % kBox;
    for (std::uint64_t i = 0; i < bytes; ++i) message[i] = static_cast<std::uint8_t>(k + i + t);
    if (!ok(Rt().Put(Sub(scratch, t * kBox, bytes), message.data(), ctx.rank, {}), "self put") ||
        !ok(Rt().Get(fetched.data(), Sub(scratch, t * kBox, bytes), ctx.rank, {}), "self get") ||
        !ok(Rt().Signal(Sub(shared, 0, 8), SignalWidth::k64, 1, peer, SignalOp::kAdd, {}),
            "shared add")) {
      return counts;
    }
    if (std::memcmp(fetched.data(), message.data(), bytes) != 0) fail("self round trip differs");
    counts.operations += 5;  // ack, wait, self put, self get, shared add
    if (!ok(Rt().WaitSignal(acked(), SignalWidth::k64, k, Comparison::kGe, {}),
            "wait for the ack")) {
      return counts;
    }
    counts.iterations = k;
    if (stop || peer_stops) return counts;
  }
}

TEST(Threads, EightThreadsPerPeIssueARandomMixWithEveryResultChecked) {
  const char* seconds_text = std::getenv("HPS_STRESS_SECONDS");
  const int seconds = seconds_text != nullptr ? std::atoi(seconds_text) : 3;
  const std::vector<PeOutcome> outcomes = RunPes(Launch(2), [seconds](PeContext& ctx) {
    CHECK_PE_OK(ctx, ctx.InitRuntime());
    Allocation boxes = MustAllocate(ctx, 2 * kThreads * kBox, 4096);
    Allocation counters = MustAllocate(ctx, 3 * kThreads * 64);
    Allocation scratch = MustAllocate(ctx, kThreads * kBox);
    Allocation shared = MustAllocate(ctx, 64);
    std::memset(counters.data, 0, counters.bytes);
    std::memset(shared.data, 0, shared.bytes);
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));  // zeroed everywhere before any peer writes
    const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    std::atomic<int> failures{0};
    std::vector<ThreadCounts> counts(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        counts[t] = RunPair(ctx, t, boxes, counters, scratch, shared, until, &failures);
      });
    }
    for (std::thread& thread : threads) thread.join();
    CHECK_PE(ctx, failures.load() == 0, std::to_string(failures.load()) + " failures");
    std::int64_t iterations = 0, operations = 0;
    for (const ThreadCounts& c : counts) {
      iterations += c.iterations;
      operations += c.operations;
      CHECK_PE(ctx, c.iterations > 0, "every thread completed at least one exchange");
    }
    CHECK_PE_OK(ctx, Barrier(Rt(), {}));
    // Every shared add of the other PE's threads arrived: one per iteration of each thread.
    CHECK_PE(ctx, Word(shared) == iterations,
             "shared counter " + std::to_string(Word(shared)) + " == the peer's iterations " +
                 std::to_string(iterations) + " (pairs run in lock step)");
    std::fprintf(stderr, "PE %d: %d threads, %lld exchanges, %lld operations in %d s\n", ctx.rank,
                 kThreads, static_cast<long long>(iterations), static_cast<long long>(operations),
                 seconds);
    FreeAllAndShutdown(ctx);
    return 0;
  });
  EXPECT_TRUE(AllPesPassed(outcomes));
  for (const PeOutcome& outcome : outcomes) std::printf("%s", outcome.output.c_str());
}

}  // namespace
}  // namespace hyper_parallel::shmem::testing
