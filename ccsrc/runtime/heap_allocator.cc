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
  // Only whole granules are handed out; a ragged end stays unused.
  const std::uint64_t usable = heap_bytes - heap_bytes % kGranule;
  if (usable > 0) free_.emplace(0, usable);
}

Status HeapAllocator::Allocate(std::uint64_t bytes, std::uint64_t alignment, HeapBlock* out) {
  HPS_RETURN_IF_ERROR(Place(bytes, alignment, out));
  Commit(*out);
  return Status::Ok();
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

  auto best = free_.cend();
  std::uint64_t best_start = 0;
  if (!too_big) {
    for (auto it = free_.cbegin(); it != free_.cend(); ++it) {
      const std::uint64_t start = (it->first + align - 1) / align * align;
      const std::uint64_t end = it->first + it->second;
      if (start > end || end - start < reserve) continue;
      if (best == free_.cend() || it->second < best->second) {  // ties keep the lower offset
        best = it;
        best_start = start;
      }
    }
  }
  if (best == free_.cend()) {
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

void HeapAllocator::Commit(const HeapBlock& block) {
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
  std::uint64_t start = used->first;
  std::uint64_t bytes = used->second;
  allocated_bytes_ -= bytes;
  used_.erase(used);

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
  return Status::Ok();
}

HeapUsage HeapAllocator::Usage() const {
  HeapUsage usage;
  usage.heap_bytes = heap_bytes_;
  usage.allocated_bytes = allocated_bytes_;
  usage.max_allocated_bytes = max_allocated_bytes_;
  usage.remaining_bytes = heap_bytes_ - allocated_bytes_;
  for (const auto& [offset, bytes] : free_) {
    usage.largest_free_block = std::max(usage.largest_free_block, bytes);
  }
  return usage;
}

}  // namespace hyper_parallel::shmem
