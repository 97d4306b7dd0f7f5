#include "runtime/heap_allocator.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

namespace hyper_parallel::shmem {
namespace {

constexpr std::uint64_t kG = HeapAllocator::kGranule;

TEST(HeapAllocator, AlignmentIsHonoured) {
  HeapAllocator heap(1 << 20);
  HeapBlock a, b, c;
  ASSERT_TRUE(heap.Allocate(10, 1, &a).ok());
  ASSERT_TRUE(heap.Allocate(10, 4096, &b).ok());
  ASSERT_TRUE(heap.Allocate(10, 64, &c).ok());
  EXPECT_EQ(a.offset % kG, 0u);
  EXPECT_EQ(b.offset % 4096, 0u);
  EXPECT_EQ(c.offset % 64, 0u);
  EXPECT_EQ(a.reserved_bytes, kG);
}

TEST(HeapAllocator, RejectsBadAlignment) {
  HeapAllocator heap(1 << 20);
  HeapBlock block;
  for (std::uint64_t alignment : std::vector<std::uint64_t>{0, 3, 48, HeapAllocator::kMaxAlignment * 2}) {
    Status status = heap.Allocate(8, alignment, &block);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument) << alignment;
    EXPECT_NE(status.message().find("alignment must be a power of two"), std::string::npos);
  }
  EXPECT_EQ(heap.Usage().allocated_bytes, 0u);
}

// Found while fuzzing (fuzz/allocator_fuzz): with a heap near 2^64 the granule round-up of a
// request just below it wrapped to a reservation of zero bytes.
TEST(HeapAllocator, RequestsNearTwoToTheSixtyFourNeverWrap) {
  HeapAllocator heap(~std::uint64_t{0});
  HeapBlock block;
  const Status status = heap.Allocate(~std::uint64_t{0} - 10, 64, &block);
  EXPECT_EQ(status.code(), ErrorCode::kOutOfMemory) << "more than the usable, whole granules";
  ASSERT_TRUE(heap.Allocate(~std::uint64_t{0} - 127, 64, &block).ok());
  EXPECT_EQ(block.offset, 0u);
  EXPECT_EQ(block.reserved_bytes, ~std::uint64_t{0} - 127) << "already whole granules";
}

TEST(HeapAllocator, ZeroBytesReservesOneGranule) {
  HeapAllocator heap(1 << 20);
  HeapBlock a, b;
  ASSERT_TRUE(heap.Allocate(0, 64, &a).ok());
  ASSERT_TRUE(heap.Allocate(0, 64, &b).ok());
  EXPECT_NE(a.offset, b.offset);
  EXPECT_EQ(a.reserved_bytes, kG);
}

TEST(HeapAllocator, CoalescesBothNeighbours) {
  HeapAllocator heap(64 * kG);
  HeapBlock a, b, c;
  ASSERT_TRUE(heap.Allocate(kG, 64, &a).ok());
  ASSERT_TRUE(heap.Allocate(kG, 64, &b).ok());
  ASSERT_TRUE(heap.Allocate(kG, 64, &c).ok());
  ASSERT_TRUE(heap.Release(a.offset).ok());
  ASSERT_TRUE(heap.Release(c.offset).ok());
  EXPECT_EQ(heap.free_block_count(), 2u);  // [a] and [c .. end) merged
  ASSERT_TRUE(heap.Release(b.offset).ok());
  EXPECT_EQ(heap.free_block_count(), 1u);
  EXPECT_EQ(heap.Usage().largest_free_block, 64 * kG);
  EXPECT_EQ(heap.Usage().allocated_bytes, 0u);
}

TEST(HeapAllocator, BestFitReusesTheTightestHole) {
  HeapAllocator heap(64 * kG);
  HeapBlock big, sep1, small, sep2;
  ASSERT_TRUE(heap.Allocate(8 * kG, 64, &big).ok());
  ASSERT_TRUE(heap.Allocate(kG, 64, &sep1).ok());
  ASSERT_TRUE(heap.Allocate(2 * kG, 64, &small).ok());
  ASSERT_TRUE(heap.Allocate(kG, 64, &sep2).ok());
  ASSERT_TRUE(heap.Release(big.offset).ok());
  ASSERT_TRUE(heap.Release(small.offset).ok());
  HeapBlock reused;
  ASSERT_TRUE(heap.Allocate(2 * kG, 64, &reused).ok());
  EXPECT_EQ(reused.offset, small.offset);  // the 2-granule hole, not the 8-granule one
}

TEST(HeapAllocator, ExhaustionReportsUsage) {
  HeapAllocator heap(4 * kG);
  HeapBlock a;
  ASSERT_TRUE(heap.Allocate(3 * kG, 64, &a).ok());
  HeapBlock b;
  Status status = heap.Allocate(2 * kG, 64, &b);
  ASSERT_EQ(status.code(), ErrorCode::kOutOfMemory);
  EXPECT_NE(status.message().find("symmetric heap exhausted: requested_bytes=128"),
            std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("heap_bytes=256"), std::string::npos);
  EXPECT_NE(status.message().find("remaining_bytes=64"), std::string::npos);
  EXPECT_EQ(heap.Usage().allocated_bytes, 3 * kG);  // unchanged
  EXPECT_EQ(heap.Allocate(UINT64_MAX, 64, &b).code(), ErrorCode::kOutOfMemory);
}

TEST(HeapAllocator, PlaceChangesNothingAndCommitMatchesAllocate) {
  HeapAllocator planned(64 * kG), direct(64 * kG);
  HeapBlock a, b;
  ASSERT_TRUE(planned.Allocate(3 * kG, 64, &a).ok());
  ASSERT_TRUE(direct.Allocate(3 * kG, 64, &b).ok());
  const HeapUsage before = planned.Usage();
  HeapBlock placed;
  ASSERT_TRUE(planned.Place(5 * kG, 1024, &placed).ok());
  EXPECT_EQ(planned.Usage(), before);  // not even the high-water mark moved
  EXPECT_EQ(planned.free_block_count(), 1u);
  planned.Commit(placed);
  HeapBlock allocated;
  ASSERT_TRUE(direct.Allocate(5 * kG, 1024, &allocated).ok());
  EXPECT_EQ(placed, allocated);
  EXPECT_EQ(planned.Usage(), direct.Usage());
  EXPECT_EQ(planned.free_block_count(), direct.free_block_count());
}

TEST(HeapAllocator, HighWaterMark) {
  HeapAllocator heap(64 * kG);
  HeapBlock a, b;
  ASSERT_TRUE(heap.Allocate(10 * kG, 64, &a).ok());
  ASSERT_TRUE(heap.Allocate(5 * kG, 64, &b).ok());
  ASSERT_TRUE(heap.Release(a.offset).ok());
  const HeapUsage usage = heap.Usage();
  EXPECT_EQ(usage.allocated_bytes, 5 * kG);
  EXPECT_EQ(usage.max_allocated_bytes, 15 * kG);
  EXPECT_EQ(usage.remaining_bytes, 59 * kG);
}

TEST(HeapAllocator, ReleaseOfUnknownOffsetIsRejected) {
  HeapAllocator heap(64 * kG);
  HeapBlock a;
  ASSERT_TRUE(heap.Allocate(2 * kG, 64, &a).ok());
  EXPECT_EQ(heap.Release(a.offset + kG).code(), ErrorCode::kInvalidArgument);
  ASSERT_TRUE(heap.Release(a.offset).ok());
  EXPECT_EQ(heap.Release(a.offset).code(), ErrorCode::kInvalidArgument);
}

TEST(HeapAllocator, SameSequenceSameOffsets) {
  // Symmetry: two heaps fed the same calls decide identically.
  HeapAllocator left(1 << 20), right(1 << 20);
  std::mt19937_64 rng(7);
  std::vector<std::uint64_t> live;
  for (int step = 0; step < 2000; ++step) {
    if (!live.empty() && rng() % 3 == 0) {
      const std::size_t pick = rng() % live.size();
      ASSERT_TRUE(left.Release(live[pick]).ok());
      ASSERT_TRUE(right.Release(live[pick]).ok());
      live.erase(live.begin() + static_cast<long>(pick));
      continue;
    }
    const std::uint64_t bytes = rng() % 5000;
    const std::uint64_t alignment = 1ull << (rng() % 13);
    HeapBlock l, r;
    const Status ls = left.Allocate(bytes, alignment, &l);
    const Status rs = right.Allocate(bytes, alignment, &r);
    ASSERT_EQ(ls.code(), rs.code());
    if (ls.ok()) {
      ASSERT_EQ(l, r);
      live.push_back(l.offset);
    }
  }
}

// Reference model: one flag per granule, best fit by scanning maximal free runs.
class ModelHeap {
 public:
  explicit ModelHeap(std::uint64_t heap_bytes) : used_(heap_bytes / kG, false) {}

