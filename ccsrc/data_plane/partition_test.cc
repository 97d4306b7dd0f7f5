#include "data_plane/partition.h"

#include <gtest/gtest.h>

namespace hyper_parallel::shmem::data_plane {
namespace {

TEST(Partition, ContiguousBalancedAndComplete) {
  for (std::uint64_t items = 0; items <= 40; ++items) {
    for (std::uint64_t workers = 1; workers <= 9; ++workers) {
      std::uint64_t cursor = 0;
      std::uint64_t smallest = UINT64_MAX, largest = 0;
      for (std::uint64_t w = 0; w < workers; ++w) {
        const Range range = PartitionRange(items, workers, w);
        ASSERT_EQ(range.begin, cursor) << items << "/" << workers << "/" << w;
        cursor = range.end;
        smallest = std::min(smallest, range.size());
        largest = std::max(largest, range.size());
        if (w > 0) {
          ASSERT_LE(range.size(), PartitionRange(items, workers, w - 1).size());
        }
        for (std::uint64_t item = range.begin; item < range.end; ++item) {
          ASSERT_EQ(PartitionOwner(items, workers, item), w);
        }
      }
      ASSERT_EQ(cursor, items);
      ASSERT_LE(largest - smallest, 1u);
    }
  }
}

TEST(Partition, MoreWorkersThanItems) {
  EXPECT_EQ(PartitionRange(2, 4, 0), (Range{0, 1}));
  EXPECT_EQ(PartitionRange(2, 4, 1), (Range{1, 2}));
  EXPECT_TRUE(PartitionRange(2, 4, 2).empty());
  EXPECT_TRUE(PartitionRange(2, 4, 3).empty());
}

static_assert(PartitionRange(10, 3, 0) == Range{0, 4});
static_assert(PartitionRange(10, 3, 2) == Range{7, 10});

}  // namespace
}  // namespace hyper_parallel::shmem::data_plane
