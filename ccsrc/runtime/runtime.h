// Runtime: the process-unique owner of the symmetric heap's lifecycle (docs/architecture.md,
// "Lifecycle"). The values its entries take and return (options, operands, handles, reports)
// are runtime_types.h.
//
// States: Uninitialized --Init--> (Initializing) --> Ready --Shutdown--> (Closing) -->
// Uninitialized. An Init that fails rolls back everything it made and leaves the Runtime
// Uninitialized (it may be retried). Failed is terminal for the process: it follows a peer that
// exited (PEER_LOST), a collective that timed out (the PEs' collective sequences are out of
// step) and a native teardown that failed; every later call, Init included, fails with that
// same error, and Shutdown then only releases this process's resources. Each lifecycle re-reads
// the configuration and freezes it, together with the device identity and the Root WORLD (rank,
// size, ordered global ranks).
//
// Every entry validates its operands through the protection chain (live allocation of this
// lifecycle, byte range inside it, PE in range, device unchanged) before it touches a backend,
// and records its failure for Diagnostics(). Every collective (Allocate, Free, Shutdown, and
// every collective unit RunCollective runs: barrier, all_gather, all_to_all, ...) that passes
// its local checks takes the next number of this PE's collective sequence, and the backend
// exchanges its descriptor with every PE before any data moves, so PEs whose calls disagree all
// fail with COLLECTIVE_MISMATCH at once instead of using different memory or waiting for the
// timeout (backends/collective_descriptor.h). A call rejected by its local checks takes no number, so the
// PEs stay in step. The Runtime names no collective unit: it runs whichever one it is given
// (data_plane/collective.h; the build's list is ops/collectives.h).
//
// Thread-safety: any thread may call any member. One mutex serialises validation and state
// changes (the members it guards are annotated, and a clang build checks every access); no
// entry waits while holding it: waits, the exchange of a collective, draining streams, copies
// above 64 KiB and whatever a device backend synchronises run outside it (only signals, small
// host copies and enqueues, which cannot wait, run under it), so a second thread can release a
// first thread's wait and Snapshot() always answers. Collectives of one PE may be in flight
// on one stream at a time: a collective enqueued on a second stream (or from a second thread's
// default stream) while another is in flight is rejected with INVALID_STATE; Allocate, Free and
// Shutdown first wait (bounded) for collectives queued on asynchronous streams to finish.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "backends/blocking_ops.h"
#include "base/config.h"
#include "base/mutex.h"
#include "base/status.h"
#include "data_plane/collective.h"
#include "runtime/allocation_registry.h"
#include "runtime/bootstrap.h"
#include "runtime/heap_allocator.h"
#include "runtime/runtime_types.h"

namespace hyper_parallel::shmem {

class Runtime {
 public:
  /// The process-unique Runtime used by the bindings and the demo.
  static Runtime& Process();

  /// A private Runtime (unit tests); it shares no state with Process().
  Runtime();
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// Collective. Reads the config, creates the backend, maps every PE's heap.
  Status Init(InitOptions options) EXCLUDES(mutex_);
  /// Collective. Closes the gate to new calls, drains the streams, then exchanges a close
  /// descriptor with every PE (which is the barrier). All-or-nothing: every PE refuses alike
  /// (and stays Ready, nothing changed) when any PE still had calls in flight on other threads
  /// or streams that did not drain, or holds live allocations, unless every PE holds only
  /// leaked ones and the same ones (same offsets and sizes): those are then logged and
  /// reclaimed, and the native teardown follows. A timeout or a lost peer makes every
  /// surviving PE terminal. When Failed: releases this process's resources (after in-flight
  /// calls ended, bounded) and returns the terminal failure.
  Status Shutdown() EXCLUDES(mutex_);

  /// The state now; a Ready Runtime whose backend latched a terminal failure becomes Failed.
  RuntimeState state() EXCLUDES(mutex_);

