// HostDevice: the device surface an op kernel sees on the host backend.
//
// A kernel (ops/) is written against this surface only: every PE's heap as mapped in this
// process, copies, the exchange of collective descriptors, epoch publication to a peer's sync
// slot, bounded waits for epochs, and a small pool of copy workers that stand in for a device's
// cores. The vendor calls stay here, guarded by the where-callable table like every other
// host-backend primitive.
//
// Epochs are arrivals: a kernel publishes epoch e on slot s to PE p by adding one to one of p's
// arrival counters of slot s for e's parity (after its data, then p's doorbell), and waits
// until as many arrivals as it named sources came in: a source publishes to a PE once per time
// that PE's waits name it, so the count tells, with no word per source (data_plane/
// kernel_api.h). The counters only grow; this PE keeps the running totals it expects per slot,
// parity and kind of counter. Every wait gives up at once when
// the failure latch is raised (a peer is gone), and latches its own timeout: a collective that
// timed out leaves the PEs' sequences out of step for good.
//
// Descriptor exchanges of a group on one host read every member's slot (flat); a group across
// hosts agrees in rounds through its hosts' leaders (AgreeAcrossHosts; docs/architecture.md,
// "Agreement across hosts").
//
// Thread-safety: one kernel runs at a time per stream; RunParallel may be called from any one
// thread at a time (the backend serialises kernels that use the pool).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

