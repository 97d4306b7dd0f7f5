// Backend: what the Runtime asks of a device family (host shared memory, CUDA, CANN).
//
// A backend owns one vendor's calls: mapping the symmetric heap of every PE, translating
// offsets to addresses, and enqueuing RMA on a stream. It holds no Runtime policy: operands
// arrive already validated against the allocation registry, as heap offsets with in-range
// byte counts and a PE in [0, size). Backends share only the Status value type with the
// Runtime, and know nothing of torch or Python.
//
// Thread-safety: CreateHeap, OpenPeers and DestroyHeap are made by one thread while no other
// call is in flight. Every other call may come from several threads at once: the Runtime
// serialises validation, not execution, so that no thread waits while holding its mutex. The
// Runtime never has two collectives (Agree, LaunchCollective) of one team in
// flight on different streams; collectives of different teams (different slots) may run at
// once, and team creations (ExchangeWithPeers) come one at a time. No backend holds a lock of its own across a wait or a stream
// synchronisation either: a second thread's call must always get through. Work the backend
// queues on an asynchronous stream runs later on that stream's executor; its failures are
// reported by the stream, not by the call that queued it.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/atomic_op.h"
#include "backends/blocking_ops.h"
#include "backends/collective_descriptor.h"
#include "data_plane/kernel_api.h"
#include "base/config.h"
#include "base/status.h"

namespace hyper_parallel::shmem {

enum class DeviceType : std::uint8_t { kCpu, kCuda, kNpu };

/// The device a Runtime runs on; frozen at initialisation.
struct DeviceId {
  DeviceType type = DeviceType::kCpu;
  int index = 0;
  bool operator==(const DeviceId&) const = default;
  std::string ToString() const;  // "cpu:0", "cuda:1", "npu:0"
};

enum class SignalWidth : std::uint8_t { k32, k64 };
enum class SignalOp : std::uint8_t { kSet, kAdd };
enum class Comparison : std::uint8_t { kEq, kNe, kGt, kGe, kLt, kLe };

std::string_view SignalOpName(SignalOp op);
std::string_view ComparisonName(Comparison comparison);
/// How a wait on several signal words ends: one satisfies, all do, or some do (docs/atomics.md).
enum class WaitSet : std::uint8_t { kAny, kAll, kSome };
std::string_view WaitSetName(WaitSet set);

/// A wait on `count` consecutive local signal words of `width` from heap offset `offset`: those
/// with mask[i] (empty mask: every word) take part, each compared against `value`.
struct SignalSet {
  std::uint64_t offset = 0;
  std::uint32_t count = 0;
  SignalWidth width = SignalWidth::k64;
  Comparison comparison = Comparison::kGe;
  std::int64_t value = 0;
  std::vector<std::uint8_t> mask;
  WaitSet set = WaitSet::kAll;
};

/// Evaluates `observed <comparison> expected`.
bool Compare(std::int64_t observed, Comparison comparison, std::int64_t expected);

/// The stream an operation is enqueued on. A null `native` is the backend's default stream;
/// otherwise it is backend-specific (a host stream, a cudaStream_t, an aclrtStream).
struct StreamRef {
  void* native = nullptr;
};

/// Keeps a local (non-symmetric) operand alive until queued work that reads or writes it ran.
using KeepAlive = std::shared_ptr<const void>;

/// A consumer's fused kernel: runs on a stream against the kernel-side data-plane API.
using Kernel = std::function<Status(data_plane::KernelApi& api)>;

/// Every backend maps each heap at an address aligned to this, so that a heap offset aligned to
/// A (up to this) is an address aligned to A: the largest alignment the Runtime hands out.
inline constexpr std::uint64_t kHeapBaseAlignment = 2ull << 20;

/// What CreateHeap needs to know about this PE and the job.
struct HeapSpec {
  int rank = 0;
  int size = 1;
  std::uint64_t heap_bytes = 0;
  std::chrono::milliseconds timeout{0};  ///< bound on every wait the backend makes
  int copy_workers = 0;                  ///< threads per PE for collective copies; 0: auto
  /// Where waits register once they stop spinning, for diagnostics (null: nowhere). Outlives
  /// the heap.
  BlockingOpTable* blocking_ops = nullptr;
  /// HYPER_PARALLEL_SHMEM_WAIT as given (the host backend's setting; checked at init).
  std::string wait = "auto";
  /// Team slots (HYPER_PARALLEL_SHMEM_MAX_TEAMS): each has descriptor slots and epoch words of
  /// its own beside the heap (slot 0: the world).
  int teams = 1;
  /// PEs on several hosts (the host backend; docs/scale-out.md): which peers go through the
  /// network ("other-hosts" or "all"), the UCX library to load, and how long a remote peer's
  /// heartbeats may be missing before it is lost.
  std::string remote_peers = "other-hosts";
  std::string ucx_library;
  std::string remote_path = "auto";
  std::string remote_transport = "ucx";  ///< "ucx" or "reordering" (tests)
  std::chrono::milliseconds peer_silence{3000};
  /// A collective all-gather over every PE (the bootstrap's), usable during OpenPeers only:
  /// every PE calls it the same number of times, decided from the handles alone.
  std::function<Status(std::string_view mine, std::vector<std::string>* all)> all_gather;
};

/// Where a PE is and how this PE reaches it, as debug_state() shows it.
/// How this PE reaches a peer (the host backend's PeerAccess): itself, a mapping of the peer's
/// segment (a PE of this host), or the remote transport.
enum class PeerRoute : std::uint8_t { kSelf, kMapped, kRemote };

struct PeerPlacement {
  std::string host;       ///< the host's label ("host1 (net:[4026532])")
  PeerRoute route = PeerRoute::kSelf;
  std::string transport;  ///< for debug_state(): "self", "shared memory" or the transport's name
  std::string path;       ///< remote: "messages" or "rma" (docs/scale-out.md); else empty
};

/// The network transport in use, as debug_state() shows it (empty provider: none).
struct NetworkInfo {
  std::string provider;  ///< "ucx"
  std::string version;
  int endpoints = 0;
  std::vector<std::pair<std::string, std::uint64_t>> counters;  ///< remote puts, gets, ...
};

/// How this backend waits, as debug_state() shows it.
struct WaitInfo {
  std::string mode = "auto";           ///< HYPER_PARALLEL_SHMEM_WAIT
  std::chrono::nanoseconds spin{0};   ///< max(): spins until the timeout
  std::chrono::nanoseconds yield{0};
  bool sleeps = true;                 ///< whether a long wait sleeps (futex) at all
  std::string pinning = "none";       ///< "cpu 1", or "none (<reason>)"
  bool pinned = false;                ///< this PE's thread was pinned to cores of its own
};

class Backend {
 public:
  virtual ~Backend() = default;

