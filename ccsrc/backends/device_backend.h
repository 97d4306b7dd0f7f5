// DeviceBackend: the stream-ordered part of a backend whose heap only its stream operations
// reach (CANN, CUDA), written once over a small per-vendor interface.
//
// What it owns, the same for every device family:
//   - Streams. StreamRef{null} stands for the calling thread's default stream, as on the host
//     backend: each thread gets a device stream of its own (made on first use), and an
//     operation on it is enqueued and then synchronised before the call returns, also when the
//     enqueue failed part-way, so nothing of a returned call is still queued. Any other
//     StreamRef is a stream of the caller's (the framework's current stream): operations are
//     only enqueued, the streams and the local operands the work reads are remembered
//     (CallerStreams) until Quiesce, which synchronises them and reports what failed there.
//     Because no two threads share a stream, no lock serialises the work: no lock is held
//     across a wait or a stream synchronisation, so a thread's signal is never stuck behind
//     another thread's wait (a collective waiting for a peer that waits for that signal).
//   - Collectives. LaunchCollective checks the call across the members on the host, through a
//     small shared segment of this host (HostAgreement, backends/device_agreement.h: the
//     descriptors, matched at once, so a mismatch fails every member at the call), then
//     enqueues on the stream an ordering round (each member raises its flag at every member,
//     then waits for every member's flag: no member's stream passes until every member's
//     stream reached the collective, which is the barrier and the guard of the buffers and
//     round words the kernel writes) and the kernel. On a caller's stream nothing is
//     synchronised: the work is the stream's, its operands kept until Quiesce; on a thread's
//     own stream the call synchronises it, as every default-stream call does. A failed
//     agreement (a timeout) leaves the PEs' sequences out of step: it is latched as the
//     lifecycle's terminal failure (Health).
//   - Host synchronisations are counted (HostSynchronizations, debug_state's
//     host_synchronizations): every wait of the host for a stream, whatever asked for it.
//   - The kernel-side API on a stream (data_plane/kernel_api.h): blocks, batches, counters and
//     epochs, each an enqueue; its body runs in the custom-op call site (backends/call_sites.h),
//     where a vendor's table refuses anything but enqueuing.
//
// What each vendor provides (the protected hooks): making, destroying and synchronising a
// stream; enqueuing a put, a get, a sync-word write, an "at least" wait and a counter add
// against a PE's heap or control block; the user's signal and wait with the vendor's own word
// widths; optionally batched puts. And its heap: CreateHeap, OpenPeers, DestroyHeap (which calls
// ReleaseStreams), LocalHeapBase.
//
// Control block, beside each PE's heap (DeviceControlLayout), for T team slots:
//   flags       [T][2][P]     sync words, 64 bytes apart: the ordering round of team t's
//                             collective n: member p raises [t][n % 2][p] to n at every member
//   epochs      [T][P]        sync words, 64 bytes apart: the kernel-side API's op epochs
//   offers      [2][P][kWords] uint64  members-only exchange rows, by sender and round % 2
//   offer flags [2][P]        sync words: a sender's round once its row is written
//   round words [T][W]        sync words, 64 bytes apart: the kernel-side API's round words,
//                             W = ceil(log2 P) per team slot (KernelApi::RoundWords)
//   constants   one line      two 32-bit words, 0 and -1: the source of a 64-bit signal's
//                             upper half (a device-memory operand, so a set needs no host copy)
// Sync words carry the number's low 31 bits (they fit a vendor's 32-bit signals and grow for
// two billion collectives); numbers only grow; the block starts zeroed (the constants set).
// Round words are the exception: a kernel sets them to the step within its call (RoundValue's
// low 16 bits, which fit a 32-bit signal), and a collective's kernel, once every wait on its
// own round words passed, sets those words back to 0 before it returns. That is safe: in one
// call each word at a PE has one writer, whose every write the PE waits for, and no member's
// stream writes in the next call before it passed that call's ordering round, which this PE's
// stream enters only after its kernel (and the reset) ran.
//
// How to add a backend: docs/architecture.md, "How to add a backend".
//
// Thread-safety: as Backend. The thread-stream table and CallerStreams have their own mutexes,
// held only for a lookup or an insertion.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "backends/collective_descriptor.h"
#include "backends/device_agreement.h"
#include "backends/failure_latch.h"
#include "base/mutex.h"
#include "base/status.h"
#include "data_plane/kernel_api.h"

