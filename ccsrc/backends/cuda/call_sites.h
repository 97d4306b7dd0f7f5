// Where each CUDA call of the CUDA backend may be made, as a table in the shared call-site
// vocabulary (backends/call_sites.h), and a CudaApi that enforces it.
//
// Sites: a host thread may make every call. A custom op (a torch custom op, or a kernel body
// the backend runs in stream order, which may run while a CUDA graph is being captured on its
// stream) may only enqueue: copies, batched copies, stream writes, adds and waits; allocating,
// opening IPC handles, making or destroying streams and synchronising are refused there (they
// are illegal during capture, and a synchronise would also stall the op's stream). A stream
// callback (cudaLaunchHostFunc) may make no CUDA call at all. The device-backend skeleton runs
// kernels' bodies in the custom-op site; CheckedCudaApi refuses a call outside its allowed
// sites with UNSUPPORTED_CAPABILITY before it reaches CUDA.
//
// Thread-safety: the table is constant; the site is per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "backends/call_sites.h"
#include "backends/cuda/cuda_api.h"

namespace hyper_parallel::shmem::cuda {

/// The sites the table speaks of, for iteration.
inline constexpr CallSite kCudaSites[] = {CallSite::kHostThread, CallSite::kCustomOp,
                                          CallSite::kStreamCallback};

/// The CudaApi methods, one entry each.
enum class CudaCall : std::uint8_t {
  kGetDevice, kSetDevice, kDeviceUuid, kLoadKernels, kMalloc, kFree, kMallocHost, kFreeHost, kIpcExport,
  kIpcOpen, kIpcClose, kStreamCreate, kStreamDestroy, kStreamSynchronize, kMemcpyAsync,
  kCopyBlocksAsync, kCopyBlocksAndAddAsync, kWriteValue64, kAddValue64, kWaitValue64,
  kElementwiseAsync, kCount,
};

struct CudaCallRule {
  CudaCall call;
  std::string_view name;  ///< the CUDA call it makes
  CallSites sites;
};

inline constexpr CallSites kHostOnly = Sites(CallSite::kHostThread);
inline constexpr CallSites kEnqueue = Sites(CallSite::kHostThread, CallSite::kCustomOp);

/// Indexed by CudaCall.
inline constexpr CudaCallRule kCudaCallRules[] = {
    {CudaCall::kGetDevice, "cudaGetDevice", kEnqueue},  // a lookup, legal during capture
    {CudaCall::kSetDevice, "cudaSetDevice", kHostOnly},
    {CudaCall::kDeviceUuid, "cudaGetDeviceProperties", kHostOnly},
    {CudaCall::kLoadKernels, "cudaFuncGetAttributes", kHostOnly},
    {CudaCall::kMalloc, "cudaMalloc", kHostOnly},
    {CudaCall::kFree, "cudaFree", kHostOnly},
    {CudaCall::kMallocHost, "cudaHostAlloc", kHostOnly},
    {CudaCall::kFreeHost, "cudaFreeHost", kHostOnly},
    {CudaCall::kIpcExport, "cudaIpcGetMemHandle", kHostOnly},
    {CudaCall::kIpcOpen, "cudaIpcOpenMemHandle", kHostOnly},
    {CudaCall::kIpcClose, "cudaIpcCloseMemHandle", kHostOnly},
    {CudaCall::kStreamCreate, "cudaStreamCreateWithFlags", kHostOnly},
    {CudaCall::kStreamDestroy, "cudaStreamDestroy", kHostOnly},
    {CudaCall::kStreamSynchronize, "cudaStreamSynchronize", kHostOnly},
    {CudaCall::kMemcpyAsync, "cudaMemcpyAsync", kEnqueue},
    {CudaCall::kCopyBlocksAsync, "the copy kernel", kEnqueue},
    {CudaCall::kCopyBlocksAndAddAsync, "the copy kernel and the add kernel", kEnqueue},
    {CudaCall::kWriteValue64, "cuStreamWriteValue64", kEnqueue},
    {CudaCall::kAddValue64, "the add kernel", kEnqueue},
    {CudaCall::kWaitValue64, "the wait kernel", kEnqueue},
    {CudaCall::kElementwiseAsync, "the reduction kernel", kEnqueue},
};

constexpr bool CudaTableIsIndexedByCall() {
  for (int i = 0; i < static_cast<int>(CudaCall::kCount); ++i) {
    if (static_cast<int>(kCudaCallRules[i].call) != i) return false;
  }
  return std::size(kCudaCallRules) == static_cast<std::size_t>(CudaCall::kCount);
}
static_assert(CudaTableIsIndexedByCall(), "one rule per CudaCall, in order");

constexpr bool IsCallable(CudaCall call, CallSite site) {
  return Allows(kCudaCallRules[static_cast<int>(call)].sites, site);
}

/// UNSUPPORTED_CAPABILITY naming the call and the site (as `context`) when the table refuses
/// it.
Status CheckCudaCall(CudaCall call, CallSite site);

/// A CudaApi that checks every call against the table for the calling thread's site, then
/// forwards it to `inner`.
std::unique_ptr<CudaApi> CheckedCudaApi(std::unique_ptr<CudaApi> inner);

}  // namespace hyper_parallel::shmem::cuda
