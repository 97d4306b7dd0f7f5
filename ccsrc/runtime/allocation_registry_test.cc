#include "runtime/allocation_registry.h"

#include <gtest/gtest.h>

#include "runtime/heap_allocator.h"

namespace hyper_parallel::shmem {
namespace {

class RegistryTest : public ::testing::Test {
 protected:
  void SetUp() override { registry_.BeginLifecycle(); }
  AllocationRegistry registry_;
};

TEST_F(RegistryTest, IdsStartAtOneAndIncrease) {
  EXPECT_EQ(registry_.Register(0, 10, 64, 64), 1u);
  EXPECT_EQ(registry_.Register(64, 10, 64, 64), 2u);
  EXPECT_EQ(registry_.next_id(), 3u);
}

TEST_F(RegistryTest, ResolvesSubRangeViews) {
  const AllocationId id = registry_.Register(1024, 256, 256, 64);
  AllocationRecord record;
  EXPECT_TRUE(registry_.Resolve(id, 1024, 256, &record).ok());
  EXPECT_EQ(record.offset, 1024u);
  EXPECT_TRUE(registry_.Resolve(id, 1024 + 100, 156, &record).ok());  // tail view
  EXPECT_TRUE(registry_.Resolve(id, 1024 + 256, 0, &record).ok());    // empty at the end
}

TEST_F(RegistryTest, RejectsBeyondEndAndBeforeBase) {
  const AllocationId id = registry_.Register(1024, 256, 256, 64);
  AllocationRecord record;
  Status beyond = registry_.Resolve(id, 1024 + 100, 157, &record);
  EXPECT_EQ(beyond.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(beyond.message().find("operand byte range must be inside allocation"),
            std::string::npos)
      << beyond.message();
  EXPECT_EQ(registry_.Resolve(id, 1023, 1, &record).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(registry_.Resolve(id, 1024 + 257, 0, &record).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(registry_.Resolve(id, 1024, UINT64_MAX, &record).code(),
            ErrorCode::kInvalidArgument);  // no overflow
}

TEST_F(RegistryTest, FreeMatchesOnlyTheWholeAllocation) {
  const AllocationId id = registry_.Register(1024, 256, 256, 64);
  AllocationRecord record;
  Status view = registry_.ResolveWhole(id, 1024, 128, &record);
  EXPECT_EQ(view.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(view.message().find("freed tensor must be the whole allocation"), std::string::npos);
  EXPECT_EQ(registry_.ResolveWhole(id, 1088, 192, &record).code(), ErrorCode::kInvalidArgument);
  EXPECT_TRUE(registry_.ResolveWhole(id, 1024, 256, &record).ok());
}

TEST_F(RegistryTest, DoubleFreeAfterAddressReuseNeverFreesTheNewOwner) {
  HeapAllocator heap(1 << 16);
  HeapBlock block;
  ASSERT_TRUE(heap.Allocate(256, 64, &block).ok());
  const AllocationId first = registry_.Register(block.offset, 256, block.reserved_bytes, 64);
  AllocationRecord record;
  ASSERT_TRUE(registry_.ResolveWhole(first, block.offset, 256, &record).ok());
  ASSERT_TRUE(heap.Release(block.offset).ok());
  registry_.Release(first);

  HeapBlock reused;
  ASSERT_TRUE(heap.Allocate(256, 64, &reused).ok());
  ASSERT_EQ(reused.offset, block.offset);  // same address, new owner
  const AllocationId second = registry_.Register(reused.offset, 256, reused.reserved_bytes, 64);

  Status again = registry_.ResolveWhole(first, block.offset, 256, &record);
  EXPECT_EQ(again.code(), ErrorCode::kDoubleFree) << again.ToString();
  EXPECT_EQ(registry_.Resolve(first, block.offset, 8, &record).code(), ErrorCode::kUseAfterFree);
  EXPECT_TRUE(registry_.Resolve(second, reused.offset, 256, &record).ok());
  EXPECT_EQ(registry_.live_count(), 1u);
}

TEST_F(RegistryTest, NeverIssuedIdIsInvalidArgument) {
  registry_.Register(0, 8, 64, 64);
  AllocationRecord record;
  EXPECT_EQ(registry_.Resolve(0, 0, 8, &record).code(), ErrorCode::kInvalidArgument);
  Status unknown = registry_.ResolveWhole(99, 0, 8, &record);
  EXPECT_EQ(unknown.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("allocation id must be an id this runtime issued"),
            std::string::npos);
}

TEST_F(RegistryTest, IdsAcrossLifecyclesAreStaleNeverReused) {
  const AllocationId old_id = registry_.Register(0, 8, 64, 64);
  registry_.EndLifecycle();
  registry_.BeginLifecycle();
  EXPECT_EQ(registry_.lifecycle(), 2u);
  const AllocationId new_id = registry_.Register(0, 8, 64, 64);
  EXPECT_GT(new_id, old_id);
  AllocationRecord record;
  EXPECT_EQ(registry_.Resolve(old_id, 0, 8, &record).code(), ErrorCode::kStaleLifecycle);
  EXPECT_EQ(registry_.ResolveWhole(old_id, 0, 8, &record).code(), ErrorCode::kStaleLifecycle);
  EXPECT_TRUE(registry_.Resolve(new_id, 0, 8, &record).ok());
  EXPECT_EQ(record.lifecycle, 2u);
}

TEST_F(RegistryTest, HighWaterMarks) {
  const AllocationId a = registry_.Register(0, 100, 128, 64);
  registry_.Register(128, 50, 64, 64);
  registry_.Release(a);
  EXPECT_EQ(registry_.live_bytes(), 50u);
  EXPECT_EQ(registry_.peaks().max_live_bytes, 150u);
  EXPECT_EQ(registry_.peaks().max_live_count, 2u);
}

TEST_F(RegistryTest, LeakTable) {
  const AllocationId a = registry_.Register(0, 100, 128, 64);
  const AllocationId b = registry_.Register(128, 50, 64, 64);
  EXPECT_TRUE(registry_.MarkLeaked(b));
  EXPECT_FALSE(registry_.MarkLeaked(999));
  ASSERT_EQ(registry_.Leaked().size(), 1u);
  EXPECT_EQ(registry_.Leaked()[0].id, b);
  EXPECT_EQ(registry_.Live().size(), 2u);
  EXPECT_FALSE(registry_.Live()[0].leaked);
  (void)a;
}

}  // namespace
}  // namespace hyper_parallel::shmem
