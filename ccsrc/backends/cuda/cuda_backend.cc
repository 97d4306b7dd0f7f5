#include "backends/cuda/cuda_backend.h"

#include "backends/cuda/call_sites.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>

namespace hyper_parallel::shmem::cuda {
namespace {

constexpr std::uint64_t kLine = DeviceControlLayout::kLine;

std::uint64_t RoundUp(std::uint64_t value, std::uint64_t to) { return (value + to - 1) / to * to; }

WaitComparison ToCuda(Comparison comparison) {
  switch (comparison) {
    case Comparison::kEq: return WaitComparison::kEq;
    case Comparison::kNe: return WaitComparison::kNe;
    case Comparison::kGt: return WaitComparison::kGt;
    case Comparison::kGe: return WaitComparison::kGe;
    case Comparison::kLt: return WaitComparison::kLt;
    case Comparison::kLe: return WaitComparison::kLe;
  }
  return WaitComparison::kEq;
}

Status SixtyFourBit(SignalWidth width) {
  if (width == SignalWidth::k64) return Status::Ok();
  return Status::Contract(ErrorCode::kUnsupportedCapability, "signal width",
                          "64 on the CUDA backend (use an int64 signal)", "32");
}

std::string Hex(const void* pointer) {
  char text[32];
  std::snprintf(text, sizeof(text), "%p", pointer);
  return text;
}

}  // namespace

// The kernel-side API on one stream: copies (a batch as copy kernels, a signalled batch as
// copy kernels each followed by an add kernel), stream writes, add kernels and polling waits, all enqueued; the waits' reports are checked when the stream is
// synchronised.
class CudaBackend::KernelApiOnStream final : public data_plane::KernelApi {
 public:
  KernelApiOnStream(CudaBackend& backend, void* stream) : backend_(backend), stream_(stream) {}

  int rank() const override { return backend_.spec_.rank; }
  int size() const override { return backend_.spec_.size; }
  std::byte* Local(std::uint64_t offset) const override { return backend_.heap_[rank()] + offset; }
  void PutBlock(int pe, std::uint64_t offset, const void* source, std::uint64_t bytes) override {
    if (bytes > 0) Note(backend_.api_->MemcpyAsync(backend_.heap_[pe] + offset, source, bytes, stream_));
  }
  // A batch (all_gather's chunks) is one copy kernel per kCopyBlocksPerLaunch blocks, its
  // thread blocks spread over the SMs, instead of one cudaMemcpyAsync per block.
  void PutBlocks(std::span<const data_plane::BlockPut> puts) override {
    std::vector<CopyBlock> blocks;
    blocks.reserve(puts.size());
    for (const data_plane::BlockPut& put : puts) {
      if (put.bytes == 0) continue;
      blocks.push_back({backend_.heap_[put.pe] + put.offset, put.source, put.bytes});
    }
    if (blocks.empty()) return;
    Note(backend_.api_->CopyBlocksAsync(stream_, blocks.data(), blocks.size()));
  }
  // MegaMoE's chunks and their signals: per kCopyBlocksPerLaunch blocks, one copy kernel and
  // one kernel of their additions, instead of a cudaMemcpyAsync and an add kernel per chunk.
  void PutBlocksSignalled(std::span<const data_plane::SignalledPut> puts) override {
    std::vector<SignalledCopyBlock> blocks;
    blocks.reserve(puts.size());
    for (const data_plane::SignalledPut& put : puts) {
      blocks.push_back({backend_.heap_[put.pe] + put.offset, put.source, put.bytes,
                        backend_.heap_[put.pe] + put.counter_offset, put.add});
    }
    if (blocks.empty()) return;
    Note(backend_.api_->CopyBlocksAndAddAsync(stream_, blocks.data(), blocks.size()));
  }
  void AddCounter(int pe, std::uint64_t offset, std::int64_t value) override {
    Note(backend_.api_->AddValue64(stream_, backend_.heap_[pe] + offset, value));
  }
  Status WaitCounter(std::uint64_t offset, std::int64_t target, std::string_view what) override {
    HPS_RETURN_IF_ERROR(failure_);
    return backend_.EnqueueWait(stream_, backend_.heap_[rank()] + offset, Comparison::kGe, target,
                                std::string(what));
  }
  // A diagnostic look: -1 inside a kernel, where the table refuses the synchronisation.
  std::int64_t ReadCounter(std::uint64_t offset) const override {
    std::int64_t value = -1;
    if (!backend_.api_->MemcpyAsync(&value, backend_.heap_[rank()] + offset, sizeof(value), stream_)
             .ok() ||
        !backend_.api_->StreamSynchronize(stream_).ok()) {
      return -1;
    }
    return value;
  }
  void PublishEpoch(int pe, int slot, std::uint64_t epoch) override {
    Note(backend_.api_->WriteValue64(stream_, EpochWord(pe, slot, rank()),
                                     static_cast<std::int64_t>(epoch)));
  }
  Status WaitEpochs(int slot, std::uint64_t epoch, std::span<const int> sources,
                    std::string_view operation, std::string_view) override {
    HPS_RETURN_IF_ERROR(failure_);
    for (int source : sources) {
      HPS_RETURN_IF_ERROR(backend_.EnqueueWait(stream_, EpochWord(rank(), slot, source),
                                               Comparison::kGe, static_cast<std::int64_t>(epoch),
                                               std::string(operation)));
    }
    return Status::Ok();
  }
  const Status& failure() const { return failure_; }

