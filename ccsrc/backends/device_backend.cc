#include "backends/device_backend.h"

#include <algorithm>
#include <array>

#include "backends/blocking_ops.h"
#include "backends/call_sites.h"

namespace hyper_parallel::shmem {
namespace {

// Sync words carry a number's low 31 bits (see the header).
std::int64_t SyncWord(std::uint64_t number) {
  return static_cast<std::int64_t>(number & 0x7fffffff);
}

// Keeps the first failure.
void Keep(Status* first, Status status) {
  if (first->ok() && !status.ok()) *first = std::move(status);
}

}  // namespace

bool CallerStreams::Note(void* stream, std::shared_ptr<const void> keep_alive) {
  MutexLock lock(&mutex_);
  if (std::find(streams_.begin(), streams_.end(), stream) == streams_.end()) {
    streams_.push_back(stream);
  }
  if (keep_alive != nullptr) keep_alive_.push_back(std::move(keep_alive));
  return keep_alive_.size() >= kMaxHeld;
}

CallerStreams::Taken CallerStreams::Take() {
  MutexLock lock(&mutex_);
  Taken taken{std::move(streams_), std::move(keep_alive_)};
  streams_.clear();
  keep_alive_.clear();
  return taken;
}

// The kernel-side API on one stream: every call is an enqueue through the vendor's hooks; the
// first failure of a call that returns nothing is kept for the kernel's outcome.
class DeviceBackend::StreamKernelApi final : public data_plane::KernelApi {
 public:
  StreamKernelApi(DeviceBackend& backend, void* stream, bool collective)
      : backend_(backend), stream_(stream), collective_(collective) {}

  int rank() const override { return backend_.spec_.rank; }
  int size() const override { return backend_.spec_.size; }
  std::byte* Local(std::uint64_t offset) const override {
    return backend_.LocalHeapBase() + offset;
  }
  void PutBlock(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes) override {
    if (bytes == 0) return;
    Note(backend_.EnqueuePut(stream_, pe, Region::kHeap, offset, source, bytes));
  }
  void PutBlocks(std::span<const data_plane::BlockPut> puts) override {
    Note(backend_.EnqueuePutBatch(stream_, puts));
  }
  void PutBlocksSignalled(std::span<const data_plane::SignalledPut> puts) override {
    Note(backend_.EnqueuePutBatchSignalled(stream_, puts));
  }
  void AddCounter(int pe, std::uint64_t offset, std::int64_t value) override {
    Note(backend_.EnqueueAddCounter(stream_, pe, offset, value));
  }
  Status WaitCounter(std::uint64_t offset, std::int64_t target, std::string_view what) override {
    HPS_RETURN_IF_ERROR(failure_);
    return backend_.EnqueueWaitAtLeast(stream_, Region::kHeap, offset, target, what);
  }
  void PublishEpoch(int pe, int slot, std::uint64_t epoch) override {
    Note(backend_.EnqueueSetWord(stream_, pe, Region::kControl,
                                 backend_.layout_.Epoch(slot, backend_.spec_.rank),
                                 SyncWord(epoch)));
  }
  Status WaitEpochs(int slot, std::uint64_t epoch, std::span<const int> sources,
                    std::string_view operation, std::string_view) override {
    HPS_RETURN_IF_ERROR(failure_);
    for (int source : sources) {
      HPS_RETURN_IF_ERROR(backend_.EnqueueWaitAtLeast(stream_, Region::kControl,
                                                      backend_.layout_.Epoch(slot, source),
                                                      SyncWord(epoch), operation));
    }
    return Status::Ok();
  }