  /// "host", "cuda", "cann", or a fake's name.
  virtual std::string_view name() const = 0;

  /// The device the calling thread would use now; compared with the frozen one at every entry.
  virtual DeviceId CurrentDevice() const = 0;

  /// Creates and maps this PE's heap. `local_handle` receives bytes that let a peer map it.
  virtual Status CreateHeap(const HeapSpec& spec, std::string* local_handle) = 0;

  /// Maps every peer's heap from the handles all PEs published (indexed by rank).
  virtual Status OpenPeers(const std::vector<std::string>& handles) = 0;

  /// Unmaps every heap and releases what CreateHeap/OpenPeers made. Safe after a partial
  /// initialisation and when nothing was created. A backend whose peers map this PE's heap
  /// (PeersMapTheHeap) frees it only after PeersClosed; without that word (a failed init, a
  /// terminal runtime) it keeps the memory until the process ends rather than free it under a
  /// peer's mapping.
  virtual Status DestroyHeap() = 0;

  /// Whether peers map this PE's heap memory in a way that must end before it is freed (CUDA:
  /// freeing memory another process has open through IPC is undefined). Then a collective
  /// teardown is ClosePeers on every PE, a barrier of all PEs, PeersClosed, DestroyHeap.
  virtual bool PeersMapTheHeap() const { return false; }
  /// Every PE agreed to shut down (the close agreement succeeded): from now on this PE may exit
  /// without its peers counting it as lost, also peers still finishing that agreement.
  virtual void Departing() {}
  /// Closes this PE's mappings of its peers' heaps (the first step of that teardown).
  virtual Status ClosePeers() { return Status::Ok(); }
  /// Every PE has closed its mappings of this PE's heap: DestroyHeap may free it.
  virtual void PeersClosed() {}

  /// Address of heap offset 0 of this PE's heap in this process (null before CreateHeap).
  virtual std::byte* LocalHeapBase() const = 0;

