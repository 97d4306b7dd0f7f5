// HostDevice: the device surface an op kernel sees on the host backend.
//
// A kernel (ops/) is written against this surface only: every PE's heap as mapped in this
// process, copies, the exchange of collective descriptors, epoch publication to a peer's sync
// slot, bounded waits for epochs, and a small pool of copy workers that stand in for a device's
// cores. The vendor calls stay here, guarded by the where-callable table like every other
// host-backend primitive.
//
// Epochs are monotonic: a kernel publishes epoch e on slot s to PE p (store-release into p's
// control block, then p's doorbell) and waits until every source has published at least e on
// its own slot s (acquire). Nothing is ever reset to zero. Every wait gives up at once when the
// failure latch is raised (a peer is gone), and latches its own timeout: a collective that
// timed out leaves the PEs' sequences out of step for good.
//
// Thread-safety: one kernel runs at a time per stream; RunParallel may be called from any one
// thread at a time (the backend serialises kernels that use the pool).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <thread>
#include <vector>

#include "backends/blocking_ops.h"
#include "backends/collective.h"
#include "backends/host/call_sites.h"
#include "backends/host/control_block.h"
#include "backends/host/doorbell.h"
#include "backends/host/liveness.h"
#include "backends/host/ucx_transport.h"
#include "base/mutex.h"
#include "base/status.h"

namespace hyper_parallel::shmem::host {

class CopyWorkers;
class HostStream;

class HostDevice {
 public:
  HostDevice(int rank, int size, int teams, std::chrono::milliseconds timeout,
             WaitPolicy wait_policy, std::vector<std::byte*> heap_bases,
             std::vector<ControlBlock*> controls, CopyWorkers* workers, FailureLatch* latch,
             BlockingOpTable* blocking_ops)
      : rank_(rank),
        size_(size),
        layout_(teams, size),
        timeout_(timeout),
        wait_policy_(wait_policy),
        heap_bases_(std::move(heap_bases)),
        controls_(std::move(controls)),
        workers_(workers),
        latch_(latch),
        blocking_ops_(blocking_ops) {}

  /// Reaches the PEs `transport` serves through it (their heaps and control blocks are not
  /// mapped here: heap(pe) is null); `control_offset` is where a segment's control block
  /// starts. Called once, before any kernel runs.
  void AttachRemote(UcxTransport* transport, std::uint64_t control_offset) {
    remote_ = transport;
    control_offset_ = control_offset;
  }
  /// Whether PE `pe` is reached through the network transport.
  bool IsRemote(int pe) const { return remote_ != nullptr && remote_->remote(pe); }
  /// Whether any PE is.
  bool HasRemote() const { return remote_ != nullptr; }

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// Address of heap offset 0 of PE `pe` in this process.
  std::byte* heap(int pe) const { return heap_bases_[pe]; }
  /// How many copy workers (the caller included) RunParallel uses.
  int workers() const;

  template <CallSite kSite>
  void Copy(void* destination, const void* source, std::uint64_t bytes) const {
    RequireCallable<HostCall::kCopyBytes, kSite>();
    CopyBytes(destination, source, bytes);
  }

  /// Copies `bytes` from local `source` to heap offset `offset` of PE `pe`: a memcpy into its
  /// mapping, or a UCX put to a remote PE (a failure is latched: the lifecycle cannot go on).
  /// `audience`: whether a later flush (a barrier) must wait for it (ucx_transport.h).
  template <CallSite kSite>
  void PutTo(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
             Audience audience = Audience::kAnyone) const {
    RequireCallable<HostCall::kCopyBytes, kSite>();
    if (IsRemote(pe)) {
      Check<kSite>(remote_->Put(pe, offset, source, bytes, audience));
      return;
    }
    CopyBytes(heap_bases_[pe] + offset, source, bytes);
  }

