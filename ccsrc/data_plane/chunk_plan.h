// ChunkPlan: deterministic byte chunking of one message.
//
// A message of `total` bytes is cut into chunks of `chunk` bytes. A short tail is rebalanced
// so that no chunk is smaller than `min_chunk` unless the whole message is: the tail and the
// last full chunk are split into two near-equal, granule-aligned halves, or merged into one
// chunk when halves would still be too small. Every PE computing the plan for the same inputs
// gets the same chunks, and chunk i is found in O(1) without materialising the list.
//
// Pure value type, header-only, constexpr.
#pragma once

#include <cstdint>

namespace hyper_parallel::shmem::data_plane {

struct Chunk {
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  constexpr bool operator==(const Chunk&) const = default;
};

class ChunkPlan {
 public:
  /// Preconditions (checked by Valid()): chunk >= min_chunk >= 1, granule a power of two that
  /// divides chunk. total may be 0 (a plan with no chunks).
  constexpr ChunkPlan(std::uint64_t total, std::uint64_t chunk, std::uint64_t min_chunk,
                      std::uint64_t granule = 1)
      : total_(total), chunk_(chunk), min_chunk_(min_chunk), granule_(granule) {
    if (!Valid() || total == 0) return;
    if (total <= chunk) {
      full_ = 0;
      tail_count_ = 1;
      tail_first_ = total;
      return;
    }
    full_ = total / chunk;
    const std::uint64_t rest = total % chunk;
    if (rest == 0) return;
    if (rest >= min_chunk) {
      tail_count_ = 1;
      tail_first_ = rest;
      return;
    }
    // Short tail: rebalance it with the last full chunk.
    --full_;
    const std::uint64_t combined = chunk + rest;
    const std::uint64_t first = combined / 2 / granule * granule;
    if (first >= min_chunk && combined - first >= min_chunk) {
      tail_count_ = 2;
      tail_first_ = first;
      tail_second_ = combined - first;
    } else {
      tail_count_ = 1;
      tail_first_ = combined;  // one chunk, larger than `chunk`
    }
  }

  constexpr bool Valid() const {
    return min_chunk_ >= 1 && chunk_ >= min_chunk_ && granule_ >= 1 &&
           (granule_ & (granule_ - 1)) == 0 && chunk_ % granule_ == 0;
  }

  constexpr std::uint64_t count() const { return full_ + tail_count_; }
  constexpr std::uint64_t total() const { return total_; }
  constexpr std::uint64_t chunk_bytes() const { return chunk_; }
  constexpr std::uint64_t min_chunk_bytes() const { return min_chunk_; }
  /// True when the tail was merged or split to respect min_chunk.
  constexpr bool rebalanced() const {
    return tail_count_ == 2 || (tail_count_ == 1 && tail_first_ > chunk_);
  }

  /// Chunk `i` in [0, count()).
  constexpr Chunk At(std::uint64_t i) const {
    if (i < full_) return Chunk{i * chunk_, chunk_};
    const std::uint64_t base = full_ * chunk_;
    if (i == full_) return Chunk{base, tail_first_};
    return Chunk{base + tail_first_, tail_second_};
  }

 private:
  std::uint64_t total_;
  std::uint64_t chunk_;
  std::uint64_t min_chunk_;
  std::uint64_t granule_;
  std::uint64_t full_ = 0;        // leading chunks of exactly chunk_ bytes
  std::uint64_t tail_count_ = 0;  // 0, 1 or 2 trailing chunks of other sizes
  std::uint64_t tail_first_ = 0;
  std::uint64_t tail_second_ = 0;
};

/// How the collectives that push blocks (all_gather, all_to_all, broadcast) cut each message:
/// 256 KiB chunks, none under 64 KiB unless the message is, split at 64-byte granules.
inline constexpr std::uint64_t kCollectiveChunkBytes = 256ull << 10;
inline constexpr std::uint64_t kCollectiveMinChunkBytes = 64ull << 10;
inline constexpr std::uint64_t kCollectiveGranule = 64;

constexpr ChunkPlan CollectiveChunks(std::uint64_t total) {
  return ChunkPlan(total, kCollectiveChunkBytes, kCollectiveMinChunkBytes, kCollectiveGranule);
}

}  // namespace hyper_parallel::shmem::data_plane