#include "backends/blocking_ops.h"
#include "backends/collective_descriptor.h"
#include "backends/wait/call_sites.h"
#include "backends/host/control_block.h"
#include "backends/wait/doorbell.h"
#include "backends/host/liveness.h"
#include "backends/host/peer_access.h"
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
        access_(std::move(heap_bases), std::move(controls)),
        workers_(workers),
        latch_(latch),
        blocking_ops_(blocking_ops),
        tallies_(std::make_unique<std::atomic<std::uint64_t>[]>(
            static_cast<std::size_t>(teams) * 4)) {}

  /// Reaches the PEs `transport` serves through it (their heaps and control blocks are not
  /// mapped here: heap(pe) is null); `control_offset` is where a segment's control block
  /// starts; `hosts[pe]` names PE pe's host by its lowest PE number (the PEs that map each
  /// other; every PE's own with HYPER_PARALLEL_SHMEM_REMOTE_PEERS=all), the same on every PE.
  /// Called once, before any kernel runs.
  /// `told(pe)` is called (from a waiting thread) when this PE's control block says a PE of
  /// this host learned that `pe` is lost (ControlBlock::told_lost).
  void AttachRemote(RemoteTransport* transport, std::vector<PeerRoute> routes,
                    std::uint64_t control_offset, std::vector<int> hosts,
                    std::function<void(int)> told) {
    access_.AttachRemote(transport, std::move(routes));
    control_offset_ = control_offset;
    hosts_ = std::move(hosts);
    told_ = std::move(told);
  }
  /// How every PE is reached (peer_access.h).
  const PeerAccess& access() const { return access_; }
  /// Whether PE `pe` is reached through the network transport.
  bool IsRemote(int pe) const { return access_.IsRemote(pe); }
  /// Whether any PE is.
  bool HasRemote() const { return access_.HasRemote(); }
  /// PE `pe`'s host as its lowest PE number (0 for every PE when none is remote).
  int HostOf(int pe) const { return hosts_.empty() ? 0 : hosts_[static_cast<std::size_t>(pe)]; }

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// Address of heap offset 0 of PE `pe` in this process.
  std::byte* heap(int pe) const { return access_.heap(pe); }
  /// How many copy workers (the caller included) RunParallel uses.
  int workers() const;

  template <CallSite kSite>
  void Copy(void* destination, const void* source, std::uint64_t bytes) const {
    RequireCallable<HostCall::kCopyBytes, kSite>();
    CopyBytes(destination, source, bytes);
  }

  /// Copies `bytes` from local `source` to heap offset `offset` of PE `pe`: a memcpy into its
  /// mapping, or a UCX put to a remote PE (a failure is latched: the lifecycle cannot go on).
  /// `audience`: whether a later flush (a barrier) must wait for it (remote_transport.h).
  template <CallSite kSite>
  void PutTo(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
             Audience audience = Audience::kAnyone) const {
    Check<kSite>(access_.Put<kSite>(pe, offset, source, bytes, audience));
  }

  /// PutTo, then adds `value` to the 64-bit counter at heap offset `counter_offset` of the same
  /// PE (AddCounter): one message to a remote PE.
  template <CallSite kSite>
  void PutThenAdd(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
                  std::uint64_t counter_offset, std::int64_t value) const {
    Check<kSite>(access_.PutSignal<kSite>(
        pe, offset, source, bytes, RemoteSignal{counter_offset, 8, SignalAction::kAdd, value}));
  }

  /// PutTo, then Publish(pe, slot, epoch): one message to a remote PE. The data is the
  /// collective's own, which the target waits for through the epoch.
  template <CallSite kSite>
  void PutThenPublish(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
                      int slot, std::uint64_t epoch) const {
    RequireCallable<HostCall::kCopyBytes, kSite>();
    if (IsRemote(pe)) {
      Check<kSite>(access_.transport()->PutSignal(
          pe, offset, source, bytes,
          ArrivalSignal(slot, epoch), Audience::kTarget));
      return;
    }
    if (bytes > 0) CopyBytes(access_.heap(pe) + offset, source, bytes);
    Publish<kSite>(pe, slot, epoch);
  }

  /// The signal that publishes `epoch` on `slot` to a remote PE (one arrival; Publish).
  RemoteSignal ArrivalSignal(int slot, std::uint64_t epoch) const {
    return RemoteSignal{RemoteOffset(&layout_.Arrivals(access_.control(rank_), slot, epoch,
                                                       kArrivalLanes)),
                        8, SignalAction::kAdd, 1};
  }
  /// A put and `signal` to a remote PE without waiting (RemoteTransport::Begin): on its way when
  /// this returns, its `source` the caller's until FinishRemote(out).
  template <CallSite kSite>
  void BeginRemote(Outbound* out, int pe, std::uint64_t offset,
                   const void* source, std::uint64_t bytes, const RemoteSignal& signal,
                   Audience audience) const {
    RequireCallable<HostCall::kCopyBytes, kSite>();
    Check<kSite>(access_.transport()->Begin(out, pe, offset, source, bytes, signal, audience));
  }
  /// Waits until every message begun on `out` has left (a failure is latched).
  template <CallSite kSite>
  void FinishRemote(Outbound* out) const {
    RequireCallable<HostCall::kCopyBytes, kSite>();
    Check<kSite>(access_.transport()->Finish(out));
  }

  /// Round words (data_plane::KernelApi::RoundWords): as many per team slot as the world's
  /// dissemination rounds.
  int RoundWords() const { return static_cast<int>(layout_.rounds); }

  /// Sets round word `word` of `slot` at PE `pe` to `value`, after every write this thread made
  /// before there (remote: with the last block of `bytes` at `offset`, one message; `bytes` 0:
  /// the word alone).
  template <CallSite kSite>
  void PutThenSetRound(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
                       int slot, int word, std::uint64_t value) const {
    RequireCallable<HostCall::kAtomicSignal, kSite>();
    if (IsRemote(pe)) {
      Check<kSite>(access_.transport()->PutSignal(
          pe, offset, source, bytes,
          RemoteSignal{RemoteOffset(&layout_.Step(access_.control(rank_), slot, word)), 8,
                       SignalAction::kSet, static_cast<std::int64_t>(value)},
          Audience::kTarget));
      return;
    }
    if (bytes > 0) CopyBytes(access_.heap(pe) + offset, source, bytes);
    layout_.Step(access_.control(pe), slot, word).value.store(value, std::memory_order_seq_cst);
    RingAfterSeqCst<kSite>(&access_.control(pe)->doorbell);
  }

  /// Waits until this PE's round word `word` of `slot` holds at least `value` (set by PE
  /// `source`). TIMEOUT (latched) names `operation`, `waiting_for` and the source; the latched
  /// failure is returned when a peer is lost meanwhile.
  template <CallSite kSite>
  Status WaitRound(int slot, int word, std::uint64_t value, int source,
                   std::string_view operation, std::string_view waiting_for,
                   const HostStream* stream) const {
    RequireCallable<HostCall::kBoundedWait, kSite>();
    const PaddedCounter& round = layout_.Step(access_.control(rank_), slot, word);
    auto ready = [&] { return round.value.load(std::memory_order_acquire) >= value; };
    auto describe = [&round, value, word, source, what = std::string(waiting_for)] {
      return "waiting_for=" + what + ", round_word=" + std::to_string(word) +
             " expected>=" + std::to_string(value) +
             " observed=" + std::to_string(round.value.load(std::memory_order_acquire)) +
             ", missing_pes=[" + std::to_string(source) + "]";
    };
    auto notice = [&] { return Register(operation, stream, describe); };
    const WaitOutcome outcome = Await<kSite>(ready, notice);
    if (outcome == WaitOutcome::kReady) return Status::Ok();
    if (outcome == WaitOutcome::kAborted) return latch_->Get();
    return Latched(Status::Assertion(ErrorCode::kTimeout,
                                     std::string(operation) + " timed out waiting for a round",
                                     {{"pe", std::to_string(rank_)},
                                      {"waiting_for", std::string(waiting_for)},
                                      {"round_word", std::to_string(word)},
                                      {"missing_pes", "[" + std::to_string(source) + "]"},
                                      {"timeout_ms", std::to_string(timeout_.count())}}));
  }

  /// Waits on this PE's doorbell until `ready()`, the timeout or the latch (WaitUntil with the
  /// PE's policy). With remote peers the waiter drives the network itself: it progresses while
  /// it spins and sleeps on the network's events when it can (remote_transport.h).
  template <CallSite kSite, class Ready, class Notice>
  WaitOutcome Await(Ready&& ready, Notice&& notice) const {
    Doorbell* bell = &access_.control(rank_)->doorbell;
    if (!access_.HasRemote()) {
      return WaitUntil<kSite>(bell, ready, timeout_, wait_policy_, latch_->flag(), notice);
    }
    if (ready()) return WaitOutcome::kReady;
    RemoteTransport::Waiting waiting(access_.transport());
    return WaitUntil<kSite>(
        bell,
        [&] {
          access_.transport()->Poll();
          const int told = access_.control(rank_)->told_lost.load(std::memory_order_relaxed);
          if (told >= 0 && told_) [[unlikely]] told_(told);
          return ready();
        },
        timeout_, wait_policy_, latch_->flag(), notice, access_.transport());
  }

  /// Latches a failed remote operation (terminal) and wakes this PE's waiters to see it.
  template <CallSite kSite>
  void Check(const Status& status) const {
    if (status.ok()) [[likely]] return;
    latch_->Set(status);
    Ring<kSite>(&access_.control(rank_)->doorbell);
  }

  /// Publishes `epoch` on `slot` to PE `pe` (one arrival), after every write this thread made
  /// before. A PE that maps `pe`'s block adds to its local counter, the network to the other,
  /// so no word takes both CPU and network adds (a NIC's atomics need not be coherent with the
  /// CPU's).
  template <CallSite kSite>
  void Publish(int pe, int slot, std::uint64_t epoch) const {
    RequireCallable<HostCall::kAtomicSignal, kSite>();
    if (IsRemote(pe)) {
      Check<kSite>(access_.transport()->PutSignal(pe, 0, nullptr, 0, ArrivalSignal(slot, epoch),
                                      Audience::kTarget));
      return;
    }
    layout_.Arrivals(access_.control(pe), slot, epoch, rank_ % kArrivalLanes)
        .value.fetch_add(1, std::memory_order_seq_cst);
    RingAfterSeqCst<kSite>(&access_.control(pe)->doorbell);
  }

  /// Adds `value` to the 64-bit counter at heap offset `offset` of PE `pe` (seq_cst: after
  /// every write this thread made before) and wakes a sleeper there.
  template <CallSite kSite>
  void AddCounter(int pe, std::uint64_t offset, std::int64_t value) const {
    Check<kSite>(access_.PutSignal<kSite>(pe, 0, nullptr, 0,
                                          RemoteSignal{offset, 8, SignalAction::kAdd, value}));
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

  /// The arrivals this PE's counter of `slot` for collectives of `epoch`'s parity holds, from
  /// mapping PEs or (`remote`) through the network.
  std::uint64_t Arrived(int slot, std::uint64_t epoch, bool remote) const {
    if (remote) {
      return layout_.Arrivals(access_.control(rank_), slot, epoch, kArrivalLanes)
          .value.load(std::memory_order_acquire);
    }
    std::uint64_t sum = 0;
    for (int lane = 0; lane < kArrivalLanes; ++lane) {
      sum += layout_.Arrivals(access_.control(rank_), slot, epoch, lane).value.load(std::memory_order_acquire);
    }
    return sum;
  }

  /// Waits until every PE in `sources` published `epoch` on `slot`: as many arrivals on each
  /// counter as `sources` names PEs of its kind (mapped or remote), beyond those earlier waits
  /// of the slot and parity counted. On timeout returns (and latches) TIMEOUT naming
  /// `operation`, the slot's meaning `waiting_for`, how many arrived and the sources; when the
  /// latch is raised meanwhile, returns the latched failure. `stream` is the stream the caller
  /// runs for (null: the default stream), for diagnostics.
  template <CallSite kSite>
  Status WaitAll(int slot, std::uint64_t epoch, const std::vector<int>& sources,
                 std::string_view operation, std::string_view waiting_for,
                 const HostStream* stream) const {
    RequireCallable<HostCall::kBoundedWait, kSite>();
    std::uint64_t remote_sources = 0;
    for (int source : sources) remote_sources += IsRemote(source) ? 1 : 0;
    std::atomic<std::uint64_t>& local_tally = Tally(slot, epoch, false);
    std::atomic<std::uint64_t>& remote_tally = Tally(slot, epoch, true);
    const std::uint64_t local_target =
        local_tally.load(std::memory_order_relaxed) + sources.size() - remote_sources;
    const std::uint64_t remote_target = remote_tally.load(std::memory_order_relaxed) + remote_sources;
    const std::uint64_t before = local_target + remote_target - sources.size();
    auto all_arrived = [&] {
      return (remote_sources == 0 || Arrived(slot, epoch, true) >= remote_target) &&
             Arrived(slot, epoch, false) >= local_target;
    };
    auto notice = [&] {
      return Register(operation, stream, [this, slot, epoch, before, sources,
                                          what = std::string(waiting_for)] {
        return "waiting_for=" + what + ", epoch=" + std::to_string(epoch) + ", " +
               ArrivalText(slot, epoch, before, sources);
      });
    };
    const WaitOutcome outcome = Await<kSite>(all_arrived, notice);
    if (outcome == WaitOutcome::kReady) {
      local_tally.store(local_target, std::memory_order_relaxed);
      remote_tally.store(remote_target, std::memory_order_relaxed);
      return Status::Ok();
    }
    if (outcome == WaitOutcome::kAborted) return latch_->Get();
    return Latched(Timeout(slot, epoch, before, sources, operation, waiting_for));
  }

  /// Agree() for a caller that only needs the verdict (the collective units): on one host it
  /// compares the members' core words in place, with no allocation, and builds the descriptors
  /// (for the COLLECTIVE_MISMATCH message of MatchDescriptors) only when something differs.
  template <CallSite kSite>
  Status ExchangeAndMatch(const data_plane::CollectiveGroup& group,
                          const CollectiveDescriptor& mine, std::string_view operation,
                          const HostStream* stream) const;

  /// Collective over `group` (Backend::Agree): publishes `mine` (the group's collective number
  /// mine.sequence) and learns the verdict and the facts of every member's descriptor of that
  /// number. On one host every member reads every member's slot; across hosts the members
  /// agree through their hosts' leaders (AgreeAcrossHosts). Either way it is a barrier of the
  /// group: publishing releases every write this thread made before (and a member with remote
  /// peers first waits until its puts landed), reading acquires the members'. TIMEOUT (latched)
  /// names the PEs that did not arrive; the latched failure is returned when a peer is lost
  /// meanwhile.
  template <CallSite kSite>
  Status Agree(const data_plane::CollectiveGroup& group, const CollectiveDescriptor& mine,
               std::string_view operation, const HostStream* stream,
               Agreement* agreement) const;

  /// The first half of an exchange on one host: publishes `mine` and waits (bounded,
  /// abortable) until every member published its descriptor of the same number.
  template <CallSite kSite>
  Status Publish(const data_plane::CollectiveGroup& group, const CollectiveDescriptor& mine,
                 std::string_view operation, const HostStream* stream) const;

  /// Whether `group` has members on other hosts (every member decides alike).
  bool Spans(const data_plane::CollectiveGroup& group) const {
    if (!access_.HasRemote()) return false;
    for (int member = 0; member < group.size(); ++member) {
      if (IsRemote(group.pe(member))) return true;
    }
    return false;
  }

  /// The agreement of a group across hosts (docs/architecture.md, "Agreement across hosts"):
  ///   1. every member waits until its own remote puts landed, then publishes its descriptor in
  ///      its own slot, as on one host;
  ///   2. each host's leader (its first member in group order) reads its host's members'
  ///      descriptors through shared memory and folds them into a DescriptorSummary;
  ///   3. the H leaders disseminate: in round k (k < ceil(log2 H)) leader i sends its summary
  ///      to leader i + 2^k and combines the one leader i - 2^k sent (one message each way);
  ///   4. each leader publishes the result in its verdict slot, which its host's members read.
  /// Every member ends with the same summary of every member's descriptor, and, since nothing
  /// reaches a leader's last round before every member published, with a barrier. Slots are two
  /// deep (call parity): a leader can send round k of call n + 2 only once every member entered
  /// n + 1, after it read round k of call n.
  template <CallSite kSite>
  Status AgreeAcrossHosts(const data_plane::CollectiveGroup& group,
                          const CollectiveDescriptor& mine, std::string_view operation,
                          const HostStream* stream, DescriptorSummary* summary) const;

  /// A members-only exchange (Backend::ExchangeWithPeers): writes `mine` into every peer's
  /// mailbox for this PE (its round's half, word 0 the round, stored last), then waits
  /// (bounded, abortable) until every peer's words for the same round arrived here, and
  /// returns them in `peers` order.
  template <CallSite kSite>
  Status ExchangeWithPeers(std::span<const PeerRound> peers, const ExchangeWords& mine,
                           std::string_view operation, std::vector<ExchangeWords>* theirs) const;

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
  // The sequence number in PE `pe`'s own descriptor slot of team slot `team`, call
  // `sequence`'s parity (`pe` maps into this process).
  std::uint64_t PublishedSequence(int pe, int team, std::uint64_t sequence) const {
    return layout_.Collective(access_.control(pe), team, sequence).sequence.load(std::memory_order_acquire);
  }
  // Writes `mine` into this PE's own slot of the group's team slot (the words, then the
  // sequence, release) and rings the members that map it.
  template <CallSite kSite>
  void StoreOwn(const data_plane::CollectiveGroup& group, const CollectiveDescriptor& mine) const;
  // Waits (bounded, abortable) until `slot` holds call `sequence`, which PE `from` sends;
  // `describe` and `what` name the wait in diagnostics and in the TIMEOUT.
  template <CallSite kSite, class Describe>
  Status AwaitSlot(const SummarySlot& slot, std::uint64_t sequence, std::string_view operation,
                   const HostStream* stream, const Describe& describe, int from,
                   std::string what) const;
  // Sends `summary` to leader `to` for its round `round` slot: the words, then the sequence
  // (one message through the network).
  template <CallSite kSite>
  void SendSummary(int to, int team, int round, const DescriptorSummary& summary) const;
  static void StoreSummary(SummarySlot& slot, const DescriptorSummary& summary);
  // Reads the summary of call `sequence` from `slot` (sent by PE `from`); COLLECTIVE_MISMATCH
  // when it holds a later call (a PE skipped one).
  static Status ReadSummary(const SummarySlot& slot, std::uint64_t sequence,
                            const data_plane::CollectiveGroup& group, int from,
                            DescriptorSummary* summary);
  // Reads PE `pe`'s own descriptor of call `sequence` (COLLECTIVE_MISMATCH when its slot holds
  // a later call).
  Status ReadOwn(int pe, const data_plane::CollectiveGroup& group, std::uint64_t sequence,
                 CollectiveDescriptor* descriptor) const;
  // The segment offset, at any PE, of `field` (a field of this PE's control block).
  std::uint64_t RemoteOffset(const void* field) const {
    return control_offset_ + ControlLayout::OffsetIn(access_.control(rank_), field);
  }
  // The arrivals this PE expects in total on `slot`'s counter for `epoch`'s parity (`remote`:
  // the network's), after the last wait.
  std::atomic<std::uint64_t>& Tally(int slot, std::uint64_t epoch, bool remote) const {
    return tallies_[(static_cast<std::size_t>(slot) * 2 + epoch % 2) * 2 + (remote ? 1 : 0)];
  }
  // "arrived=1 of 3, sources=[1,2,3]" for diagnostics.
  std::string ArrivalText(int slot, std::uint64_t epoch, std::uint64_t before,
                          const std::vector<int>& sources) const;
  Status ReadDescriptors(const data_plane::CollectiveGroup& group, std::uint64_t sequence,
                         std::vector<CollectiveDescriptor>* all) const;
  std::atomic_ref<std::int64_t> Counter(int pe, std::uint64_t offset) const {
    return std::atomic_ref<std::int64_t>(*reinterpret_cast<std::int64_t*>(access_.heap(pe) + offset));
  }
  // "0x40 expected>=3 observed=2" for diagnostics.
  std::string CounterText(std::uint64_t offset, std::int64_t target) const;
  // True when every PE's core words equal `mine`'s (so the descriptors certainly match).
  bool CoreWordsMatch(const data_plane::CollectiveGroup& group,
                      const CollectiveDescriptor& mine) const;
  std::string MissingExchange(const data_plane::CollectiveGroup& group,
                              std::uint64_t sequence) const;
  Status ExchangeTimeout(const data_plane::CollectiveGroup& group,
                         const CollectiveDescriptor& mine) const;
  Status Timeout(int slot, std::uint64_t epoch, std::uint64_t before,
                 const std::vector<int>& sources, std::string_view operation,
                 std::string_view waiting_for) const;
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
  PeerAccess access_;
  CopyWorkers* workers_;  // may be null: the caller alone
  FailureLatch* latch_;
  BlockingOpTable* blocking_ops_;  // may be null: waits are not registered
  std::uint64_t control_offset_ = 0;
  std::vector<int> hosts_;  // with remote peers: each PE's host, as its lowest PE number
  std::function<void(int)> told_;  // with remote peers: a loss a PE of this host passed on
  // Per team slot, parity and kind of counter: the arrivals expected in total after the last
  // wait (a slot has one collective at a time: the Runtime's claim).
  std::unique_ptr<std::atomic<std::uint64_t>[]> tallies_;
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

#include "backends/host/host_agreement.h"  // HostDevice's agreements, defined
