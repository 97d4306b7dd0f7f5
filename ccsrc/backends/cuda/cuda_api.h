// CudaApi: every CUDA call the CUDA backend makes, as one interface.
//
// The backend (cuda_backend.h) is written against this interface only. Two implementations:
//   - the real one (cuda_runtime_api.h; cuda_runtime_api.cc and cuda_kernels.cu), the only code
//     that includes CUDA headers, built when a CUDA toolkit is found;
//   - a fake (testing/fake_cuda/) that models device memory as host shared memory, IPC handles
//     as file descriptors of the owning process, and streams that run each operation when it is
//     enqueued, so the backend's logic is unit-tested on machines without a GPU.
//
// Pointers are device pointers (the fake's are host addresses). Streams are opaque
// (cudaStream_t). Every method maps a failure to a Status: BACKEND_ERROR naming the CUDA call
// and its error (TIMEOUT where a wait kernel reported one).
//
// Thread-safety: like the CUDA runtime: any thread may call any method; work on one stream runs
// in the order it was enqueued.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"
#include "data_plane/elementwise.h"

namespace hyper_parallel::shmem::cuda {

/// Comparisons a stream wait supports (the backend's Comparison, in CUDA's terms).
enum class WaitComparison : std::uint8_t { kEq, kNe, kGt, kGe, kLt, kLe };

/// One copy of a CopyBlocksAsync batch.
struct CopyBlock {
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
};

/// One block of a CopyBlocksAndAddAsync batch: a copy, then `add` added to the 64-bit word at
/// `counter` once this block's bytes have landed.
struct SignalledCopyBlock {
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;     ///< 0: the addition alone
  void* counter = nullptr;   ///< 8-byte aligned
  std::int64_t add = 0;
};

/// The most blocks one launch of the copy kernel carries (its descriptors travel by value in
/// the kernel's parameters); CopyBlocksAsync splits a larger batch into several launches.
inline constexpr std::size_t kCopyBlocksPerLaunch = 64;

/// Where a stream wait that gave up records what it saw: the backend passes a small host-mapped
/// (or, in the fake, host) record per wait; the implementation fills it when the wait times out
/// and the backend reads it after synchronising the stream. Whatever the outcome, the wait
/// stores 1 to `finished` last (a release store), so the backend can reuse the record of a
/// wait that passed without synchronising its stream.
struct WaitReport {
  std::uint64_t timed_out = 0;  ///< nonzero: the wait gave up
  std::int64_t observed = 0;    ///< the word's value when it gave up
  std::uint64_t finished = 0;   ///< nonzero: the wait is over (passed or gave up)
};

class CudaApi {
 public:
  virtual ~CudaApi() = default;

  /// "cuda" for the real runtime, "fake" for the test double.
  virtual std::string_view name() const = 0;

  /// True when memory from Malloc is host memory this process may read and write directly
  /// (the fake's); device memory is not.
  virtual bool HostAddressableMemory() const { return false; }

  // ---- device ---------------------------------------------------------------------------
  /// cudaGetDevice.
  virtual Status GetDevice(int* device) const = 0;
  /// cudaSetDevice.
  virtual Status SetDevice(int device) = 0;
  /// The device's UUID as 32 hex digits (cudaGetDeviceProperties().uuid).
  virtual Status DeviceUuid(int device, std::string* uuid) const = 0;
  /// Loads every kernel this layer launches into the current device's context now
  /// (cudaFuncGetAttributes of each). Since CUDA 12.2 kernels load lazily, at their first
  /// launch, and that load may wait for the kernels already running on the device: the first
  /// signal launched while a wait kernel spins for it would wait for that wait to give up. The
  /// backend calls this when it makes its heap, before any wait.
  virtual Status LoadKernels() = 0;