  Status ReadLocal(void* destination, std::uint64_t offset, std::uint64_t bytes) override {
    HPS_RETURN_IF_ERROR(failure_);
    if (!collective_) {
      return Status::Assertion(ErrorCode::kInvalidState,
                               "only a collective's kernel reads its heap back (it synchronises "
                               "the stream)", {});
    }
    if (bytes == 0) return Status::Ok();
    HPS_RETURN_IF_ERROR(backend_.EnqueueGet(stream_, destination, backend_.spec_.rank,
                                            Region::kHeap, offset, bytes));
    // A collective's kernel runs on the launching host thread, outside any capture.
    CallSiteScope site(CallSite::kHostThread);
    return backend_.HostSynchronize(stream_);
  }
  bool ComputesElementwise() const override { return backend_.ComputesElementwise(); }
  Status Elementwise(const data_plane::ElementwiseStep& step) override {
    HPS_RETURN_IF_ERROR(failure_);
    return backend_.EnqueueElementwise(stream_, step);
  }
  // Round words are a collective's (they are reset when its kernel ends, see the header).
  int RoundWords() const override {
    return collective_ ? static_cast<int>(backend_.layout_.round_words) : 0;
  }
  void PutBlocksAndSetRound(std::span<const data_plane::BlockPut> puts, int pe, int slot,
                            int word, std::uint64_t value) override {
    Note(backend_.EnqueuePutBatch(stream_, puts));
    Note(backend_.EnqueueSetWord(stream_, pe, Region::kControl,
                                 backend_.layout_.RoundWord(slot, word), StepOf(value)));
  }
  Status WaitRound(int slot, int word, std::uint64_t value, int source,
                   std::string_view operation, std::string_view waiting_for) override {
    HPS_RETURN_IF_ERROR(failure_);
    if (std::find(waited_.begin(), waited_.end(), std::pair{slot, word}) == waited_.end()) {
      waited_.emplace_back(slot, word);
    }
    return backend_.EnqueueWaitAtLeast(
        stream_, Region::kControl, backend_.layout_.RoundWord(slot, word), StepOf(value),
        std::string(operation) + ": " + std::string(waiting_for) + " from PE " +
            std::to_string(source));
  }
  // Sets the round words this kernel waited on back to 0, after those waits (stream order).
  Status ResetRoundWords() {
    for (const auto& [slot, word] : waited_) {
      HPS_RETURN_IF_ERROR(backend_.EnqueueSetWord(stream_, backend_.spec_.rank, Region::kControl,
                                                  backend_.layout_.RoundWord(slot, word), 0));
    }
    return Status::Ok();
  }

  const Status& failure() const { return failure_; }

 private:
  void Note(Status status) { Keep(&failure_, std::move(status)); }
  // A round value's step within its call (data_plane::RoundValue).
  static std::int64_t StepOf(std::uint64_t value) {
    return static_cast<std::int64_t>(value & 0xffff);
  }