namespace hyper_parallel::shmem {

/// `value` rounded up to a multiple of `to` (the vendors' heap and control-block sizes).
constexpr std::uint64_t RoundUp(std::uint64_t value, std::uint64_t to) {
  return (value + to - 1) / to * to;
}

/// A vendor's own value for `comparison`, given its values in Comparison's order.
template <class Vendor>
constexpr Vendor VendorComparison(Comparison comparison, Vendor eq, Vendor ne, Vendor gt,
                                  Vendor ge, Vendor lt, Vendor le) {
  switch (comparison) {
    case Comparison::kEq: return eq;
    case Comparison::kNe: return ne;
    case Comparison::kGt: return gt;
    case Comparison::kGe: return ge;
    case Comparison::kLt: return lt;
    case Comparison::kLe: return le;
  }
  return eq;
}

struct DeviceControlLayout {
  static constexpr std::uint64_t kLine = 64;
  static constexpr std::uint64_t kRowBytes = CollectiveDescriptor::kWords * sizeof(std::uint64_t);

  explicit DeviceControlLayout(int size = 1, int team_slots = 1)
      : pes(static_cast<std::uint64_t>(size)), teams(static_cast<std::uint64_t>(team_slots)) {
    flags = 0;
    epochs = flags + teams * 2 * pes * kLine;
    offers = epochs + teams * pes * kLine;
    offer_flags = (offers + 2 * pes * kRowBytes + kLine - 1) / kLine * kLine;
    round_words = 1;
    while ((std::uint64_t{1} << round_words) < pes) ++round_words;
    rounds = offer_flags + 2 * pes * kLine;
    constants = rounds + teams * round_words * kLine;
    bytes = constants + kLine;
  }

  /// Offsets inside the block.
  std::uint64_t Flag(int team, std::uint64_t sequence, int pe) const {
    return flags + ((Team(team) * 2 + sequence % 2) * pes + static_cast<std::uint64_t>(pe)) * kLine;
  }
  std::uint64_t Epoch(int team, int source) const {
    return epochs + (Team(team) * pes + static_cast<std::uint64_t>(source)) * kLine;
  }
  std::uint64_t OfferRow(std::uint64_t round, int source) const {
    return offers + (round % 2 * pes + static_cast<std::uint64_t>(source)) * kRowBytes;
  }
  std::uint64_t OfferFlag(std::uint64_t round, int source) const {
    return offer_flags + (round % 2 * pes + static_cast<std::uint64_t>(source)) * kLine;
  }
  std::uint64_t RoundWord(int team, int word) const {
    return rounds + (Team(team) * round_words + static_cast<std::uint64_t>(word)) * kLine;
  }

  std::uint64_t pes = 1;
  std::uint64_t teams = 1;
  std::uint64_t flags = 0;
  std::uint64_t epochs = 0;
  std::uint64_t offers = 0;
  std::uint64_t offer_flags = 0;
  std::uint64_t rounds = 0;
  std::uint64_t round_words = 1;
  std::uint64_t constants = 0;  ///< int32 0 at +0, int32 -1 at +4
  std::uint64_t bytes = 0;

  /// The block's initial contents: zeros, and the constants.
  std::vector<std::byte> Initial() const {
    std::vector<std::byte> block(bytes);
    std::fill_n(block.begin() + static_cast<std::ptrdiff_t>(constants + 4), 4, std::byte{0xff});
    return block;
  }

 private:
  static std::uint64_t Team(int team) { return static_cast<std::uint64_t>(team); }
};

/// The caller's streams work was enqueued on, and the operands it holds, until the next Quiesce.
class CallerStreams {
 public:
  /// Operands held at most: past it the backend synchronises the noted streams once (a
  /// counted host synchronisation) and lets them go, so a long loop on a caller's stream
  /// without a free or close holds a bounded number of tensors.
  static constexpr std::size_t kMaxHeld = 4096;

  /// Notes that work holding `keep_alive` (may be null) was enqueued on `stream`; true when
  /// kMaxHeld operands are held now.
  bool Note(void* stream, std::shared_ptr<const void> keep_alive) EXCLUDES(mutex_);

  /// Everything noted so far, forgotten here: the caller synchronises the streams, then drops
  /// the operands (work noted meanwhile keeps its own).
  struct Taken {
    std::vector<void*> streams;
    std::vector<std::shared_ptr<const void>> keep_alive;
  };
  Taken Take() EXCLUDES(mutex_);