  /// Collective. `bytes` may be 0 (a real allocation with its own id and base). `note` is
  /// appended to the debug log line (for example shape, dtype and the caller's location).
  Status Allocate(std::uint64_t bytes, std::uint64_t alignment, Allocation* out,
                  std::string_view note = {}) EXCLUDES(mutex_);
  /// Collective. `whole` must be the complete allocation.
  Status Free(const SymmetricView& whole, std::string_view note = {}) EXCLUDES(mutex_);

  /// Enqueues a copy of destination.bytes bytes from local `source` into `destination` on PE
  /// `pe`. `keep_alive` owns `source` until the copy ran.
  Status Put(const SymmetricView& destination, const void* source, int pe, StreamRef stream,
             KeepAlive keep_alive = nullptr) EXCLUDES(mutex_);
  /// Enqueues a copy of source.bytes bytes from `source` on PE `pe` into local `destination`.
  Status Get(void* destination, const SymmetricView& source, int pe, StreamRef stream,
             KeepAlive keep_alive = nullptr) EXCLUDES(mutex_);
  /// Enqueues a set or add of `value` on the signal word `signal` of PE `pe`.
  Status Signal(const SymmetricView& signal, SignalWidth width, std::int64_t value, int pe,
                SignalOp op, StreamRef stream) EXCLUDES(mutex_);
  /// Put followed by Signal on the same PE, as one entry (one validation, one enqueue): the
  /// data is visible on PE `pe` before the signal is.
  Status PutSignal(const SymmetricView& destination, const void* source,
                   const SymmetricView& signal, SignalWidth width, std::int64_t value, int pe,
                   SignalOp op, StreamRef stream, KeepAlive keep_alive = nullptr)
      EXCLUDES(mutex_);
  /// Enqueues a wait until the local signal word satisfies `comparison` against `value`.
  Status WaitSignal(const SymmetricView& signal, SignalWidth width, std::int64_t value,
                    Comparison comparison, StreamRef stream) EXCLUDES(mutex_);
  /// Non-blocking Put and Get (docs/atomics.md): they may return before the copy completed;
  /// Quiet, a collective or a stream synchronisation completes them. `keep_alive` owns the
  /// local side until then.
  Status PutNbi(const SymmetricView& destination, const void* source, int pe, StreamRef stream,
                KeepAlive keep_alive = nullptr) EXCLUDES(mutex_);
  Status GetNbi(void* destination, const SymmetricView& source, int pe, StreamRef stream,
                KeepAlive keep_alive = nullptr) EXCLUDES(mutex_);
  /// Enqueues `op` on the one-element word `target` (`width` 4 or 8 bytes, aligned) of PE
  /// `pe`, operands as bit patterns (docs/atomics.md). A non-null `fetched` (`width` local
  /// bytes) receives the old value in stream order; `keep_alive` owns it until then.
  Status Atomic(const SymmetricView& target, std::uint8_t width, AtomicOp op, std::uint64_t value,
                std::uint64_t compare, int pe, void* fetched, StreamRef stream,
                KeepAlive keep_alive = nullptr) EXCLUDES(mutex_);
  /// Enqueues a fence: this PE's later puts, signals and atomics to a PE land after its
  /// earlier ones to that PE.
  Status Fence(StreamRef stream) EXCLUDES(mutex_);
  /// Enqueues a quiet: everything this PE issued before is complete and visible at its target.
  Status Quiet(StreamRef stream) EXCLUDES(mutex_);
  /// Enqueues a wait on the local 1-D signal words `signals` (docs/atomics.md): until any, all
  /// or some of those with mask[i] (empty: all) compare true against `value`; then
  /// satisfied[i] (`signals` words long, local, owned by `keep_alive`) says which do.
  Status WaitSignals(const SymmetricView& signals, SignalWidth width, std::int64_t value,
                     Comparison comparison, std::vector<std::uint8_t> mask, WaitSet set,
                     std::uint8_t* satisfied, StreamRef stream, KeepAlive keep_alive = nullptr)
      EXCLUDES(mutex_);
  /// Whether the local signal word compares true against `value` now; never waits (a heap the
  /// host cannot read: UNSUPPORTED_CAPABILITY).
  Status TestSignal(const SymmetricView& signal, SignalWidth width, std::int64_t value,
                    Comparison comparison, bool* satisfied) EXCLUDES(mutex_);
  /// Collective, enqueued on `stream`: runs the collective unit `collective` over the Root
  /// WORLD (data_plane/collective.h). Its symmetric output goes through the protection chain,
  /// then the collective's own checks. The call takes the next collective number either way,
  /// and in stream order every PE's descriptor is exchanged and matched (COLLECTIVE_MISMATCH on
  /// every PE when the calls differ in a field the collective declared) before its kernel runs
  /// (none for a call that moves nothing: zero bytes). A call refused by those checks publishes
  /// a refusal in its place (RefuseCollective): it returns its own reason, and every other
  /// PE's call of that number fails naming it. `keep_alive` owns the local operands until it
  /// ran; `collective` must outlive the work (the build's collectives, ops/collectives.h, live
  /// for the process).
  Status RunCollective(const data_plane::Collective& collective,
                       const CollectiveOperands& operands, StreamRef stream,
                       KeepAlive keep_alive = nullptr) EXCLUDES(mutex_);
  /// Collective: a call of kind `kind` (a collective unit's name) over the world or `team`
  /// that the caller refused before RunCollective (a binding's own argument checks; `why` its
  /// failure). It takes the call's number in the team's sequence and publishes the refusal on
  /// `stream`, so every other member's call of that number fails with COLLECTIVE_MISMATCH
  /// "<kind> was refused on PE p: <reason>" and the next calls pair (docs/architecture.md, "A
  /// refused call keeps its place"). Returns `why`, tagged (kind, validate). Without a ready
  /// Runtime or a team this PE is in, only `why` (there is no sequence to take a place in).
  Status RefuseCollective(std::string_view kind, Status why, StreamRef stream) EXCLUDES(mutex_);
  Status RefuseCollective(const TeamHandle& team, std::string_view kind, Status why,
                          StreamRef stream) EXCLUDES(mutex_);