  bool Allocate(std::uint64_t bytes, std::uint64_t alignment, std::uint64_t* offset) {
    const std::uint64_t align = std::max(alignment, kG) / kG;
    const std::uint64_t need = (std::max<std::uint64_t>(bytes, 1) + kG - 1) / kG;
    std::uint64_t best_start = 0, best_length = 0;
    bool found = false;
    for (std::uint64_t i = 0; i < used_.size();) {
      if (used_[i]) {
        ++i;
        continue;
      }
      std::uint64_t j = i;
      while (j < used_.size() && !used_[j]) ++j;
      const std::uint64_t start = (i + align - 1) / align * align;
      if (start <= j && j - start >= need && (!found || j - i < best_length)) {
        found = true;
        best_start = start;
        best_length = j - i;
      }
      i = j;
    }
    if (!found) return false;
    for (std::uint64_t g = best_start; g < best_start + need; ++g) used_[g] = true;
    sizes_[best_start] = need;
    *offset = best_start * kG;
    return true;
  }

  void Release(std::uint64_t offset) {
    const std::uint64_t start = offset / kG;
    for (std::uint64_t g = start; g < start + sizes_[start]; ++g) used_[g] = false;
    sizes_.erase(start);
  }

  std::size_t FreeRuns() const {
    std::size_t runs = 0;
    for (std::size_t i = 0; i < used_.size(); ++i) {
      if (!used_[i] && (i == 0 || used_[i - 1])) ++runs;
    }
    return runs;
  }