  /// Address of heap offset 0 of PE `pe`'s heap where this process maps it for loads, stores
  /// and CPU atomics (the host backend: PEs of this host, unless they are reached through the
  /// network), else null. Valid from OpenPeers until ClosePeers.
  virtual std::byte* PeerHeapAddress(int pe) const {
    (void)pe;
    return nullptr;
  }

  /// True when this process may read and write its heap directly (host memory); false for
  /// device memory, which only the backend's operations reach.
  virtual bool HostAddressableHeap() const = 0;

  /// Collective over `group`, on the calling thread: publishes this PE's descriptor of the
  /// group's collective number mine.sequence and learns whether every member's descriptor of
  /// that number agrees (the verdict: OK or COLLECTIVE_MISMATCH, the same on every member) and
  /// the members' facts (DescriptorFacts). It is also a barrier of the group: every write a
  /// member made before is visible to every member after. A backend that reads every member's
  /// descriptor concludes with Agreement::FromAll; the host backend across hosts agrees in
  /// rounds (docs/architecture.md, "Agreement across hosts"). Bounded by the heap spec's
  /// timeout; a timeout or a lost peer is terminal (see Health) and is the returned status.
  /// `operation` names the call in diagnostics.
  virtual Status Agree(const data_plane::CollectiveGroup& group, const CollectiveDescriptor& mine,
                       std::string_view operation, Agreement* agreement) = 0;

  /// A members-only exchange (team creation, docs/teams.md), on the calling thread: sends
  /// `mine` to every PE of `peers` (word 0 replaced by that peer's round) and returns, in the
  /// same order, the words each of them sent this PE for the same round. A pair's round counts
  /// the exchanges the two PEs made together, so each pair's rounds run in step however the
  /// PEs' exchanges with others interleave (a mailbox per sender, two rounds deep). Bounded by
  /// the timeout; a timeout or a lost peer is terminal.
  virtual Status ExchangeWithPeers(std::span<const PeerRound> peers, const ExchangeWords& mine,
                                   std::string_view operation,
                                   std::vector<ExchangeWords>* theirs) = 0;

  /// Waits until every stream of this process has run what was queued on it (device
  /// quiescent). Fails only when a stream cannot drain within the timeout; failures of queued
  /// work stay with their stream, for its next synchronize.
  virtual Status Quiesce() = 0;

  /// The stream the calling thread enqueues on now.
  virtual StreamRef CurrentStream() const = 0;

  /// True when work enqueued on `stream` has run by the time the enqueuing call returns (the
  /// host backend's default stream is the calling thread).
  virtual bool RunsInline(StreamRef stream) const = 0;

  /// True when work that runs inline is enqueued on a device and synchronised before the call
  /// returns, so it may wait for the device however small it is; false when it runs on the
  /// calling thread (the host). The Runtime never holds its mutex across such work.
  virtual bool SynchronizesInline() const { return false; }

  /// True when a collective on `stream` has run, peers' arrival included, by the time
  /// LaunchCollective returns; false when it is only enqueued.
  virtual bool CollectiveRunsInline(StreamRef stream) const { return RunsInline(stream); }

  /// The wait policy in force (for diagnostics).
  virtual WaitInfo Wait() const = 0;

  /// Every PE's host and how this PE reaches it, indexed by PE (empty: one host, all mapped).
  virtual std::vector<PeerPlacement> Placement() const { return {}; }
  /// The network transport in use, for diagnostics.
  virtual NetworkInfo Network() const { return {}; }

  /// How diagnostics and errors name `stream`: "stream 3", "default (thread 1234)".
  virtual std::string StreamLabel(StreamRef stream) const = 0;

  /// How many times this backend blocked the host until a device stream had run its work
  /// (debug_state's host_synchronizations; a read, never a synchronisation). 0 for a backend
  /// whose streams are the host's own.
  virtual std::uint64_t HostSynchronizations() const { return 0; }

  /// OK while this lifecycle can go on; otherwise the sticky failure that ended it: PEER_LOST
  /// (a peer process exited) or TIMEOUT of a collective (the PEs' collective sequences are out
  /// of step). Cheap while healthy: the Runtime asks at every entry.
  virtual Status Health() const = 0;

  /// Copies `bytes` from local `source` to heap offset `offset` of PE `pe`. `keep_alive` is
  /// held until the copy has run (it owns `source` for work queued on a stream).
  virtual Status Put(StreamRef stream, std::uint64_t offset, const void* source,
                     std::uint64_t bytes, int pe, KeepAlive keep_alive) = 0;