  /// Enqueues a consumer's fused kernel (data_plane/kernel_api.h) on `stream`. Every symmetric
  /// operand it declares in `operands` goes through the protection chain first; the kernel
  /// receives their heap offsets. The kernel may put to and signal any PE and wait for its own
  /// counters (bounded); it is not a collective (no descriptor is exchanged): consumers that
  /// need agreement exchange it themselves. `name` tags its failures. `keep_alive` owns local
  /// memory the kernel reads or writes, until it ran.
  Status Launch(std::string_view name, const std::vector<SymmetricView>& operands,
                StreamRef stream, LaunchKernel kernel, KeepAlive keep_alive = nullptr)
      EXCLUDES(mutex_);

  // ---- teams (docs/teams.md) ---------------------------------------------------------------
  // A team is a subset of the Root WORLD's PEs, numbered 0..n-1 in its own order, with a
  // collective sequence, sync words and descriptor check of its own: collectives on disjoint
  // teams run at the same time, and PEs of a team whose calls differ all get COLLECTIVE_MISMATCH
  // naming the team. Creating a team is collective over its members (a split: over its parent
  // too, which checks the arguments agree); handles of the same ranks share one team, which ends
  // with its last handle. Every team ends at the last close. Refused: a handle of an older
  // lifecycle (STALE_LIFECYCLE), a destroyed handle or team and a team this PE is not in
  // (INVALID_ARGUMENT); a creation when every slot is taken (HYPER_PARALLEL_SHMEM_MAX_TEAMS,
  // INVALID_STATE on every member alike).

