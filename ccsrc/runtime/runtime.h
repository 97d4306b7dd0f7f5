// Runtime: the process-unique owner of the symmetric heap's lifecycle (DESIGN §4).
//
// States: Uninitialized --Init--> Ready --Shutdown--> Uninitialized. An Init that fails rolls
// back everything it made and leaves the Runtime Uninitialized (it may be retried); a native
// shutdown that fails leaves it Failed, which is terminal for the process. Each lifecycle
// re-reads the configuration and freezes it, together with the device identity and the Root
// WORLD (rank, size, ordered global ranks).
//
// Every entry validates its operands through the protection chain (live allocation of this
// lifecycle, byte range inside it, PE in range, device unchanged) before it touches a backend,
// and records its failure for Diagnostics(). Collective entries (Allocate, Free, Shutdown)
// first agree with every PE on what is being done, so PEs whose calls disagree all fail with
// COLLECTIVE_MISMATCH instead of using different memory.
//
// Thread-safety: one mutex serialises every entry, so any thread may call any member. An
// operation on the default stream runs (and may wait) while holding it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "runtime/allocation_registry.h"
#include "runtime/bootstrap.h"
#include "runtime/config.h"
#include "runtime/heap_allocator.h"
#include "runtime/status.h"

namespace hyper_parallel::shmem {

enum class RuntimeState : std::uint8_t { kUninitialized, kReady, kFailed };
std::string_view RuntimeStateName(RuntimeState state);

/// Makes the backend for a configured kind; UNSUPPORTED_CAPABILITY when the build lacks it.
using BackendFactory = std::function<Status(BackendKind kind, std::unique_ptr<Backend>* out)>;

/// The factory of this build: host always; cuda and cann report UNSUPPORTED_CAPABILITY.
Status DefaultBackendFactory(BackendKind kind, std::unique_ptr<Backend>* out);

struct InitOptions {
  std::shared_ptr<Bootstrap> bootstrap;  ///< required; its rank and size define the Root WORLD
  std::vector<int> global_ranks;         ///< increasing; empty means 0 .. size-1
  EnvLookup env;                         ///< empty means the process environment
  BackendFactory backend_factory;        ///< empty means DefaultBackendFactory
};

/// A symmetric operand: an allocation id and a byte range given by address. `data` is an
/// address in this PE's mapping of the heap.
struct SymmetricView {
  AllocationId id = 0;
  const void* data = nullptr;
  std::uint64_t bytes = 0;
};

/// A new allocation as Allocate returns it.
struct Allocation {
  AllocationId id = 0;
  std::uint64_t lifecycle = 0;
  void* data = nullptr;  ///< in this PE's mapping
  std::uint64_t bytes = 0;
  std::uint64_t alignment = 0;
};

/// What a storage deleter knows about the allocation it held.
struct OrphanReport {
  AllocationId id = 0;
  std::uint64_t lifecycle = 0;
  const void* base = nullptr;
  std::uint64_t bytes = 0;
  int rank = -1;
};

/// A consistent picture of the Runtime for debug_state(); taken under the mutex.
struct Diagnostics {
  RuntimeState state = RuntimeState::kUninitialized;
  std::uint64_t lifecycle = 0;
  int rank = -1;
  int size = 0;
  std::vector<int> global_ranks;
  std::string device;
  std::string backend;
  Config config;
  const void* heap_base = nullptr;
  HeapUsage heap;
  RegistryPeaks peaks;
  std::vector<AllocationRecord> live;
  std::vector<AllocationRecord> leaks;
  Status latest_failure;
};

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
  Status Init(InitOptions options);
  /// Collective. Refused while allocations are live, unless every PE holds only leaked ones
  /// and the same ones (same offsets and sizes): those are logged and reclaimed. Then drains
  /// the streams, a bootstrap barrier, and the native teardown.
  Status Shutdown();

  RuntimeState state() const;

  /// Collective. `bytes` may be 0 (a real allocation with its own id and base). `note` is
  /// appended to the debug log line (for example shape, dtype and the caller's location).
  Status Allocate(std::uint64_t bytes, std::uint64_t alignment, Allocation* out,
                  std::string_view note = {});
  /// Collective. `whole` must be the complete allocation.
  Status Free(const SymmetricView& whole, std::string_view note = {});

