#include "testing/fake_backend.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "runtime/heap_allocator.h"

namespace hyper_parallel::shmem::testing {

std::string_view FakeCallName(FakeCall call) {
  switch (call) {
    case FakeCall::kCreateHeap: return "create_heap";
    case FakeCall::kOpenPeers: return "open_peers";
    case FakeCall::kDestroyHeap: return "destroy_heap";
    case FakeCall::kExchange: return "exchange";
    case FakeCall::kQuiesce: return "quiesce";
    case FakeCall::kPut: return "put";
    case FakeCall::kGet: return "get";
    case FakeCall::kSignal: return "signal";
    case FakeCall::kWaitSignal: return "wait_signal";
    case FakeCall::kLaunchCollective: return "launch_collective";
    case FakeCall::kLaunch: return "launch";
    case FakeCall::kAllGather: return "all_gather";
    case FakeCall::kBootstrapBarrier: return "bootstrap_barrier";
    case FakeCall::kCount: break;
  }
  return "unknown";
}

Status FakePanel::Enter(FakeCall call) {
  std::lock_guard<std::mutex> lock(mutex);
  ++calls[static_cast<int>(call)];
  if (auto it = fail_once.find(call); it != fail_once.end()) {
    Status failure = it->second;
    fail_once.erase(it);
    return failure;
  }
  if (auto it = fail_always.find(call); it != fail_always.end()) return it->second;
  return Status::Ok();
}

FakeBackend::~FakeBackend() { std::free(heap_); }

Status FakeBackend::CreateHeap(const HeapSpec& spec, std::string* local_handle) {
  HPS_RETURN_IF_ERROR(panel_->Enter(FakeCall::kCreateHeap));
  const std::uint64_t bytes =
      (spec.heap_bytes + HeapAllocator::kMaxAlignment - 1) / HeapAllocator::kMaxAlignment *
      HeapAllocator::kMaxAlignment;
  heap_ = static_cast<std::byte*>(std::aligned_alloc(HeapAllocator::kMaxAlignment, bytes));
  if (heap_ == nullptr) {
    return Status::Assertion(ErrorCode::kBackendError, "fake heap allocation failed");
  }
  std::memset(heap_, 0, bytes);
  heap_bytes_ = spec.heap_bytes;
  size_ = spec.size;
  timeout_ = spec.timeout;
  ++panel_->heaps_created;
  panel_->last_heap_bytes = spec.heap_bytes;
  *local_handle = "fake";
  return Status::Ok();
}

Status FakeBackend::OpenPeers(const std::vector<std::string>& handles) {
  (void)handles;
  return panel_->Enter(FakeCall::kOpenPeers);
}

Status FakeBackend::DestroyHeap() {
  Status injected = panel_->Enter(FakeCall::kDestroyHeap);
  if (heap_ != nullptr) {
    std::free(heap_);
    heap_ = nullptr;
    ++panel_->heaps_destroyed;
  }
  return injected;
}

std::string FakeBackend::StreamLabel(StreamRef stream) const {
  return stream.native == nullptr ? DefaultStreamLabel() : "fake stream " + Hex(stream.native);
}

Status FakeBackend::Agree(const data_plane::CollectiveGroup& group,
                          const CollectiveDescriptor& mine, std::string_view operation,
                          Agreement* agreement) {
  std::vector<CollectiveDescriptor> all;
  HPS_RETURN_IF_ERROR(ExchangeDescriptors(group, mine, operation, &all));
  *agreement = Agreement::FromAll(mine, all, &group);
  return Status::Ok();
}

Status FakeBackend::ExchangeDescriptors(const data_plane::CollectiveGroup& group,
                                        const CollectiveDescriptor& mine, std::string_view,
                                        std::vector<CollectiveDescriptor>* all) {
  HPS_RETURN_IF_ERROR(panel_->Enter(FakeCall::kExchange));
  HPS_RETURN_IF_ERROR(panel_->Health());
  std::lock_guard<std::mutex> lock(panel_->mutex);
  panel_->descriptors.push_back(mine);
  all->assign(group.sync_slot == 0 ? std::max(1, panel_->exchange_size) : group.size(), mine);
  if (panel_->tamper_peers) panel_->tamper_peers(all);
  return Status::Ok();
}

Status FakeBackend::ExchangeWithPeers(std::span<const PeerRound> peers, const ExchangeWords& mine,
                                      std::string_view, std::vector<ExchangeWords>* theirs) {
  HPS_RETURN_IF_ERROR(panel_->Enter(FakeCall::kExchange));
  HPS_RETURN_IF_ERROR(panel_->Health());
  theirs->clear();
  for (const PeerRound& peer : peers) {  // every peer echoes this PE's words
    theirs->push_back(mine);
    theirs->back()[0] = peer.round;
  }
  return Status::Ok();
}

Status FakeBackend::Put(StreamRef, std::uint64_t offset, const void* source, std::uint64_t bytes,
                        int, KeepAlive) {
  HPS_RETURN_IF_ERROR(panel_->Enter(FakeCall::kPut));
  std::memmove(heap_ + offset, source, bytes);
  return Status::Ok();
}

Status FakeBackend::Get(StreamRef, void* destination, std::uint64_t offset, std::uint64_t bytes,
                        int, KeepAlive) {
  HPS_RETURN_IF_ERROR(panel_->Enter(FakeCall::kGet));
  std::memmove(destination, heap_ + offset, bytes);
  return Status::Ok();
}

Status FakeBackend::Signal(StreamRef, std::uint64_t offset, SignalWidth width, SignalOp op,
                           std::int64_t value, int) {
  HPS_RETURN_IF_ERROR(panel_->Enter(FakeCall::kSignal));
  if (width == SignalWidth::k32) {
    std::atomic_ref<std::int32_t> word(*reinterpret_cast<std::int32_t*>(heap_ + offset));
    if (op == SignalOp::kSet) {
      word.store(static_cast<std::int32_t>(value));
    } else {
      word.fetch_add(static_cast<std::int32_t>(value));
    }
  } else {
    std::atomic_ref<std::int64_t> word(*reinterpret_cast<std::int64_t*>(heap_ + offset));
    if (op == SignalOp::kSet) {
      word.store(value);
    } else {
      word.fetch_add(value);
    }
  }
  return Status::Ok();
}

Status FakeBackend::PutSignal(StreamRef stream, std::uint64_t offset, const void* source,
                              std::uint64_t bytes, std::uint64_t signal_offset,
                              SignalWidth width, SignalOp op, std::int64_t value, int pe,
                              KeepAlive keep_alive) {
  HPS_RETURN_IF_ERROR(Put(stream, offset, source, bytes, pe, keep_alive));
  return Signal(stream, signal_offset, width, op, value, pe);
}

Status FakeBackend::WaitSignal(StreamRef, std::uint64_t offset, SignalWidth width,
                               Comparison comparison, std::int64_t value) {
  HPS_RETURN_IF_ERROR(panel_->Enter(FakeCall::kWaitSignal));
  auto observe = [&] {
    return width == SignalWidth::k32
               ? std::int64_t{std::atomic_ref<std::int32_t>(
                                  *reinterpret_cast<std::int32_t*>(heap_ + offset))
                                  .load()}
               : std::atomic_ref<std::int64_t>(*reinterpret_cast<std::int64_t*>(heap_ + offset))
                     .load();
  };
  std::int64_t observed = observe();
  if (panel_->blocking_waits) {
    // Another thread of the test may change the word: poll until the timeout.
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    while (!Compare(observed, comparison, value) &&
           std::chrono::steady_clock::now() < deadline) {
      HPS_RETURN_IF_ERROR(panel_->Health());
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      observed = observe();
    }
  }
  if (Compare(observed, comparison, value)) return Status::Ok();
  // Without blocking waits (one PE, one thread) the word cannot change: time out at once.
  return Status::Assertion(ErrorCode::kTimeout, "wait_signal timed out",
                           {{"observed", std::to_string(observed)},
                            {"expected", std::to_string(value)}});
}

namespace {

// One PE over the fake's heap; waits never block (nothing else can add).
class FakeKernelApi final : public data_plane::KernelApi {
 public:
  explicit FakeKernelApi(std::byte* heap) : heap_(heap) {}
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::byte* Local(std::uint64_t offset) const override { return heap_ + offset; }
  bool HostAddressable() const override { return true; }
  void PutBlock(int, std::uint64_t offset, const void* source, std::uint64_t bytes) override {
    if (bytes > 0) std::memmove(heap_ + offset, source, bytes);
  }
  void AddCounter(int, std::uint64_t offset, std::int64_t value) override {
    std::atomic_ref<std::int64_t>(*reinterpret_cast<std::int64_t*>(heap_ + offset))
        .fetch_add(value);
  }
  Status WaitCounter(std::uint64_t offset, std::int64_t target, std::string_view what) override {
    const std::int64_t observed = ReadCounter(offset);
    if (observed >= target) return Status::Ok();
    return Status::Assertion(ErrorCode::kTimeout, std::string(what) + " timed out",
                             {{"expected", std::to_string(target)},
                              {"observed", std::to_string(observed)}});
  }
  std::int64_t ReadCounter(std::uint64_t offset) const {
    return std::atomic_ref<std::int64_t>(*reinterpret_cast<std::int64_t*>(heap_ + offset)).load();
  }
  void PublishEpoch(int, int, std::uint64_t) override {}  // no peer to publish to
  Status WaitEpochs(int, std::uint64_t, std::span<const int> sources, std::string_view operation,
                    std::string_view) override {
    if (sources.empty()) return Status::Ok();
    return Status::Assertion(ErrorCode::kTimeout, std::string(operation) + " timed out",
                             {{"missing_pes", std::to_string(sources.size())}});
  }

