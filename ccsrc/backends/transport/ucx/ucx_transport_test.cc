// The network transport's pure parts: the messages path's header checks (wire.h) and the
// choice of a path per peer (ucx_transport.h). What crosses a network is tested by the
// ucx_loopback ctest and tests/python/test_scale_out.py (docs/scale-out.md, "Tests").
#include "backends/transport/ucx/ucx_transport.h"

#include <gtest/gtest.h>

#include <cstring>

#include "backends/transport/ucx/wire.h"

namespace hyper_parallel::shmem::transport {
namespace {

constexpr std::uint64_t kSegment = 1 << 20;

WireHeader Put(std::uint64_t offset, std::uint64_t bytes) {
  return PutHeader(1, offset, bytes, RemoteSignal{});
}

TEST(RemoteWire, AcceptsWhatLandsInsideTheSegment) {
  EXPECT_EQ(Validate(Put(0, 64), 64, kSegment, 2), "");
  EXPECT_EQ(Validate(Put(kSegment - 8, 8), 8, kSegment, 2), "");
  EXPECT_EQ(Validate(Put(kSegment, 0), 0, kSegment, 2), "");  // a signal alone
  WireHeader signalled = Put(128, 16);
  signalled.action = SignalAction::kAdd;
  signalled.width = 4;
  signalled.signal_offset = kSegment - 4;
  EXPECT_EQ(Validate(signalled, 16, kSegment, 2), "");
  WireHeader get;
  get.kind = WireKind::kGet;
  get.source = 0;
  get.offset = 4096;
  get.bytes = 4096;
  EXPECT_EQ(Validate(get, 0, kSegment, 2), "");
}

TEST(RemoteWire, RefusesWhatCouldWriteOutsideOrMeansNothing) {
  EXPECT_EQ(Validate(Put(kSegment - 8, 16), 16, kSegment, 2), "data outside the segment");
  EXPECT_EQ(Validate(Put(~0ull - 4, 16), 16, kSegment, 2), "data outside the segment");
  EXPECT_EQ(Validate(Put(0, 64), 32, kSegment, 2), "data length differs from the header");
  WireHeader stranger = Put(0, 8);
  stranger.magic = 0x12345678;
  EXPECT_EQ(Validate(stranger, 8, kSegment, 2), "bad magic");
  WireHeader nobody = Put(0, 8);
  nobody.source = 2;
  EXPECT_EQ(Validate(nobody, 8, kSegment, 2), "source out of range");
  WireHeader signal = Put(0, 0);
  signal.action = SignalAction::kSet;
  signal.width = 8;
  signal.signal_offset = 12;
  EXPECT_EQ(Validate(signal, 0, kSegment, 2), "signal word not aligned");
  signal.signal_offset = kSegment;
  EXPECT_EQ(Validate(signal, 0, kSegment, 2), "signal word outside the segment");
  signal.signal_offset = 16;
  signal.width = 2;
  EXPECT_EQ(Validate(signal, 0, kSegment, 2), "signal width not 4 or 8");
  signal.width = 8;
  signal.action = static_cast<SignalAction>(7);
  EXPECT_EQ(Validate(signal, 0, kSegment, 2), "unknown signal action");
  WireHeader get;
  get.kind = WireKind::kGet;
  get.source = 0;
  get.offset = kSegment;
  get.bytes = 1;
  EXPECT_EQ(Validate(get, 0, kSegment, 2), "read outside the segment");
  WireHeader odd = Put(0, 0);
  odd.kind = static_cast<WireKind>(42);
  EXPECT_EQ(Validate(odd, 0, kSegment, 2), "unknown kind");
}

TEST(RemoteWire, ALossReportNamesAPeOfTheJob) {
  WireHeader lost;
  lost.kind = WireKind::kLost;
  lost.source = 1;
  lost.value = 0;
  EXPECT_EQ(Validate(lost, 0, kSegment, 2), "");
  lost.value = 2;
  EXPECT_EQ(Validate(lost, 0, kSegment, 2), "lost PE out of range");
  lost.value = -1;
  EXPECT_EQ(Validate(lost, 0, kSegment, 2), "lost PE out of range");
  WireHeader hello;
  hello.kind = WireKind::kHello;
  hello.source = 1;
  EXPECT_EQ(Validate(hello, 0, kSegment, 2), "");
}

// ucp_ep_print_info's text for an endpoint over TCP (UCX 1.13) and over InfiniBand RC.
constexpr std::string_view kTcpEndpoint = R"(#
# UCP endpoint
#
#               peer: <no debug data>
#                 lane[0]:  1:tcp/eth0.0 md[1]              -> md[1]/tcp/sysdev[255] am am_bw#0 keepalive wireup
#
#                 am_send: 0..<egr/short>..8185..<egr/zcopy>..20553..<rndv>..(inf)
#
#                  rma_bw: mds rndv_rkey_size 9
#
)";
constexpr std::string_view kRcEndpoint = R"(#
#                 lane[0]:  8:rc_mlx5/mlx5_0:1.0 md[4]      -> md[4]/ib/sysdev[255] rma#0 amo#0 am am_bw#0
#                 lane[1]:  9:rc_mlx5/mlx5_0:1.0 md[4]      -> md[4]/ib/sysdev[255] rma_bw#0 wireup
#                  rma_bw: mds [4] rndv_rkey_size 19
)";