 private:
  Mutex mutex_;
  std::vector<void*> streams_ GUARDED_BY(mutex_);
  std::vector<std::shared_ptr<const void>> keep_alive_ GUARDED_BY(mutex_);
};

class DeviceBackend : public Backend {
 public:
  ~DeviceBackend() override = default;

  Status Agree(const data_plane::CollectiveGroup& group, const CollectiveDescriptor& mine,
               std::string_view operation, Agreement* agreement) final;
  Status ExchangeWithPeers(std::span<const PeerRound> peers, const ExchangeWords& mine,
                           std::string_view operation, std::vector<ExchangeWords>* theirs) final;
  Status Quiesce() final;
  StreamRef CurrentStream() const final { return StreamRef{}; }
  bool RunsInline(StreamRef stream) const final { return stream.native == nullptr; }
  bool SynchronizesInline() const final { return true; }
  // A collective's host part (the agreement) is done when LaunchCollective returns; on a
  // caller's stream its device part is that stream's, tracked until Quiesce.
  bool CollectiveRunsInline(StreamRef) const final { return true; }
  std::uint64_t HostSynchronizations() const final {
    return host_synchronizations_.load(std::memory_order_relaxed);
  }
  Status Health() const final { return terminal_.Get(); }

  Status Put(StreamRef stream, std::uint64_t offset, const void* source, std::uint64_t bytes,
             int pe, KeepAlive keep_alive) final;
  Status Get(StreamRef stream, void* destination, std::uint64_t offset, std::uint64_t bytes,
             int pe, KeepAlive keep_alive) final;
  Status Signal(StreamRef stream, std::uint64_t offset, SignalWidth width, SignalOp op,
                std::int64_t value, int pe) final;
  Status PutSignal(StreamRef stream, std::uint64_t offset, const void* source,
                   std::uint64_t bytes, std::uint64_t signal_offset, SignalWidth width,
                   SignalOp op, std::int64_t value, int pe, KeepAlive keep_alive) final;
  Status WaitSignal(StreamRef stream, std::uint64_t offset, SignalWidth width,
                    Comparison comparison, std::int64_t value) final;
  // fence and quiet are stream order (docs/atomics.md, "Backends"): a stream runs each
  // operation after the ones before it completed, so nothing needs enqueuing; on the default
  // stream the call synchronises it, which completes every earlier operation of the thread.
  Status Fence(StreamRef stream) final;
  Status Quiet(StreamRef stream) final;
  Status Launch(StreamRef stream, std::string_view name, Kernel kernel,
                KeepAlive keep_alive) final;
  Status LaunchCollective(StreamRef stream, const data_plane::CollectiveGroup& group,
                          const CollectiveDescriptor& descriptor, std::string_view name,
                          Kernel kernel, KeepAlive keep_alive) final;

 protected:
  /// The memory an enqueued operation addresses at a PE: its heap, or its control block.
  enum class Region : std::uint8_t { kHeap, kControl };

  DeviceBackend() = default;

  /// Starts a lifecycle for `spec` (CreateHeap calls it first).
  void BeginHeap(const HeapSpec& spec);
  const HeapSpec& spec() const { return spec_; }
  const DeviceControlLayout& layout() const { return layout_; }
  /// The calling thread's stream for default-stream work, made on first use.
  Status ThreadStream(void** stream) EXCLUDES(streams_mutex_);
  /// Synchronises and destroys every thread's stream (DestroyHeap, with nothing in flight).
  Status ReleaseStreams() EXCLUDES(streams_mutex_);
  /// Forgets every thread's stream without a vendor call (the vendor is gone or failed).
  void AbandonStreams() EXCLUDES(streams_mutex_);
  /// Keeps `failure` as the lifecycle's terminal failure (the first wins) and returns it.
  Status Latch(Status failure);
  /// Maps the host agreement segment (collective; OpenPeers calls it first, on every PE) and
  /// unmaps it (DestroyHeap).
  Status OpenAgreement();
  void CloseAgreement() { agreement_.Close(); }
  /// Waits for `stream` on the host, counted in HostSynchronizations.
  Status HostSynchronize(void* stream);

