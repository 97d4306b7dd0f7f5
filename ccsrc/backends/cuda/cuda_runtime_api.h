// CudaRuntimeApi: the CudaApi of the real CUDA runtime (built only when a CUDA toolkit is found).
//
// Each method makes one CUDA runtime call, or launches one of the kernels of cuda_kernels.h
// (CopyBlocksAsync: several), and maps a failure to BACKEND_ERROR "CUDA call failed:
// call=<call>, error=<cudaErrorName>, message=<cudaGetErrorString>". This header includes no
// CUDA header; only cuda_runtime_api.cc and cuda_kernels.cu do.
//
// How the calls map:
//   Malloc/Free             cudaMalloc/cudaFree
//   MallocHost/FreeHost     cudaHostAlloc(cudaHostAllocMapped)/cudaFreeHost; kernels use the
//                           host pointer itself (unified addressing, checked at allocation)
//   IpcExport/Open/Close    cudaIpcGetMemHandle (64 bytes), cudaIpcOpenMemHandle(lazy peer
//                           access), cudaIpcCloseMemHandle. CUDA refuses to open a handle in
//                           the process that exported it, so a handle this object exported
//                           opens as the exported pointer itself (counted; IpcClose of it only
//                           drops the count).
//   StreamCreate            cudaStreamCreateWithFlags(cudaStreamNonBlocking): no implicit
//                           synchronisation with the legacy default stream (a null stream)
//   MemcpyAsync             cudaMemcpyAsync(cudaMemcpyDefault)
//   CopyBlocksAsync         the copy kernel, one launch per kCopyBlocksPerLaunch blocks, after
//                           cudaPointerGetAttributes of each pointer (once per device
//                           allocation and call: the driver's cuPointerGetAttributes gives its
//                           address range); a block with a pointer the device cannot address
//                           (pageable host memory) goes through cudaMemcpyAsync instead
//   CopyBlocksAndAddAsync   per kCopyBlocksPerLaunch blocks: CopyBlocksAsync for their bytes,
//                           then one add kernel (a thread per addition: __threadfence_system,
//                           atomicAdd_system) on the counters as given
//   WriteValue64            cuStreamWriteValue64, fetched at construction through
//                           cudaGetDriverEntryPointByVersion (nothing links libcuda.so); a
//                           one-thread store kernel where the driver lacks it or refuses it,
//                           whatever the refusal (write_value.h)
//   AddValue64              a one-thread kernel: __threadfence_system, then atomicAdd_system
//   WaitValue64             a one-thread polling kernel bounded by %globaltimer that fills the
//                           WaitReport and returns when the timeout passes (cuda_kernels.h)
//   ElementwiseAsync        the reductions' grid-stride kernel (cuda_reduce.cu)
//
// Thread-safety: like the CUDA runtime, any thread may call any method; the current device is
// the calling thread's. The table of exported handles takes a mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "backends/cuda/cuda_api.h"
#include "base/mutex.h"

namespace hyper_parallel::shmem::cuda {

class CudaRuntimeApi final : public CudaApi {
 public:
  /// Made by MakeCudaRuntimeApi once a device is known to be visible. `write_value64` is the
  /// driver's cuStreamWriteValue64 (null: use the store kernel); `pointer_attributes` its
  /// cuPointerGetAttributes (null: CopyBlocksAsync asks the runtime about every pointer).
  CudaRuntimeApi(void* write_value64, void* pointer_attributes);
  ~CudaRuntimeApi() override = default;

  std::string_view name() const override { return "cuda"; }

  Status GetDevice(int* device) const override;
  Status SetDevice(int device) override;
  Status DeviceUuid(int device, std::string* uuid) const override;

  Status Malloc(std::size_t bytes, void** ptr) override;
  Status Free(void* ptr) override;
  Status MallocHost(std::size_t bytes, void** ptr) override;
  Status FreeHost(void* ptr) override;
  Status IpcExport(void* ptr, std::string* handle) override;
  Status IpcOpen(const std::string& handle, void** ptr) override;
  Status IpcClose(void* ptr) override;

  Status StreamCreate(void** stream) override;
  Status StreamDestroy(void* stream) override;
  Status StreamSynchronize(void* stream) override;
  Status MemcpyAsync(void* dst, const void* src, std::size_t bytes, void* stream) override;
  Status CopyBlocksAsync(void* stream, const CopyBlock* blocks, std::size_t count) override;
  Status CopyBlocksAndAddAsync(void* stream, const SignalledCopyBlock* blocks,
                               std::size_t count) override;
  Status LoadKernels() override;
  Status WriteValue64(void* stream, void* address, std::int64_t value) override;
  Status AddValue64(void* stream, void* address, std::int64_t value) override;
  Status ElementwiseAsync(void* stream, const data_plane::ElementwiseStep& step) override;
  Status WaitValue64(void* stream, const void* address, WaitComparison comparison,
                     std::int64_t value, std::uint64_t timeout_ns, WaitReport* report) override;

 private:
  void* const write_value64_;       // PFN_cuStreamWriteValue64, or null
  void* const pointer_attributes_;  // PFN_cuPointerGetAttributes, or null

  Mutex mutex_;
  std::map<std::string, void*> exported_ GUARDED_BY(mutex_);  // handle bytes -> pointer
  std::map<void*, int> self_opened_ GUARDED_BY(mutex_);  // exported pointers opened here
                                                          // -> open count
};

}  // namespace hyper_parallel::shmem::cuda
