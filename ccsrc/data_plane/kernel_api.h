// KernelApi: what a fused consumer kernel may do on the symmetric heap, whatever the backend.
//
// A kernel is a function of this interface that the Runtime launches on a stream
// (Runtime::Launch): it runs in stream order like any other operation, after the Runtime checked
// every symmetric operand the launch declared. Inside, it addresses the heap by offsets (the
// same on every PE) and may:
//   - put a block of bytes from local memory to an offset of any PE's heap;
//   - add to a 64-bit counter at an offset of any PE's heap, after every block it put to that PE
//     before (data before signal: whoever sees the count sees the data);
//   - wait until a 64-bit counter in its own heap reaches a target (bounded: TIMEOUT naming what
//     it waited for, or PEER_LOST when a peer exits meanwhile);
//   - read and write its own heap directly.
// For the runtime's collectives (data_plane/collective.h) it also offers a batch of puts the
// backend may spread over its copy engines, and per-op epoch slots outside the heap: a PE
// publishes a monotonic epoch (the collective's number) on a slot at a peer, and waits until
// given peers published at least an epoch on a slot of its own. Consumers keep to counters in
// their own heap allocations.
// Counters are monotonic: a kernel adds and compares against growing targets, never resets, so
// no per-step zeroing can race a peer's add (docs/architecture.md, "The kernel-side API and
// MegaMoE"). Counters that different PEs add to concurrently should sit 64 bytes apart.
//
// Each backend implements it (the host backend with memcpy, atomics and futex waits; a device
// backend with on-stream puts and signals); consumers (the collectives under ops/; ops/mega_moe;
// any fused kernel) include only this header.
//
// Thread-safety: a kernel runs on one thread (its stream's); an instance is used by one kernel
// at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string_view>

#include "base/status.h"
#include "data_plane/elementwise.h"

namespace hyper_parallel::shmem::data_plane {

/// One block of a PutBlocks batch.
struct BlockPut {
  int pe = 0;
  std::uint64_t offset = 0;      ///< heap offset at `pe`
  const void* source = nullptr;  ///< local memory
  std::uint64_t bytes = 0;
};

/// One block of a PutBlocksSignalled batch: a block put to `pe`, then `add` added to the
/// 64-bit counter at heap offset `counter_offset` of the same PE.
struct SignalledPut {
  int pe = 0;
  std::uint64_t offset = 0;      ///< heap offset at `pe`
  const void* source = nullptr;  ///< local memory
  std::uint64_t bytes = 0;       ///< 0: the addition alone
  std::uint64_t counter_offset = 0;
  std::int64_t add = 0;
};

/// Epoch slots: each team (group of PEs, data_plane/collective.h) publishes its collectives'
/// arrivals on the slot of its own team slot; the Root WORLD's is slot 0. A backend has as many
/// as the lifecycle's team slots (HYPER_PARALLEL_SHMEM_MAX_TEAMS).
inline constexpr int kWorldEpochSlot = 0;

/// The value a round word holds once step `step` (< 2^16) of collective `epoch` landed: it grows
/// with both, so one word serves every step one sender makes in a call (a ring's) and every
/// call after it (KernelApi::PutBlocksAndSetRound).
inline constexpr std::uint64_t RoundValue(std::uint64_t epoch, std::uint64_t step) {
  return (epoch << 16) + step;
}

class KernelApi {
 public:
  virtual ~KernelApi() = default;

  /// This PE's index in the Root WORLD and the number of PEs (a team's kernel: this PE's team
  /// PE and the team's size, TeamKernelApi).
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// The host PE `pe` runs on, as a number every PE computes alike (the host's lowest PE
  /// number): PEs of one host share memory, so a collective can combine there and cross the
  /// network once per pair of hosts (docs/architecture.md, "Collectives across hosts"). 0 for
  /// every PE of a backend on one host.
  virtual int HostOf(int pe) const {
    (void)pe;
    return 0;
  }

  /// This PE's byte at heap offset `offset`, for direct reads and writes of its own heap.
  virtual std::byte* Local(std::uint64_t offset) const = 0;

  /// True when the kernel runs on the CPU and Local() is memory the CPU may compute on (the
  /// host backend); false on a stream backend, whose heap is device memory that only its
  /// enqueued operations touch.
  virtual bool HostAddressable() const { return false; }

  /// Copies `bytes` of this PE's heap at `offset` into host memory at `destination`, after
  /// everything the kernel enqueued before: a host-addressable heap is read directly; a stream
  /// backend synchronises its stream, which only a collective's kernel may ask (it runs on the
  /// launching thread, never under graph capture; a Launch'ed kernel gets INVALID_STATE).
  virtual Status ReadLocal(void* destination, std::uint64_t offset, std::uint64_t bytes) {
    if (!HostAddressable()) {
      return Status::Assertion(ErrorCode::kUnsupportedCapability,
                               "this backend cannot read its heap back into host memory", {});
    }
    if (bytes > 0) std::memcpy(destination, Local(offset), bytes);
    return Status::Ok();
  }

  /// True when Elementwise runs steps on this backend's memory (a stream backend with a
  /// reduction kernel); a host-addressable backend's kernels compute on the CPU themselves.
  virtual bool ComputesElementwise() const { return false; }