  std::uint64_t AllocatedBytes() const {
    std::uint64_t granules = 0;
    for (bool flag : used_) granules += flag ? 1 : 0;
    return granules * kG;
  }

 private:
  std::vector<bool> used_;
  std::map<std::uint64_t, std::uint64_t> sizes_;
};

class HeapAllocatorProperty : public ::testing::TestWithParam<int> {};

TEST_P(HeapAllocatorProperty, MatchesReferenceModel) {
  const std::uint64_t heap_bytes = 512 * kG;
  HeapAllocator heap(heap_bytes);
  ModelHeap model(heap_bytes);
  std::mt19937_64 rng(static_cast<std::uint64_t>(GetParam()));
  std::vector<HeapBlock> live;
  std::uint64_t peak = 0;
  for (int step = 0; step < 3000; ++step) {
    if (!live.empty() && rng() % 2 == 0) {
      const std::size_t pick = rng() % live.size();
      ASSERT_TRUE(heap.Release(live[pick].offset).ok());
      model.Release(live[pick].offset);
      live.erase(live.begin() + static_cast<long>(pick));
    } else {
      const std::uint64_t bytes = rng() % 3 == 0 ? rng() % 64 : rng() % (40 * kG);
      const std::uint64_t alignment = 1ull << (rng() % 12);
      HeapBlock block;
      std::uint64_t expected = 0;
      const bool model_ok = model.Allocate(bytes, alignment, &expected);
      const Status status = heap.Allocate(bytes, alignment, &block);
      ASSERT_EQ(status.ok(), model_ok) << "step " << step << " " << status.ToString();
      if (model_ok) {
        ASSERT_EQ(block.offset, expected) << "step " << step;
        ASSERT_EQ(block.offset % std::max(alignment, kG), 0u);
        ASSERT_GE(block.reserved_bytes, bytes);
        ASSERT_LE(block.offset + block.reserved_bytes, heap_bytes);
        live.push_back(block);
      } else {
        ASSERT_EQ(status.code(), ErrorCode::kOutOfMemory);
      }
    }
    const HeapUsage usage = heap.Usage();
    peak = std::max(peak, usage.allocated_bytes);
    ASSERT_EQ(usage.allocated_bytes, model.AllocatedBytes());
    ASSERT_EQ(usage.allocated_bytes + usage.remaining_bytes, heap_bytes);
    ASSERT_EQ(usage.max_allocated_bytes, peak);
    ASSERT_EQ(heap.free_block_count(), model.FreeRuns()) << "coalescing diverged at " << step;
  }
  for (const HeapBlock& block : live) ASSERT_TRUE(heap.Release(block.offset).ok());
  EXPECT_EQ(heap.free_block_count(), 1u);  // no fragmentation leak
  EXPECT_EQ(heap.Usage().largest_free_block, heap_bytes);
}

INSTANTIATE_TEST_SUITE_P(Seeds, HeapAllocatorProperty, ::testing::Values(1, 2, 3, 42, 1234));

// ---- quarantine -------------------------------------------------------------------------

TEST(HeapAllocatorQuarantine, AFreedBlockIsNotHandedOutAgainAtOnce) {
  HeapAllocator heap(1 << 20);
  heap.SetQuarantine(4 * kG);
  HeapBlock a, b;
  ASSERT_TRUE(heap.Allocate(kG, 1, &a).ok());
  ASSERT_TRUE(heap.Release(a.offset).ok());
  const HeapUsage usage = heap.Usage();
  EXPECT_EQ(usage.quarantined_bytes, kG);
  EXPECT_EQ(usage.quarantined_blocks, 1u);
  EXPECT_EQ(usage.quarantine_budget, 4 * kG);
  EXPECT_EQ(usage.allocated_bytes, 0u);  // released, only held back
  ASSERT_TRUE(heap.Allocate(kG, 1, &b).ok());
  EXPECT_NE(b.offset, a.offset) << "best fit would have reused the block just freed";
  // Without a quarantine, best fit takes it back at once.
  HeapAllocator plain(1 << 20);
  ASSERT_TRUE(plain.Allocate(kG, 1, &a).ok());
  ASSERT_TRUE(plain.Release(a.offset).ok());
  ASSERT_TRUE(plain.Allocate(kG, 1, &b).ok());
  EXPECT_EQ(b.offset, a.offset);
}

TEST(HeapAllocatorQuarantine, LaterFreesPushTheOldestOut) {
  HeapAllocator heap(1 << 20);
  heap.SetQuarantine(2 * kG);
  std::vector<HeapBlock> blocks(4);
  for (HeapBlock& block : blocks) ASSERT_TRUE(heap.Allocate(kG, 1, &block).ok());
  ASSERT_TRUE(heap.Release(blocks[0].offset).ok());
  ASSERT_TRUE(heap.Release(blocks[1].offset).ok());
  EXPECT_EQ(heap.Usage().quarantined_blocks, 2u);
  ASSERT_TRUE(heap.Release(blocks[2].offset).ok());  // over budget: blocks[0] leaves
  EXPECT_EQ(heap.Usage().quarantined_bytes, 2 * kG);
  HeapBlock next;
  ASSERT_TRUE(heap.Allocate(kG, 1, &next).ok());
  EXPECT_EQ(next.offset, blocks[0].offset) << "the oldest freed block is free again";
  // A block larger than the budget does not wait at all.
  HeapBlock big;
  ASSERT_TRUE(heap.Allocate(8 * kG, 1, &big).ok());
  ASSERT_TRUE(heap.Release(big.offset).ok());
  EXPECT_EQ(heap.Usage().quarantined_bytes, 2 * kG);
}

TEST(HeapAllocatorQuarantine, NeverCausesOutOfMemoryAndPlaceChangesNothing) {
  HeapAllocator heap(16 * kG);
  heap.SetQuarantine(16 * kG);
  std::vector<HeapBlock> blocks(16);
  for (HeapBlock& block : blocks) ASSERT_TRUE(heap.Allocate(kG, 1, &block).ok());
  for (const HeapBlock& block : blocks) ASSERT_TRUE(heap.Release(block.offset).ok());
  const HeapUsage before = heap.Usage();
  EXPECT_EQ(before.quarantined_bytes, 16 * kG);
  EXPECT_EQ(before.largest_free_block, 16 * kG) << "what a request could get after draining";
  HeapBlock whole;
  ASSERT_TRUE(heap.Place(16 * kG, 1, &whole).ok());
  EXPECT_EQ(heap.Usage(), before) << "Place drains nothing";
  heap.Commit(whole);  // drains, then reserves the whole heap
  EXPECT_EQ(whole.offset, 0u);
  EXPECT_EQ(heap.Usage().quarantined_bytes, 0u);
  EXPECT_EQ(heap.Usage().allocated_bytes, 16 * kG);
  HeapBlock more;
  EXPECT_EQ(heap.Allocate(kG, 1, &more).code(), ErrorCode::kOutOfMemory);
}

TEST(HeapAllocatorQuarantine, PlacementStaysAPureFunctionOfTheCalls) {
  // Two allocators (two PEs) making the same random calls agree on every offset.
  HeapAllocator pe0(1 << 16), pe1(1 << 16);
  pe0.SetQuarantine(1 << 12);
  pe1.SetQuarantine(1 << 12);
  std::mt19937 rng(7);
  std::vector<HeapBlock> live;
  for (int step = 0; step < 2000; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      const std::uint64_t bytes = 1 + rng() % 2000, alignment = 64u << (rng() % 4);
      HeapBlock a, b;
      const Status first = pe0.Allocate(bytes, alignment, &a);
      const Status second = pe1.Allocate(bytes, alignment, &b);
      ASSERT_EQ(first.code(), second.code());
      if (first.ok()) {
        ASSERT_EQ(a, b);
        live.push_back(a);
      }
    } else {
      const std::size_t victim = rng() % live.size();
      ASSERT_TRUE(pe0.Release(live[victim].offset).ok());
      ASSERT_TRUE(pe1.Release(live[victim].offset).ok());
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
    }
    ASSERT_EQ(pe0.Usage(), pe1.Usage());
    ASSERT_LE(pe0.Usage().quarantined_bytes, 1u << 12);
  }
}

}  // namespace
}  // namespace hyper_parallel::shmem
