// RemoteTransport: how the host backend reaches the PEs it cannot map (docs/scale-out.md).
//
// PEs on one host map each other's segments and use plain loads and stores; a PE on another
// host (or every peer, with HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all) is reached through a
// transport behind this interface. The host backend, its kernel API and the OpenSHMEM direct
// path hold this interface only (route.h says which PEs it serves); which transport runs is
// decided once, at init, by OpenRemoteTransport (transport.h):
//   - ucx/: UCX's ucp API, over active messages or hardware RMA per peer (ucx/ucx_transport.h);
//   - reordering.h: a transport for tests that delays and reorders what another one sends
//     between the ordering points below (EFA-like links are reliable but unordered), so the
//     tests prove the host code relies on these guarantees and on nothing more.
//
// The guarantees every transport keeps, and the only ones its users may rely on:
//   - a put's data lands at some point after Put returns (its source may be reused at once);
//     two puts to one PE may land in either order;
//   - a signal (PutSignal, Begin with a signal, Atomic) lands after its own data and after
//     every earlier write of this PE to that PE; a Get sees every earlier write of this PE to
//     its PE;
//   - Fence: every later write to any PE lands after every earlier one to that PE;
//   - Flush: every kAnyone write issued before has landed; Quiet: CompleteNbi, then Flush.
//
// Waiting: a remote write lands only while its target drives the transport (Poll); threads that
// wait in the library drive it themselves (a Waiting on the stack, Poll in their predicate) and
// one of them at a time may sleep on the transport's events (EventSleeper, backends/wait/).
//
// Thread-safety: Put, PutSignal, Begin, Finish, Atomic, Fence, Get, Flush, the nbi calls, Poll,
// Arm and Sleep may be called from any thread at once; Register, Connect, Start and Close from
// one thread while nothing else runs.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backends/atomic_op.h"
#include "backends/wait/doorbell.h"
#include "base/status.h"

namespace hyper_parallel::shmem::transport {

using host::Doorbell;
using host::EventSleeper;
using host::WaitPolicy;

/// What a signal does to its word.
enum class SignalAction : std::uint8_t { kNone = 0, kSet = 1, kAdd = 2 };

/// A signal on a remote word: `action` `value` on the `width`-byte word at segment `offset`.
struct RemoteSignal {
  std::uint64_t offset = 0;
  std::uint8_t width = 8;  ///< 4 or 8
  SignalAction action = SignalAction::kNone;
  std::int64_t value = 0;
};

/// Who must see a remote write after a flush (RemoteTransport::Flush).
enum class Audience : std::uint8_t {
  kAnyone,  ///< user data and signals: a flush (a barrier, a quiet) waits until it landed
  kTarget,  ///< a control word or a collective's data that the target itself waits for
};

// The one list of what a transport counts (debug_state()'s network counters), since init.
// Every operation this PE sends to a remote PE counts once, in one of the first three: a put
// (data, with or without a signal after it), a get, or an atomic (a signal alone). Liveness
// traffic counts apart, in `heartbeats`.
#define HPS_REMOTE_COUNTERS(X)                                                                 \
  X(puts)                                                                                      \
  X(gets)                                                                                      \
  X(atomics)                                                                                   \
  X(bytes_put)                                                                                 \
  X(bytes_got)                                                                                 \
  X(messages)     /* messages sent (UCX's messages path), heartbeats apart */                  \
  X(heartbeats)   /* heartbeats and farewells sent */                                          \
  X(flushes)      /* flush requests sent to peers with unconfirmed writes */                   \
  X(rejected)     /* arriving messages refused (malformed or out of bounds) */                 \
  X(event_sleeps) /* waits that slept on the network's events */                              \
  X(reordered)    /* operations the reordering transport held back and sent out of order */

/// A snapshot of the counters.
struct RemoteCounters {
#define HPS_COUNTER_FIELD(name) std::uint64_t name = 0;
  HPS_REMOTE_COUNTERS(HPS_COUNTER_FIELD)
#undef HPS_COUNTER_FIELD
  /// Calls fn(name, value) for every counter, in the list's order.
  template <class Fn>
  void ForEach(Fn&& fn) const {
#define HPS_COUNTER_VISIT(name) fn(std::string_view(#name), name);
    HPS_REMOTE_COUNTERS(HPS_COUNTER_VISIT)
#undef HPS_COUNTER_VISIT
  }
};

/// The counters as a transport keeps them (relaxed atomics, bumped from any thread).
struct LiveCounters {
#define HPS_COUNTER_FIELD(name) std::atomic<std::uint64_t> name{0};
  HPS_REMOTE_COUNTERS(HPS_COUNTER_FIELD)
#undef HPS_COUNTER_FIELD
  RemoteCounters Snapshot() const {
    RemoteCounters out;
#define HPS_COUNTER_LOAD(name) out.name = name.load(std::memory_order_relaxed);
    HPS_REMOTE_COUNTERS(HPS_COUNTER_LOAD)
#undef HPS_COUNTER_LOAD
    return out;
  }
};

/// Messages started together and finished together (Begin, Finish): a collective's blocks to
/// several peers travel at once while the caller copies its local blocks. The transport keeps
/// its records here; callers only pass it. Finish before it goes.
class Outbound {
 public:
  static constexpr std::size_t kMaxInFlight = 8;
  Outbound() = default;
  Outbound(const Outbound&) = delete;
  Outbound& operator=(const Outbound&) = delete;