  DeviceBackend& backend_;
  void* stream_;
  bool collective_;
  Status failure_;
  std::vector<std::pair<int, int>> waited_;  // (slot, word)
};

void DeviceBackend::BeginHeap(const HeapSpec& spec) {
  spec_ = spec;
  layout_ = DeviceControlLayout(spec.size, spec.teams);
  terminal_.Reset();
}

Status DeviceBackend::Latch(Status failure) {
  terminal_.Set(failure);
  return failure;
}

Status DeviceBackend::HostSynchronize(void* stream) {
  host_synchronizations_.fetch_add(1, std::memory_order_relaxed);
  return Synchronize(stream);
}

Status DeviceBackend::OpenAgreement() {
  if (!spec_.all_gather) {
    return Status::Assertion(ErrorCode::kInvalidState,
                             "open_peers without the bootstrap's all-gather", {});
  }
  return agreement_.Open(spec_.rank, spec_.size, spec_.teams, spec_.timeout, spec_.all_gather);
}

Status DeviceBackend::ThreadStream(void** stream) {
  const long thread = CurrentThreadId();
  {
    MutexLock lock(&streams_mutex_);
    if (auto it = thread_streams_.find(thread); it != thread_streams_.end()) {
      *stream = it->second;
      return Status::Ok();
    }
  }
  void* made = nullptr;
  HPS_RETURN_IF_ERROR(CreateStream(&made));  // without the lock: a vendor call
  MutexLock lock(&streams_mutex_);
  thread_streams_[thread] = made;
  *stream = made;
  return Status::Ok();
}

Status DeviceBackend::ReleaseStreams() {
  std::map<long, void*> streams;
  {
    MutexLock lock(&streams_mutex_);
    streams.swap(thread_streams_);
  }
  Status first;
  for (const auto& [thread, stream] : streams) {
    Keep(&first, HostSynchronize(stream));
    Keep(&first, DestroyStream(stream));
  }
  return first;
}

void DeviceBackend::AbandonStreams() {
  MutexLock lock(&streams_mutex_);
  thread_streams_.clear();
}

template <class Enqueue>
Status DeviceBackend::OnStream(StreamRef stream, KeepAlive keep_alive, Enqueue enqueue) {
  if (stream.native != nullptr) {
    Status status = enqueue(stream.native);
    // Noted even after a failure part-way: what was enqueued may still read the operands.
    if (caller_streams_.Note(stream.native, std::move(keep_alive))) Keep(&status, Quiesce());
    return status;
  }
  void* own = nullptr;
  HPS_RETURN_IF_ERROR(ThreadStream(&own));
  Status status = enqueue(own);
  Keep(&status, HostSynchronize(own));  // always: nothing of a returned call stays queued
  return status;
}

Status DeviceBackend::Quiesce() {
  // The threads' own streams hold nothing between calls (each call synchronises its own), and
  // one may be in a long wait of another thread's call right now: only the callers' streams.
  const CallerStreams::Taken taken = caller_streams_.Take();  // operands dropped on return
  Status first;
  for (void* stream : taken.streams) Keep(&first, HostSynchronize(stream));
  return first;
}

Status DeviceBackend::Put(StreamRef stream, std::uint64_t offset, const void* source,
                          std::uint64_t bytes, int pe, KeepAlive keep_alive) {
  if (bytes == 0) return Status::Ok();
  return OnStream(stream, std::move(keep_alive), [&](void* native) {
    return EnqueuePut(native, pe, Region::kHeap, offset, source, bytes);
  });
}

Status DeviceBackend::Get(StreamRef stream, void* destination, std::uint64_t offset,
                          std::uint64_t bytes, int pe, KeepAlive keep_alive) {
  if (bytes == 0) return Status::Ok();
  return OnStream(stream, std::move(keep_alive), [&](void* native) {
    return EnqueueGet(native, destination, pe, Region::kHeap, offset, bytes);
  });
}

Status DeviceBackend::Signal(StreamRef stream, std::uint64_t offset, SignalWidth width,
                             SignalOp op, std::int64_t value, int pe) {
  return PutSignal(stream, 0, nullptr, 0, offset, width, op, value, pe, nullptr);
}

Status DeviceBackend::PutSignal(StreamRef stream, std::uint64_t offset, const void* source,
                                std::uint64_t bytes, std::uint64_t signal_offset,
                                SignalWidth width, SignalOp op, std::int64_t value, int pe,
                                KeepAlive keep_alive) {
  HPS_RETURN_IF_ERROR(CheckSignal(width, value));
  return OnStream(stream, std::move(keep_alive), [&](void* native) {
    // Stream order puts the data before the signal.
    if (bytes > 0) {
      HPS_RETURN_IF_ERROR(EnqueuePut(native, pe, Region::kHeap, offset, source, bytes));
    }
    return EnqueueSignal(native, pe, signal_offset, width, op, value);
  });
}

Status DeviceBackend::Fence(StreamRef stream) {
  return OnStream(stream, nullptr, [](void*) { return Status::Ok(); });
}

Status DeviceBackend::Quiet(StreamRef stream) {
  return OnStream(stream, nullptr, [](void*) { return Status::Ok(); });
}

Status DeviceBackend::WaitSignal(StreamRef stream, std::uint64_t offset, SignalWidth width,
                                 Comparison comparison, std::int64_t value) {
  HPS_RETURN_IF_ERROR(CheckWait(width, value));
  return OnStream(stream, nullptr, [&](void* native) {
    return EnqueueWaitSignal(native, offset, width, comparison, value);
  });
}

Status DeviceBackend::EnqueuePutBatch(void* stream, std::span<const data_plane::BlockPut> puts) {
  for (const data_plane::BlockPut& put : puts) {
    if (put.bytes == 0) continue;
    HPS_RETURN_IF_ERROR(EnqueuePut(stream, put.pe, Region::kHeap, put.offset, put.source,
                                   put.bytes));
  }
  return Status::Ok();
}

Status DeviceBackend::EnqueuePutBatchSignalled(void* stream,
                                               std::span<const data_plane::SignalledPut> puts) {
  for (const data_plane::SignalledPut& put : puts) {
    if (put.bytes > 0) {
      HPS_RETURN_IF_ERROR(EnqueuePut(stream, put.pe, Region::kHeap, put.offset, put.source,
                                     put.bytes));
    }
    HPS_RETURN_IF_ERROR(EnqueueAddCounter(stream, put.pe, put.counter_offset, put.add));
  }
  return Status::Ok();
}

Status DeviceBackend::Agree(const data_plane::CollectiveGroup& group,
                            const CollectiveDescriptor& mine, std::string_view operation,
                            Agreement* agreement) {
  std::vector<CollectiveDescriptor> all;
  const std::string label =
      std::string(operation) + (group.sync_slot == 0 ? std::string() : " (" + GroupLabel(group) + ")");
  // The PEs' collective sequences are out of step after a failed agreement: terminal.
  if (Status agreed = agreement_.Agree(group, mine, label, &all); !agreed.ok()) {
    return Latch(std::move(agreed).At(operation, "execute"));
  }
  *agreement = Agreement::FromAll(mine, all, &group);
  return Status::Ok();
}

Status DeviceBackend::EnqueueOrdering(void* stream, const data_plane::CollectiveGroup& group,
                                      std::uint64_t sequence, std::string_view operation) {
  const int rank = spec_.rank, team = group.sync_slot;
  const std::int64_t number = SyncWord(sequence);
  for (int member = 0; member < group.size(); ++member) {
    HPS_RETURN_IF_ERROR(EnqueueSetWord(stream, group.pe(member), Region::kControl,
                                       layout_.Flag(team, sequence, rank), number));
  }
  for (int member = 0; member < group.size(); ++member) {
    const int pe = group.pe(member);
    HPS_RETURN_IF_ERROR(EnqueueWaitAtLeast(
        stream, Region::kControl, layout_.Flag(team, sequence, pe), number,
        std::string(operation) + " waiting for pe " + std::to_string(pe) + " to reach it"));
  }
  return Status::Ok();
}

Status DeviceBackend::ExchangeWithPeers(std::span<const PeerRound> peers,
                                        const ExchangeWords& mine, std::string_view operation,
                                        std::vector<ExchangeWords>* theirs) {
  void* stream = nullptr;
  HPS_RETURN_IF_ERROR(ThreadStream(&stream));
  const int rank = spec_.rank;
  // One row per peer: word 0 carries that pair's round.
  std::vector<ExchangeWords> sent(peers.size(), mine);
  theirs->assign(peers.size(), ExchangeWords{});
  Status status;
  for (std::size_t i = 0; status.ok() && i < peers.size(); ++i) {
    sent[i][0] = peers[i].round;
    Keep(&status, EnqueuePut(stream, peers[i].pe, Region::kControl,
                             layout_.OfferRow(peers[i].round, rank), sent[i].data(),
                             DeviceControlLayout::kRowBytes));
    if (status.ok()) {
      Keep(&status, EnqueueSetWord(stream, peers[i].pe, Region::kControl,
                                   layout_.OfferFlag(peers[i].round, rank),
                                   SyncWord(peers[i].round)));
    }
  }
  for (std::size_t i = 0; status.ok() && i < peers.size(); ++i) {
    Keep(&status, EnqueueWaitAtLeast(stream, Region::kControl,
                                     layout_.OfferFlag(peers[i].round, peers[i].pe),
                                     SyncWord(peers[i].round),
                                     std::string(operation) + " waiting for pe " +
                                         std::to_string(peers[i].pe)));
    if (status.ok()) {
      Keep(&status, EnqueueGet(stream, (*theirs)[i].data(), rank, Region::kControl,
                               layout_.OfferRow(peers[i].round, peers[i].pe),
                               DeviceControlLayout::kRowBytes));
    }
  }
  // Always: the queued copies read `sent` and write `theirs`.
  Keep(&status, HostSynchronize(stream));
  // The pairs' rounds are out of step after a failed exchange: terminal.
  if (!status.ok()) return Latch(std::move(status));
  for (std::size_t i = 0; i < peers.size(); ++i) {
    if ((*theirs)[i][0] != peers[i].round) {
      return Latch(Status::Assertion(
          ErrorCode::kCollectiveMismatch, "a PE is ahead in the members-only exchanges with this PE",
          {{"operation", std::string(operation)}, {"pe", std::to_string(peers[i].pe)},
           {"round", std::to_string(peers[i].round)},
           {"their_round", std::to_string((*theirs)[i][0])}}));
    }
  }
  return Status::Ok();
}

Status DeviceBackend::RunKernel(void* stream, const Kernel& kernel, bool collective) {
  StreamKernelApi api(*this, stream, collective);
  // A kernel's body may be captured into a graph and replayed: it may enqueue, not synchronise.
  CallSiteScope site(CallSite::kCustomOp);
  Status status = kernel(api);
  if (status.ok()) status = api.failure();
  Keep(&status, api.ResetRoundWords());
  return status;
}

Status DeviceBackend::EnqueueElementwise(void*, const data_plane::ElementwiseStep&) {
  return Status::Assertion(ErrorCode::kUnsupportedCapability,
                           "this device backend has no reduction kernel",
                           {{"backend", std::string(name())}});
}

Status DeviceBackend::Launch(StreamRef stream, std::string_view name, Kernel kernel,
                             KeepAlive keep_alive) {
  Status status = OnStream(stream, std::move(keep_alive),
                           [&](void* native) { return RunKernel(native, kernel, /*collective=*/false); });
  return std::move(status).At(name, "execute");
}

Status DeviceBackend::LaunchCollective(StreamRef stream, const data_plane::CollectiveGroup& group,
                                       const CollectiveDescriptor& descriptor,
                                       std::string_view name, Kernel kernel,
                                       KeepAlive keep_alive) {
  // Checked across the members first, on the host: a refused call enqueues nothing.
  Agreement agreement;
  Status status = Agree(group, descriptor, name, &agreement);
  if (status.ok()) status = std::move(agreement.verdict);
  if (!status.ok()) return std::move(status).At(name, "execute");
  // A refusal (CollectiveDescriptor::Refusal) only takes its place: nothing to enqueue.
  if (descriptor.refused) return Status::Ok();
  // Then on the stream: the ordering round (the barrier itself when there is no kernel), and
  // the kernel. A caller's stream is only enqueued on; the thread's own is synchronised.
  status = OnStream(stream, std::move(keep_alive), [&](void* native) {
    HPS_RETURN_IF_ERROR(EnqueueOrdering(native, group, descriptor.sequence, name));
    return kernel ? RunKernel(native, kernel, /*collective=*/true) : Status::Ok();
  });
  return std::move(status).At(name, "execute");
}

}  // namespace hyper_parallel::shmem
