// Where each CUDA call of the CUDA backend may be made, as a table, and a CudaApi that enforces
// it.
//
// Contexts: a host thread may make every call. A captured op (a torch custom op or a kernel body
// that may run while a CUDA graph is being captured on its stream) may only enqueue: copies,
// batched copies, stream writes, adds and waits; allocating, opening IPC handles, making or
// destroying streams and synchronising are refused there (they are illegal during capture, and
// a synchronise would also stall the op's stream). A host callback (cudaLaunchHostFunc) may make no CUDA call at
// all. The backend runs kernels' bodies in the captured-op context; CheckedCudaApi refuses a
// call outside its allowed contexts with UNSUPPORTED_CAPABILITY before it reaches CUDA.
//
// Thread-safety: the table is constant; the context is per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "backends/cuda/cuda_api.h"

namespace hyper_parallel::shmem::cuda {

enum class CudaContext : std::uint8_t {
  kHostThread = 1u << 0,
  kCapturedOp = 1u << 1,
  kHostCallback = 1u << 2,
};

/// Every context, for iteration.
inline constexpr CudaContext kAllCudaContexts[] = {CudaContext::kHostThread,
                                                    CudaContext::kCapturedOp,
                                                    CudaContext::kHostCallback};

/// The CudaApi methods, one entry each.
enum class CudaCall : std::uint8_t {
  kGetDevice, kSetDevice, kDeviceUuid, kMalloc, kFree, kMallocHost, kFreeHost, kIpcExport,
  kIpcOpen, kIpcClose, kStreamCreate, kStreamDestroy, kStreamSynchronize, kMemcpyAsync,
  kCopyBlocksAsync, kCopyBlocksAndAddAsync, kWriteValue64, kAddValue64, kWaitValue64, kCount,
};

struct CudaCallRule {
  CudaCall call;
  std::string_view name;  ///< the CUDA call it makes
  std::uint8_t contexts;  ///< CudaContext bits
};

inline constexpr std::uint8_t kHostOnly = static_cast<std::uint8_t>(CudaContext::kHostThread);
inline constexpr std::uint8_t kEnqueue =
    kHostOnly | static_cast<std::uint8_t>(CudaContext::kCapturedOp);

/// Indexed by CudaCall.
inline constexpr CudaCallRule kCudaCallRules[] = {
    {CudaCall::kGetDevice, "cudaGetDevice", kEnqueue},  // a lookup, legal during capture
    {CudaCall::kSetDevice, "cudaSetDevice", kHostOnly},
    {CudaCall::kDeviceUuid, "cudaGetDeviceProperties", kHostOnly},
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
};

constexpr bool CudaTableIsIndexedByCall() {
  for (int i = 0; i < static_cast<int>(CudaCall::kCount); ++i) {
    if (static_cast<int>(kCudaCallRules[i].call) != i) return false;
  }
  return std::size(kCudaCallRules) == static_cast<std::size_t>(CudaCall::kCount);
}
static_assert(CudaTableIsIndexedByCall(), "one rule per CudaCall, in order");

constexpr bool IsCallable(CudaCall call, CudaContext context) {
  return (kCudaCallRules[static_cast<int>(call)].contexts & static_cast<std::uint8_t>(context)) != 0;
}

/// "host_thread", "captured_op", "host_callback".
std::string_view CudaContextName(CudaContext context);

/// UNSUPPORTED_CAPABILITY naming the call and the context when the table refuses it.
Status CheckCudaCall(CudaCall call, CudaContext context);

/// The calling thread's context (kHostThread unless a CudaContextScope says otherwise).
CudaContext CurrentCudaContext();

/// Sets the calling thread's context until the scope ends (scopes nest).
class CudaContextScope {
 public:
  explicit CudaContextScope(CudaContext context);
  ~CudaContextScope();
  CudaContextScope(const CudaContextScope&) = delete;
  CudaContextScope& operator=(const CudaContextScope&) = delete;

 private:
  CudaContext previous_;
};

/// A CudaApi that checks every call against the table for the calling thread's context, then
/// forwards it to `inner`.
std::unique_ptr<CudaApi> CheckedCudaApi(std::unique_ptr<CudaApi> inner);

}  // namespace hyper_parallel::shmem::cuda