 private:
  std::byte* EpochWord(int at, int slot, int source) const {
    return backend_.Control(at, backend_.layout_.Epoch(slot, source));
  }
  void Note(Status status) {
    if (failure_.ok() && !status.ok()) failure_ = std::move(status);
  }

  CudaBackend& backend_;
  void* stream_;
  Status failure_;
};

CudaBackend::CudaBackend(std::unique_ptr<CudaApi> api) : api_(CheckedCudaApi(std::move(api))) {}

CudaBackend::~CudaBackend() { DestroyHeap(); }

Status CudaBackend::Available() {
  std::unique_ptr<CudaApi> api;
  return MakeCudaRuntimeApi(&api);
}

DeviceId CudaBackend::CurrentDevice() const {
  int device = -1;
  if (!api_->GetDevice(&device).ok()) device = -1;
  return DeviceId{DeviceType::kCuda, device};
}

Status CudaBackend::CreateHeap(const HeapSpec& spec, std::string* local_handle) {
  spec_ = spec;
  layout_ = DeviceControlLayout(spec.size);
  HPS_RETURN_IF_ERROR(api_->GetDevice(&device_));
  HPS_RETURN_IF_ERROR(api_->DeviceUuid(device_, &uuid_));
  const std::uint64_t heap_bytes = RoundUp(spec.heap_bytes, kLine);
  HPS_RETURN_IF_ERROR(api_->Malloc(kHeapBaseAlignment + heap_bytes + layout_.bytes, &allocation_));
  const auto start = reinterpret_cast<std::uintptr_t>(allocation_);
  base_offset_ = RoundUp(start, kHeapBaseAlignment) - start;
  std::string ipc;
  HPS_RETURN_IF_ERROR(api_->IpcExport(allocation_, &ipc));
  local_handle->assign(ipc);
  local_handle->append(reinterpret_cast<const char*>(&base_offset_), sizeof(base_offset_));
  HPS_RETURN_IF_ERROR(api_->MallocHost(kWaitReports * sizeof(WaitReport), &reports_));
  auto* reports = static_cast<WaitReport*>(reports_);
  for (int i = 0; i < kWaitReports; ++i) free_reports_.push_back(new (&reports[i]) WaitReport{});
  return api_->StreamCreate(&own_stream_);
}

Status CudaBackend::OpenPeers(const std::vector<std::string>& handles) {
  const std::uint64_t heap_bytes = RoundUp(spec_.heap_bytes, kLine);
  heap_.assign(spec_.size, nullptr);
  control_.assign(spec_.size, nullptr);
  for (int pe = 0; pe < spec_.size; ++pe) {
    std::byte* allocation = static_cast<std::byte*>(allocation_);
    std::uint64_t offset = base_offset_;
    if (pe != spec_.rank) {
      const std::string& handle = handles[pe];
      if (handle.size() <= sizeof(offset)) {
        return Status::Contract(ErrorCode::kInvalidArgument, "a peer's heap handle",
                                "an IPC handle and an offset", std::to_string(handle.size()) + " bytes");
      }
      std::memcpy(&offset, handle.data() + handle.size() - sizeof(offset), sizeof(offset));
      void* opened = nullptr;
      HPS_RETURN_IF_ERROR(api_->IpcOpen(handle.substr(0, handle.size() - sizeof(offset)), &opened));
      opened_.push_back(opened);
      allocation = static_cast<std::byte*>(opened);
    }
    heap_[pe] = allocation + offset;
    control_[pe] = heap_[pe] + heap_bytes;
  }
  // The control block starts zeroed before any peer writes to it (the Runtime's bootstrap
  // exchange after OpenPeers is the barrier).
  std::vector<std::byte> zeros(layout_.bytes);
  HPS_RETURN_IF_ERROR(api_->MemcpyAsync(control_[spec_.rank], zeros.data(), zeros.size(), own_stream_));
  return api_->StreamSynchronize(own_stream_);
}

Status CudaBackend::DestroyHeap() {
  if (allocation_ == nullptr && own_stream_ == nullptr && reports_ == nullptr) return Status::Ok();
  Status first;
  auto keep = [&first](Status status) {
    if (first.ok() && !status.ok()) first = std::move(status);
  };
  keep(Quiesce());
  for (void* opened : opened_) keep(api_->IpcClose(opened));
  opened_.clear();
  if (allocation_ != nullptr) keep(api_->Free(allocation_));
  if (own_stream_ != nullptr) keep(api_->StreamDestroy(own_stream_));
  if (reports_ != nullptr) keep(api_->FreeHost(reports_));
  allocation_ = own_stream_ = reports_ = nullptr;
  free_reports_.clear();
  waits_.clear();
  heap_.clear();
  control_.clear();
  if (!first.ok()) Latch(first);
  return first;
}

Status CudaBackend::Latch(Status failure) {
  terminal_.Set(failure);
  return failure;
}

Status CudaBackend::Health() const { return terminal_.Get(); }

WaitInfo CudaBackend::Wait() const {
  WaitInfo info;
  info.mode = spec_.wait_mode;
  info.pinning = "none (waits run on the GPU)";
  return info;
}

std::string CudaBackend::StreamLabel(StreamRef stream) const {
  if (stream.native == nullptr) return "default (the backend's CUDA stream)";
  if (stream.native == CallerStream(nullptr).native) return "cuda legacy default stream";
  return "cuda stream " + Hex(stream.native);
}

Status CudaBackend::EnqueueWait(void* stream, const void* address, Comparison comparison,
                                std::int64_t value, std::string what) {
  // Reports come from a pool made at CreateHeap: a kernel's body may not allocate.
  WaitReport* report = nullptr;
  {
    std::lock_guard<std::mutex> lock(pending_mutex_);
    if (free_reports_.empty()) ReclaimPassedWaitsLocked();
    if (free_reports_.empty()) {
      return Status::Assertion(ErrorCode::kInvalidState,
                               "too many stream waits pending: synchronise the streams",
                               {{"pending_waits", std::to_string(waits_.size())}});
    }
    report = free_reports_.back();
    free_reports_.pop_back();
  }
  *report = WaitReport{};
  const auto timeout_ns = static_cast<std::uint64_t>(spec_.timeout.count()) * 1'000'000ull;
  Status enqueued = api_->WaitValue64(stream, address, ToCuda(comparison), value, timeout_ns, report);
  std::lock_guard<std::mutex> lock(pending_mutex_);
  if (!enqueued.ok()) {
    free_reports_.push_back(report);
    return enqueued;
  }
  waits_.push_back(PendingWait{stream, report, std::move(what), address, comparison, value});
  return Status::Ok();
}

void CudaBackend::ReclaimPassedWaitsLocked() {
  // A wait that passed has nothing to report: its record is free again without a stream sync
  // (a host-memory read, so allowed wherever a wait may be enqueued). A wait that gave up stays
  // pending until its stream is synchronised, which reports it.
  auto passed = std::stable_partition(waits_.begin(), waits_.end(), [](const PendingWait& w) {
    const std::atomic_ref<std::uint64_t> finished(w.report->finished);
    return finished.load(std::memory_order_acquire) == 0 || w.report->timed_out != 0;
  });
  for (auto it = passed; it != waits_.end(); ++it) free_reports_.push_back(it->report);
  waits_.erase(passed, waits_.end());
}

Status CudaBackend::Synchronize(void* stream) {
  Status status = api_->StreamSynchronize(stream);
  std::vector<PendingWait> waits;
  {
    // The reports of waits on this stream are final now that it ran.
    std::lock_guard<std::mutex> lock(pending_mutex_);
    auto ran = std::stable_partition(waits_.begin(), waits_.end(),
                                     [stream](const PendingWait& w) { return w.stream != stream; });
    waits.assign(std::make_move_iterator(ran), std::make_move_iterator(waits_.end()));
    waits_.erase(ran, waits_.end());
  }
  for (const PendingWait& wait : waits) {
    if (wait.report->timed_out != 0 && status.ok()) {
      status = Status::Assertion(ErrorCode::kTimeout, wait.what + " timed out",
                                 {{"pe", std::to_string(spec_.rank)},
                                  {"address", Hex(wait.address)},
                                  {"comparison", std::string(ComparisonName(wait.comparison))},
                                  {"expected", std::to_string(wait.expected)},
                                  {"observed", std::to_string(wait.report->observed)},
                                  {"timeout_ms", std::to_string(spec_.timeout.count())}});
    }
  }
  std::lock_guard<std::mutex> lock(pending_mutex_);
  for (const PendingWait& wait : waits) free_reports_.push_back(wait.report);
  return status;
}

Status CudaBackend::Complete(StreamRef stream, KeepAlive keep_alive) {
  if (stream.native == nullptr) return Synchronize(own_stream_);
  caller_streams_.Note(stream.native, std::move(keep_alive));
  return Status::Ok();
}

Status CudaBackend::Drain(StreamRef stream) {
  if (stream.native == nullptr) return Status::Ok();
  return api_->StreamSynchronize(stream.native);
}

Status CudaBackend::Quiesce() {
  const CallerStreams::Taken taken = caller_streams_.Take();  // operands dropped on return
  Status first;
  for (void* stream : taken.streams) {
    Status synced = Synchronize(stream);
    if (first.ok() && !synced.ok()) first = std::move(synced);
  }
  if (own_stream_ != nullptr) {
    std::lock_guard<std::recursive_mutex> lock(own_stream_mutex_);
    Status synced = Synchronize(own_stream_);
    if (first.ok() && !synced.ok()) first = std::move(synced);
  }
  return first;
}

Status CudaBackend::Put(StreamRef stream, std::uint64_t offset, const void* source,
                        std::uint64_t bytes, int pe, KeepAlive keep_alive) {
  if (bytes == 0) return Status::Ok();
  std::unique_lock<std::recursive_mutex> lock(own_stream_mutex_, std::defer_lock);
  if (stream.native == nullptr) lock.lock();
  HPS_RETURN_IF_ERROR(api_->MemcpyAsync(heap_[pe] + offset, source, bytes, Native(stream)));
  return Complete(stream, std::move(keep_alive));
}

Status CudaBackend::Get(StreamRef stream, void* destination, std::uint64_t offset,
                        std::uint64_t bytes, int pe, KeepAlive keep_alive) {
  if (bytes == 0) return Status::Ok();
  std::unique_lock<std::recursive_mutex> lock(own_stream_mutex_, std::defer_lock);
  if (stream.native == nullptr) lock.lock();
  HPS_RETURN_IF_ERROR(api_->MemcpyAsync(destination, heap_[pe] + offset, bytes, Native(stream)));
  return Complete(stream, std::move(keep_alive));
}

Status CudaBackend::Signal(StreamRef stream, std::uint64_t offset, SignalWidth width,
                           SignalOp op, std::int64_t value, int pe) {
  return PutSignal(stream, 0, nullptr, 0, offset, width, op, value, pe, nullptr);
}

Status CudaBackend::PutSignal(StreamRef stream, std::uint64_t offset, const void* source,
                              std::uint64_t bytes, std::uint64_t signal_offset,
                              SignalWidth width, SignalOp op, std::int64_t value, int pe,
                              KeepAlive keep_alive) {
  HPS_RETURN_IF_ERROR(SixtyFourBit(width));
  std::unique_lock<std::recursive_mutex> lock(own_stream_mutex_, std::defer_lock);
  if (stream.native == nullptr) lock.lock();
  void* native = Native(stream);
  // Stream order puts the data before the signal.
  if (bytes > 0) HPS_RETURN_IF_ERROR(api_->MemcpyAsync(heap_[pe] + offset, source, bytes, native));
  std::byte* word = heap_[pe] + signal_offset;
  HPS_RETURN_IF_ERROR(op == SignalOp::kAdd ? api_->AddValue64(native, word, value)
                                           : api_->WriteValue64(native, word, value));
  return Complete(stream, std::move(keep_alive));
}

Status CudaBackend::WaitSignal(StreamRef stream, std::uint64_t offset, SignalWidth width,
                               Comparison comparison, std::int64_t value) {
  HPS_RETURN_IF_ERROR(SixtyFourBit(width));
  if (stream.native == nullptr) {
    // The backend's stream is shared: a wait there must not hold it (another thread may be
    // about to send what it waits for), so it gets a stream of its own.
    void* waiting = nullptr;
    HPS_RETURN_IF_ERROR(api_->StreamCreate(&waiting));
    Status status =
        EnqueueWait(waiting, heap_[spec_.rank] + offset, comparison, value, "wait_signal");
    if (status.ok()) status = Synchronize(waiting);
    Status destroyed = api_->StreamDestroy(waiting);
    return status.ok() ? destroyed : status;
  }
  HPS_RETURN_IF_ERROR(
      EnqueueWait(stream.native, heap_[spec_.rank] + offset, comparison, value, "wait_signal"));
  return Complete(stream, nullptr);
}

Status CudaBackend::ExchangeDescriptors(const CollectiveDescriptor& mine,
                                        std::string_view operation,
                                        std::vector<CollectiveDescriptor>* all) {
  std::lock_guard<std::recursive_mutex> lock(own_stream_mutex_);
  DeviceControlOps ops;
  ops.put = [this](int pe, std::uint64_t offset, const void* row, std::uint64_t bytes) {
    return api_->MemcpyAsync(Control(pe, offset), row, bytes, own_stream_);
  };
  ops.set_flag = [this](int pe, std::uint64_t offset, std::int64_t value) {
    return api_->WriteValue64(own_stream_, Control(pe, offset), value);
  };
  ops.wait_flag = [this, operation](std::uint64_t offset, std::int64_t value, int from_pe) {
    return EnqueueWait(own_stream_, Control(spec_.rank, offset), Comparison::kGe, value,
                       std::string(operation) + " waiting for pe " + std::to_string(from_pe) +
                           "'s descriptor");
  };
  ops.read = [this](std::uint64_t offset, void* out, std::uint64_t bytes) {
    return api_->MemcpyAsync(out, Control(spec_.rank, offset), bytes, own_stream_);
  };
  ops.synchronize = [this] { return Synchronize(own_stream_); };
  return ExchangeThroughDeviceControl(mine, spec_.rank, spec_.size, layout_, ops, all);
}

Status CudaBackend::ExchangeAndMatch(const CollectiveDescriptor& mine,
                                     std::string_view operation) {
  std::vector<CollectiveDescriptor> all;
  Status exchanged = ExchangeDescriptors(mine, operation, &all);
  if (!exchanged.ok()) return Latch(std::move(exchanged));  // sequences out of step: terminal
  return MatchDescriptors(mine, all);
}

Status CudaBackend::Barrier(StreamRef stream, const CollectiveDescriptor& descriptor, KeepAlive) {
  HPS_RETURN_IF_ERROR(Drain(stream));
  return ExchangeAndMatch(descriptor, "barrier");
}

Status CudaBackend::RunKernel(void* stream, const Kernel& kernel) {
  KernelApiOnStream api(*this, stream);
  // A kernel's body may be captured into a CUDA graph: it may enqueue, not synchronise.
  CudaContextScope context(CudaContext::kCapturedOp);
  Status status = kernel(api);
  return status.ok() ? api.failure() : status;
}

Status CudaBackend::Launch(StreamRef stream, std::string_view name, Kernel kernel,
                           KeepAlive keep_alive) {
  std::unique_lock<std::recursive_mutex> lock(own_stream_mutex_, std::defer_lock);
  if (stream.native == nullptr) lock.lock();
  Status status = RunKernel(Native(stream), kernel);
  if (status.ok()) status = Complete(stream, std::move(keep_alive));
  return std::move(status).At(name, "execute");
}

Status CudaBackend::LaunchCollective(StreamRef stream, const CollectiveDescriptor& descriptor,
                                     std::string_view name, Kernel kernel, KeepAlive) {
  Status status = Drain(stream);
  if (status.ok()) status = ExchangeAndMatch(descriptor, name);
  if (status.ok()) {
    std::lock_guard<std::recursive_mutex> lock(own_stream_mutex_);
    status = RunKernel(own_stream_, kernel);
    if (status.ok()) status = Synchronize(own_stream_);
  }
  return std::move(status).At(name, "execute");
}

}  // namespace hyper_parallel::shmem::cuda