  /// PutTo, then adds `value` to the 64-bit counter at heap offset `counter_offset` of the same
  /// PE (AddCounter): one message to a remote PE.
  template <CallSite kSite>
  void PutThenAdd(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
                  std::uint64_t counter_offset, std::int64_t value) const {
    RequireCallable<HostCall::kCopyBytes, kSite>();
    if (IsRemote(pe)) {
      Check<kSite>(remote_->PutSignal(pe, offset, source, bytes,
                                      RemoteSignal{counter_offset, 8, SignalAction::kAdd, value}));
      return;
    }
    if (bytes > 0) CopyBytes(heap_bases_[pe] + offset, source, bytes);
    AddCounter<kSite>(pe, counter_offset, value);
  }

  /// PutTo, then Publish(pe, slot, epoch): one message to a remote PE. The data is the
  /// collective's own, which the target waits for through the epoch.
  template <CallSite kSite>
  void PutThenPublish(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
                      int slot, std::uint64_t epoch) const {
    RequireCallable<HostCall::kCopyBytes, kSite>();
    if (IsRemote(pe)) {
      Check<kSite>(remote_->PutSignal(
          pe, offset, source, bytes,
          RemoteSignal{EpochWord(slot), 8, SignalAction::kSet, static_cast<std::int64_t>(epoch)},
          Audience::kTarget));
      return;
    }
    if (bytes > 0) CopyBytes(heap_bases_[pe] + offset, source, bytes);
    Publish<kSite>(pe, slot, epoch);
  }

  /// Waits on this PE's doorbell until `ready()`, the timeout or the latch (WaitUntil with the
  /// PE's policy). With remote peers the waiter drives the network itself: it progresses while
  /// it spins and sleeps on the network's events when it can (ucx_transport.h).
  template <CallSite kSite, class Ready, class Notice>
  WaitOutcome Await(Ready&& ready, Notice&& notice) const {
    Doorbell* bell = &controls_[rank_]->doorbell;
    if (remote_ == nullptr) {
      return WaitUntil<kSite>(bell, ready, timeout_, wait_policy_, latch_->flag(), notice);
    }
    if (ready()) return WaitOutcome::kReady;
    UcxTransport::Waiting waiting(remote_);
    return WaitUntil<kSite>(
        bell,
        [&] {
          remote_->Poll();
          return ready();
        },
        timeout_, wait_policy_, latch_->flag(), notice, remote_);
  }

  /// Latches a failed remote operation (terminal) and wakes this PE's waiters to see it.
  template <CallSite kSite>
  void Check(const Status& status) const {
    if (status.ok()) [[likely]] return;
    latch_->Set(status);
    Ring<kSite>(&controls_[rank_]->doorbell);
  }

  /// Publishes `epoch` on `slot` to PE `pe`, after every write this thread made before.
  template <CallSite kSite>
  void Publish(int pe, int slot, std::uint64_t epoch) const {
    RequireCallable<HostCall::kAtomicSignal, kSite>();
    if (IsRemote(pe)) {
      Check<kSite>(remote_->PutWord(pe, EpochWord(slot), epoch));
      return;
    }
    layout_.Epoch(controls_[pe], slot, rank_).value.store(epoch, std::memory_order_release);
    Ring<kSite>(&controls_[pe]->doorbell);
  }

  /// Adds `value` to the 64-bit counter at heap offset `offset` of PE `pe` (seq_cst: after
  /// every write this thread made before) and wakes a sleeper there.
  template <CallSite kSite>
  void AddCounter(int pe, std::uint64_t offset, std::int64_t value) const {
    RequireCallable<HostCall::kAtomicSignal, kSite>();
    if (IsRemote(pe)) {
      Check<kSite>(remote_->PutSignal(pe, 0, nullptr, 0,
                                      RemoteSignal{offset, 8, SignalAction::kAdd, value}));
      return;
    }
    Counter(pe, offset).fetch_add(value, std::memory_order_seq_cst);
    RingAfterSeqCst<kSite>(&controls_[pe]->doorbell);
  }

