#include "ops/mega_moe/layout.h"

#include <gtest/gtest.h>

namespace hyper_parallel::shmem::ops {
namespace {

// 2 PEs, 4 experts (2 local each), 3-row chunks.
//            e0 e1 e2 e3
// PE 0:  [   2, 0, 5, 1 ]
// PE 1:  [   4, 3, 0, 0 ]
MoeLayout Example() {
  return MoeLayout(MoeShape{2, 4, 16, 3}, {2, 0, 5, 1, 4, 3, 0, 0});
}

TEST(MoeLayout, SourcesSortTheirRowsByExpert) {
  const MoeLayout layout = Example();
  ASSERT_TRUE(layout.Validate().ok());
  EXPECT_EQ(layout.SendRows(0), 8);
  EXPECT_EQ(layout.SendRows(1), 7);
  EXPECT_EQ(layout.SendRow(0, 0), 0);
  EXPECT_EQ(layout.SendRow(0, 1), 2);
  EXPECT_EQ(layout.SendRow(0, 2), 2);
  EXPECT_EQ(layout.SendRow(0, 3), 7);
  EXPECT_EQ(layout.SendRow(1, 2), 7);
}

TEST(MoeLayout, OwnersGroupByLocalExpertThenSource) {
  const MoeLayout layout = Example();
  // PE 0 owns e0, e1: e0 from PE 0 (2), e0 from PE 1 (4), e1 from PE 0 (0), e1 from PE 1 (3).
  EXPECT_EQ(layout.RecvRows(0), 9);
  EXPECT_EQ(layout.RecvRow(0, 0, 0), 0);
  EXPECT_EQ(layout.RecvRow(0, 0, 1), 2);
  EXPECT_EQ(layout.RecvRow(0, 1, 0), 6);
  EXPECT_EQ(layout.RecvRow(0, 1, 1), 6);
  EXPECT_EQ(layout.ExpertRow(0, 1), 6);
  EXPECT_EQ(layout.ExpertRows(0, 0), 6);
  EXPECT_EQ(layout.ExpertRows(0, 1), 3);
  // PE 1 owns e2, e3: only PE 0 sends (5 and 1 rows).
  EXPECT_EQ(layout.RecvRows(1), 6);
  EXPECT_EQ(layout.RecvRow(1, 1, 0), 5);
  EXPECT_EQ(layout.ExpertRows(1, 0), 5);
  EXPECT_EQ(layout.MaxRecvRows(), 9);
}

TEST(MoeLayout, ExpectedSignalsCountChunksAndOneForNothing) {
  const MoeLayout layout = Example();
  EXPECT_EQ(layout.Chunks(0), 1);
  EXPECT_EQ(layout.Chunks(3), 1);
  EXPECT_EQ(layout.Chunks(4), 2);
  EXPECT_EQ(layout.ExpectedChunks(0, 0), 1 + 2);  // 2 rows, 4 rows
  EXPECT_EQ(layout.ExpectedChunks(0, 1), 1 + 1);  // nothing, 3 rows
  EXPECT_EQ(layout.ExpectedChunks(1, 0), 2 + 1);  // 5 rows, nothing
}

TEST(MoeLayout, RejectsShapesAndCountsItCannotLayOut) {
  EXPECT_EQ(MoeLayout(MoeShape{2, 3, 16, 4}, std::vector<std::int64_t>(6)).Validate().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(MoeLayout(MoeShape{2, 4, 16, 0}, std::vector<std::int64_t>(8)).Validate().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(MoeLayout(MoeShape{2, 4, 16, 4}, std::vector<std::int64_t>(7)).Validate().code(),
            ErrorCode::kInvalidArgument);
  const Status negative = MoeLayout(MoeShape{1, 2, 16, 4}, {1, -1}).Validate();
  EXPECT_EQ(negative.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(negative.message().find("(pe 0, expert 1)"), std::string::npos) << negative.message();
}

}  // namespace
}  // namespace hyper_parallel::shmem::ops
