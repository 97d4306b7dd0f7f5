#include "data_plane/chunk_plan.h"

#include <gtest/gtest.h>

#include <vector>

namespace hyper_parallel::shmem::data_plane {
namespace {

// Every plan must tile [0, total) exactly, in order, with no chunk below the minimum unless
// the whole message is below it, and no chunk above chunk + min (the merged tail).
void ExpectWellFormed(const ChunkPlan& plan) {
  ASSERT_TRUE(plan.Valid());
  std::uint64_t cursor = 0;
  for (std::uint64_t i = 0; i < plan.count(); ++i) {
    const Chunk chunk = plan.At(i);
    ASSERT_EQ(chunk.offset, cursor) << "chunk " << i;
    ASSERT_GT(chunk.bytes, 0u) << "chunk " << i;
    if (plan.total() >= plan.min_chunk_bytes()) {
      ASSERT_GE(chunk.bytes, plan.min_chunk_bytes()) << "chunk " << i << " of " << plan.total();
    }
    ASSERT_LT(chunk.bytes, plan.chunk_bytes() + plan.min_chunk_bytes()) << "chunk " << i;
    cursor += chunk.bytes;
  }
  ASSERT_EQ(cursor, plan.total());
}

TEST(ChunkPlan, EmptyMessageHasNoChunks) {
  ChunkPlan plan(0, 1024, 256);
  EXPECT_EQ(plan.count(), 0u);
}

TEST(ChunkPlan, SmallMessageIsOneChunkEvenBelowMinimum) {
  for (std::uint64_t total : {1ull, 31ull, 255ull, 256ull, 1023ull, 1024ull}) {
    ChunkPlan plan(total, 1024, 256);
    ASSERT_EQ(plan.count(), 1u) << total;
    EXPECT_EQ(plan.At(0), (Chunk{0, total}));
    EXPECT_FALSE(plan.rebalanced());
  }
}

TEST(ChunkPlan, ExactMultiple) {
  ChunkPlan plan(4096, 1024, 256);
  ASSERT_EQ(plan.count(), 4u);
  EXPECT_EQ(plan.At(3), (Chunk{3072, 1024}));
  EXPECT_FALSE(plan.rebalanced());
}

TEST(ChunkPlan, TailAtMinimumStaysItsOwnChunk) {
  ChunkPlan plan(1024 + 256, 1024, 256);
  ASSERT_EQ(plan.count(), 2u);
  EXPECT_EQ(plan.At(1), (Chunk{1024, 256}));
  EXPECT_FALSE(plan.rebalanced());
}

TEST(ChunkPlan, ShortTailIsSplitWithTheLastFullChunk) {
  ChunkPlan plan(2048 + 100, 1024, 256, 64);  // tail 100 < 256
  ASSERT_EQ(plan.count(), 3u);
  EXPECT_TRUE(plan.rebalanced());
  EXPECT_EQ(plan.At(0), (Chunk{0, 1024}));
  // 1124 bytes shared: 512 (granule-aligned half) + 612.
  EXPECT_EQ(plan.At(1), (Chunk{1024, 512}));
  EXPECT_EQ(plan.At(2), (Chunk{1536, 612}));
  ExpectWellFormed(plan);
}

TEST(ChunkPlan, ShortTailIsMergedWhenHalvesWouldBeTooSmall) {
  ChunkPlan plan(300 + 10, 300, 200);  // halves of 310 are 155 < 200
  ASSERT_EQ(plan.count(), 1u);
  EXPECT_TRUE(plan.rebalanced());
  EXPECT_EQ(plan.At(0), (Chunk{0, 310}));
}

TEST(ChunkPlan, TailOfOneByte) {
  ChunkPlan plan(1025, 1024, 256);
  ASSERT_EQ(plan.count(), 2u);
  EXPECT_EQ(plan.At(0), (Chunk{0, 512}));
  EXPECT_EQ(plan.At(1), (Chunk{512, 513}));
}

TEST(ChunkPlan, TailJustBelowMinimum) {
  ChunkPlan plan(1024 + 255, 1024, 256);
  ASSERT_EQ(plan.count(), 2u);
  EXPECT_TRUE(plan.rebalanced());
  ExpectWellFormed(plan);
}

TEST(ChunkPlan, DeterministicForSameInputs) {
  ChunkPlan a(123457, 4096, 1024, 64), b(123457, 4096, 1024, 64);
  ASSERT_EQ(a.count(), b.count());
  for (std::uint64_t i = 0; i < a.count(); ++i) EXPECT_EQ(a.At(i), b.At(i));
}

TEST(ChunkPlan, InvalidParametersYieldNoChunks) {
  EXPECT_FALSE(ChunkPlan(100, 64, 128).Valid());      // chunk < min
  EXPECT_FALSE(ChunkPlan(100, 100, 10, 64).Valid());  // granule does not divide chunk
  EXPECT_FALSE(ChunkPlan(100, 64, 0).Valid());
  EXPECT_FALSE(ChunkPlan(100, 96, 16, 48).Valid());   // granule not a power of two
  EXPECT_EQ(ChunkPlan(100, 64, 128).count(), 0u);
}

TEST(ChunkPlan, EveryBoundaryIsWellFormed) {
  for (std::uint64_t chunk : {64ull, 256ull, 1000ull, 4096ull}) {
    for (std::uint64_t min_chunk : std::vector<std::uint64_t>{1, 16, chunk / 2, chunk}) {
      const std::uint64_t granule = chunk % 64 == 0 ? 64 : 8;
      for (std::uint64_t total = 0; total <= 5 * chunk + 3; ++total) {
        ChunkPlan plan(total, chunk, min_chunk, granule);
        ExpectWellFormed(plan);
        if (::testing::Test::HasFatalFailure()) {
          FAIL() << "total=" << total << " chunk=" << chunk << " min=" << min_chunk;
        }
      }
    }
  }
}

static_assert(ChunkPlan(2048 + 100, 1024, 256, 64).count() == 3, "usable at compile time");

}  // namespace
}  // namespace hyper_parallel::shmem::data_plane