 private:
  std::byte* heap_;
};

}  // namespace

Status FakeBackend::LaunchCollective(StreamRef stream, const data_plane::CollectiveGroup& group,
                                     const CollectiveDescriptor& descriptor,
                                     std::string_view name, Kernel kernel, KeepAlive keep_alive) {
  HPS_RETURN_IF_ERROR(panel_->Enter(FakeCall::kLaunchCollective));
  if (stream.native != nullptr) {
    std::lock_guard<std::mutex> lock(panel_->mutex);
    panel_->queued.push_back(std::move(keep_alive));
  }
  std::vector<CollectiveDescriptor> all;
  Status status = ExchangeDescriptors(group, descriptor, name, &all);
  if (status.ok()) status = MatchDescriptors(descriptor, all, &group);
  if (status.ok() && kernel) {  // no kernel: the agreement is the collective (a barrier)
    FakeKernelApi api(heap_);
    status = kernel(api);
  }
  return std::move(status).At(name, "execute");
}

Status FakeBackend::Launch(StreamRef, std::string_view name, Kernel kernel, KeepAlive) {
  HPS_RETURN_IF_ERROR(panel_->Enter(FakeCall::kLaunch));
  FakeKernelApi api(heap_);
  Status status = kernel(api);
  return status.At(name, "execute");
}

Status FakeBootstrap::AllGather(std::string_view mine, std::chrono::milliseconds,
                                std::vector<std::string>* all) {
  HPS_RETURN_IF_ERROR(panel_->Enter(FakeCall::kAllGather));
  all->assign(1, std::string(mine));
  return Status::Ok();
}

Status FakeBootstrap::Barrier(std::chrono::milliseconds) {
  return panel_->Enter(FakeCall::kBootstrapBarrier);
}

InitOptions FakeInitOptions(std::shared_ptr<FakePanel> panel,
                            std::map<std::string, std::string> env) {
  InitOptions options;
  options.bootstrap = std::make_shared<FakeBootstrap>(panel);
  options.env = [env = std::move(env)](std::string_view name) -> std::optional<std::string> {
    auto it = env.find(std::string(name));
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  options.backend_factory = [panel](BackendKind, std::unique_ptr<Backend>* out) {
    *out = std::make_unique<FakeBackend>(panel);
    return Status::Ok();
  };
  return options;
}

}  // namespace hyper_parallel::shmem::testing