  /// The team of the PEs on this PE's host (docs/scale-out.md). The world team when every PE
  /// shares one host; otherwise a team made at the first call, collective over that host's
  /// PEs (each of them must call it), and the same handle at every later call.
  Status NodeTeam(TeamHandle* out) EXCLUDES(mutex_);
  /// Collective over `parent`'s PEs, with the same arguments on every one of them: the team of
  /// parent PEs start, start + stride, ... (`size` of them), in that order. A PE outside it gets
  /// an invalid handle (slot -1). Arguments that differ across the parent are
  /// COLLECTIVE_MISMATCH on every parent PE; then a triplet outside the parent is
  /// INVALID_ARGUMENT on every PE alike (judged after that agreement, so all judge the same).
  Status TeamSplitStrided(const TeamHandle& parent, int start, int stride, int size,
                          TeamHandle* out) EXCLUDES(mutex_);
  /// Collective over `parent`'s PEs: parent PE p has coordinates (p mod xrange, p div xrange);
  /// `xteam` gets its row (the PEs with its y), `yteam` its column (the PEs with its x).
  Status TeamSplit2d(const TeamHandle& parent, int xrange, TeamHandle* xteam, TeamHandle* yteam)
      EXCLUDES(mutex_);
  /// Collective over the members only: the team of world PEs `pes`, in that order (distinct,
  /// this PE among them). The same team as a live one of the same ranks in the same order.
  Status TeamCreate(const std::vector<int>& pes, TeamHandle* out) EXCLUDES(mutex_);
  /// Collective over the team's PEs: ends this handle; the team ends with its last handle
  /// (a predefined team never ends before the lifecycle does).
  Status TeamDestroy(const TeamHandle& team) EXCLUDES(mutex_);
  /// What `team` is now (INVALID_ARGUMENT for a refused handle).
  Status DescribeTeam(const TeamHandle& team, TeamInfo* out) EXCLUDES(mutex_);
  /// The world PE number of `team`'s PE `team_pe` (INVALID_ARGUMENT out of range).
  Status TeamPe(const TeamHandle& team, int team_pe, int* world_pe) EXCLUDES(mutex_);
  /// RunCollective over `team`: results in team-PE order.
  Status RunCollective(const TeamHandle& team, const data_plane::Collective& collective,
                       const CollectiveOperands& operands, StreamRef stream,
                       KeepAlive keep_alive = nullptr) EXCLUDES(mutex_);
  /// Launch for a kernel that works over `team`: its KernelApi numbers PEs in the team (rank()
  /// is this PE's team PE, size() the team's size, and every PE argument is a team PE).
  Status Launch(const TeamHandle& team, std::string_view name,
                const std::vector<SymmetricView>& operands, StreamRef stream, LaunchKernel kernel,
                KeepAlive keep_alive = nullptr) EXCLUDES(mutex_);

  /// The current stream of the calling thread on the Runtime's device. `operation` names the
  /// call that asks, in the error when the Runtime is not ready.
  Status CurrentStream(StreamRef* out, std::string_view operation = "current_stream")
      EXCLUDES(mutex_);
  /// UNSUPPORTED_CAPABILITY when the heap is device memory this process cannot address (a
  /// binding that makes host tensors over the heap asks first).
  Status RequireHostAddressableHeap(std::string_view operation) EXCLUDES(mutex_);
  /// Where the heap's memory is: the Runtime's (frozen) device, and whether this process may
  /// address it from the host (the host backend, the fakes) or it is device memory (CUDA).
  /// INVALID_STATE when not ready, which is not recorded as the latest failure.
  Status HeapPlacement(std::string_view operation, DeviceId* device, bool* host_addressable)
      EXCLUDES(mutex_);

  /// The running backend's description; INVALID_STATE when not ready (not recorded as the
  /// latest failure: a question, not a failed call).
  Status DescribeBackend(std::string_view operation, BackendDescription* out) EXCLUDES(mutex_);

  /// For every Root WORLD PE, where heap offset 0 of its heap lies in this process when this
  /// process may load, store and use CPU atomics on it directly (a PE of this host on the host
  /// backend), else null; valid for this lifecycle. For OpenSHMEM's shmem_ptr and the C API's
  /// direct path to its host's PEs (docs/openshmem.md). INVALID_STATE when not ready.
  Status PeerHeapAddresses(std::string_view operation, std::vector<std::byte*>* out)
      EXCLUDES(mutex_);

  /// Records that a live allocation lost its last reference without free: logs an ERROR at
  /// once and puts it in the leak table. Never collective and never takes the entry mutex, so
  /// it is safe from a storage deleter on any thread, also while an entry is in progress. A
  /// tensor of a lifecycle whose heap is already gone (a terminal close released it) is no
  /// leak: it is logged at INFO and forgotten.
  void ReportOrphan(const OrphanReport& report) EXCLUDES(orphan_mutex_);

