#include "backends/transport/reordering.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace hyper_parallel::shmem::transport {
namespace {

// Records what reaches it, in order: "put p:offset", "signal p", "get p", "fence", "flush".
class Recorder final : public RemoteTransport {
 public:
  explicit Recorder(std::vector<std::string>* log) : log_(log) {}
  std::string name() const override { return "recorder"; }
  std::string version() const override { return "1"; }
  Status Register(void*, std::uint64_t, std::string*) override { return Status::Ok(); }
  Status Connect(int, const std::vector<std::string>&, const std::vector<bool>&,
                 const std::vector<bool>&, LostFn) override {
    return Status::Ok();
  }
  void ReportLost(int) override {}
  Status Start(Liveness, const std::atomic<bool>*, Doorbell*, WaitPolicy) override {
    return Status::Ok();
  }
  void Close() override {}
  Status Put(int pe, std::uint64_t offset, const void*, std::uint64_t, Audience) override {
    log_->push_back("put " + std::to_string(pe) + ":" + std::to_string(offset));
    return Status::Ok();
  }
  Status PutSignal(int pe, std::uint64_t, const void*, std::uint64_t, const RemoteSignal&,
                   Audience) override {
    log_->push_back("signal " + std::to_string(pe));
    return Status::Ok();
  }
  Status Begin(Outbound*, int pe, std::uint64_t, const void*, std::uint64_t, const RemoteSignal&,
               Audience) override {
    log_->push_back("signal " + std::to_string(pe));
    return Status::Ok();
  }
  Status Finish(Outbound*) override { return Status::Ok(); }
  Status Atomic(int pe, const AtomicRequest&, std::uint64_t*) override {
    log_->push_back("atomic " + std::to_string(pe));
    return Status::Ok();
  }
  Status Fence() override {
    log_->push_back("fence");
    return Status::Ok();
  }
  Status PutNbi(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes,
                std::shared_ptr<const void>) override {
    return Put(pe, offset, source, bytes, Audience::kAnyone);
  }
  Status GetNbi(int pe, void*, std::uint64_t, std::uint64_t,
                std::shared_ptr<const void>) override {
    log_->push_back("get " + std::to_string(pe));
    return Status::Ok();
  }
  Status CompleteNbi() override { return Status::Ok(); }
  Status Quiet() override {
    log_->push_back("quiet");
    return Status::Ok();
  }
  Status Get(int pe, void*, std::uint64_t, std::uint64_t) override {
    log_->push_back("get " + std::to_string(pe));
    return Status::Ok();
  }
  Status Flush() override {
    log_->push_back("flush");
    return Status::Ok();
  }
  bool Poll() override { return false; }
  Armed Arm(Doorbell*) override { return Armed::kTaken; }
  void Sleep(Doorbell*, std::chrono::nanoseconds) override {}
  bool remote(int) const override { return true; }
  std::string PathName(int) const override { return "recorded"; }
  RemoteCounters counters() const override { return {}; }
  int endpoints() const override { return 0; }