TEST(RemotePath, HardwareRmaNeedsAnRmaLaneAndAnAmoLane) {
  EXPECT_FALSE(UcxTransport::LanesHaveHardwareRma(kTcpEndpoint));
  EXPECT_TRUE(UcxTransport::LanesHaveHardwareRma(kRcEndpoint));
  // RMA without atomics (a copy engine alone): signals would be emulated, so messages.
  EXPECT_FALSE(UcxTransport::LanesHaveHardwareRma(
      "#  lane[0]:  2:cma/memory.0 md[2] -> md[2]/cma rma_bw#0\n"));
  EXPECT_FALSE(UcxTransport::LanesHaveHardwareRma(""));
}

TEST(RemotePath, MessagesUnlessForcedOrImpossibleOrHardwareOnAuto) {
  using Path = UcxTransport::Path;
  EXPECT_EQ(UcxTransport::ChoosePath("auto", "", true, false).first, Path::kMessages);
  EXPECT_EQ(UcxTransport::ChoosePath("messages", "", true, true).first, Path::kMessages);
  auto hardware = UcxTransport::ChoosePath("auto", "", true, true);
  EXPECT_EQ(hardware.first, Path::kRma);
  EXPECT_NE(hardware.second.find("hardware"), std::string::npos) << hardware.second;
  auto forced = UcxTransport::ChoosePath("rma", "", true, false);
  EXPECT_EQ(forced.first, Path::kRma);
  EXPECT_EQ(forced.second, "HYPER_PARALLEL_SHMEM_REMOTE_PATH=rma");
  // A UCX without active messages falls back, naming what it lacks; so does a peer's.
  auto lacking = UcxTransport::ChoosePath("auto", "UCX 1.10.0 has no active messages", true, false);
  EXPECT_EQ(lacking.first, Path::kRma);
  EXPECT_EQ(lacking.second, "UCX 1.10.0 has no active messages");
  auto peer = UcxTransport::ChoosePath("auto", "", false, false);
  EXPECT_EQ(peer.first, Path::kRma);
  EXPECT_EQ(peer.second, "the peer's UCX has no active messages");
}

TEST(RemoteWire, AtomicsCarryNoDataAndLandOnAnAlignedWordInside) {
  WireHeader atomic;
  atomic.kind = WireKind::kAtomic;
  atomic.source = 1;
  atomic.atomic = static_cast<std::uint32_t>(AtomicOp::kCompareSwap);
  atomic.width = 8;
  atomic.offset = kSegment - 8;
  EXPECT_EQ(Validate(atomic, 0, kSegment, 2), "");
  EXPECT_EQ(Validate(atomic, 8, kSegment, 2), "an atomic carries no data");
  atomic.offset = kSegment;
  EXPECT_EQ(Validate(atomic, 0, kSegment, 2), "atomic word outside the segment");
  atomic.offset = 12;
  EXPECT_EQ(Validate(atomic, 0, kSegment, 2), "atomic word not aligned");
  atomic.width = 4;
  EXPECT_EQ(Validate(atomic, 0, kSegment, 2), "");
  atomic.width = 2;
  EXPECT_EQ(Validate(atomic, 0, kSegment, 2), "atomic width not 4 or 8");
  atomic.width = 4;
  atomic.atomic = kAtomicOps;
  EXPECT_EQ(Validate(atomic, 0, kSegment, 2), "unknown atomic");
}

TEST(ApplyAtomic, EveryOpOnBothWidthsReturnsTheOldValue) {
  alignas(8) std::byte word[8] = {};
  auto as64 = [&] {
    std::uint64_t value = 0;
    std::memcpy(&value, word, 8);
    return value;
  };
  EXPECT_EQ(ApplyAtomic(word, 8, AtomicOp::kSet, 5, 0), 0u);
  EXPECT_EQ(ApplyAtomic(word, 8, AtomicOp::kAdd, ~0ull, 0), 5u);  // adds -1, wrapping
  EXPECT_EQ(as64(), 4u);
  EXPECT_EQ(ApplyAtomic(word, 8, AtomicOp::kCompareSwap, 9, 3), 4u);  // no match: unchanged
  EXPECT_EQ(as64(), 4u);
  EXPECT_EQ(ApplyAtomic(word, 8, AtomicOp::kCompareSwap, 9, 4), 4u);
  EXPECT_EQ(as64(), 9u);
  EXPECT_EQ(ApplyAtomic(word, 8, AtomicOp::kOr, 1ull << 63, 0), 9u);
  EXPECT_EQ(ApplyAtomic(word, 8, AtomicOp::kAnd, (1ull << 63) | 1, 0), (1ull << 63) | 9);
  EXPECT_EQ(ApplyAtomic(word, 8, AtomicOp::kXor, 3, 0), (1ull << 63) | 1);
  EXPECT_EQ(ApplyAtomic(word, 8, AtomicOp::kSwap, 7, 0), (1ull << 63) | 2);
  EXPECT_EQ(ApplyAtomic(word, 8, AtomicOp::kFetch, 0, 0), 7u);
  // A 32-bit word: the high half of the operands is ignored and the next word untouched.
  std::memset(word, 0, 8);
  EXPECT_EQ(ApplyAtomic(word, 4, AtomicOp::kAdd, 0xffffffffull, 0), 0u);
  EXPECT_EQ(ApplyAtomic(word, 4, AtomicOp::kAdd, 1, 0), 0xffffffffu);
  EXPECT_EQ(as64(), 0u);  // wrapped to 0 within its 4 bytes
  EXPECT_EQ(ApplyAtomic(word, 4, AtomicOp::kSet, 0x1234567800000001ull, 0), 0u);
  EXPECT_EQ(as64(), 1u);
}

}  // namespace
}  // namespace hyper_parallel::shmem::transport
