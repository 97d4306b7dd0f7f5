#include "backends/registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

#include "backends/wait/wait_policy.h"

namespace hyper_parallel::shmem {
namespace {

using std::chrono::milliseconds;

TEST(BackendRegistry, HostIsProvidedAndAutoFallsBackToIt) {
  const BackendEntry* host = nullptr;
  ASSERT_TRUE(FindBackend(BackendKind::kHost, &host).ok());
  EXPECT_EQ(host->kind, BackendKind::kHost);
  std::unique_ptr<Backend> made;
  ASSERT_TRUE(CreateBackend(BackendKind::kAuto, &made).ok());
  ASSERT_NE(made, nullptr);
  // No device backend is available on a machine without one: auto is the host backend.
  EXPECT_EQ(made->name(), "host");
  EXPECT_NE(ProvidedBackends().find("host"), std::string::npos);
}

TEST(BackendRegistry, ABackendThisMachineCannotRunSaysWhy) {
  // Neither a GPU nor the CANN vendor library is here (CI's machines): both are refused with
  // the reason, and nothing is made.
  for (BackendKind kind : {BackendKind::kCuda, BackendKind::kCann}) {
    std::unique_ptr<Backend> made;
    const Status status = CreateBackend(kind, &made);
    EXPECT_EQ(status.code(), ErrorCode::kUnsupportedCapability) << status.ToString();
    EXPECT_NE(status.ToString().find("HYPER_PARALLEL_SHMEM_BACKEND must be a backend this build "
                                     "provides and this machine can run (auto, cann, cuda, host)"),
              std::string::npos)
        << status.ToString();
    EXPECT_NE(status.ToString().find("cannot run here: "), std::string::npos) << status.ToString();
    EXPECT_EQ(made, nullptr);
  }
  EXPECT_EQ(ProvidedBackends(), "auto, cann, cuda, host");
}

TEST(BackendRegistry, ChecksTheConfiguredNameAndEveryBackendsOwnSettings) {
  for (const auto& [kind, name] : kBackendNames) {
    Config config;
    config.backend = std::string(name);
    BackendKind parsed = BackendKind::kHost;
    ASSERT_TRUE(CheckBackendSettings(config, &parsed).ok()) << name;
    EXPECT_EQ(parsed, kind);
    EXPECT_EQ(BackendKindName(kind), name);
  }
  for (const char* bad : {"HOST", "", "gpu"}) {
    Config config;
    config.backend = bad;
    BackendKind parsed = BackendKind::kHost;
    const Status status = CheckBackendSettings(config, &parsed);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidConfig) << status.ToString();
    EXPECT_EQ(status.message(), std::string("HYPER_PARALLEL_SHMEM_BACKEND must be one of auto, "
                                            "host, cuda, cann, but got \"") + bad + "\"");
    EXPECT_EQ(parsed, BackendKind::kHost) << "written on failure";
  }
  // The host backend's wait setting is checked whichever backend is named.
  for (const char* backend : {"auto", "cann"}) {
    Config config;
    config.backend = backend;
    config.wait = "busy";
    BackendKind parsed = BackendKind::kHost;
    const Status status = CheckBackendSettings(config, &parsed);
    EXPECT_EQ(status.code(), ErrorCode::kInvalidConfig) << status.ToString();
    EXPECT_EQ(status.message(),
              "HYPER_PARALLEL_SHMEM_WAIT must be one of auto, spin, block, but got \"busy\"");
  }
}

TEST(WaitPolicy, NamesRoundTrip) {
  for (WaitMode mode : {WaitMode::kAuto, WaitMode::kSpin, WaitMode::kBlock}) {
    WaitMode parsed = WaitMode::kAuto;
    ASSERT_TRUE(ParseWaitMode(WaitModeName(mode), &parsed).ok());
    EXPECT_EQ(parsed, mode);
  }
  EXPECT_EQ(WaitModeName(WaitMode::kSpin), "spin");
  WaitMode untouched = WaitMode::kBlock;
  EXPECT_EQ(ParseWaitMode("Spin", &untouched).code(), ErrorCode::kInvalidConfig);
  EXPECT_EQ(untouched, WaitMode::kBlock);
}

// Entries of the test's own: a device backend whose probe answers `answer`, then the host.
std::vector<BackendEntry> DeviceThenHost(Status answer) {
  std::vector<BackendEntry> entries(2);
  entries[0].kind = BackendKind::kCuda;
  entries[0].auto_priority = 10;
  entries[0].available = [answer] { return answer; };
  entries[1].kind = BackendKind::kHost;
  entries[1].available = [] { return Status::Ok(); };
  return entries;
}

Status Ask(const BackendEntry& entry) { return entry.available(); }

TEST(BackendRegistry, AutoPassesOverABackendWithNothingHere) {
  const std::vector<BackendEntry> entries = DeviceThenHost(
      Status::Assertion(ErrorCode::kUnsupportedCapability, "no CUDA device is usable"));
  const BackendEntry* found = nullptr;
  ASSERT_TRUE(FindBackendAmong(entries, BackendKind::kAuto, Ask, &found).ok());
  EXPECT_EQ(found, &entries[1]);
  // Present and working: auto takes it.
  const std::vector<BackendEntry> working = DeviceThenHost(Status::Ok());
  ASSERT_TRUE(FindBackendAmong(working, BackendKind::kAuto, Ask, &found).ok());
  EXPECT_EQ(found, &working[0]);
}

TEST(BackendRegistry, AutoStopsAtABackendThatIsPresentButBroken) {
  // A driver older than the runtime: not "no device", so no silent fallback to the host.
  const std::vector<BackendEntry> entries = DeviceThenHost(Status::Assertion(
      ErrorCode::kBackendError, "the CUDA driver is older than the CUDA runtime this build links"));
  const BackendEntry* found = nullptr;
  const Status status = FindBackendAmong(entries, BackendKind::kAuto, Ask, &found);
  EXPECT_EQ(status.code(), ErrorCode::kBackendError) << status.ToString();
  EXPECT_EQ(found, nullptr);
  EXPECT_NE(status.message().find("backend auto: this machine has the cuda backend's device or "
                                  "library, but it cannot run (fix it, or set "
                                  "HYPER_PARALLEL_SHMEM_BACKEND to another backend)"),
            std::string::npos)
      << status.message();
  EXPECT_NE(status.message().find("reason=the CUDA driver is older"), std::string::npos)
      << status.message();
  // Named explicitly: the same code, and the reason.
  const Status named = FindBackendAmong(entries, BackendKind::kCuda, Ask, &found);
  EXPECT_EQ(named.code(), ErrorCode::kBackendError) << named.ToString();
  EXPECT_NE(named.message().find("cuda, which cannot run here: the CUDA driver is older"),
            std::string::npos)
      << named.message();
  // The host stays reachable by name.
  ASSERT_TRUE(FindBackendAmong(entries, BackendKind::kHost, Ask, &found).ok());
  EXPECT_EQ(found, &entries[1]);
}

TEST(BackendRegistry, HostStreamsComeThroughTheNeutralInterface) {
  const BackendEntry* host = nullptr;
  ASSERT_TRUE(FindBackend(BackendKind::kHost, &host).ok());
  ASSERT_NE(host->streams, nullptr);
  StreamProvider& streams = *host->streams;
  EXPECT_EQ(streams.CurrentStream().native, nullptr);  // the default stream
  std::shared_ptr<Stream> stream = streams.CreateStream();
  ASSERT_NE(stream, nullptr);
  EXPECT_GT(stream->id(), 0u);
  streams.SetCurrentStream(stream.get());
  EXPECT_EQ(streams.CurrentStream().native, stream->ref().native);
  streams.SetCurrentStream(nullptr);
  EXPECT_EQ(streams.CurrentStream().native, nullptr);

  std::unique_ptr<Event> event = streams.CreateEvent();
  event->Record(stream.get());
  ASSERT_TRUE(event->Synchronize(milliseconds(5000)).ok());
  EXPECT_TRUE(event->Query());
  ASSERT_TRUE(stream->Synchronize(milliseconds(5000)).ok());
  EXPECT_TRUE(stream->Query());
}

}  // namespace
}  // namespace hyper_parallel::shmem
