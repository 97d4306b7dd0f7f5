// The Runtime's public value types (runtime.h is the class; docs/architecture.md, "Lifecycle"):
// what callers pass to and get from its entries: the lifecycle states, the init options and the
// backend factory, symmetric operands and a collective's operands, team handles and what a team
// is, allocations, orphan reports, the backend's description and the Diagnostics snapshot.
// Plain data: the Runtime checks every value at the entry that takes it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "backends/backend.h"
#include "backends/backend_kind.h"
#include "backends/blocking_ops.h"
#include "base/config.h"
#include "base/status.h"
#include "data_plane/collective.h"
#include "data_plane/kernel_api.h"
#include "runtime/allocation_registry.h"
#include "runtime/bootstrap.h"
#include "runtime/heap_allocator.h"

namespace hyper_parallel::shmem {

enum class RuntimeState : std::uint8_t { kUninitialized, kInitializing, kReady, kClosing, kFailed };
std::string_view RuntimeStateName(RuntimeState state);

/// Makes the backend for a configured kind; UNSUPPORTED_CAPABILITY when the build lacks it.
using BackendFactory = std::function<Status(BackendKind kind, std::unique_ptr<Backend>* out)>;

/// The factory of this build: the backend registry's (backends/registry.h).
Status DefaultBackendFactory(BackendKind kind, std::unique_ptr<Backend>* out);

struct InitOptions {
  std::shared_ptr<Bootstrap> bootstrap;  ///< required; its rank and size define the Root WORLD
  std::vector<int> global_ranks;         ///< increasing; empty means 0 .. size-1
  EnvLookup env;                         ///< empty means the process environment
  BackendFactory backend_factory;        ///< empty means DefaultBackendFactory
  /// The collectives HYPER_PARALLEL_SHMEM_ALGORITHMS may name, each with the algorithms it
  /// offers (the binding passes the build's list); a name outside it fails init.
  std::span<const data_plane::Collective* const> collectives;
};

/// A symmetric operand: an allocation id and a byte range given by address. `data` is an
/// address in this PE's mapping of the heap.
struct SymmetricView {
  AllocationId id = 0;
  const void* data = nullptr;
  std::uint64_t bytes = 0;
};

/// The operands of one collective call: a symmetric output and a local input (all_gather,
/// all_to_all), or none (barrier).
struct CollectiveOperands {
  SymmetricView output;
  const void* input = nullptr;
  std::uint64_t input_bytes = 0;
  /// The caller's element size: its size rules are then phrased in elements (0: in bytes).
  std::uint64_t element_bytes = 0;
  /// The element type's name (up to 15 characters), compared across PEs where declared.
  std::string_view dtype;
  /// The collective's integer arguments (a root, an operator), compared across PEs where it
  /// declares kAgreeArguments.
  data_plane::CollectiveArguments arguments{};
  /// Per-member sizes in bytes where the collective takes them (CollectiveCall::sizes).
  std::vector<std::uint64_t> sizes{};
  /// Filled by the kernel where the collective reports something (CollectivePlan::results);
  /// on a queued stream, once the call has run.
  std::shared_ptr<std::vector<std::uint64_t>> results{};
};

/// A handle of a team: a subset of the Root WORLD's PEs with collectives of its own
/// (docs/teams.md). Plain data: the Runtime checks it at every use, so a handle of an older
/// lifecycle, of a destroyed team, or a destroyed handle is refused there.
struct TeamHandle {
  /// The lifecycle the team belongs to; 0 for a predefined team (world, node), which stands for
  /// the current lifecycle's.
  std::uint64_t lifecycle = 0;
  /// The team's slot: its sync words and sequence (0: the world). -1: no team (a PE outside a
  /// split's new team gets this).
  int slot = -1;
  /// This handle's own number (handles of the same ranks share one team); 0: predefined.
  std::uint64_t id = 0;

  bool valid() const { return slot >= 0; }
  bool operator==(const TeamHandle&) const = default;
};

/// The world team's handle, valid in every lifecycle.
inline constexpr TeamHandle kWorldTeam{0, 0, 0};

/// What a team is, as DescribeTeam reports it.
struct TeamInfo {
  int slot = -1;
  std::vector<int> pes;        ///< world PE numbers, in team-PE order
  int my_pe = -1;              ///< this PE's team PE number
  std::uint64_t sequence = 0;  ///< number of the team's latest collective
  std::uint64_t first_sequence = 0;  ///< the number its first collective followed
  int handles = 0;             ///< this PE's live handles of it (0: predefined)
  bool predefined = false;
};

/// A consumer's fused kernel as Launch runs it: the kernel-side API and the heap offsets of
/// the symmetric operands it declared, in the order it declared them.
using LaunchKernel =
    std::function<Status(data_plane::KernelApi& api, const std::vector<std::uint64_t>& offsets)>;

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
  /// Given up on purpose (Runtime::Release), not lost: no error, reclaimed when agreed.
  bool released = false;
};

/// What a layer above may ask about the running backend (shmem.backend_info() in Python): the
/// facts the backend and the heap decide, so that no consumer restates them or parses
/// diagnostics (docs/api.md, Backend description).
struct BackendDescription {
  std::string name;                    ///< "host", "cuda", "cann", or a fake's name
  /// This PE's thread was pinned to cores of its own (the host backend's automatic wait
  /// setting, where the PEs fit the machine's cores); false where PEs share their cores or a
  /// device backend runs the work.
  bool own_core = false;
  /// The heap is memory this process addresses from the host (the host backend, the fakes);
  /// false for device memory (CUDA).
  bool host_addressable_heap = true;
  /// Every allocation reserves a multiple of this many bytes.
  std::uint64_t granule_bytes = HeapAllocator::kGranule;
  /// The bound on every wait in force (HYPER_PARALLEL_SHMEM_TIMEOUT_SEC).
  std::chrono::milliseconds timeout{0};
};

/// A consistent picture of the Runtime for debug_state(); taken under the mutex (the blocked
/// operations under the blocking-op table's own lock).
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
  Status terminal_failure;               ///< why the Runtime is Failed (OK otherwise)
  std::uint64_t collective_sequence = 0;  ///< number of the latest collective of this PE
  int collectives_in_flight = 0;         ///< enqueued and not yet finished
  std::string collective_stream;         ///< the stream they are on ("" when none)
  int calls_in_flight = 0;               ///< entries executing outside the mutex right now
  /// How often the backend blocked the host until a device stream ran its work (this
  /// lifecycle's backend; Backend::HostSynchronizations).
  std::uint64_t host_synchronizations = 0;
  /// The teams this PE is in, by slot (the world first), with their collective state.
  struct TeamRow {
    TeamInfo info;
    int in_flight = 0;       ///< its collectives enqueued and not yet finished
    std::string stream;      ///< the stream they are on ("" when none)
  };
  std::vector<TeamRow> teams;
  WaitInfo wait;                         ///< the wait policy in force
  std::vector<PeerPlacement> peers;      ///< every PE's host and transport (empty: one host)
  NetworkInfo network;                   ///< the network transport in use (empty: none)
  std::vector<BlockingOp> blocking;      ///< operations blocked right now, oldest first
};

/// The byte Free writes over a freed allocation (a host-addressable heap): all bits set is NaN
/// in every IEEE float dtype and -1 in every signed integer dtype.
inline constexpr unsigned char kPoisonByte = 0xFF;

}  // namespace hyper_parallel::shmem
