#include "runtime/heap_allocator.h"

#include <algorithm>
#include <iterator>
#include <string>

namespace hyper_parallel::shmem {
namespace {

std::string Decimal(std::uint64_t value) { return std::to_string(value); }

}  // namespace

void HeapAllocator::Reset(std::uint64_t heap_bytes) {
  heap_bytes_ = heap_bytes;
  allocated_bytes_ = 0;
  max_allocated_bytes_ = 0;
  free_.clear();
  used_.clear();
  quarantine_.clear();
  quarantined_bytes_ = 0;
  // Only whole granules are handed out; a ragged end stays unused.
  const std::uint64_t usable = heap_bytes - heap_bytes % kGranule;
  if (usable > 0) free_.emplace(0, usable);
}

Status HeapAllocator::Allocate(std::uint64_t bytes, std::uint64_t alignment, HeapBlock* out) {
  HPS_RETURN_IF_ERROR(Place(bytes, alignment, out));
  Commit(*out);
  return Status::Ok();
}

void HeapAllocator::DrainQuarantine() {
  while (!quarantine_.empty()) {
    const HeapBlock oldest = quarantine_.front();
    quarantine_.pop_front();
    quarantined_bytes_ -= oldest.reserved_bytes;
    ReturnToFree(oldest.offset, oldest.reserved_bytes);
  }
}

Status HeapAllocator::Place(std::uint64_t bytes, std::uint64_t alignment, HeapBlock* out) const {
  if (!IsPowerOfTwo(alignment) || alignment > kMaxAlignment) {
    return Status::Contract(ErrorCode::kInvalidArgument, "alignment",
                            "a power of two no greater than " + Decimal(kMaxAlignment),
                            Decimal(alignment));
  }
  const std::uint64_t align = std::max(alignment, kGranule);
  const std::uint64_t wanted = std::max<std::uint64_t>(bytes, 1);
  // Compared with the usable (whole-granule) heap, so the round-up below cannot wrap even for
  // a heap near 2^64.
  const bool too_big = wanted > heap_bytes_ - heap_bytes_ % kGranule;
  const std::uint64_t reserve = too_big ? 0 : (wanted + kGranule - 1) / kGranule * kGranule;

  // Best fit, lowest offset on ties; where nothing fits, the same over the space the
  // quarantine would free (Commit drains it then).
  auto best_fit = [&](const std::map<std::uint64_t, std::uint64_t>& space,
                      std::uint64_t* start_out) {
    auto best = space.cend();
    for (auto it = space.cbegin(); it != space.cend(); ++it) {
      const std::uint64_t start = (it->first + align - 1) / align * align;
      const std::uint64_t end = it->first + it->second;
      if (start > end || end - start < reserve) continue;
      if (best == space.cend() || it->second < best->second) {
        best = it;
        *start_out = start;
      }
    }
    return best != space.cend();
  };
  std::uint64_t best_start = 0;
  bool found = !too_big && best_fit(free_, &best_start);
  if (!found && !too_big && !quarantine_.empty()) found = best_fit(DrainedSpace(), &best_start);
  if (!found) {
    const HeapUsage usage = Usage();
    return Status::Assertion(ErrorCode::kOutOfMemory, "symmetric heap exhausted",
                             {{"requested_bytes", Decimal(bytes)},
                              {"alignment", Decimal(alignment)},
                              {"heap_bytes", Decimal(usage.heap_bytes)},
                              {"allocated_bytes", Decimal(usage.allocated_bytes)},
                              {"remaining_bytes", Decimal(usage.remaining_bytes)},
                              {"largest_free_block", Decimal(usage.largest_free_block)}});
  }

  *out = HeapBlock{best_start, reserve};
  return Status::Ok();
}

std::map<std::uint64_t, std::uint64_t> HeapAllocator::DrainedSpace() const {
  std::map<std::uint64_t, std::uint64_t> space;
  std::map<std::uint64_t, std::uint64_t> all = free_;
  for (const HeapBlock& block : quarantine_) all.emplace(block.offset, block.reserved_bytes);
  for (const auto& [offset, bytes] : all) {
    if (!space.empty()) {
      auto last = std::prev(space.end());
      if (last->first + last->second == offset) {
        last->second += bytes;
        continue;
      }
    }
    space.emplace(offset, bytes);
  }
  return space;
}

bool HeapAllocator::InFreeBlock(const HeapBlock& block) const {
  auto after = free_.upper_bound(block.offset);
  if (after == free_.begin()) return false;
  const auto containing = std::prev(after);
  return block.offset + block.reserved_bytes <= containing->first + containing->second;
}

void HeapAllocator::Commit(const HeapBlock& block) {
  if (!InFreeBlock(block)) DrainQuarantine();  // Place found room only after draining
  // The free block that contains the placement: the last one starting at or before it.
  auto containing = std::prev(free_.upper_bound(block.offset));
  const std::uint64_t block_offset = containing->first;
  const std::uint64_t block_end = containing->first + containing->second;
  free_.erase(containing);
  if (block.offset > block_offset) free_.emplace(block_offset, block.offset - block_offset);
  if (block.offset + block.reserved_bytes < block_end) {
    free_.emplace(block.offset + block.reserved_bytes,
                  block_end - block.offset - block.reserved_bytes);
  }
  used_.emplace(block.offset, block.reserved_bytes);
  allocated_bytes_ += block.reserved_bytes;
  max_allocated_bytes_ = std::max(max_allocated_bytes_, allocated_bytes_);
}

Status HeapAllocator::Release(std::uint64_t offset) {
  auto used = used_.find(offset);
  if (used == used_.end()) {
    return Status::Assertion(ErrorCode::kInvalidArgument, "no heap block starts at this offset",
                             {{"offset", Hex(offset)}});
  }
  const HeapBlock released{used->first, used->second};
  allocated_bytes_ -= released.reserved_bytes;
  used_.erase(used);
  if (released.reserved_bytes > quarantine_budget_) {  // off, or a block too big to hold back
    ReturnToFree(released.offset, released.reserved_bytes);
    return Status::Ok();
  }
  quarantine_.push_back(released);
  quarantined_bytes_ += released.reserved_bytes;
  // The oldest blocks leave while the quarantine holds more than its budget.
  while (quarantined_bytes_ > quarantine_budget_) {
    const HeapBlock oldest = quarantine_.front();
    quarantine_.pop_front();
    quarantined_bytes_ -= oldest.reserved_bytes;
    ReturnToFree(oldest.offset, oldest.reserved_bytes);
  }
  return Status::Ok();
}

void HeapAllocator::ReturnToFree(std::uint64_t start, std::uint64_t bytes) {
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + bytes) {
    bytes += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == start) {
      start = previous->first;
      bytes += previous->second;
      free_.erase(previous);
    }
  }
  free_.emplace(start, bytes);
}

HeapUsage HeapAllocator::Usage() const {
  HeapUsage usage;
  usage.heap_bytes = heap_bytes_;
  usage.allocated_bytes = allocated_bytes_;
  usage.max_allocated_bytes = max_allocated_bytes_;
  usage.remaining_bytes = heap_bytes_ - allocated_bytes_;
  usage.quarantined_bytes = quarantined_bytes_;
  usage.quarantined_blocks = quarantine_.size();
  usage.quarantine_budget = quarantine_budget_;
  // What a request could get, after draining the quarantine if it must.
  for (const auto& [offset, bytes] : quarantine_.empty() ? free_ : DrainedSpace()) {
    usage.largest_free_block = std::max(usage.largest_free_block, bytes);
  }
  return usage;
}

}  // namespace hyper_parallel::shmem
