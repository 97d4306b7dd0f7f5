// CudaBackend: the runtime's Backend on CUDA GPUs, through the CudaApi interface (cuda_api.h).
//
// Heap: each PE allocates its heap and a small control block as one device allocation (over-
// allocated so the heap starts kHeapBaseAlignment-aligned), exports it as a CUDA IPC handle
// (its local handle), and opens every peer's; several PEs may share one GPU. Heap offsets are
// offsets from the aligned base, in every PE's mapping.
//
// Streams: StreamRef{null} is the backend's own CUDA stream; an operation on it is enqueued and
// then synchronised before the call returns (RunsInline), like the host backend's default
// stream. Any other StreamRef is a cudaStream_t of the caller's (torch.cuda.current_stream()):
// operations are only enqueued, local operands are kept alive until Quiesce, and a wait that
// gives up on such a stream is reported by the next Quiesce. Puts and gets are asynchronous
// copies (a kernel's batch of puts, as all_gather makes, is one multi-block copy kernel per 64
// blocks); signals are 64-bit words: set with a stream write, add with a one-thread kernel
// (system-scope release); waits are a polling kernel that gives up after the timeout and reports
// what it saw instead of trapping. Collectives (barrier, the descriptor exchange, all_gather)
// run on the backend's stream after synchronising the caller's: each PE writes its descriptor
// row into every PE's control block, raises its flag there, waits for every flag, and matches
// the rows on the host.
//
// Signal words are 64-bit here (a 32-bit signal is UNSUPPORTED_CAPABILITY). Device identity:
// index and UUID of the current device, frozen at CreateHeap; the Runtime rejects a different
// current device (DEVICE_MISMATCH). A lost peer process is not watched: waits end with their
// TIMEOUT.
//
// Thread-safety: as Backend. Work on the backend's own stream is serialised by a mutex.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/device_control.h"
#include "backends/failure_latch.h"
#include "backends/cuda/cuda_api.h"

namespace hyper_parallel::shmem::cuda {

/// The StreamRef of a caller's CUDA stream given by its handle. The handle of the legacy default
/// stream (torch's default stream) is null, which as a StreamRef would mean the backend's own
/// stream; it becomes cudaStreamLegacy ((cudaStream_t)0x1), so work on it stays in order with
/// the caller's default-stream work.
inline StreamRef CallerStream(void* handle) {
  return StreamRef{handle != nullptr ? handle : reinterpret_cast<void*>(std::uintptr_t{1})};
}

class CudaBackend final : public Backend {
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
  std::byte* LocalHeapBase() const override { return heap_.empty() ? nullptr : heap_[spec_.rank]; }
  bool HostAddressableHeap() const override { return api_->HostAddressableMemory(); }

  Status ExchangeDescriptors(const CollectiveDescriptor& mine, std::string_view operation,
                             std::vector<CollectiveDescriptor>* all) override;
  Status Quiesce() override;
  StreamRef CurrentStream() const override { return StreamRef{}; }
  bool RunsInline(StreamRef stream) const override { return stream.native == nullptr; }
  WaitInfo Wait() const override;
  std::string StreamLabel(StreamRef stream) const override;
  Status Health() const override;

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
  Status Barrier(StreamRef stream, const CollectiveDescriptor& descriptor,
                 KeepAlive keep_alive) override;
  Status Launch(StreamRef stream, std::string_view name, Kernel kernel,
                KeepAlive keep_alive) override;
  Status LaunchCollective(StreamRef stream, const CollectiveDescriptor& descriptor,
                          std::string_view name, Kernel kernel, KeepAlive keep_alive) override;

  /// The frozen device's UUID (32 hex digits; empty before CreateHeap).
  const std::string& device_uuid() const { return uuid_; }

 private:
  class KernelApiOnStream;
  struct PendingWait {
    void* stream = nullptr;
    WaitReport* report = nullptr;
    std::string what;  // "wait_signal", "moe combine waiting for ..."
    const void* address = nullptr;
    Comparison comparison = Comparison::kEq;
    std::int64_t expected = 0;
  };

  void* Native(StreamRef stream) const { return stream.native ? stream.native : own_stream_; }
  std::byte* Control(int pe, std::uint64_t offset) const { return control_[pe] + offset; }
  // A wait on `stream` whose report is checked when the stream is synchronised.
  Status EnqueueWait(void* stream, const void* address, Comparison comparison,
                     std::int64_t value, std::string what);
  // Synchronises `stream` and turns a wait that gave up on it into TIMEOUT.
  Status Synchronize(void* stream);
  // Frees the records of waits that passed (pending_mutex_ held).
  void ReclaimPassedWaitsLocked();
  // After enqueuing on `stream`: synchronises the backend's own stream, or keeps `keep_alive`
  // until Quiesce for a caller's stream.
  Status Complete(StreamRef stream, KeepAlive keep_alive);
  Status Drain(StreamRef stream);
  Status ExchangeAndMatch(const CollectiveDescriptor& mine, std::string_view operation);
  Status RunKernel(void* stream, const Kernel& kernel);
  Status Latch(Status failure);

  std::unique_ptr<CudaApi> api_;
  HeapSpec spec_;
  DeviceControlLayout layout_;
  int device_ = -1;
  std::string uuid_;
  void* allocation_ = nullptr;       // this PE's device allocation
  std::uint64_t base_offset_ = 0;    // aligned heap base inside it
  std::vector<std::byte*> heap_;     // every PE's heap base, as mapped here
  std::vector<std::byte*> control_;  // every PE's control block, as mapped here
  std::vector<void*> opened_;        // peers' allocations opened through IPC
  void* own_stream_ = nullptr;
  std::recursive_mutex own_stream_mutex_;
  CallerStreams caller_streams_;     // queued on since the last Quiesce
  std::mutex pending_mutex_;         // guards the waits and the free reports
  std::vector<PendingWait> waits_;   // reports of waits not yet checked
  // Host-mapped wait reports, made once (a kernel's body may not allocate).
  static constexpr int kWaitReports = 1024;
  void* reports_ = nullptr;
  std::vector<WaitReport*> free_reports_;
  FailureLatch terminal_;
};

}  // namespace hyper_parallel::shmem::cuda