  // ---- the vendor's calls ------------------------------------------------------------------
  virtual Status CreateStream(void** stream) = 0;
  virtual Status DestroyStream(void* stream) = 0;
  /// Runs what was enqueued on `stream` and reports what failed there (a wait that gave up
  /// is TIMEOUT naming what it waited for).
  virtual Status Synchronize(void* stream) = 0;
  /// Copies `bytes` from local `source` to `offset` of `region` at PE `pe`.
  virtual Status EnqueuePut(void* stream, int pe, Region region, std::uint64_t offset,
                            const void* source, std::uint64_t bytes) = 0;
  /// Copies `bytes` from `offset` of `region` at PE `pe` to local `destination`.
  virtual Status EnqueueGet(void* stream, void* destination, int pe, Region region,
                            std::uint64_t offset, std::uint64_t bytes) = 0;
  /// Sets the sync word at `offset` of `region` at PE `pe` to `value` (31 bits), after every
  /// write the stream made before.
  virtual Status EnqueueSetWord(void* stream, int pe, Region region, std::uint64_t offset,
                                std::int64_t value) = 0;
  /// Makes the stream wait until this PE's word at `offset` of `region` is at least `value`;
  /// `what` names it when it gives up.
  virtual Status EnqueueWaitAtLeast(void* stream, Region region, std::uint64_t offset,
                                    std::int64_t value, std::string_view what) = 0;
  /// Adds `value` to the counter at heap offset `offset` of PE `pe`, after every write the
  /// stream made before.
  virtual Status EnqueueAddCounter(void* stream, int pe, std::uint64_t offset,
                                   std::int64_t value) = 0;
  /// UNSUPPORTED_CAPABILITY (before anything is enqueued) for a user signal or a wait this
  /// vendor cannot make: a word width or a value it has no signal for.
  virtual Status CheckSignal(SignalWidth width, std::int64_t value) const = 0;
  virtual Status CheckWait(SignalWidth width, std::int64_t value) const = 0;
  /// The user's signal on PE `pe`'s word at heap `offset`, and a wait on this PE's.
  virtual Status EnqueueSignal(void* stream, int pe, std::uint64_t offset, SignalWidth width,
                               SignalOp op, std::int64_t value) = 0;
  virtual Status EnqueueWaitSignal(void* stream, std::uint64_t offset, SignalWidth width,
                                   Comparison comparison, std::int64_t value) = 0;
  /// Enqueues one element-wise step (data_plane/elementwise.h) on this PE's memory; a vendor
  /// without a reduction kernel keeps the default, UNSUPPORTED_CAPABILITY, and says so in
  /// ComputesElementwise.
  virtual bool ComputesElementwise() const { return false; }
  virtual Status EnqueueElementwise(void* stream, const data_plane::ElementwiseStep& step);
  /// A batch of puts to heaps; by default one EnqueuePut each.
  virtual Status EnqueuePutBatch(void* stream, std::span<const data_plane::BlockPut> puts);
  /// A batch of puts each followed by its counter addition; by default a put and an addition
  /// each, in order.
  virtual Status EnqueuePutBatchSignalled(void* stream,
                                          std::span<const data_plane::SignalledPut> puts);

 private:
  class StreamKernelApi;

  // Runs `enqueue` on the stream `stream` stands for: a caller's stream only enqueues (its
  // operands are kept until Quiesce); the thread's own is synchronised before returning.
  template <class Enqueue>
  Status OnStream(StreamRef stream, KeepAlive keep_alive, Enqueue enqueue);
  // Enqueues the ordering round of `group`'s collective number `sequence` on `stream`.
  Status EnqueueOrdering(void* stream, const data_plane::CollectiveGroup& group,
                         std::uint64_t sequence, std::string_view operation);
  // Runs a kernel's body on `stream` in the custom-op call site; a collective's kernel may
  // also read its heap back (KernelApi::ReadLocal) and resets its round words afterwards.
  Status RunKernel(void* stream, const Kernel& kernel, bool collective);

  HeapSpec spec_;
  DeviceControlLayout layout_;
  HostAgreement agreement_;
  std::atomic<std::uint64_t> host_synchronizations_{0};
  FailureLatch terminal_;
  CallerStreams caller_streams_;  // queued on since the last Quiesce
  Mutex streams_mutex_;
  std::map<long, void*> thread_streams_ GUARDED_BY(streams_mutex_);  // by thread id
};

}  // namespace hyper_parallel::shmem
