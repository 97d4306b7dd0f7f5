// Collective: what one collective operation (barrier, all_gather, all_to_all, ...) is, as a
// unit the Runtime runs without knowing which one it runs.
//
// A collective declares four things:
//   - its kind: the name every PE's descriptor carries and every error and diagnostic uses;
//   - its local checks: the rules one PE's call must keep (sizes, overlap), checked on the
//     caller before anything collective happens (INVALID_ARGUMENT naming the broken rule);
//   - the descriptor fields every PE's call must agree on (AgreedField): the Runtime fills them
//     from the call and the backends compare exactly those, so PEs whose calls differ all fail
//     with COLLECTIVE_MISMATCH before any data moves;
//   - its kernel, written on the kernel-side API (kernel_api.h) alone, so every backend runs it.
// The Runtime's one collective path (Runtime::RunCollective) does the rest for every collective
// alike: the protection chain for the symmetric output, the claim of the next collective number,
// the exchange and match of descriptors, inline or enqueued execution, and the release.
//
// Collectives run over a group of PEs (CollectiveGroup): its members' PE numbers in the group's
// order, this PE's place among them, and the epoch slot its collectives publish their arrivals
// on. The group owns the sequence of collective numbers its calls take: the Root WORLD is one
// group, and every team (a subset of the PEs, docs/teams.md) is a group of its own.
//
// Synchronisation inside a kernel uses the call's collective number as a monotonic epoch on the
// group's sync slot (KernelApi::PublishEpoch / WaitEpochs): numbers only grow, and every
// collective of the group shares the slot, since a PE publishes number n only after it put
// everything of call n (data before signal), so seeing n or more from a peer means call n's
// data from that peer has landed.
//
// How to add one: docs/architecture.md, "How to add a collective".
//
// Thread-safety: a Collective is immutable; its methods may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "data_plane/kernel_api.h"

namespace hyper_parallel::shmem::data_plane {

/// The fields of a collective descriptor a collective may ask every PE to agree on (besides its
/// kind and its number, which always must), as bits.
enum AgreedField : unsigned {
  kAgreeBytes = 1u << 0,      ///< the call's input bytes
  kAgreeAlignment = 1u << 1,  ///< an allocation's alignment (empty)
  kAgreeOffset = 1u << 2,     ///< the heap offset of the symmetric operand
  kAgreeDtype = 1u << 3,      ///< the element type's name
  kAgreeLocal = 1u << 4,      ///< the outcome of each PE's local step (empty)
  kAgreeArguments = 1u << 5,  ///< up to three integer arguments (a split's triplet, a root)
};

/// A collective's integer arguments (a broadcast's root, a reduction's operator), compared
/// across PEs where the collective declares kAgreeArguments.
using CollectiveArguments = std::array<std::int64_t, 3>;

/// The PEs a collective runs over.
struct CollectiveGroup {
  /// Each member's PE number (in the Root WORLD), in the group's order.
  std::shared_ptr<const std::vector<int>> pes;
  /// This PE's index in `pes`.
  int index = 0;
  /// The group's team slot: its descriptor slots and the epoch slot its collectives publish
  /// their arrivals on (0: the Root WORLD).
  int sync_slot = 0;

