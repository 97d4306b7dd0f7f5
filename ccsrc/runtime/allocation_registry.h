// AllocationRegistry: the table of live symmetric allocations, the root of the protection
// chain (docs/architecture.md, "The protection chain").
//
// Ids start at 1, increase monotonically and are never reused, also across Runtime lifecycles,
// so an id alone tells whether an operand is live, freed (in this lifecycle), from an earlier
// lifecycle, or never issued, each with its own error code. Ranges are heap offsets.
//
// Lookups are O(1): records sit in a deque indexed by id (ids are dense within a lifecycle),
// and released records at the front are dropped, so memory follows the oldest live id.
//
// Not thread-safe: the Runtime's mutex serialises every call.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "base/status.h"

namespace hyper_parallel::shmem {

using AllocationId = std::uint64_t;

struct AllocationRecord {
  AllocationId id = 0;
  std::uint64_t lifecycle = 0;
  std::uint64_t offset = 0;          ///< heap offset of the first byte
  std::uint64_t bytes = 0;           ///< the size asked for; operands must stay inside it
  std::uint64_t reserved_bytes = 0;  ///< what the heap reserved (granule-rounded)
  std::uint64_t alignment = 0;
  bool leaked = false;               ///< lost its last reference without free
  /// Released by its owner without a collective free (torch's symm_mem frees from a tensor's
  /// deleter, docs/api.md "torch's symmetric-memory API"): also `leaked`, but no error; the
  /// agreed reclaim gives it back once every PE released it.
  bool released = false;
  bool operator==(const AllocationRecord&) const = default;
};

/// High-water marks of one lifecycle.
struct RegistryPeaks {
  std::uint64_t max_live_count = 0;
  std::uint64_t max_live_bytes = 0;
};

class AllocationRegistry {
 public:
  /// Starts a lifecycle: ids issued from now on belong to it; earlier ones become stale.
  void BeginLifecycle();
  /// Ends the lifecycle and forgets its records (the caller has released or reclaimed them).
  void EndLifecycle();

  /// Records a new live allocation and returns its id.
  AllocationId Register(std::uint64_t offset, std::uint64_t bytes, std::uint64_t reserved_bytes,
                        std::uint64_t alignment);

  /// Validates an operand: `id` is live in this lifecycle and [offset, offset + bytes) lies
  /// inside its allocation. Freed: USE_AFTER_FREE; earlier lifecycle: STALE_LIFECYCLE; never
  /// issued: INVALID_ARGUMENT; outside the allocation: INVALID_ARGUMENT.
  Status Resolve(AllocationId id, std::uint64_t offset, std::uint64_t bytes,
                 AllocationRecord* out) const;

  /// Validates a free: like Resolve, but already freed is DOUBLE_FREE and the range must be
  /// the whole allocation (a view or slice is INVALID_ARGUMENT).
  Status ResolveWhole(AllocationId id, std::uint64_t offset, std::uint64_t bytes,
                      AllocationRecord* out) const;

  /// Validates only the id: live in this lifecycle, else STALE_LIFECYCLE, INVALID_ARGUMENT,
  /// or `freed_code` for an id freed in this lifecycle.
  Status CheckId(AllocationId id, ErrorCode freed_code) const;

  /// Forgets a live allocation (validated by ResolveWhole first).
  void Release(AllocationId id);

  /// Moves a live allocation into the leak table (`released`: its owner gave it up on purpose,
  /// AllocationRecord::released); false if it is not live.
  bool MarkLeaked(AllocationId id, bool released = false);

  std::vector<AllocationRecord> Live() const;    ///< by id
  std::vector<AllocationRecord> Leaked() const;  ///< by id, the released ones included
  std::size_t live_count() const { return live_count_; }
  std::uint64_t live_bytes() const { return live_bytes_; }
  RegistryPeaks peaks() const { return peaks_; }
  std::uint64_t lifecycle() const { return lifecycle_; }
  AllocationId next_id() const { return next_id_; }
  AllocationId first_id_of_lifecycle() const { return first_id_; }

 private:
  struct Slot {
    AllocationRecord record;
    bool live = false;
  };
  // The live slot of `id`, or null.
  const Slot* Find(AllocationId id) const {
    if (id < base_id_ || id - base_id_ >= slots_.size()) return nullptr;
    const Slot& slot = slots_[id - base_id_];
    return slot.live ? &slot : nullptr;
  }
  Slot* Find(AllocationId id) {
    return const_cast<Slot*>(static_cast<const AllocationRegistry*>(this)->Find(id));
  }
  Status Classify(AllocationId id, ErrorCode freed_code, const AllocationRecord** found) const;

  AllocationId next_id_ = 1;
  AllocationId first_id_ = 1;
  std::uint64_t lifecycle_ = 0;
  std::uint64_t live_bytes_ = 0;
  std::size_t live_count_ = 0;
  RegistryPeaks peaks_;
  AllocationId base_id_ = 1;  // id of slots_.front()
  std::deque<Slot> slots_;    // ids [base_id_, next_id_)
};

}  // namespace hyper_parallel::shmem
