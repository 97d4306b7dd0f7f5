// FakeBackend and FakeBootstrap: in-process stand-ins for unit tests of the Runtime.
//
// One PE, a heap in ordinary memory, and a control panel shared with the test: it counts every
// call, can make any call fail (once or always), can stand in for peers whose collective
// descriptors differ, can latch a terminal failure (a lost peer), and can change the "current
// device" to test drift. No accelerator, no shared memory, no other process. The panel's
// counters and injections are guarded by its mutex, so calls may come from several threads;
// set the other fields before the calls they affect.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "runtime/bootstrap.h"
#include "runtime/runtime.h"

namespace hyper_parallel::shmem::testing {

enum class FakeCall : int {
  kCreateHeap,
  kOpenPeers,
  kDestroyHeap,
  kExchange,
  kQuiesce,
  kPut,
  kGet,
  kSignal,
  kWaitSignal,
  kLaunchCollective,
  kLaunch,
  kAllGather,  // FakeBootstrap
  kBootstrapBarrier,  // FakeBootstrap
  kCount,
};

std::string_view FakeCallName(FakeCall call);

/// The test's side of the fakes: counters, injected failures, the current device.
struct FakePanel {
  mutable std::mutex mutex;  // guards calls, fail_once, fail_always, health, descriptors
  std::array<int, static_cast<int>(FakeCall::kCount)> calls{};
  std::map<FakeCall, Status> fail_once;
  std::map<FakeCall, Status> fail_always;
  DeviceId device{DeviceType::kCpu, 0};
  int heaps_created = 0;
  int heaps_destroyed = 0;
  std::uint64_t last_heap_bytes = 0;
  /// Peers of the exchange (the fake itself is PE 0): each gets this PE's descriptor, then the
  /// hook may change what "they" called. Empty hook: every peer called the same.
  int exchange_size = 1;
  std::function<void(std::vector<CollectiveDescriptor>* all)> tamper_peers;
  /// Every descriptor this PE published, in order.
  std::vector<CollectiveDescriptor> descriptors;
  /// The terminal failure Health() reports (OK: healthy); waits give up once it is set.
  Status health;
  /// WaitSignal polls the word until the timeout instead of failing at once.
  bool blocking_waits = false;
  /// What HostAddressableHeap() answers (false: a heap in device memory).
  bool host_addressable = true;
  /// What collectives on a non-default stream keep alive, held here as if the work were still
  /// queued, until the test clears it (ReleaseQueued).
  std::vector<KeepAlive> queued;
  void ReleaseQueued() {
    std::vector<KeepAlive> released;
    {
      std::lock_guard<std::mutex> lock(mutex);
      released.swap(queued);
    }
  }

  int count(FakeCall call) const {
    std::lock_guard<std::mutex> lock(mutex);
    return calls[static_cast<int>(call)];
  }
  /// Counts the call and returns the injected failure, if any.
  Status Enter(FakeCall call);
  void SetHealth(Status failure) {
    std::lock_guard<std::mutex> lock(mutex);
    health = std::move(failure);
  }
  Status Health() const {
    std::lock_guard<std::mutex> lock(mutex);
    return health;
  }
};

class FakeBackend final : public Backend {
 public:
  explicit FakeBackend(std::shared_ptr<FakePanel> panel) : panel_(std::move(panel)) {}
  ~FakeBackend() override;

  std::string_view name() const override { return "fake"; }
  DeviceId CurrentDevice() const override { return panel_->device; }
  Status CreateHeap(const HeapSpec& spec, std::string* local_handle) override;
  Status OpenPeers(const std::vector<std::string>& handles) override;
  Status DestroyHeap() override;
  std::byte* LocalHeapBase() const override { return heap_; }
  bool HostAddressableHeap() const override { return panel_->host_addressable; }
  Status Agree(const data_plane::CollectiveGroup& group, const CollectiveDescriptor& mine,
               std::string_view operation, Agreement* agreement) override;
  Status ExchangeWithPeers(std::span<const PeerRound> peers, const ExchangeWords& mine,
                           std::string_view operation,
                           std::vector<ExchangeWords>* theirs) override;
  Status Quiesce() override { return panel_->Enter(FakeCall::kQuiesce); }
  StreamRef CurrentStream() const override { return StreamRef{}; }
  bool RunsInline(StreamRef stream) const override { return stream.native == nullptr; }
  std::string StreamLabel(StreamRef stream) const override;
  WaitInfo Wait() const override { return WaitInfo{}; }
  Status Health() const override { return panel_->Health(); }
  Status Put(StreamRef stream, std::uint64_t offset, const void* source, std::uint64_t bytes,
             int pe, KeepAlive keep_alive) override;
  Status Get(StreamRef stream, void* destination, std::uint64_t offset, std::uint64_t bytes,
             int pe, KeepAlive keep_alive) override;
  Status Signal(StreamRef stream, std::uint64_t offset, SignalWidth width, SignalOp op,
                std::int64_t value, int pe) override;
  Status PutSignal(StreamRef stream, std::uint64_t offset, const void* source,
                   std::uint64_t bytes, std::uint64_t signal_offset, SignalWidth width,
                   SignalOp op, std::int64_t value, int pe, KeepAlive keep_alive) override;
  Status WaitSignal(StreamRef stream, std::uint64_t offset, SignalWidth width,
                    Comparison comparison, std::int64_t value) override;
  Status LaunchCollective(StreamRef stream, const data_plane::CollectiveGroup& group,
                          const CollectiveDescriptor& descriptor, std::string_view name,
                          Kernel kernel, KeepAlive keep_alive) override;
  Status Launch(StreamRef stream, std::string_view name, Kernel kernel,
                KeepAlive keep_alive) override;

 private:
  // Every member's descriptor: this PE's, as often as the panel says (tampered with if asked).
  Status ExchangeDescriptors(const data_plane::CollectiveGroup& group,
                             const CollectiveDescriptor& mine, std::string_view operation,
                             std::vector<CollectiveDescriptor>* all);

  std::shared_ptr<FakePanel> panel_;
  std::byte* heap_ = nullptr;
  std::uint64_t heap_bytes_ = 0;
  int size_ = 1;
  std::chrono::milliseconds timeout_{0};
};

/// A one-PE bootstrap (or `size` PEs that all echo this PE's bytes, for config tests).
class FakeBootstrap final : public Bootstrap {
 public:
  explicit FakeBootstrap(std::shared_ptr<FakePanel> panel) : panel_(std::move(panel)) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  Status AllGather(std::string_view mine, std::chrono::milliseconds timeout,
                   std::vector<std::string>* all) override;
  Status Barrier(std::chrono::milliseconds timeout) override;

 private:
  std::shared_ptr<FakePanel> panel_;
};

/// InitOptions wired to the fakes, with `env` as the whole environment.
InitOptions FakeInitOptions(std::shared_ptr<FakePanel> panel,
                            std::map<std::string, std::string> env = {});

}  // namespace hyper_parallel::shmem::testing
