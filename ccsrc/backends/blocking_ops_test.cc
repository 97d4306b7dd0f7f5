#include "backends/blocking_ops.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace hyper_parallel::shmem {
namespace {

TEST(BlockingOpTable, RegistersUntilTheScopeEndsAndDescribesNow) {
  BlockingOpTable table;
  std::atomic<int> observed{3};
  EXPECT_TRUE(table.Snapshot().empty());
  {
    BlockingOpTable::Scope wait = table.Enter("wait_signal", "stream 7", [&] {
      return "observed=" + std::to_string(observed.load());
    });
    BlockingOpTable::Scope barrier = table.Enter("barrier", DefaultStreamLabel(), nullptr);
    std::vector<BlockingOp> ops = table.Snapshot();
    ASSERT_EQ(ops.size(), 2u);
    EXPECT_EQ(ops[0].operation, "wait_signal");
    EXPECT_EQ(ops[0].stream, "stream 7");
    EXPECT_EQ(ops[0].waiting_for, "observed=3");
    EXPECT_LT(ops[0].id, ops[1].id) << "oldest first";
    EXPECT_EQ(ops[1].stream, "default (thread " + std::to_string(CurrentThreadId()) + ")");
    EXPECT_TRUE(ops[1].waiting_for.empty());
    observed = 4;
    EXPECT_EQ(table.Snapshot()[0].waiting_for, "observed=4") << "evaluated at snapshot time";
    BlockingOpTable::Scope moved = std::move(wait);
    EXPECT_EQ(table.Snapshot().size(), 2u) << "moving a scope keeps its entry";
    moved.Reset();
    EXPECT_EQ(table.Snapshot().size(), 1u);
    EXPECT_EQ(table.Snapshot()[0].operation, "barrier");
  }
  EXPECT_EQ(table.Snapshot().size(), 0u);
}

TEST(BlockingOpTable, ThreadsEnterAndLeaveConcurrently) {
  BlockingOpTable table;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        BlockingOpTable::Scope scope = table.Enter("wait_signal", DefaultStreamLabel(), [] {
          return std::string("x");
        });
        (void)table.Snapshot();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(table.Snapshot().size(), 0u);
}

TEST(BlockingOpTable, ThreadIdsDifferPerThread) {
  long other = 0;
  std::thread([&] { other = CurrentThreadId(); }).join();
  EXPECT_NE(other, CurrentThreadId());
  EXPECT_EQ(CurrentThreadId(), CurrentThreadId());
}

}  // namespace
}  // namespace hyper_parallel::shmem
