#include "base/status.h"

#include <gtest/gtest.h>

namespace hyper_parallel::shmem {
namespace {

TEST(Status, DefaultIsOk) {
  Status status;
  EXPECT_TRUE(status.ok());
  EXPECT_EQ(status.code(), ErrorCode::kOk);
  EXPECT_EQ(status.ToString(), "OK");
}

TEST(Status, ContractShape) {
  Status status = Status::Contract(ErrorCode::kInvalidArgument, "pe", "in [0, 4)", "7");
  EXPECT_EQ(status.message(), "pe must be in [0, 4), but got 7");
  EXPECT_EQ(status.code(), ErrorCode::kInvalidArgument);
}

TEST(Status, AssertionShape) {
  Status status = Status::Assertion(ErrorCode::kTimeout, "barrier timed out",
                                    {{"pe", "1"}, {"missing_pes", "[2,3]"}});
  EXPECT_EQ(status.message(), "barrier timed out: pe=1, missing_pes=[2,3]");
  EXPECT_EQ(Status::Assertion(ErrorCode::kTimeout, "plain fact").message(), "plain fact");
}

TEST(Status, ToStringCarriesCodeOperationPhase) {
  Status status = Status::Contract(ErrorCode::kDoubleFree, "x", "y", "z");
  status.At("free", "validate");
  EXPECT_EQ(status.ToString(),
            "[HYPER_PARALLEL_SHMEM_ERROR] error_code=DOUBLE_FREE operation=free phase=validate "
            "x must be y, but got z");
}

TEST(Status, InnermostTagWins) {
  Status status = Status::Assertion(ErrorCode::kTimeout, "late");
  status.At("wait_signal", "execute").At("outer", "other");
  EXPECT_EQ(status.operation(), "wait_signal");
  EXPECT_EQ(status.phase(), "execute");
  Status ok;
  ok.At("put", "execute");
  EXPECT_TRUE(ok.operation().empty());
}

TEST(Status, EveryCodeHasAName) {
  for (int code = 0; code <= static_cast<int>(ErrorCode::kPeerLost); ++code) {
    EXPECT_NE(ErrorCodeName(static_cast<ErrorCode>(code)), "UNKNOWN") << code;
  }
  EXPECT_EQ(ErrorCodeName(ErrorCode::kInvalidConfig), "INVALID_CONFIG");
  EXPECT_EQ(ErrorCodeName(ErrorCode::kUnsupportedCapability), "UNSUPPORTED_CAPABILITY");
  EXPECT_EQ(ErrorCodeName(ErrorCode::kPeerLost), "PEER_LOST");
  EXPECT_EQ(ErrorCodeName(static_cast<ErrorCode>(static_cast<int>(ErrorCode::kPeerLost) + 1)),
            "UNKNOWN");
}

TEST(Status, RetaggedKeepsCodeAndMessageUnderANewEntry) {
  Status lost = Status::Assertion(ErrorCode::kPeerLost, "a peer PE exited", {{"pe", "1"}});
  lost.At("barrier", "execute");
  const Status again = lost.Retagged("put", "state");
  EXPECT_EQ(again.code(), ErrorCode::kPeerLost);
  EXPECT_EQ(again.message(), lost.message());
  EXPECT_EQ(again.operation(), "put");
  EXPECT_EQ(again.phase(), "state");
  EXPECT_EQ(lost.operation(), "barrier") << "the original keeps its tag";
  EXPECT_TRUE(Status::Ok().Retagged("put", "state").ok());
}

TEST(Status, CopiesAreDeepAndMovesLeaveOk) {
  Status original = Status::Assertion(ErrorCode::kTimeout, "late", {{"pe", "3"}});
  original.At("barrier", "execute");
  Status copy = original;
  EXPECT_EQ(copy, original);
  copy = Status::Ok();
  EXPECT_FALSE(original.ok()) << "a copy shares nothing with its source";
  EXPECT_EQ(original.message(), "late: pe=3");
  Status moved = std::move(original);
  EXPECT_EQ(moved.code(), ErrorCode::kTimeout);
  EXPECT_EQ(moved.operation(), "barrier");
  Status assigned;
  assigned = moved;
  EXPECT_EQ(assigned.ToString(), moved.ToString());
  EXPECT_NE(assigned, Status::Ok());
  EXPECT_EQ(Status::Ok(), Status());
  EXPECT_TRUE(Status().message().empty() && Status().operation().empty());
}

TEST(Status, Hex) {
  EXPECT_EQ(Hex(std::uint64_t{255}), "0xff");
  EXPECT_EQ(Hex(std::uint64_t{0}), "0x0");
}

TEST(Status, ReturnIfErrorPropagates) {
  auto inner = [](bool fail) {
    return fail ? Status::Assertion(ErrorCode::kBackendError, "boom") : Status::Ok();
  };
  auto outer = [&](bool fail) -> Status {
    HPS_RETURN_IF_ERROR(inner(fail));
    return Status::Assertion(ErrorCode::kInvalidState, "reached");
  };
  EXPECT_EQ(outer(true).code(), ErrorCode::kBackendError);
  EXPECT_EQ(outer(false).code(), ErrorCode::kInvalidState);
}

}  // namespace
}  // namespace hyper_parallel::shmem