  /// Copies `bytes` from heap offset `offset` of PE `pe` to local `destination`.
  virtual Status Get(StreamRef stream, void* destination, std::uint64_t offset,
                     std::uint64_t bytes, int pe, KeepAlive keep_alive) = 0;

  /// Sets or adds `value` to the signal word at heap offset `offset` of PE `pe`, after every
  /// earlier write this stream made (data before signal).
  virtual Status Signal(StreamRef stream, std::uint64_t offset, SignalWidth width, SignalOp op,
                        std::int64_t value, int pe) = 0;

  /// Put, then Signal on the same PE, as one operation: the data is visible before the signal.
  virtual Status PutSignal(StreamRef stream, std::uint64_t offset, const void* source,
                           std::uint64_t bytes, std::uint64_t signal_offset, SignalWidth width,
                           SignalOp op, std::int64_t value, int pe, KeepAlive keep_alive) = 0;

  /// Waits until the local signal word at `offset` satisfies `comparison` against `value`.
  virtual Status WaitSignal(StreamRef stream, std::uint64_t offset, SignalWidth width,
                            Comparison comparison, std::int64_t value) = 0;

  /// `request` on the word of PE `pe` (docs/atomics.md), atomic with respect to every other
  /// atomic on that word from any PE. A non-null `fetched` receives the old value's `width`
  /// bytes in stream order; `keep_alive` owns it until then. Default: UNSUPPORTED_CAPABILITY.
  virtual Status Atomic(StreamRef stream, const AtomicRequest& request, int pe, void* fetched,
                        KeepAlive keep_alive);
  /// After this, in stream order, this PE's puts, signals and atomics to any one PE land after
  /// every one it issued to that PE before. Default: UNSUPPORTED_CAPABILITY.
  virtual Status Fence(StreamRef stream);
  /// In stream order, waits until everything this PE issued before (non-blocking puts and gets
  /// included) is complete and visible at its target. Default: UNSUPPORTED_CAPABILITY.
  virtual Status Quiet(StreamRef stream);
  /// Put and Get that may return before the copy completed; Quiet, a collective or a stream
  /// synchronisation completes them, and `keep_alive` is held until then. Default: Put and Get
  /// (complete when they return, which non-blocking allows).
  virtual Status PutNbi(StreamRef stream, std::uint64_t offset, const void* source,
                        std::uint64_t bytes, int pe, KeepAlive keep_alive);
  virtual Status GetNbi(StreamRef stream, void* destination, std::uint64_t offset,
                        std::uint64_t bytes, int pe, KeepAlive keep_alive);
  /// Waits, in stream order, until the words of `signals` satisfy its set (any, all, some),
  /// then writes satisfied[i] = 1 for every taking part word that satisfies the comparison at
  /// that moment (0 for the others; `count` bytes). Bounded like WaitSignal. Default:
  /// UNSUPPORTED_CAPABILITY.
  virtual Status WaitSignals(StreamRef stream, const SignalSet& signals, std::uint8_t* satisfied,
                             KeepAlive keep_alive);

  /// Runs `kernel` in order on `stream` (inline on a stream that runs inline), its failures
  /// tagged with `name`. `keep_alive` is held until it ran.
  virtual Status Launch(StreamRef stream, std::string_view name, Kernel kernel,
                        KeepAlive keep_alive) = 0;

  /// Collective over `group`: in order on `stream`, exchanges `descriptor` with every member
  /// and matches them (COLLECTIVE_MISMATCH on every member, and `kernel` does not run, when
  /// the members' calls of this number differ), then runs `kernel` like Launch. An empty
  /// `kernel` makes the agreement alone the collective: the exchange publishes after every
  /// earlier write of this PE and reads every member's, so it is a barrier of the group. Every
  /// collective unit runs this way (data_plane/collective.h). `keep_alive` is held until it
  /// ran.
  virtual Status LaunchCollective(StreamRef stream, const data_plane::CollectiveGroup& group,
                                  const CollectiveDescriptor& descriptor, std::string_view name,
                                  Kernel kernel, KeepAlive keep_alive) = 0;

 protected:
  /// UNSUPPORTED_CAPABILITY: this backend has no `operation` yet.
  Status Unsupported(std::string_view operation) const;
};

}  // namespace hyper_parallel::shmem