  /// Releases an allocation locally, without a collective (torch's symm_mem frees from a
  /// tensor's deleter, at a moment each PE picks): safe from any thread like ReportOrphan. From
  /// the next entry on, an operand in it is USE_AFTER_FREE here; its memory is given back by
  /// ReclaimReleased once every PE has released it (docs/api.md, "torch's symmetric-memory
  /// API").
  void Release(const OrphanReport& report) EXCLUDES(orphan_mutex_);

  /// Collective over the Root WORLD (every PE calls it at the same point of its program; a
  /// bootstrap exchange, not a heap collective): gives back to the heap every allocation that
  /// every PE has released (Release), after this PE's outstanding operations completed.
  /// `reclaimed` (optional) gets their ids. Not on a queued stream's thread.
  Status ReclaimReleased(std::string_view operation, std::vector<AllocationId>* reclaimed)
      EXCLUDES(mutex_, orphan_mutex_);

  /// Never waits for another entry: answers while other threads are blocked in calls.
  Diagnostics Snapshot() EXCLUDES(mutex_);

  /// Records a failure found outside the Runtime (a binding's own argument check) as the
  /// latest failure, so Diagnostics reports every rejected call alike.
  void NoteFailure(const Status& status) EXCLUDES(mutex_);

  int rank() const EXCLUDES(mutex_);
  int size() const EXCLUDES(mutex_);
  std::chrono::milliseconds timeout() const EXCLUDES(mutex_);

 private:
  // Who enqueued a collective: an asynchronous stream, or a thread's default stream.
  struct CollectiveOwner {
    void* stream = nullptr;  // null: the default stream of thread `thread`
    long thread = 0;
    bool operator==(const CollectiveOwner&) const = default;
  };
  // Counts an entry executing outside the mutex until it returns, so a shutdown never tears
  // the heap down under it. Constructed under the mutex (the count is read there), destroyed
  // anywhere.
  class CallScope {
   public:
    explicit CallScope(Runtime* runtime) : runtime_(runtime) {
      runtime_->calls_in_flight_.fetch_add(1, std::memory_order_relaxed);
    }
    ~CallScope() { runtime_->calls_in_flight_.fetch_sub(1, std::memory_order_release); }
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;

   private:
    Runtime* runtime_;
  };

  // One team this PE is in (the world in slot 0; docs/teams.md): its group, its sequence of
  // collective numbers and who has its collectives in flight. Shared with the tickets of its
  // queued collectives, which release their claims wherever they end. Every member but
  // `in_flight` is guarded by the Runtime's mutex.
  struct TeamState {
    data_plane::CollectiveGroup group;
    bool predefined = false;               // the world: it ends with the lifecycle only
    std::uint64_t first_sequence = 0;      // the number its first collective follows
    std::uint64_t sequence = 0;            // number of its latest collective
    std::vector<std::uint64_t> handles;    // this PE's live handles of it
    std::atomic<int> in_flight{0};         // claimed under the mutex, released anywhere
    CollectiveOwner owner;
  };

  // Entry check: Ready, healthy and on the frozen device.
  Status CheckReady(std::string_view operation) REQUIRES(mutex_);
  // Validates a symmetric operand (id, then heap bounds, then the range inside the allocation)
  // and returns its heap offset. `freed_code` is DOUBLE_FREE for free, which also requires the
  // whole allocation, and USE_AFTER_FREE for RMA.
  Status ResolveOperand(const SymmetricView& view, std::uint64_t* offset,
                        AllocationRecord* record,
                        ErrorCode freed_code = ErrorCode::kUseAfterFree) const REQUIRES(mutex_);
  Status CheckPe(int pe) const REQUIRES(mutex_);
  // Put or Get (`nbi`: their non-blocking forms), one body for the four entries.
  Status Transfer(std::string_view operation, bool put, bool nbi, const SymmetricView& symmetric,
                  void* local, int pe, StreamRef stream, KeepAlive keep_alive) EXCLUDES(mutex_);
  // The operand checks of put, get and put_signal: PE in range, a live symmetric operand (its
  // heap offset goes to `offset`) and a non-null local side unless zero bytes move.
  Status CheckTransfer(const SymmetricView& symmetric, int pe, const void* local,
                       std::string_view local_name, std::uint64_t* offset) const
      REQUIRES(mutex_);

