#include "backends/host/host_stream_provider.h"

#include <memory>

#include "backends/host/host_stream.h"

namespace hyper_parallel::shmem::host {
namespace {

// User-facing calls are host-thread calls in the where-callable table.
constexpr CallSite kUser = CallSite::kHostThread;

class UserStream final : public Stream {
 public:
  UserStream() : stream_(HostStream::Create<kUser>()) {}
  StreamRef ref() const override { return StreamRef{stream_.get()}; }
  std::uint64_t id() const override { return stream_->id(); }
  Status Synchronize(std::chrono::milliseconds timeout) override {
    return stream_->Synchronize<kUser>(timeout);
  }
  bool Query() const override { return stream_->Query(); }
  HostStream* native() const { return stream_.get(); }

 private:
  std::shared_ptr<HostStream> stream_;
};

HostStream* Native(Stream* stream) {
  return stream == nullptr ? nullptr : static_cast<UserStream*>(stream)->native();
}

class UserEvent final : public Event {
 public:
  void Record(Stream* stream) override { event_.Record<kUser>(Native(stream)); }
  Status Wait(Stream* stream, std::chrono::milliseconds timeout) override {
    return event_.Wait(Native(stream), timeout);
  }
  Status Synchronize(std::chrono::milliseconds timeout) override {
    return event_.Synchronize<kUser>(timeout);
  }
  bool Query() const override { return event_.Query(); }

 private:
  HostEvent event_;
};

class Provider final : public StreamProvider {
 public:
  std::shared_ptr<Stream> CreateStream() override { return std::make_shared<UserStream>(); }
  std::unique_ptr<Event> CreateEvent() override { return std::make_unique<UserEvent>(); }
  void SetCurrentStream(Stream* stream) override { host::SetCurrentStream(Native(stream)); }
  StreamRef CurrentStream() const override { return StreamRef{host::CurrentStream()}; }
};

}  // namespace

StreamProvider& HostStreams() {
  static Provider* provider = new Provider();  // never destroyed: used until exit
  return *provider;
}

}  // namespace hyper_parallel::shmem::host