  // ---- memory ---------------------------------------------------------------------------
  /// cudaMalloc of device memory that can be exported to other processes.
  virtual Status Malloc(std::size_t bytes, void** ptr) = 0;
  /// cudaFree.
  virtual Status Free(void* ptr) = 0;
  /// cudaMallocHost: pinned host memory the device can write (wait reports).
  virtual Status MallocHost(std::size_t bytes, void** ptr) = 0;
  /// cudaFreeHost.
  virtual Status FreeHost(void* ptr) = 0;
  /// cudaIpcGetMemHandle: bytes a process of the same node opens with IpcOpen.
  virtual Status IpcExport(void* ptr, std::string* handle) = 0;
  /// cudaIpcOpenMemHandle (lazy peer access); several PEs may share one GPU.
  virtual Status IpcOpen(const std::string& handle, void** ptr) = 0;
  /// cudaIpcCloseMemHandle.
  virtual Status IpcClose(void* ptr) = 0;

  // ---- streams --------------------------------------------------------------------------
  virtual Status StreamCreate(void** stream) = 0;
  virtual Status StreamDestroy(void* stream) = 0;
  /// cudaStreamSynchronize: reports failures of work queued on it.
  virtual Status StreamSynchronize(void* stream) = 0;
  /// cudaMemcpyAsync with cudaMemcpyDefault (unified addressing tells the direction).
  virtual Status MemcpyAsync(void* dst, const void* src, std::size_t bytes, void* stream) = 0;
  /// Copies every block of `blocks[0, count)` after the stream's earlier work and before its
  /// later work, in any order and in parallel: one launch of a kernel of several thread blocks
  /// per kCopyBlocksPerLaunch blocks, instead of one cudaMemcpyAsync per block. Each pointer
  /// may be device memory, memory opened through IPC or host memory the device can address
  /// (MallocHost); a block with a pointer the device cannot address (pageable host memory) is
  /// copied with cudaMemcpyAsync on the same stream instead. Zero-byte blocks do nothing.
  /// Destinations must be disjoint from one another and from every source, but a block's
  /// own identical one (the blocks run concurrently). (A pointer and a count, not a span: the
  /// kernels are compiled as C++17.)
  virtual Status CopyBlocksAsync(void* stream, const CopyBlock* blocks, std::size_t count) = 0;
  /// Copies every block of `blocks[0, count)` and, after each block's bytes have landed (and are
  /// visible system-wide), atomically adds its `add` to its `counter` (MegaMoE's chunks and
  /// their signals): per kCopyBlocksPerLaunch blocks, the copy kernel of CopyBlocksAsync, then
  /// one kernel of their additions. Blocks and additions run in any order relative to one
  /// another, after the stream's earlier work and before its later work. A block with a pointer the device cannot
  /// address is a cudaMemcpyAsync then an AddValue64 on the same stream instead. Destinations
  /// must be disjoint from one another and from the sources.
  virtual Status CopyBlocksAndAddAsync(void* stream, const SignalledCopyBlock* blocks,
                                       std::size_t count) = 0;
  /// Writes `value` to the 64-bit word at `address` after the stream's earlier work, visible to
  /// other processes (cuStreamWriteValue64).
  virtual Status WriteValue64(void* stream, void* address, std::int64_t value) = 0;
  /// Atomically adds `value` to the 64-bit word at `address` after the stream's earlier work,
  /// with system-scope release (a one-thread kernel).
  virtual Status AddValue64(void* stream, void* address, std::int64_t value) = 0;
  /// Makes the stream wait until the 64-bit word at `address` satisfies `comparison` against
  /// `value` (a polling kernel). It gives up after `timeout_ns` and fills `report` (host
  /// memory from MallocHost) instead of trapping; the stream then runs on.
  virtual Status WaitValue64(void* stream, const void* address, WaitComparison comparison,
                             std::int64_t value, std::uint64_t timeout_ns,
                             WaitReport* report) = 0;
  /// Enqueues one element-wise step of a reduction (data_plane/elementwise.h) over
  /// device-addressable memory, pointers aligned to their element type: the reductions' kernel
  /// (cuda_reduce.cu); the fake runs it on the CPU.
  virtual Status ElementwiseAsync(void* stream, const data_plane::ElementwiseStep& step) = 0;
};

/// The real CUDA runtime (null with UNSUPPORTED_CAPABILITY in a build without CUDA, or when this
/// machine has no device; null with BACKEND_ERROR when a driver or device is present but the
/// runtime cannot use it: device_probe.h).
Status MakeCudaRuntimeApi(std::unique_ptr<CudaApi>* out);

}  // namespace hyper_parallel::shmem::cuda