  int size() const { return pes ? static_cast<int>(pes->size()) : 0; }
  /// The PE number of member `member`.
  int pe(int member) const { return (*pes)[static_cast<std::size_t>(member)]; }
};

/// One call as a collective's local checks see it. Sizes are bytes; `element_bytes` says how
/// the caller counts (a binding passes the element size and names sizes in elements; 0: the
/// caller counts bytes).
struct CollectiveCall {
  CollectiveGroup group;
  const void* output = nullptr;     ///< the symmetric output, in this PE's mapping (or null)
  std::uint64_t output_bytes = 0;
  const void* input = nullptr;      ///< local memory (or null)
  std::uint64_t input_bytes = 0;
  std::uint64_t element_bytes = 0;  ///< 0: sizes are counted in bytes
  std::string_view dtype;           ///< the element type's name ("" when not given)
  CollectiveArguments arguments{};  ///< the call's integer arguments (each collective's own)
  /// Per-member sizes in bytes where a collective takes them (all_to_all with split sizes:
  /// the bytes this PE sends to each member, then the bytes it expects from each).
  std::span<const std::uint64_t> sizes;
  /// Bytes of the group's workspace (CollectivePlan::workspace_offset), the same on every PE.
  std::uint64_t workspace_bytes = 0;
};

/// What a collective's kernel works with, once every PE's call matched.
struct CollectivePlan {
  CollectiveGroup group;
  std::uint64_t sequence = 0;       ///< the call's collective number: its epoch
  std::uint64_t output_offset = 0;  ///< heap offset of the symmetric output
  std::uint64_t output_bytes = 0;   ///< this PE's output bytes
  const void* input = nullptr;      ///< local memory, alive until the kernel ran
  std::uint64_t input_bytes = 0;
  /// The algorithm HYPER_PARALLEL_SHMEM_ALGORITHMS sets for this collective, one of its
  /// Algorithms() ("auto": the collective chooses by size and placement). The same on every PE;
  /// it views the lifecycle's frozen configuration, which outlives every call.
  std::string_view algorithm = "auto";
  CollectiveArguments arguments{};  ///< as in the call (agreed where declared)
  std::string dtype;                ///< the element type's name, as in the call
  std::uint64_t element_bytes = 0;  ///< as in the call (0: sizes in bytes)
  std::vector<std::uint64_t> sizes; ///< as in the call
  /// Where a collective that learns something every member must know leaves it (all_gather_v:
  /// each member's input bytes), when the caller asked (else null). Written by the kernel.
  std::shared_ptr<std::vector<std::uint64_t>> results;
  /// The group's workspace: symmetric heap bytes past the allocator's heap, one region per
  /// team slot, that only this group's collectives write (the reductions stage partial sums
  /// there). The same offset at every member; nothing else touches it, so a collective may
  /// reuse it across calls the way it reuses an output (every member entered call e before
  /// any byte of call e moves).
  std::uint64_t workspace_offset = 0;
  std::uint64_t workspace_bytes = 0;
};

class Collective {
 public:
  virtual ~Collective() = default;

  /// Its kind (at most 15 characters): "all_to_all".
  virtual std::string_view name() const = 0;

  /// Whether a call takes a symmetric output and a local input (false: no operand, a barrier).
  virtual bool TakesOperands() const { return true; }

  /// The call's local checks, after its output passed the protection chain.
  virtual Status Check(const CollectiveCall& call) const = 0;

  /// True when a call that passed its checks moves nothing (zero bytes): it runs no kernel, but
  /// still takes its collective number and agrees, so the PEs stay in step.
  virtual bool MovesNothing(const CollectiveCall& call) const {
    return TakesOperands() && call.input_bytes == 0;
  }

  /// The algorithms a user may set for it (HYPER_PARALLEL_SHMEM_ALGORITHMS) besides "auto";
  /// none: it has one.
  virtual std::span<const std::string_view> Algorithms() const { return {}; }

  /// AgreedField bits of the descriptor fields every PE's call must agree on.
  virtual unsigned AgreedFields() const = 0;

  /// How a mismatch names integer argument `index` ("root", "op"; "" where it takes none) and
  /// reads a value of it ("7", "sum").
  virtual std::string_view ArgumentName(int /*index*/) const { return {}; }
  virtual std::string ArgumentValue(int /*index*/, std::int64_t value) const {
    return std::to_string(value);
  }

  /// False when the agreement alone is the collective (a barrier): no kernel runs.
  virtual bool HasKernel() const { return true; }