  /// Waits until this PE's 64-bit counter at heap offset `offset` is at least `target`. TIMEOUT
  /// names `what`; the latched failure is returned when a peer is lost meanwhile.
  template <CallSite kSite>
  Status WaitCounter(std::uint64_t offset, std::int64_t target, std::string_view what,
                     const HostStream* stream) const {
    RequireCallable<HostCall::kBoundedWait, kSite>();
    auto reached = [&] { return ReadCounter(rank_, offset) >= target; };
    auto notice = [&] {
      return Register(what, stream, [this, offset, target] {
        return "counter=" + CounterText(offset, target);
      });
    };
    const WaitOutcome outcome = Await<kSite>(reached, notice);
    if (outcome == WaitOutcome::kReady) return Status::Ok();
    if (outcome == WaitOutcome::kAborted) return latch_->Get();
    return Status::Assertion(ErrorCode::kTimeout, std::string(what) + " timed out",
                             {{"pe", std::to_string(rank_)},
                              {"counter", CounterText(offset, target)},
                              {"timeout_ms", std::to_string(timeout_.count())}});
  }

  /// The 64-bit counter at heap offset `offset` of PE `pe`, now (seq_cst load).
  std::int64_t ReadCounter(int pe, std::uint64_t offset) const {
    return Counter(pe, offset).load(std::memory_order_seq_cst);
  }

  /// The epoch `source` last published to this PE on `slot`.
  std::uint64_t Observed(int slot, int source) const {
    return layout_.Epoch(controls_[rank_], slot, source).value.load(std::memory_order_acquire);
  }

  /// Waits until every PE in `sources` published at least `epoch` on `slot`. On timeout
  /// returns (and latches) TIMEOUT naming `operation`, the slot's meaning `waiting_for` and the
  /// missing PEs; when the latch is raised meanwhile, returns the latched failure. `stream` is
  /// the stream the caller runs for (null: the default stream), for diagnostics.
  template <CallSite kSite>
  Status WaitAll(int slot, std::uint64_t epoch, const std::vector<int>& sources,
                 std::string_view operation, std::string_view waiting_for,
                 const HostStream* stream) const {
    RequireCallable<HostCall::kBoundedWait, kSite>();
    auto all_arrived = [&] {
      for (int source : sources) {
        if (Observed(slot, source) < epoch) return false;
      }
      return true;
    };
    auto notice = [&] {
      return Register(operation, stream, [this, slot, epoch, sources,
                                          what = std::string(waiting_for)] {
        return "waiting_for=" + what + ", epoch=" + std::to_string(epoch) +
               ", missing_pes=" + MissingSources(slot, epoch, sources);
      });
    };
    const WaitOutcome outcome = Await<kSite>(all_arrived, notice);
    if (outcome == WaitOutcome::kReady) return Status::Ok();
    if (outcome == WaitOutcome::kAborted) return latch_->Get();
    return Latched(Timeout(slot, epoch, sources, operation, waiting_for));
  }

  /// Exchange() for a caller that only needs the verdict (the collective units): compares the
  /// members' core words in place, with no allocation, and builds the descriptors (for the
  /// COLLECTIVE_MISMATCH message of MatchDescriptors) only when something differs.
  template <CallSite kSite>
  Status ExchangeAndMatch(const data_plane::CollectiveGroup& group,
                          const CollectiveDescriptor& mine, std::string_view operation,
                          const HostStream* stream) const {
    HPS_RETURN_IF_ERROR(Publish<kSite>(group, mine, operation, stream));
    if (mine.DecidedByCoreWords() && CoreWordsMatch(group, mine)) return Status::Ok();
    std::vector<CollectiveDescriptor> all;
    HPS_RETURN_IF_ERROR(ReadDescriptors(group, mine.sequence, &all));
    return MatchDescriptors(mine, all, &group);
  }

  /// Collective over `group`: publishes `mine` (the group's collective number mine.sequence)
  /// on the group's slot of this PE's control block, waits until every member published its
  /// descriptor for the same number, and returns all of them in member order. Publishing
  /// releases every write this thread made before; reading acquires the members', so the
  /// exchange is also a barrier of the group. TIMEOUT (latched) names the PEs that never
  /// arrived; the latched failure is returned when a peer is lost meanwhile.
  template <CallSite kSite>
  Status Exchange(const data_plane::CollectiveGroup& group, const CollectiveDescriptor& mine,
                  std::string_view operation, const HostStream* stream,
                  std::vector<CollectiveDescriptor>* all) const {
    HPS_RETURN_IF_ERROR(Publish<kSite>(group, mine, operation, stream));
    return ReadDescriptors(group, mine.sequence, all);
  }