  std::vector<std::shared_ptr<void>> in_flight;  ///< the transport's, in the order begun
  std::size_t finished = 0;  ///< in_flight[0 .. finished) were waited for
  Status failed;             ///< the first failure
};

class RemoteTransport : public EventSleeper {
 public:
  /// Called (from any thread) when peer `pe` is lost; `reason` says how it was noticed.
  using LostFn = std::function<void(int pe, const std::string& reason)>;

  /// The heartbeat word's value once its writer closed normally (it says farewell).
  static constexpr std::uint64_t kFarewell = ~0ull;

  struct Liveness {
    std::chrono::milliseconds silence{3000};
    /// The segment offset, at peer `pe`, of the word this PE's heartbeats add to.
    std::function<std::uint64_t(int pe)> remote_beat_offset;
    /// This PE's word that peer `pe`'s heartbeats add to.
    std::function<std::uint64_t(int pe)> observed_beat;
  };

  virtual ~RemoteTransport() = default;

  /// "ucx", or "reordering over ucx" (debug_state()'s network provider).
  virtual std::string name() const = 0;
  /// The library's version ("1.13.1").
  virtual std::string version() const = 0;

  /// Registers this PE's segment [base, base + bytes) and returns what a peer needs to reach
  /// it (`blob`, exchanged through the bootstrap).
  virtual Status Register(void* base, std::uint64_t bytes, std::string* blob) = 0;
  /// Keeps every PE with remote[pe] reachable from its blob and connects the PEs with
  /// watched[pe] (heartbeats both ways). `lost` is called for a loss this transport notices or
  /// is told of. No traffic yet.
  virtual Status Connect(int rank, const std::vector<std::string>& blobs,
                         const std::vector<bool>& remote, const std::vector<bool>& watched,
                         LostFn lost) = 0;
  /// Tells every watched peer but `pe` that PE `pe` is lost; never waits.
  virtual void ReportLost(int pe) = 0;
  /// Starts progress (and heartbeats); `own_bell` is rung whenever a remote write may have
  /// landed here. Waits for remote completion give up once `abort` is set; the transport's own
  /// waits follow `policy`.
  virtual Status Start(Liveness liveness, const std::atomic<bool>* abort, Doorbell* own_bell,
                       WaitPolicy policy) = 0;
  /// Stops progress, flushes (bounded) and releases everything. Idempotent.
  virtual void Close() = 0;