  /// Enqueues a copy of destination.bytes bytes from local `source` into `destination` on PE
  /// `pe`. `keep_alive` owns `source` until the copy ran.
  Status Put(const SymmetricView& destination, const void* source, int pe, StreamRef stream,
             KeepAlive keep_alive = nullptr);
  /// Enqueues a copy of source.bytes bytes from `source` on PE `pe` into local `destination`.
  Status Get(void* destination, const SymmetricView& source, int pe, StreamRef stream,
             KeepAlive keep_alive = nullptr);
  /// Enqueues a set or add of `value` on the signal word `signal` of PE `pe`.
  Status Signal(const SymmetricView& signal, SignalWidth width, std::int64_t value, int pe,
                SignalOp op, StreamRef stream);
  /// Put followed by Signal on the same PE, as one entry (one validation, one enqueue): the
  /// data is visible on PE `pe` before the signal is.
  Status PutSignal(const SymmetricView& destination, const void* source,
                   const SymmetricView& signal, SignalWidth width, std::int64_t value, int pe,
                   SignalOp op, StreamRef stream, KeepAlive keep_alive = nullptr);
  /// Enqueues a wait until the local signal word satisfies `comparison` against `value`.
  Status WaitSignal(const SymmetricView& signal, SignalWidth width, std::int64_t value,
                    Comparison comparison, StreamRef stream);
  /// Enqueues a barrier over the Root WORLD.
  Status Barrier(StreamRef stream);

  /// Collective, enqueued: `input_bytes` of local `input` land in slot `rank` of `output` on
  /// every PE. `output` must be exactly input_bytes * size bytes and must not overlap `input`.
  /// Zero bytes: validated, then nothing. `keep_alive` owns both operands until it ran.
  Status AllGather(const SymmetricView& output, const void* input, std::uint64_t input_bytes,
                   StreamRef stream, KeepAlive keep_alive = nullptr);

  /// The current stream of the calling thread on the Runtime's device.
  Status CurrentStream(StreamRef* out);

  /// Records that a live allocation lost its last reference without free: logs an ERROR at
  /// once and puts it in the leak table. Never collective and never takes the entry mutex, so
  /// it is safe from a storage deleter on any thread, also while an entry is in progress.
  void ReportOrphan(const OrphanReport& report);

  Diagnostics Snapshot();

  /// Records a failure found outside the Runtime (a binding's own argument check) as the
  /// latest failure, so Diagnostics reports every rejected call alike.
  void NoteFailure(const Status& status);

  int rank() const;
  int size() const;
  std::chrono::milliseconds timeout() const;

 private:
  // Entry check: Ready and on the frozen device. Must hold mutex_.
  Status CheckReady(std::string_view operation) const;
  // Validates a symmetric operand (id, then heap bounds, then the range inside the allocation)
  // and returns its heap offset. `freed_code` is DOUBLE_FREE for free, which also requires the
  // whole allocation, and USE_AFTER_FREE for RMA. Must hold mutex_.
  Status ResolveOperand(const SymmetricView& view, std::uint64_t* offset,
                        AllocationRecord* record,
                        ErrorCode freed_code = ErrorCode::kUseAfterFree) const;
  Status CheckPe(int pe) const;
  // The operand checks of put, get and put_signal: PE in range, a live symmetric operand (its
  // heap offset goes to `offset`) and a non-null local side unless zero bytes move.
  Status CheckTransfer(const SymmetricView& symmetric, int pe, const void* local,
                       std::string_view local_name, std::uint64_t* offset) const;
  // Agreement through the backend; returns COLLECTIVE_MISMATCH naming the first disagreeing PE.
  Status AgreeOrMismatch(std::string_view what, const AgreementRecord& mine,
                         std::vector<AgreementRecord>* all);
  // Tags a failure with where it happened and keeps it as the latest failure. Inline so the
  // success path of every entry is a null check.
  Status Record(Status status, std::string_view operation, std::string_view phase) {
    if (status.ok()) [[likely]] return status;
    return RecordFailure(std::move(status), operation, phase);
  }
  Status RecordFailure(Status status, std::string_view operation, std::string_view phase);

// Inside a Runtime member: returns the recorded failure of `expression`, if any.
#define HPS_RECORD_IF_ERROR(expression, operation, phase)                         \
  do {                                                                            \
    ::hyper_parallel::shmem::Status hps_checked_ = (expression);                  \
    if (!hps_checked_.ok()) [[unlikely]] {                                        \
      return RecordFailure(std::move(hps_checked_), (operation), (phase));        \
    }                                                                             \
  } while (false)
  void RollBackInit();
  // Moves orphans reported since the last entry into the leak table. Must hold mutex_.
  void AdoptOrphans();

  mutable std::mutex mutex_;
  RuntimeState state_ = RuntimeState::kUninitialized;
  Config config_;
  DeviceId device_;
  int rank_ = -1;
  int size_ = 0;
  std::vector<int> global_ranks_;
  std::shared_ptr<Bootstrap> bootstrap_;
  std::unique_ptr<Backend> backend_;
  std::byte* heap_base_ = nullptr;
  HeapAllocator allocator_;
  AllocationRegistry registry_;
  Status latest_failure_;

  std::mutex orphan_mutex_;  // guards pending_orphans_ only; never held with mutex_ waiting
  std::vector<OrphanReport> pending_orphans_;
};

}  // namespace hyper_parallel::shmem
