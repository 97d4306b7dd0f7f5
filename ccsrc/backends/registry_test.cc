#include "backends/registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>

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