  /// The first half of an exchange: publishes `mine` and waits (bounded, abortable) until every
  /// member published its descriptor of the same number.
  template <CallSite kSite>
  Status Publish(const data_plane::CollectiveGroup& group, const CollectiveDescriptor& mine,
                 std::string_view operation, const HostStream* stream) const {
    RequireCallable<HostCall::kExchange, kSite>();
    const std::uint64_t sequence = mine.sequence;
    const int team = group.sync_slot;
    const auto words = mine.Pack();
    CollectiveSlot& own = layout_.Collective(controls_[rank_], team, sequence);
    for (int i = 1; i < CollectiveDescriptor::kWords; ++i) {
      own.words[i - 1].store(words[i], std::memory_order_relaxed);
    }
    own.sequence.store(sequence, std::memory_order_release);
    for (int member = 0; member < group.size(); ++member) {
      const int pe = group.pe(member);
      if (pe != rank_ && !IsRemote(pe)) Ring<kSite>(&controls_[pe]->doorbell);
    }
    if (remote_ != nullptr) PublishToRemotes<kSite>(group, team, sequence, words);
    auto everyone = [&] {
      for (int member = 0; member < group.size(); ++member) {
        if (PublishedSequence(group.pe(member), team, sequence) < sequence) return false;
      }
      return true;
    };
    auto notice = [&] {
      return Register(operation, stream, [this, group, mine] {
        return (group.sync_slot == 0 ? std::string() : GroupLabel(group) + ", ") +
               "collective=" + mine.Describe() +
               ", missing_pes=" + MissingExchange(group, mine.sequence);
      });
    };
    const WaitOutcome outcome = Await<kSite>(everyone, notice);
    if (outcome == WaitOutcome::kAborted) return latch_->Get();
    if (outcome == WaitOutcome::kTimedOut) return Latched(ExchangeTimeout(group, mine));
    return Status::Ok();
  }

  /// A members-only exchange (Backend::ExchangeWithPeers): writes `mine` into every peer's
  /// mailbox for this PE (its round's half, word 0 the round, stored last), then waits
  /// (bounded, abortable) until every peer's words for the same round arrived here, and
  /// returns them in `peers` order.
  template <CallSite kSite>
  Status ExchangeWithPeers(std::span<const PeerRound> peers, const ExchangeWords& mine,
                           std::string_view operation, std::vector<ExchangeWords>* theirs) const {
    RequireCallable<HostCall::kExchange, kSite>();
    for (const PeerRound& peer : peers) {
      if (IsRemote(peer.pe)) {
        // Into the peer's mailbox through UCX: the words, then the round (after them; one
        // message on the messages path).
        const CollectiveSlot& box = layout_.Offer(controls_[rank_], rank_, peer.round);
        Check<kSite>(remote_->PutSignal(
            peer.pe, RemoteOffset(&box.words[0]), &mine[1],
            (CollectiveDescriptor::kWords - 1) * sizeof(std::uint64_t),
            RemoteSignal{RemoteOffset(&box.sequence), 8, SignalAction::kSet,
                         static_cast<std::int64_t>(peer.round)},
            Audience::kTarget));
        continue;
      }
      CollectiveSlot& box = layout_.Offer(controls_[peer.pe], rank_, peer.round);
      for (int i = 1; i < CollectiveDescriptor::kWords; ++i) {
        box.words[i - 1].store(mine[i], std::memory_order_relaxed);
      }
      box.sequence.store(peer.round, std::memory_order_release);
      Ring<kSite>(&controls_[peer.pe]->doorbell);
    }
    auto arrived = [&](const PeerRound& peer) {
      return layout_.Offer(controls_[rank_], peer.pe, peer.round)
                 .sequence.load(std::memory_order_acquire) >= peer.round;
    };
    auto everyone = [&] {
      for (const PeerRound& peer : peers) {
        if (!arrived(peer)) return false;
      }
      return true;
    };
    auto missing = [&] {
      std::string text = "[";
      for (const PeerRound& peer : peers) {
        if (arrived(peer)) continue;
        if (text.size() > 1) text += ',';
        text += std::to_string(peer.pe);
      }
      return text + "]";
    };
    auto notice = [&] {
      return Register(operation, nullptr, [missing] { return "missing_pes=" + missing(); });
    };
    const WaitOutcome outcome = Await<kSite>(everyone, notice);
    if (outcome == WaitOutcome::kAborted) return latch_->Get();
    if (outcome == WaitOutcome::kTimedOut) {
      return Latched(Status::Assertion(ErrorCode::kTimeout,
                                       std::string(operation) + " timed out waiting for PEs",
                                       {{"pe", std::to_string(rank_)},
                                        {"missing_pes", missing()},
                                        {"timeout_ms", std::to_string(timeout_.count())}}));
    }
    theirs->assign(peers.size(), ExchangeWords{});
    for (std::size_t i = 0; i < peers.size(); ++i) {
      const CollectiveSlot& box = layout_.Offer(controls_[rank_], peers[i].pe, peers[i].round);
      ExchangeWords& words = (*theirs)[i];
      words[0] = box.sequence.load(std::memory_order_acquire);
      for (int w = 1; w < CollectiveDescriptor::kWords; ++w) {
        words[w] = box.words[w - 1].load(std::memory_order_relaxed);
      }
      if (words[0] != peers[i].round) {
        return Latched(Status::Assertion(
            ErrorCode::kCollectiveMismatch,
            "a PE is ahead in the members-only exchanges with this PE",
            {{"operation", std::string(operation)}, {"pe", std::to_string(peers[i].pe)},
             {"round", std::to_string(peers[i].round)},
             {"their_round", std::to_string(words[0])}}));
      }
    }
    return Status::Ok();
  }