  /// Enqueues one element-wise step (data_plane/elementwise.h) over memory this PE's stream
  /// addresses, after everything the kernel enqueued before. UNSUPPORTED_CAPABILITY where
  /// ComputesElementwise() is false.
  virtual Status Elementwise(const ElementwiseStep& step) {
    (void)step;
    return Status::Assertion(ErrorCode::kUnsupportedCapability,
                             "this backend has no element-wise kernel", {});
  }

  /// Copies `bytes` from local `source` to heap offset `offset` of PE `pe`.
  virtual void PutBlock(int pe, std::uint64_t offset, const void* source,
                        std::uint64_t bytes) = 0;

  /// Adds `value` to the 64-bit counter at heap offset `offset` (8-byte aligned) of PE `pe`,
  /// after every block this kernel put to `pe` before, and wakes a waiter there.
  virtual void AddCounter(int pe, std::uint64_t offset, std::int64_t value) = 0;

  /// Waits until this PE's 64-bit counter at heap offset `offset` is at least `target`.
  /// `what` names the wait in TIMEOUT messages and in debug_state()'s blocked operations.
  virtual Status WaitCounter(std::uint64_t offset, std::int64_t target, std::string_view what) = 0;

  /// Puts every block of `puts`, in any order and possibly in parallel (the host backend
  /// spreads them over its copy workers); all have landed when it returns or, on a stream
  /// backend, before anything the kernel enqueues later.
  virtual void PutBlocks(std::span<const BlockPut> puts) {
    for (const BlockPut& put : puts) PutBlock(put.pe, put.offset, put.source, put.bytes);
  }

  /// Puts every block of `puts` and adds each one's `add` to its counter once that block has
  /// landed (data before signal, block by block: a waiter that counts every block's addition
  /// sees every block). Blocks, and their additions, may land in any order and in parallel
  /// (the CUDA backend: one multi-block kernel per 64 blocks); the host backend puts each PE's
  /// blocks in order, each addition also after every earlier block of the batch to that PE.
  virtual void PutBlocksSignalled(std::span<const SignalledPut> puts) {
    for (const SignalledPut& put : puts) {
      if (put.bytes > 0) PutBlock(put.pe, put.offset, put.source, put.bytes);
      AddCounter(put.pe, put.counter_offset, put.add);
    }
  }

  /// Publishes `epoch` on this PE's epoch slot `slot` (a team slot) at PE `pe`, after every
  /// block this kernel put to `pe` before (data before signal).
  virtual void PublishEpoch(int pe, int slot, std::uint64_t epoch) = 0;

  /// PutBlocks(puts), then PublishEpoch(pe, slot, epoch) for every pe of `peers`: a
  /// collective's data and its arrival flag. A backend may send a peer's last block and its
  /// epoch as one message (the host backend to a PE on another host).
  virtual void PutBlocksAndPublish(std::span<const BlockPut> puts, std::span<const int> peers,
                                   int slot, std::uint64_t epoch) {
    PutBlocks(puts);
    for (int pe : peers) PublishEpoch(pe, slot, epoch);
  }

  /// Waits until every PE of `sources` published `epoch` on slot `slot` here. Each PE publishes
  /// a given epoch to a given PE once per time it is named in the sources of that PE's waits
  /// (a PE named twice, in two waits or in one, publishes twice), and a wait names only PEs
  /// that publish to this PE in the same call: a backend may count arrivals rather than keep a
  /// word per source (the host backend does). A TIMEOUT names `operation`, `waiting_for` and
  /// what is missing, and is terminal for the lifecycle (the PEs' collectives are out of step);
  /// PEER_LOST when a peer exits.
  virtual Status WaitEpochs(int slot, std::uint64_t epoch, std::span<const int> sources,
                            std::string_view operation, std::string_view waiting_for) = 0;

  /// Round words, for collectives that move data in rounds from changing sources (Bruck's
  /// among hosts: in round k a PE hears from another PE than in round k - 1, and a later
  /// round's data may come first, which arrival counts cannot tell apart). Each team slot has
  /// RoundWords() of them at every PE (0: the backend has none, and such algorithms are not
  /// chosen); in one call exactly one PE writes a given word at a given PE, with values that
  /// grow (RoundValue), and a word's values only grow from call to call.
  virtual int RoundWords() const { return 0; }

  /// Puts every block of `puts` (all to PE `pe`), then sets round word `word` of slot `slot`
  /// at `pe` to `value` (data before the word: whoever sees the value sees the blocks).
  virtual void PutBlocksAndSetRound(std::span<const BlockPut> puts, int pe, int slot, int word,
                                    std::uint64_t value) {
    (void)puts, (void)pe, (void)slot, (void)word, (void)value;
  }

  /// Waits until this PE's round word `word` of slot `slot` holds at least `value`, which PE
  /// `source` sets. Bounded as WaitEpochs: a TIMEOUT names `operation`, `waiting_for` and the
  /// source, and is terminal; PEER_LOST when a peer exits. UNSUPPORTED_CAPABILITY on a backend
  /// without round words.
  virtual Status WaitRound(int slot, int word, std::uint64_t value, int source,
                           std::string_view operation, std::string_view waiting_for) {
    (void)slot, (void)word, (void)value, (void)source, (void)waiting_for;
    return Status::Assertion(ErrorCode::kUnsupportedCapability,
                             "this backend has no round words", {{"operation", std::string(operation)}});
  }
};

}  // namespace hyper_parallel::shmem::data_plane