 private:
  std::vector<std::string>* log_;
};

ReorderingTransport::Options NeverByTime() {
  ReorderingTransport::Options options;
  options.delay = std::chrono::hours(1);  // only ordering points release (no Start: no thread)
  options.max_held = 1000;
  return options;
}

std::size_t IndexOf(const std::vector<std::string>& log, const std::string& entry) {
  for (std::size_t i = 0; i < log.size(); ++i) {
    if (log[i] == entry) return i;
  }
  return log.size();
}

TEST(ReorderingTransportTest, HoldsPutsUntilAnOrderingPointThenSendsThemShuffled) {
  std::vector<std::string> log;
  ReorderingTransport transport(std::make_unique<Recorder>(&log), NeverByTime());
  const std::uint64_t word = 7;
  for (std::uint64_t i = 0; i < 16; ++i) {
    ASSERT_TRUE(transport.Put(1, i * 8, &word, 8, Audience::kAnyone).ok());
  }
  EXPECT_TRUE(log.empty());
  EXPECT_EQ(transport.held(), 16u);
  ASSERT_TRUE(transport.Fence().ok());
  ASSERT_EQ(log.size(), 17u);
  EXPECT_EQ(log.back(), "fence");
  std::vector<std::string> in_order;
  for (std::uint64_t i = 0; i < 16; ++i) in_order.push_back("put 1:" + std::to_string(i * 8));
  EXPECT_NE(std::vector<std::string>(log.begin(), log.end() - 1), in_order);
  EXPECT_EQ(transport.counters().reordered, 16u);
}

TEST(ReorderingTransportTest, ASignalReleasesOnlyItsOwnPesPutsFirst) {
  std::vector<std::string> log;
  ReorderingTransport transport(std::make_unique<Recorder>(&log), NeverByTime());
  const std::uint64_t word = 7;
  ASSERT_TRUE(transport.Put(1, 0, &word, 8, Audience::kAnyone).ok());
  ASSERT_TRUE(transport.Put(2, 0, &word, 8, Audience::kAnyone).ok());
  ASSERT_TRUE(transport.Put(1, 8, &word, 8, Audience::kTarget).ok());
  ASSERT_TRUE(transport.PutSignal(1, 0, nullptr, 0, RemoteSignal{16, 8, SignalAction::kAdd, 1},
                                  Audience::kAnyone)
                  .ok());
  ASSERT_EQ(log.size(), 3u);
  EXPECT_EQ(log.back(), "signal 1");
  EXPECT_LT(IndexOf(log, "put 1:0"), 2u);
  EXPECT_LT(IndexOf(log, "put 1:8"), 2u);
  EXPECT_EQ(transport.held(), 1u);  // PE 2's put waits on
  ASSERT_TRUE(transport.Get(2, nullptr, 0, 8).ok());
  EXPECT_EQ(log[3], "put 2:0");
  EXPECT_EQ(log[4], "get 2");
}

TEST(ReorderingTransportTest, BeginWithoutSignalIsHeldAndWithSignalOrdersAfterIt) {
  std::vector<std::string> log;
  ReorderingTransport transport(std::make_unique<Recorder>(&log), NeverByTime());
  Outbound out;
  const std::uint64_t word = 7;
  ASSERT_TRUE(transport.Begin(&out, 3, 64, &word, 8, RemoteSignal{}, Audience::kTarget).ok());
  EXPECT_TRUE(log.empty());
  ASSERT_TRUE(transport.Begin(&out, 3, 72, &word, 8, RemoteSignal{0, 8, SignalAction::kAdd, 1},
                              Audience::kTarget)
                  .ok());
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0], "put 3:64");
  EXPECT_EQ(log[1], "signal 3");
  ASSERT_TRUE(transport.Finish(&out).ok());
}

TEST(ReorderingTransportTest, FlushQuietAndAtomicsReleaseFirst) {
  std::vector<std::string> log;
  ReorderingTransport transport(std::make_unique<Recorder>(&log), NeverByTime());
  const std::uint64_t word = 7;
  ASSERT_TRUE(transport.Put(0, 0, &word, 8, Audience::kAnyone).ok());
  ASSERT_TRUE(transport.Atomic(0, AtomicRequest{}, nullptr).ok());
  ASSERT_TRUE(transport.PutNbi(1, 0, &word, 8, nullptr).ok());
  ASSERT_TRUE(transport.Flush().ok());
  ASSERT_TRUE(transport.Put(2, 0, &word, 8, Audience::kAnyone).ok());
  ASSERT_TRUE(transport.Quiet().ok());
  EXPECT_EQ(log, (std::vector<std::string>{"put 0:0", "atomic 0", "put 1:0", "flush", "put 2:0",
                                           "quiet"}));
}

TEST(ReorderingTransportTest, TooManyHeldGoAtOnce) {
  std::vector<std::string> log;
  ReorderingTransport::Options options = NeverByTime();
  options.max_held = 4;
  ReorderingTransport transport(std::make_unique<Recorder>(&log), options);
  const std::uint64_t word = 7;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(transport.Put(1, i * 8, &word, 8, Audience::kAnyone).ok());
  EXPECT_EQ(log.size(), 5u);
  EXPECT_EQ(transport.held(), 0u);
}

}  // namespace
}  // namespace hyper_parallel::shmem::transport
