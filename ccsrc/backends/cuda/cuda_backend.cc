#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "backends/cuda/call_sites.h"
#include "base/log.h"

namespace hyper_parallel::shmem::cuda {
namespace {

constexpr std::uint64_t kLine = DeviceControlLayout::kLine;

WaitComparison ToCuda(Comparison comparison) {
  return VendorComparison(comparison, WaitComparison::kEq, WaitComparison::kNe,
                          WaitComparison::kGt, WaitComparison::kGe, WaitComparison::kLt,
                          WaitComparison::kLe);
}

Status SixtyFourBit(SignalWidth width) {
  if (width == SignalWidth::k64) return Status::Ok();
  return Status::Contract(ErrorCode::kUnsupportedCapability, "signal width",
                          "64 on the CUDA backend (use an int64 signal)", "32");
}

}  // namespace

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
  BeginHeap(spec);
  HPS_RETURN_IF_ERROR(api_->GetDevice(&device_));
  HPS_RETURN_IF_ERROR(api_->DeviceUuid(device_, &uuid_));
  // Every kernel loaded before any wait can spin: a lazily loaded first launch would wait for
  // the spinning kernels (cuda_api.h, LoadKernels).
  HPS_RETURN_IF_ERROR(api_->LoadKernels());
  const std::uint64_t heap_bytes = RoundUp(spec.heap_bytes, kLine);
  HPS_RETURN_IF_ERROR(
      api_->Malloc(kHeapBaseAlignment + heap_bytes + layout().bytes, &allocation_));
  const auto start = reinterpret_cast<std::uintptr_t>(allocation_);
  base_offset_ = RoundUp(start, kHeapBaseAlignment) - start;
  std::string ipc;
  HPS_RETURN_IF_ERROR(api_->IpcExport(allocation_, &ipc));
  local_handle->assign(ipc);
  local_handle->append(reinterpret_cast<const char*>(&base_offset_), sizeof(base_offset_));
  handed_out_ = true;
  peers_closed_ = false;
  HPS_RETURN_IF_ERROR(api_->MallocHost(kWaitReports * sizeof(WaitReport), &reports_));
  auto* reports = static_cast<WaitReport*>(reports_);
  MutexLock lock(&pending_mutex_);
  for (int i = 0; i < kWaitReports; ++i) free_reports_.push_back(new (&reports[i]) WaitReport{});
  return Status::Ok();
}