  /// Copies `bytes` from `source` to segment offset `offset` of `pe`; returns once `source`
  /// may be reused.
  virtual Status Put(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
                     Audience audience = Audience::kAnyone) = 0;
  /// Put (when bytes > 0), then `signal` on a word of the same PE, after the data and after
  /// every earlier write of this PE to `pe`. Returns once `source` may be reused.
  virtual Status PutSignal(int pe, std::uint64_t offset, const void* source,
                           std::uint64_t bytes, const RemoteSignal& signal,
                           Audience audience = Audience::kAnyone) = 0;
  /// PutSignal without waiting: `source` stays the caller's until Finish(out). What is begun
  /// to one PE with a signal lands after everything begun to it before. At most
  /// Outbound::kMaxInFlight at a time.
  virtual Status Begin(Outbound* out, int pe, std::uint64_t offset, const void* source,
                       std::uint64_t bytes, const RemoteSignal& signal, Audience audience) = 0;
  /// Waits until every message begun on `out` has left; the first failure, if any.
  virtual Status Finish(Outbound* out) = 0;
  /// `request` on the word of `pe` (docs/atomics.md), after every earlier write of this PE to
  /// `pe`; a non-null `old` waits for the answer.
  virtual Status Atomic(int pe, const AtomicRequest& request, std::uint64_t* old) = 0;
  /// Every later write lands after every earlier one (to each PE).
  virtual Status Fence() = 0;
  /// Put and Get that may return before the copy completed; CompleteNbi completes them and then
  /// drops `hold`, which owns the local side.
  virtual Status PutNbi(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
                        std::shared_ptr<const void> hold) = 0;
  virtual Status GetNbi(int pe, void* destination, std::uint64_t offset, std::uint64_t bytes,
                        std::shared_ptr<const void> hold) = 0;
  /// Waits until every PutNbi and GetNbi begun before has completed; the first failure.
  virtual Status CompleteNbi() = 0;
  /// CompleteNbi, then Flush.
  virtual Status Quiet() = 0;
  /// Copies `bytes` from segment offset `offset` of `pe` to `destination`; returns once there.
  virtual Status Get(int pe, void* destination, std::uint64_t offset, std::uint64_t bytes) = 0;
  /// Waits until every kAnyone write this PE issued before has landed at its target.
  virtual Status Flush() = 0;
  /// Progresses unless another thread does right now; true when something happened. Never
  /// blocks for long.
  virtual bool Poll() = 0;

  /// Whether `pe` is reached through this transport.
  virtual bool remote(int pe) const = 0;
  /// How `pe` is reached, for debug_state()'s peers ("messages", "rma", "not connected").
  virtual std::string PathName(int pe) const = 0;
  virtual RemoteCounters counters() const = 0;
  virtual int endpoints() const = 0;

  /// Counts threads in or out of a Waiting; a transport over another passes them on.
  virtual void AddWaiters(int delta) {
    if (delta > 0) {
      waiters_.fetch_add(delta, std::memory_order_relaxed);
    } else {
      waiters_.fetch_add(delta, std::memory_order_release);
    }
  }

  /// A thread that waits in the library and drives progress itself (its predicate polls):
  /// while any does, a transport's own progress thread leaves the work to the waiters.
  class Waiting {
   public:
    explicit Waiting(RemoteTransport* transport) : transport_(transport) {
      transport_->AddWaiters(1);
    }
    ~Waiting() { transport_->AddWaiters(-1); }
    Waiting(const Waiting&) = delete;
    Waiting& operator=(const Waiting&) = delete;

   private:
    RemoteTransport* transport_;
  };

 protected:
  RemoteTransport() = default;
  /// Threads inside a Waiting now.
  int waiters() const { return waiters_.load(std::memory_order_acquire); }

 private:
  std::atomic<int> waiters_{0};
};

}  // namespace hyper_parallel::shmem::transport
