#include "data_plane/block_runs.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "data_plane/chunk_plan.h"

namespace hyper_parallel::shmem::data_plane {
namespace {

// PEs 1 and 2 merge (remote), PE 0 does not (this host).
bool Remote(int pe) { return pe != 0; }

std::vector<BlockPut> Merge(const std::vector<BlockPut>& puts) {
  return MergeContinuingBlocks(std::span<const BlockPut>(puts), 3, Remote);
}

TEST(BlockRuns, TheChunksOfABlockToARemotePeBecomeOneBlock) {
  std::vector<std::byte> input(1000);
  const ChunkPlan chunks(1000, 256, 64, 8);
  ASSERT_GT(chunks.count(), 1u);
  std::vector<BlockPut> puts;
  for (std::uint64_t i = 0; i < chunks.count(); ++i) {  // chunk-major over the PEs
    const Chunk chunk = chunks.At(i);
    for (int pe = 0; pe < 3; ++pe) {
      puts.push_back({pe, 4096 + chunk.offset, input.data() + chunk.offset, chunk.bytes});
    }
  }
  const std::vector<BlockPut> merged = Merge(puts);
  // PE 0's chunks as they were, each remote PE's block once, in first-appearance order.
  ASSERT_EQ(merged.size(), chunks.count() + 2);
  EXPECT_EQ(merged[0].pe, 0);
  EXPECT_EQ(merged[1].pe, 1);
  EXPECT_EQ(merged[2].pe, 2);
  for (const BlockPut& put : merged) {
    if (put.pe == 0) continue;
    EXPECT_EQ(put.offset, 4096u);
    EXPECT_EQ(put.source, input.data());
    EXPECT_EQ(put.bytes, 1000u);
  }
}

TEST(BlockRuns, AGapInTheDestinationOrTheSourceStartsANewBlock) {
  std::vector<std::byte> input(64);
  const std::vector<BlockPut> puts = {
      {1, 0, input.data(), 8},       {1, 8, input.data() + 8, 8},    // one run
      {1, 24, input.data() + 16, 8},                                 // destination gap
      {1, 32, input.data() + 32, 8},                                 // source gap
      {1, 40, input.data() + 40, 0},  {1, 40, input.data() + 40, 8},  // an empty block merges
  };
  const std::vector<BlockPut> merged = Merge(puts);
  ASSERT_EQ(merged.size(), 3u);
  EXPECT_EQ(merged[0].offset, 0u);
  EXPECT_EQ(merged[0].bytes, 16u);
  EXPECT_EQ(merged[1].offset, 24u);
  EXPECT_EQ(merged[1].bytes, 8u);
  EXPECT_EQ(merged[2].offset, 32u);
  EXPECT_EQ(merged[2].bytes, 16u);
}

TEST(BlockRuns, BlocksToThisHostAreNeverMerged) {
  std::vector<std::byte> input(16);
  const std::vector<BlockPut> puts = {{0, 0, input.data(), 8}, {0, 8, input.data() + 8, 8}};
  const std::vector<BlockPut> merged = Merge(puts);
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].bytes, 8u);
  EXPECT_EQ(merged[1].bytes, 8u);
}

TEST(BlockRuns, EveryByteOnceAndEachPesBlocksInOrder) {
  // Random batches: per PE, the bytes covered (destination -> source) are the same before and
  // after, and the merged blocks to a PE start in the order of the blocks they began with.
  std::mt19937 random(7);
  std::vector<std::byte> input(4096);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<BlockPut> puts;
    std::uint64_t cursor[3] = {0, 0, 0};
    const int count = static_cast<int>(random() % 24);
    for (int i = 0; i < count; ++i) {
      const int pe = static_cast<int>(random() % 3);
      if (random() % 4 == 0) cursor[pe] += 8;  // sometimes a gap
      const std::uint64_t bytes = 8 * (random() % 4);
      puts.push_back({pe, cursor[pe], input.data() + cursor[pe], bytes});
      cursor[pe] += bytes;
    }
    auto covered = [](const std::vector<BlockPut>& list) {
      std::map<std::pair<int, std::uint64_t>, const std::byte*> bytes;
      for (const BlockPut& put : list) {
        for (std::uint64_t b = 0; b < put.bytes; ++b) {
          const bool fresh = bytes.emplace(std::make_pair(put.pe, put.offset + b),
                                           static_cast<const std::byte*>(put.source) + b)
                                 .second;
          EXPECT_TRUE(fresh) << "a byte put twice";
        }
      }
      return bytes;
    };
    const std::vector<BlockPut> merged = Merge(puts);
    EXPECT_EQ(covered(merged), covered(puts)) << "trial " << trial;
    for (int pe = 0; pe < 3; ++pe) {
      std::uint64_t last = 0;
      bool first = true;
      for (const BlockPut& put : merged) {
        if (put.pe != pe) continue;
        if (!first) EXPECT_GE(put.offset, last) << "trial " << trial;
        last = put.offset;
        first = false;
      }
    }
  }
}

}  // namespace
}  // namespace hyper_parallel::shmem::data_plane