  /// Runs body(worker) for worker in [0, workers) in parallel, the caller being worker 0, and
  /// returns once all are done (their writes are then visible to the caller).
  void RunParallel(const std::function<void(int worker)>& body) const;

  /// The latched failure of this lifecycle, or OK.
  const FailureLatch& latch() const { return *latch_; }

  /// Registers a blocked wait of `operation` on `stream` (null: the caller's default stream)
  /// in the blocking-op table, until the returned scope ends.
  BlockingOpTable::Scope Register(std::string_view operation, const HostStream* stream,
                                  BlockingOpTable::Describe describe) const;

 private:
  static void CopyBytes(void* destination, const void* source, std::uint64_t bytes);
  std::uint64_t PublishedSequence(int pe, int team, std::uint64_t sequence) const {
    return SlotOf(pe, team, sequence).sequence.load(std::memory_order_acquire);
  }
  // PE `pe`'s descriptor slot of team slot `team`, call `sequence`: in its control block, or,
  // for a remote PE, the mirror of it that PE pushed into this PE's block.
  const CollectiveSlot& SlotOf(int pe, int team, std::uint64_t sequence) const {
    return IsRemote(pe) ? layout_.Mirror(controls_[rank_], team, sequence, pe)
                        : layout_.Collective(controls_[pe], team, sequence);
  }
  // The segment offset, at any PE, of `field` (a field of this PE's control block).
  std::uint64_t RemoteOffset(const void* field) const {
    return control_offset_ + ControlLayout::OffsetIn(controls_[rank_], field);
  }
  // The segment offset, at any PE, of the epoch word this PE publishes on `slot` there.
  std::uint64_t EpochWord(int slot) const {
    return RemoteOffset(&layout_.Epoch(controls_[rank_], slot, rank_));
  }
  // Pushes this PE's descriptor of call `sequence` into every remote member's mirror: first
  // everything this PE wrote lands (flush: the exchange is a barrier), then the words, then
  // the sequence, fenced after them.
  template <CallSite kSite>
  void PublishToRemotes(const data_plane::CollectiveGroup& group, int team, std::uint64_t sequence,
                        const std::array<std::uint64_t, CollectiveDescriptor::kWords>& words) const {
    bool any = false;
    for (int member = 0; member < group.size() && !any; ++member) any = IsRemote(group.pe(member));
    if (!any) return;
    Check<kSite>(remote_->Flush());
    const CollectiveSlot& mirror = layout_.Mirror(controls_[rank_], team, sequence, rank_);
    for (int member = 0; member < group.size(); ++member) {
      const int pe = group.pe(member);
      if (!IsRemote(pe)) continue;
      Check<kSite>(remote_->PutSignal(
          pe, RemoteOffset(&mirror.words[0]), &words[1],
          (CollectiveDescriptor::kWords - 1) * sizeof(std::uint64_t),
          RemoteSignal{RemoteOffset(&mirror.sequence), 8, SignalAction::kSet,
                       static_cast<std::int64_t>(sequence)},
          Audience::kTarget));
    }
  }
  Status ReadDescriptors(const data_plane::CollectiveGroup& group, std::uint64_t sequence,
                         std::vector<CollectiveDescriptor>* all) const;
  std::atomic_ref<std::int64_t> Counter(int pe, std::uint64_t offset) const {
    return std::atomic_ref<std::int64_t>(*reinterpret_cast<std::int64_t*>(heap_bases_[pe] + offset));
  }
  // "0x40 expected>=3 observed=2" for diagnostics.
  std::string CounterText(std::uint64_t offset, std::int64_t target) const;
  // True when every PE's core words equal `mine`'s (so the descriptors certainly match).
  bool CoreWordsMatch(const data_plane::CollectiveGroup& group,
                      const CollectiveDescriptor& mine) const;
  std::string MissingExchange(const data_plane::CollectiveGroup& group,
                              std::uint64_t sequence) const;
  std::string MissingSources(int slot, std::uint64_t epoch, const std::vector<int>& sources) const;
  Status ExchangeTimeout(const data_plane::CollectiveGroup& group,
                         const CollectiveDescriptor& mine) const;
  Status Timeout(int slot, std::uint64_t epoch, const std::vector<int>& sources,
                 std::string_view operation, std::string_view waiting_for) const;
  // Latches `failure` (the first terminal failure wins) and returns it.
  Status Latched(Status failure) const {
    latch_->Set(failure);
    return failure;
  }