  CollectiveOwner OwnerOf(StreamRef stream, bool runs_inline) const;
  std::string OwnerLabel(const CollectiveOwner& owner) const REQUIRES(mutex_);
  // Takes the next collective number of `team` for `owner`, or INVALID_STATE when a
  // collective of the team by another owner is in flight.
  Status ClaimCollective(TeamState& team, const CollectiveOwner& owner,
                         std::string_view operation, std::uint64_t* sequence) REQUIRES(mutex_);
  // Before a blocking host collective of `team` claims: waits (bounded, releasing the mutex)
  // for the team's collectives queued on asynchronous streams to finish. Holds the mutex again
  // on return.
  Status WaitForOtherCollectives(TeamState& team, std::string_view operation) REQUIRES(mutex_);
  // Ends one claimed collective of `team`: atomic decrements; the mutex is taken only to wake
  // a host collective waiting for the last one to end (the Locked form: the caller holds it).
  void ReleaseCollective(TeamState& team) EXCLUDES(mutex_);
  void ReleaseCollectiveLocked(TeamState& team) REQUIRES(mutex_);
  // Holds `inner` and releases the claim on `team` when the queued work that owns it is done.
  KeepAlive CollectiveTicket(KeepAlive inner, std::shared_ptr<TeamState> team);

  // The team a handle names, or why it is refused (docs/teams.md).
  Status ResolveTeam(const TeamHandle& handle, std::shared_ptr<TeamState>* out) const
      REQUIRES(mutex_);
  TeamState& World() REQUIRES(mutex_) { return *teams_[0]; }
  void DescribeTeamLocked(const TeamState& team, TeamInfo* out) const REQUIRES(mutex_);
  // INVALID_STATE while another thread of this PE creates, splits or destroys a team; else
  // marks one in progress (the caller clears creating_team_ when it is done).
  Status BeginTeamChange(std::string_view operation) REQUIRES(mutex_);
  // The members-only part of every team creation: agrees with the other members of `pes`
  // (world PEs, this PE among them) on a free slot and the sequence it starts from, or on the
  // live team of the same ranks, and hands out a new handle. Releases the mutex while it
  // exchanges; holds it on entry and on return.
  Status MakeTeam(const std::vector<int>& pes, std::string_view operation, TeamHandle* out)
      REQUIRES(mutex_);
  // One members-only exchange of MakeTeam: the next round with each other member.
  Status ExchangeOffer(const std::vector<int>& pes, const ExchangeWords& mine,
                       std::string_view operation, std::vector<ExchangeWords>* theirs)
      REQUIRES(mutex_);
  // A host collective (empty, free) this PE refused (`why`, kept as failed at `phase`): takes
  // its place in `team`'s sequence with a refusal and returns `why` (docs/architecture.md, "A
  // refused call keeps its place").
  Status RefuseInPlaceLocked(TeamState& team, std::string_view operation, Status why,
                             std::string_view phase) REQUIRES(mutex_);
  // RunCollective (with `collective` and `operands`) and RefuseCollective (without, `refused`
  // failed): the claim, the refusal in place of a refused call, and the launch.
  Status RunOrRefuse(const TeamHandle& team, const data_plane::Collective* collective,
                     std::string_view op, const CollectiveOperands* operands, Status refused,
                     StreamRef stream, KeepAlive keep_alive) EXCLUDES(mutex_);
  // The local checks every split starts with: Ready, a `parent` this PE is in (resolved from
  // `parent_handle`), no other team change in progress (then marked: the caller clears
  // creating_team_). A refusal comes back kept.
  Status BeginSplit(std::string_view operation, const TeamHandle& parent_handle,
                    std::shared_ptr<TeamState>* parent) REQUIRES(mutex_);
  // The parent-collective part of a split: agrees on the kind and arguments across `parent`.
  Status AgreeSplit(TeamState& parent, std::string_view operation, std::array<int, 3> arguments)
      REQUIRES(mutex_);

