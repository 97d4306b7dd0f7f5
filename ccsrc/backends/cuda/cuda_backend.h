// CudaBackend: the runtime's Backend on CUDA GPUs, through the CudaApi interface (cuda_api.h).
//
// Heap: each PE allocates its heap and a small control block as one device allocation (over-
// allocated so the heap starts kHeapBaseAlignment-aligned), exports it as a CUDA IPC handle
// (its local handle), and opens every peer's; several PEs may share one GPU. Heap offsets are
// offsets from the aligned base, in every PE's mapping.
//
// Streams and collectives are the device-backend skeleton's (backends/device_backend.h): each
// thread's default-stream work runs on a CUDA stream of its own and is synchronised before the
// call returns; a caller's stream (torch.cuda.current_stream()) is only enqueued on. Puts and
// gets are asynchronous copies (a kernel's batch of puts, as all_gather makes, is one
// multi-block copy kernel per 64 blocks); signals are 64-bit words: set with a stream write,
// add with a one-thread kernel (system-scope release); waits are a polling kernel that gives up
// after the timeout and reports what it saw instead of trapping.
//
// Signal words are 64-bit here (a 32-bit signal is UNSUPPORTED_CAPABILITY). Device identity:
// index and UUID of the current device, frozen at CreateHeap; the Runtime rejects a different
// current device (DEVICE_MISMATCH). A lost peer process is not watched: waits end with their
// TIMEOUT.
//
// Thread-safety: as Backend. The wait records have a mutex of their own, held only to take or
// give back a record, never across a CUDA call that waits.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "backends/cuda/cuda_api.h"
#include "backends/device_backend.h"
#include "base/mutex.h"

namespace hyper_parallel::shmem::cuda {

/// The StreamRef of a caller's CUDA stream given by its handle. The handle of the legacy default
/// stream (torch's default stream) is null, which as a StreamRef would mean the backend's own
/// stream; it becomes cudaStreamLegacy ((cudaStream_t)0x1), so work on it stays in order with
/// the caller's default-stream work.
inline StreamRef CallerStream(void* handle) {
  return StreamRef{handle != nullptr ? handle : reinterpret_cast<void*>(std::uintptr_t{1})};
}

class CudaBackend final : public DeviceBackend {
 public:
  /// A backend over `api` (the real CUDA runtime, or a fake in tests).
  explicit CudaBackend(std::unique_ptr<CudaApi> api);
  ~CudaBackend() override;

  /// Whether the CUDA runtime is usable here (the registry's availability check).
  static Status Available();

  std::string_view name() const override { return "cuda"; }
  DeviceId CurrentDevice() const override;

  Status CreateHeap(const HeapSpec& spec, std::string* local_handle) override;
  Status OpenPeers(const std::vector<std::string>& handles) override;
  Status DestroyHeap() override;
  // Peers open this PE's heap through IPC: it is freed only after every PE closed its mappings.
  bool PeersMapTheHeap() const override { return true; }
  Status ClosePeers() override;
  void PeersClosed() override { peers_closed_ = true; }
  std::byte* LocalHeapBase() const override {
    return heap_.empty() ? nullptr : heap_[spec().rank];
  }
  bool HostAddressableHeap() const override { return api_->HostAddressableMemory(); }
  WaitInfo Wait() const override;
  std::string StreamLabel(StreamRef stream) const override;

  /// The frozen device's UUID (32 hex digits; empty before CreateHeap).
  const std::string& device_uuid() const { return uuid_; }

 protected:
  Status CreateStream(void** stream) override { return api_->StreamCreate(stream); }
  Status DestroyStream(void* stream) override { return api_->StreamDestroy(stream); }
  Status Synchronize(void* stream) override EXCLUDES(pending_mutex_);
  Status EnqueuePut(void* stream, int pe, Region region, std::uint64_t offset,
                    const void* source, std::uint64_t bytes) override;
  Status EnqueueGet(void* stream, void* destination, int pe, Region region,
                    std::uint64_t offset, std::uint64_t bytes) override;
  Status EnqueueSetWord(void* stream, int pe, Region region, std::uint64_t offset,
                        std::int64_t value) override;
  Status EnqueueWaitAtLeast(void* stream, Region region, std::uint64_t offset,
                            std::int64_t value, std::string_view what) override;
  Status EnqueueAddCounter(void* stream, int pe, std::uint64_t offset,
                           std::int64_t value) override;
  Status CheckSignal(SignalWidth width, std::int64_t value) const override;
  Status CheckWait(SignalWidth width, std::int64_t value) const override;
  Status EnqueueSignal(void* stream, int pe, std::uint64_t offset, SignalWidth width,
                       SignalOp op, std::int64_t value) override;
  Status EnqueueWaitSignal(void* stream, std::uint64_t offset, SignalWidth width,
                           Comparison comparison, std::int64_t value) override;
  Status EnqueuePutBatch(void* stream, std::span<const data_plane::BlockPut> puts) override;
  bool ComputesElementwise() const override { return true; }
  Status EnqueueElementwise(void* stream, const data_plane::ElementwiseStep& step) override {
    return api_->ElementwiseAsync(stream, step);
  }
  Status EnqueuePutBatchSignalled(void* stream,
                                  std::span<const data_plane::SignalledPut> puts) override;

 private:
  struct PendingWait {
    void* stream = nullptr;
    WaitReport* report = nullptr;
    std::string what;  // "wait_signal", "moe combine waiting for ..."
    const void* address = nullptr;
    Comparison comparison = Comparison::kEq;
    std::int64_t expected = 0;
  };

  // The address of `offset` in `region` of PE `pe`, as mapped here.
  std::byte* Address(int pe, Region region, std::uint64_t offset) const {
    return (region == Region::kHeap ? heap_[pe] : control_[pe]) + offset;
  }
  // A wait on `stream` whose report is checked when the stream is synchronised.
  Status EnqueueWait(void* stream, const void* address, Comparison comparison,
                     std::int64_t value, std::string_view what) EXCLUDES(pending_mutex_);
  // Frees the records of waits that passed.
  void ReclaimPassedWaits() REQUIRES(pending_mutex_);

  std::unique_ptr<CudaApi> api_;
  int device_ = -1;
  std::string uuid_;
  void* allocation_ = nullptr;       // this PE's device allocation
  std::uint64_t base_offset_ = 0;    // aligned heap base inside it
  std::vector<std::byte*> heap_;     // every PE's heap base, as mapped here
  std::vector<std::byte*> control_;  // every PE's control block, as mapped here
  std::vector<void*> opened_;        // peers' allocations opened through IPC
  // The heap's handle was handed out (CreateHeap returned it): peers may have opened it.
  bool handed_out_ = false;
  // Every PE closed its mappings of this heap (the Runtime's word, after its barrier).
  bool peers_closed_ = false;
  Mutex pending_mutex_;
  std::vector<PendingWait> waits_ GUARDED_BY(pending_mutex_);  // reports not yet checked
  // Host-mapped wait reports, made once (a kernel's body may not allocate).
  static constexpr int kWaitReports = 1024;
  void* reports_ = nullptr;
  std::vector<WaitReport*> free_reports_ GUARDED_BY(pending_mutex_);
};

}  // namespace hyper_parallel::shmem::cuda