  int rank_;
  int size_;
  ControlLayout layout_;
  std::chrono::milliseconds timeout_;
  WaitPolicy wait_policy_;
  std::vector<std::byte*> heap_bases_;
  std::vector<ControlBlock*> controls_;
  CopyWorkers* workers_;  // may be null: the caller alone
  FailureLatch* latch_;
  BlockingOpTable* blocking_ops_;  // may be null: waits are not registered
  UcxTransport* remote_ = nullptr;  // null: every peer is mapped
  std::uint64_t control_offset_ = 0;
};

/// The label of a stream in diagnostics: "stream <id>", or the calling thread's default stream.
std::string StreamLabel(const HostStream* stream);

/// Persistent helper threads for RunParallel. Created with the heap, joined at DestroyHeap.
class CopyWorkers {
 public:
  /// `threads` helpers besides the caller (0: the caller works alone).
  explicit CopyWorkers(int threads);
  ~CopyWorkers();
  CopyWorkers(const CopyWorkers&) = delete;
  CopyWorkers& operator=(const CopyWorkers&) = delete;

  int workers() const { return static_cast<int>(threads_.size()) + 1; }
  void Run(const std::function<void(int worker)>& body) EXCLUDES(run_mutex_, mutex_);

 private:
  void Loop(int worker) EXCLUDES(mutex_);

  // One Run at a time (kernels on different streams share the pool): held across a Run, which
  // waits only for this pool's own workers, never for a peer or a stream.
  Mutex run_mutex_ ACQUIRED_BEFORE(mutex_);
  Mutex mutex_;
  CondVar start_;
  CondVar finished_;
  const std::function<void(int)>* body_ GUARDED_BY(mutex_) = nullptr;
  std::uint64_t generation_ GUARDED_BY(mutex_) = 0;
  int pending_ GUARDED_BY(mutex_) = 0;
  bool stopping_ GUARDED_BY(mutex_) = false;
  std::vector<std::thread> threads_;
};

/// How many copy workers pay off: the machine's cores shared among the PEs on it, at least
/// one (the caller), at most `cap`.
int DefaultCopyWorkers(int local_pes, int cap = 8);

}  // namespace hyper_parallel::shmem::host