  // The failure helpers, by what they conclude and where they run. Each returns `status`; on
  // failure it is tagged with where it happened and kept as the latest failure. Inline so the
  // success path of every entry is a null check.
  //   RejectLocked      a call the Runtime's own checks refused (mutex held);
  //   ConcludeLocked    the outcome of backend work run under the mutex: a terminal failure of
  //                     the backend also makes the Runtime Failed;
  //   ConcludeOutside   the same for backend work run outside the mutex, which it takes only
  //                     on failure.
  Status RejectLocked(Status status, std::string_view operation, std::string_view phase)
      REQUIRES(mutex_) {
    if (status.ok()) [[likely]] return status;
    return KeepFailureLocked(std::move(status), operation, phase, /*backend_work=*/false);
  }
  Status ConcludeLocked(Status status, std::string_view operation, std::string_view phase)
      REQUIRES(mutex_) {
    if (status.ok()) [[likely]] return status;
    return KeepFailureLocked(std::move(status), operation, phase, /*backend_work=*/true);
  }
  Status ConcludeOutside(Status status, std::string_view operation, std::string_view phase)
      EXCLUDES(mutex_) {
    if (status.ok()) [[likely]] return status;
    MutexLock lock(&mutex_);
    return KeepFailureLocked(std::move(status), operation, phase, /*backend_work=*/true);
  }
  // Tags and keeps a failure; after backend work, a latched terminal failure of the backend
  // makes the Runtime Failed first.
  Status KeepFailureLocked(Status status, std::string_view operation, std::string_view phase,
                           bool backend_work) REQUIRES(mutex_);

// Inside a Runtime member holding mutex_: returns the failure of `expression`, if any, after
// RejectLocked kept it.
#define HPS_REJECT_IF_ERROR(expression, operation, phase)                                 \
  do {                                                                                    \
    ::hyper_parallel::shmem::Status hps_checked_ = (expression);                          \
    if (!hps_checked_.ok()) [[unlikely]] {                                                \
      return KeepFailureLocked(std::move(hps_checked_), (operation), (phase), false);     \
    }                                                                                     \
  } while (false)

  // The exchange of a host collective's descriptor (empty, free, a split, a destroy) claimed
  // on `team` under the mutex: outside it, counted as a call in flight; then releases the
  // claim and turns a terminal failure into Failed. Holds the mutex on entry and on return.
  Status Agree(TeamState& team, std::string_view operation, const CollectiveDescriptor& mine)
      REQUIRES(mutex_);
  // Runs work that `execute(backend)` performs: under the mutex when it cannot wait (`small`
  // host work, or only enqueued), else outside it, counted as a call in flight. Holds the
  // mutex on entry and on return; the outcome is concluded either way.
  template <class Execute>
  Status Execute(std::string_view operation, bool small, StreamRef stream, Execute execute)
      REQUIRES(mutex_);
  // Makes the Runtime Failed with `failure` (the first one wins).
  void EnterTerminal(const Status& failure) REQUIRES(mutex_);
  // Shutdown of a Failed Runtime: waits (bounded) for calls in flight to end, drains the
  // streams, releases the heap; returns the terminal failure.
  Status TerminalShutdown() REQUIRES(mutex_);
  // Drains this PE's queued and outstanding work (Backend::Quiesce) outside the mutex,
  // counted as a call in flight (Free, ReclaimReleased). Holds the mutex on entry and on return.
  Status QuiesceOutside() REQUIRES(mutex_);
  // Waits (bounded, releasing the mutex meanwhile) until no entry executes outside it.
  bool WaitForCallsToEnd() REQUIRES(mutex_);
  void RollBackInit() REQUIRES(mutex_);
  // Init's steps under the mutex (runtime.cc): BeginInit refuses an Init in the wrong state or
  // without a bootstrap, else marks the Runtime Initializing; AbandonInit ends a failed attempt
  // (destroying `backend`'s heap, Uninitialized again) and returns `status`, tagged; CommitInit
  // makes the agreed lifecycle Ready.
  Status BeginInit(const InitOptions& options) EXCLUDES(mutex_);
  Status AbandonInit(Status status, std::string_view phase, std::unique_ptr<Backend> backend)
      EXCLUDES(mutex_);
  void CommitInit(const Config& config, const DeviceId& device, int rank,
                  std::vector<int> global_ranks, std::shared_ptr<Bootstrap> bootstrap,
                  std::unique_ptr<Backend> backend) REQUIRES(mutex_);
  // Moves orphans reported since the last entry into the leak table.
  void AdoptOrphans() REQUIRES(mutex_) EXCLUDES(orphan_mutex_);

