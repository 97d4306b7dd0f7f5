// HeapAllocator: places allocations inside one PE's symmetric heap, by offset.
//
// Decisions are a pure function of the call sequence (best fit, lowest offset on ties, no
// randomness, no addresses), so every PE that makes the same calls gets the same offsets:
// that is what makes the heap symmetric. Freed blocks coalesce with free neighbours at once, so
// a heap that is empty again is one free block. Every reservation is a multiple of kGranule
// and aligned to at least kGranule.
//
// Quarantine: with a budget (SetQuarantine), a released block is not free at once. It waits in
// a FIFO until later releases push more than the budget in behind it, so a stale alias of a
// freed block (a numpy array, a DLPack capsule) never reads another allocation's data right
// after the free. The quarantine holds the most recently released blocks up to the budget in
// bytes; older ones leave (become free) as newer ones arrive, and a block larger than the
// budget is free at once (it would push out everything else). A request that fits nowhere else is placed as if the quarantine were
// drained, and Commit drains it (all of it): the quarantine never causes OUT_OF_MEMORY. Like
// placement, it is a pure function of the calls, so every PE holds the same blocks back.
//
// Not thread-safe: the Runtime's mutex serialises every call.
#pragma once

#include <cstdint>
#include <deque>
#include <map>

#include "base/status.h"

namespace hyper_parallel::shmem {

/// A placed allocation: where it starts in the heap and how many bytes it reserves.
struct HeapBlock {
  std::uint64_t offset = 0;
  std::uint64_t reserved_bytes = 0;
  bool operator==(const HeapBlock&) const = default;
};

/// Byte accounting of one heap. allocated + remaining == heap.
struct HeapUsage {
  std::uint64_t heap_bytes = 0;
  std::uint64_t allocated_bytes = 0;      ///< reserved by live blocks (granule-rounded)
  std::uint64_t max_allocated_bytes = 0;  ///< high-water mark of allocated_bytes
  std::uint64_t remaining_bytes = 0;      ///< heap_bytes - allocated_bytes
  std::uint64_t largest_free_block = 0;   ///< the biggest contiguous request that could fit
                                          ///< (after draining the quarantine)
  std::uint64_t quarantined_bytes = 0;    ///< released, held back from reuse (in remaining)
  std::uint64_t quarantined_blocks = 0;
  std::uint64_t quarantine_budget = 0;
  bool operator==(const HeapUsage&) const = default;
};

class HeapAllocator {
 public:
  /// Smallest reservation and alignment: one cache line.
  static constexpr std::uint64_t kGranule = 64;
  /// Largest alignment a caller may ask for; the backend aligns the heap base to it.
  static constexpr std::uint64_t kMaxAlignment = 2ull << 20;

  explicit HeapAllocator(std::uint64_t heap_bytes = 0) { Reset(heap_bytes); }

  /// Forgets every block and starts over with an empty heap of `heap_bytes`.
  void Reset(std::uint64_t heap_bytes);

  /// Reserves max(bytes, 1) rounded up to kGranule, at an offset that is a multiple of
  /// max(alignment, kGranule). alignment must be a power of two no greater than kMaxAlignment.
  /// A zero-byte request still reserves one granule, so every allocation has its own base.
  Status Allocate(std::uint64_t bytes, std::uint64_t alignment, HeapBlock* out);

  /// Decides where Allocate would place the request, changing nothing (not even the
  /// high-water mark), so a collective caller can agree first and Commit after.
  Status Place(std::uint64_t bytes, std::uint64_t alignment, HeapBlock* out) const;
  /// Reserves a block Place returned, with no allocation in between.
  void Commit(const HeapBlock& block);

  /// Returns the block that starts at `offset` to the free space (through the quarantine).
  Status Release(std::uint64_t offset);

  /// Holds released blocks back until more than `budget` bytes were released after them
  /// (0: off, the default). Applies to later releases.
  void SetQuarantine(std::uint64_t budget) { quarantine_budget_ = budget; }
  /// Frees every quarantined block, oldest first. Allocate does it when nothing else fits.
  void DrainQuarantine();

  HeapUsage Usage() const;
  std::uint64_t heap_bytes() const { return heap_bytes_; }
  std::size_t free_block_count() const { return free_.size(); }

 private:
  std::uint64_t heap_bytes_ = 0;
  std::uint64_t allocated_bytes_ = 0;
  std::uint64_t max_allocated_bytes_ = 0;
  std::map<std::uint64_t, std::uint64_t> free_;  // offset -> bytes; never adjacent
  std::map<std::uint64_t, std::uint64_t> used_;  // offset -> reserved bytes
  std::deque<HeapBlock> quarantine_;             // oldest first
  std::uint64_t quarantined_bytes_ = 0;
  std::uint64_t quarantine_budget_ = 0;

  // Returns a released block to the free space, merging with its free neighbours.
  void ReturnToFree(std::uint64_t start, std::uint64_t bytes);
  // The free space as it would be with the quarantine drained (merged blocks).
  std::map<std::uint64_t, std::uint64_t> DrainedSpace() const;
  // Whether `block` lies inside one free block.
  bool InFreeBlock(const HeapBlock& block) const;
};

/// True when `value` is a power of two (zero is not).
constexpr bool IsPowerOfTwo(std::uint64_t value) {
  return value != 0 && (value & (value - 1)) == 0;
}

}  // namespace hyper_parallel::shmem