  /// The kernel, run in stream order after every PE's descriptor matched.
  virtual Status Run(KernelApi& api, const CollectivePlan& plan) const = 0;
};

// ---- checks several collectives share ---------------------------------------------------

/// How a size reads in a message: elements when the caller counts elements, else bytes.
inline std::string SizeText(const CollectiveCall& call, std::uint64_t bytes) {
  return std::to_string(call.element_bytes > 0 ? bytes / call.element_bytes : bytes);
}
inline std::string_view SizeUnit(const CollectiveCall& call) {
  return call.element_bytes > 0 ? "numel" : "byte size";
}

/// An output of the input's size (all_reduce, all_to_all, broadcast).
inline Status CheckOutputSizeIsInput(const CollectiveCall& call) {
  if (call.output_bytes == call.input_bytes) return Status::Ok();
  const std::string unit(SizeUnit(call));
  return Status::Contract(ErrorCode::kInvalidArgument, "output " + unit,
                          "input " + unit + " (" + SizeText(call, call.input_bytes) + ")",
                          SizeText(call, call.output_bytes));
}

/// A non-null input unless it is empty, and an input disjoint from the output.
inline Status CheckInputBeside(const CollectiveCall& call, std::string_view collective) {
  const std::string what = std::string(collective) + " input";
  if (call.input == nullptr && call.input_bytes > 0) {
    return Status::Contract(ErrorCode::kInvalidArgument, what, "non-null", "null");
  }
  const auto in = reinterpret_cast<std::uintptr_t>(call.input);
  const auto out = reinterpret_cast<std::uintptr_t>(call.output);
  if (call.input_bytes > 0 && in < out + call.output_bytes && out < in + call.input_bytes) {
    // Appended piece by piece: GCC 12 warns (-Wrestrict, a known false positive) on
    // "literal" + std::string&&.
    const auto range = [](const void* start, std::uint64_t bytes) {
      std::string text("[");
      text.append(Hex(start)).append(", +").append(std::to_string(bytes)).append(")");
      return text;
    };
    return Status::Contract(ErrorCode::kInvalidArgument, what,
                            std::string("disjoint from the output ")
                                .append(range(call.output, call.output_bytes)),
                            range(call.input, call.input_bytes));
  }
  return Status::Ok();
}

/// CheckInputBeside, except that the input may also be the output itself (in place).
inline Status CheckInputInPlaceOrBeside(const CollectiveCall& call, std::string_view collective) {
  if (call.input != nullptr && call.input == call.output && call.input_bytes == call.output_bytes) {
    return Status::Ok();
  }
  return CheckInputBeside(call, collective);
}

/// The end of a pushing collective's kernel: publishes the call's number to every member of
/// `peers` (world PE numbers) on the group's sync slot, after everything the kernel put there
/// (data before signal), then waits until each of them published it here: their data has
/// landed, and this PE's input is free again.
inline Status PublishAndAwaitPeers(KernelApi& api, const CollectivePlan& plan,
                                   std::span<const int> peers, std::string_view operation) {
  if (peers.empty()) return Status::Ok();
  for (int peer : peers) api.PublishEpoch(peer, plan.group.sync_slot, plan.sequence);
  return api.WaitEpochs(plan.group.sync_slot, plan.sequence, peers, operation,
                        "peers' data to arrive");
}

/// PublishAndAwaitPeers after putting `puts`, through KernelApi::PutBlocksAndPublish: the
/// backend may send each peer's last block with its epoch as one message.
inline Status PutPublishAndAwaitPeers(KernelApi& api, const CollectivePlan& plan,
                                      std::span<const BlockPut> puts, std::span<const int> peers,
                                      std::string_view operation) {
  if (peers.empty()) {
    api.PutBlocks(puts);
    return Status::Ok();
  }
  api.PutBlocksAndPublish(puts, peers, plan.group.sync_slot, plan.sequence);
  return api.WaitEpochs(plan.group.sync_slot, plan.sequence, peers, operation,
                        "peers' data to arrive");
}

}  // namespace hyper_parallel::shmem::data_plane
