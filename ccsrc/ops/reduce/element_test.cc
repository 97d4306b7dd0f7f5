// The reductions' arithmetic and layout without PEs: the half types' conversions (every half
// round-trips, ties go to even), wrapping integers, NaN in min and max, and pass layouts that
// fit the workspace for every group size.
#include "ops/reduce/element.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "ops/reduce/halving.h"

namespace hyper_parallel::shmem::ops {
namespace {

TEST(ReduceElementTest, EveryHalfRoundTripsThroughFloat) {
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const auto half = static_cast<std::uint16_t>(bits);
    const float value = HalfToFloat(half);
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(HalfToFloat(FloatToHalf(value)))) << bits;
      continue;
    }
    EXPECT_EQ(FloatToHalf(value), half) << bits;
    EXPECT_EQ(FloatToBFloat16(BFloat16ToFloat(half)), half) << bits;
  }
}

TEST(ReduceElementTest, HalfRoundingTiesToEvenAndOverflowsToInfinity) {
  EXPECT_EQ(FloatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(FloatToHalf(1.0f + 1.0f / 2048), 0x3c00);          // tie: stays even
  EXPECT_EQ(FloatToHalf(1.0f + 3.0f / 2048), 0x3c02);          // tie: up to even
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);                    // halfway past the largest
  EXPECT_EQ(FloatToHalf(-std::ldexp(1.0f, -24)), 0x8001);      // smallest subnormal
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);       // tie below it: even zero
  EXPECT_EQ(FloatToBFloat16(1.0f + 1.0f / 256), 0x3f80);       // tie: stays even
  EXPECT_EQ(FloatToBFloat16(1.0f + 3.0f / 256), 0x3f82);
}

TEST(ReduceElementTest, IntegersWrapAndFloatsPropagateNan) {
  const std::int32_t big[] = {std::numeric_limits<std::int32_t>::max()};
  const std::int32_t one[] = {1};
  std::int32_t out[1];
  Combine(ElementType::kInt32, ReduceOp::kSum, big, one, out, 1);
  EXPECT_EQ(out[0], std::numeric_limits<std::int32_t>::min());
  const std::uint16_t u[] = {0xffff};
  std::uint16_t squared[1];
  Combine(ElementType::kUInt16, ReduceOp::kProd, u, u, squared, 1);
  EXPECT_EQ(squared[0], 1);
  const float nan[] = {std::nanf("")};
  const float two[] = {2.0f};
  float result[1];
  for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
    Combine(ElementType::kFloat32, op, two, nan, result, 1);
    EXPECT_TRUE(std::isnan(result[0]));
    Combine(ElementType::kFloat32, op, nan, two, result, 1);
    EXPECT_TRUE(std::isnan(result[0]));
  }
  EXPECT_FALSE(CheckReducible("all_reduce", "float16", 4).ok());  // and on floats
  EXPECT_TRUE(CheckReducible("all_reduce", "uint64", 6).ok());
  EXPECT_FALSE(CheckReducible("all_reduce", "bool", 0).ok());
}

TEST(ReduceHalvingTest, VirtualRanksCoverEveryBlockOnce) {
  for (int size = 1; size <= 33; ++size) {
    const HalvingShape shape(size);
    EXPECT_EQ(shape.pow + shape.rest, size);
    EXPECT_EQ(shape.FirstBlock(0), 0);
    EXPECT_EQ(shape.FirstBlock(shape.pow), size);
    for (int v = 0; v < shape.pow; ++v) {
      const HalvingShape member(size, shape.MemberOf(v));
      EXPECT_EQ(member.VirtualRank(), v);
      EXPECT_EQ(shape.FirstBlock(v), shape.MemberOf(v));
    }
  }
}

TEST(ReduceHalvingTest, PassesFitTheWorkspaceForEveryGroupSize) {
  for (int size = 1; size <= 17; ++size) {
    for (ReductionKind kind : {ReductionKind::kAllReduce, ReductionKind::kReduceScatter}) {
      for (std::uint64_t elements : {1ull, 1000ull, 1000003ull}) {
        ReductionLayout layout;
        ASSERT_TRUE(PlanReduction(kind, size, 0, elements, ElementType::kBFloat16, 64 << 10,
                                  "test", &layout)
                        .ok());
        std::uint64_t covered = 0;
        for (std::uint64_t p = 0; p < layout.passes; ++p) {
          const ReductionPass pass = layout.Pass(p);
          EXPECT_LE(layout.SetElements(pass) * layout.accumulator_bytes, layout.set_bytes);
          covered += kind == ReductionKind::kAllReduce ? pass.Elements() : pass.pieces[0].count;
        }
        EXPECT_EQ(covered, elements) << size;
      }
    }
  }
  // Staged (a stream backend): the sets take a quarter each, and the accumulators, the staged
  // half-type input and reduce_scatter's hand-over block fit past them, in order.
  for (int size : {1, 2, 3, 5, 8}) {
    for (ReductionKind kind : {ReductionKind::kAllReduce, ReductionKind::kReduceScatter}) {
      for (ElementType type : {ElementType::kBFloat16, ElementType::kFloat64}) {
        ReductionLayout staged;
        ASSERT_TRUE(
            PlanReduction(kind, size, 0, 100003, type, 64 << 10, "test", &staged, true).ok());
        const ReductionPass pass = staged.Pass(0);
        const std::uint64_t eb = ElementBytes(type);
        EXPECT_EQ(staged.set_bytes, (64u << 10) / 4);
        EXPECT_LE(staged.SetElements(pass) * staged.accumulator_bytes, staged.set_bytes);
        EXPECT_EQ(staged.accumulators_at, 2 * staged.set_bytes);
        EXPECT_GE(staged.stage_at, staged.accumulators_at + pass.Elements() * staged.accumulator_bytes);
        EXPECT_GE(staged.hand_over_at,
                  staged.stage_at + (staged.accumulator_bytes == eb ? 0 : pass.Elements() * eb));
        const std::uint64_t hand_over =
            kind == ReductionKind::kReduceScatter ? staged.pass_elements * eb : 0;
        EXPECT_LE(staged.hand_over_at + hand_over, 64u << 10) << size;
      }
    }
  }
  // More passes than round words can number: refused, naming the setting to raise.
  ReductionLayout layout;
  const Status passes = PlanReduction(ReductionKind::kAllReduce, 2, 0, 100000000,
                                      ElementType::kFloat64, 4096, "test", &layout);
  EXPECT_EQ(passes.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(passes.message().find("HYPER_PARALLEL_SHMEM_REDUCE_WORKSPACE"), std::string::npos);
}

}  // namespace
}  // namespace hyper_parallel::shmem::ops