  mutable Mutex mutex_;
  CondVar collectives_done_;  // signalled when collectives_in_flight_ drops to 0
  RuntimeState state_ GUARDED_BY(mutex_) = RuntimeState::kUninitialized;
  Config config_ GUARDED_BY(mutex_);
  DeviceId device_ GUARDED_BY(mutex_);
  int rank_ GUARDED_BY(mutex_) = -1;
  int size_ GUARDED_BY(mutex_) = 0;
  std::vector<int> global_ranks_ GUARDED_BY(mutex_);
  std::shared_ptr<Bootstrap> bootstrap_ GUARDED_BY(mutex_);
  std::unique_ptr<Backend> backend_ GUARDED_BY(mutex_);
  std::string backend_name_ GUARDED_BY(mutex_);  // kept after a terminal teardown released it
  std::byte* heap_base_ GUARDED_BY(mutex_) = nullptr;
  HeapAllocator allocator_ GUARDED_BY(mutex_);
  AllocationRegistry registry_ GUARDED_BY(mutex_);
  Status latest_failure_ GUARDED_BY(mutex_);
  Status terminal_ GUARDED_BY(mutex_);  // set with state_ = kFailed

  // The teams this PE is in, by slot (null: a free slot); slot 0 is the Root WORLD (every PE,
  // in rank order). Each has its own sequence of collective numbers (docs/teams.md).
  std::vector<std::shared_ptr<TeamState>> teams_ GUARDED_BY(mutex_);
  // The PEs of each team handle destroyed lately ("[0,2]"), to name it when it is used again.
  static constexpr std::size_t kDestroyedTeamsKept = 256;
  std::map<std::uint64_t, std::string> destroyed_teams_ GUARDED_BY(mutex_);
  // The highest collective number any team of this PE used on each slot this lifecycle: a new
  // team in a slot continues above every member's (their control words only grow).
  std::vector<std::uint64_t> slot_high_ GUARDED_BY(mutex_);
  // The members-only exchanges this PE made with each PE this lifecycle (team creation).
  std::vector<std::uint64_t> pair_rounds_ GUARDED_BY(mutex_);
  std::uint64_t next_team_handle_ GUARDED_BY(mutex_) = 0;
  bool creating_team_ GUARDED_BY(mutex_) = false;  // one creation at a time per PE
  TeamHandle node_team_ GUARDED_BY(mutex_);  // the node team once made (several hosts)
  // Every team's claims together, claimed under mutex_ and released anywhere; seq_cst with
  // collective_waiters_, so a release either sees a waiter or the waiter sees the release.
  std::atomic<int> collectives_in_flight_{0};
  std::atomic<int> collective_waiters_{0};
  std::atomic<int> calls_in_flight_{0};
  std::atomic<std::uint64_t> heap_lifecycle_{0};  // lifecycle whose heap is mapped; 0: none
  BlockingOpTable blocking_ops_;

  // Guards pending_orphans_ only; taken after mutex_ (AdoptOrphans) or alone (a deleter).
  Mutex orphan_mutex_ ACQUIRED_AFTER(mutex_);
  std::vector<OrphanReport> pending_orphans_ GUARDED_BY(orphan_mutex_);
};

}  // namespace hyper_parallel::shmem