Status CudaBackend::OpenPeers(const std::vector<std::string>& handles) {
  HPS_RETURN_IF_ERROR(OpenAgreement());  // collective: first, on every PE
  const std::uint64_t heap_bytes = RoundUp(spec().heap_bytes, kLine);
  heap_.assign(spec().size, nullptr);
  control_.assign(spec().size, nullptr);
  for (int pe = 0; pe < spec().size; ++pe) {
    std::byte* allocation = static_cast<std::byte*>(allocation_);
    std::uint64_t offset = base_offset_;
    if (pe != spec().rank) {
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
  void* stream = nullptr;
  HPS_RETURN_IF_ERROR(ThreadStream(&stream));
  const std::vector<std::byte> initial = layout().Initial();
  HPS_RETURN_IF_ERROR(
      api_->MemcpyAsync(control_[spec().rank], initial.data(), initial.size(), stream));
  return HostSynchronize(stream);
}

Status CudaBackend::ClosePeers() {
  Status first = Quiesce();  // nothing in flight may still touch a peer's heap
  for (void* opened : opened_) {
    if (Status closed = api_->IpcClose(opened); first.ok() && !closed.ok()) first = closed;
  }
  opened_.clear();
  return first;
}

Status CudaBackend::DestroyHeap() {
  CloseAgreement();
  if (allocation_ == nullptr && reports_ == nullptr && heap_.empty()) return ReleaseStreams();
  Status first;
  auto keep = [&first](Status status) {
    if (first.ok() && !status.ok()) first = std::move(status);
  };
  keep(Quiesce());
  keep(ReleaseStreams());
  for (void* opened : opened_) keep(api_->IpcClose(opened));
  opened_.clear();
  if (allocation_ != nullptr && handed_out_ && !peers_closed_) {
    // A peer may still have it open (a failed init, a terminal runtime: no barrier confirmed
    // otherwise), and freeing memory another process has open through IPC is undefined in
    // CUDA: it stays until this process ends.
    HPS_LOG_ERROR("the CUDA heap is kept until the process ends, not freed: peers may still "
                  "have it open (bytes=" +
                  std::to_string(RoundUp(spec().heap_bytes, kLine) + layout().bytes) + ")");
    allocation_ = nullptr;
  }
  if (allocation_ != nullptr) keep(api_->Free(allocation_));
  handed_out_ = peers_closed_ = false;
  if (reports_ != nullptr) keep(api_->FreeHost(reports_));
  allocation_ = reports_ = nullptr;
  {
    MutexLock lock(&pending_mutex_);
    free_reports_.clear();
    waits_.clear();
  }
  heap_.clear();
  control_.clear();
  if (!first.ok()) Latch(first);
  return first;
}

WaitInfo CudaBackend::Wait() const {
  WaitInfo info;
  info.mode = spec().wait;
  info.pinning = "none (waits run on the GPU)";
  return info;
}

std::string CudaBackend::StreamLabel(StreamRef stream) const {
  if (stream.native == nullptr) return "default (the backend's CUDA stream)";
  if (stream.native == CallerStream(nullptr).native) return "cuda legacy default stream";
  return "cuda stream " + Hex(stream.native);
}

Status CudaBackend::EnqueueWait(void* stream, const void* address, Comparison comparison,
                                std::int64_t value, std::string_view what) {
  // Reports come from a pool made at CreateHeap: a kernel's body may not allocate.
  WaitReport* report = nullptr;
  {
    MutexLock lock(&pending_mutex_);
    if (free_reports_.empty()) ReclaimPassedWaits();
    if (free_reports_.empty()) {
      return Status::Assertion(ErrorCode::kInvalidState,
                               "too many stream waits pending: synchronise the streams",
                               {{"pending_waits", std::to_string(waits_.size())}});
    }
    report = free_reports_.back();
    free_reports_.pop_back();
  }
  *report = WaitReport{};
  const auto timeout_ns = static_cast<std::uint64_t>(spec().timeout.count()) * 1'000'000ull;
  Status enqueued =
      api_->WaitValue64(stream, address, ToCuda(comparison), value, timeout_ns, report);
  MutexLock lock(&pending_mutex_);
  if (!enqueued.ok()) {
    free_reports_.push_back(report);
    return enqueued;
  }
  waits_.push_back(PendingWait{stream, report, std::string(what), address, comparison, value});
  return Status::Ok();
}

void CudaBackend::ReclaimPassedWaits() {
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
    MutexLock lock(&pending_mutex_);
    auto ran = std::stable_partition(waits_.begin(), waits_.end(),
                                     [stream](const PendingWait& w) { return w.stream != stream; });
    waits.assign(std::make_move_iterator(ran), std::make_move_iterator(waits_.end()));
    waits_.erase(ran, waits_.end());
  }
  for (const PendingWait& wait : waits) {
    if (wait.report->timed_out != 0 && status.ok()) {
      status = Status::Assertion(ErrorCode::kTimeout, wait.what + " timed out",
                                 {{"pe", std::to_string(spec().rank)},
                                  {"address", Hex(wait.address)},
                                  {"comparison", std::string(ComparisonName(wait.comparison))},
                                  {"expected", std::to_string(wait.expected)},
                                  {"observed", std::to_string(wait.report->observed)},
                                  {"timeout_ms", std::to_string(spec().timeout.count())}});
    }
  }
  MutexLock lock(&pending_mutex_);
  for (const PendingWait& wait : waits) free_reports_.push_back(wait.report);
  return status;
}

Status CudaBackend::EnqueuePut(void* stream, int pe, Region region, std::uint64_t offset,
                              const void* source, std::uint64_t bytes) {
  return api_->MemcpyAsync(Address(pe, region, offset), source, bytes, stream);
}

Status CudaBackend::EnqueueGet(void* stream, void* destination, int pe, Region region,
                              std::uint64_t offset, std::uint64_t bytes) {
  return api_->MemcpyAsync(destination, Address(pe, region, offset), bytes, stream);
}

Status CudaBackend::EnqueueSetWord(void* stream, int pe, Region region, std::uint64_t offset,
                                  std::int64_t value) {
  return api_->WriteValue64(stream, Address(pe, region, offset), value);
}

Status CudaBackend::EnqueueWaitAtLeast(void* stream, Region region, std::uint64_t offset,
                                      std::int64_t value, std::string_view what) {
  return EnqueueWait(stream, Address(spec().rank, region, offset), Comparison::kGe, value, what);
}

Status CudaBackend::EnqueueAddCounter(void* stream, int pe, std::uint64_t offset,
                                     std::int64_t value) {
  return api_->AddValue64(stream, Address(pe, Region::kHeap, offset), value);
}

Status CudaBackend::CheckSignal(SignalWidth width, std::int64_t) const {
  return SixtyFourBit(width);
}

Status CudaBackend::CheckWait(SignalWidth width, std::int64_t) const {
  return SixtyFourBit(width);
}

Status CudaBackend::EnqueueSignal(void* stream, int pe, std::uint64_t offset, SignalWidth,
                                 SignalOp op, std::int64_t value) {
  std::byte* word = Address(pe, Region::kHeap, offset);
  return op == SignalOp::kAdd ? api_->AddValue64(stream, word, value)
                              : api_->WriteValue64(stream, word, value);
}

Status CudaBackend::EnqueueWaitSignal(void* stream, std::uint64_t offset, SignalWidth,
                                     Comparison comparison, std::int64_t value) {
  return EnqueueWait(stream, Address(spec().rank, Region::kHeap, offset), comparison, value,
                     "wait_signal");
}

// A batch (all_gather's chunks) is one copy kernel per kCopyBlocksPerLaunch blocks, its thread
// blocks spread over the SMs, instead of one cudaMemcpyAsync per block.
Status CudaBackend::EnqueuePutBatch(void* stream, std::span<const data_plane::BlockPut> puts) {
  std::vector<CopyBlock> blocks;
  blocks.reserve(puts.size());
  for (const data_plane::BlockPut& put : puts) {
    if (put.bytes == 0) continue;
    blocks.push_back({Address(put.pe, Region::kHeap, put.offset), put.source, put.bytes});
  }
  if (blocks.empty()) return Status::Ok();
  return api_->CopyBlocksAsync(stream, blocks.data(), blocks.size());
}

// MegaMoE's chunks and their signals: per kCopyBlocksPerLaunch blocks, one copy kernel and one
// kernel of their additions, instead of a cudaMemcpyAsync and an add kernel per chunk.
Status CudaBackend::EnqueuePutBatchSignalled(void* stream,
                                            std::span<const data_plane::SignalledPut> puts) {
  std::vector<SignalledCopyBlock> blocks;
  blocks.reserve(puts.size());
  for (const data_plane::SignalledPut& put : puts) {
    blocks.push_back({Address(put.pe, Region::kHeap, put.offset), put.source, put.bytes,
                      Address(put.pe, Region::kHeap, put.counter_offset), put.add});
  }
  if (blocks.empty()) return Status::Ok();
  return api_->CopyBlocksAndAddAsync(stream, blocks.data(), blocks.size());
}

}  // namespace hyper_parallel::shmem::cuda
