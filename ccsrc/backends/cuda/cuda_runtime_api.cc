#include "backends/cuda/cuda_runtime_api.h"

#include <cuda.h>  // driver types of cuStreamWriteValue64 only; nothing links libcuda.so
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "backends/cuda/cuda_kernels.h"

namespace hyper_parallel::shmem::cuda {
namespace {

using WriteValue64Fn = PFN_cuStreamWriteValue64_v11070;

// The driver ABI asked for at the entry points: CUDA 12.0 (cuStreamWriteValue64 is then the
// 64-bit-pointer v2 entry of CUDA 11.7+).
constexpr unsigned kDriverAbiVersion = 12000;

Status Failed(std::string_view call, cudaError_t error) {
  return Status::Assertion(ErrorCode::kBackendError, "CUDA call failed",
                           {{"call", std::string(call)},
                            {"error", cudaGetErrorName(error)},
                            {"message", cudaGetErrorString(error)}});
}

Status Check(cudaError_t error, std::string_view call) {
  return error == cudaSuccess ? Status::Ok() : Failed(call, error);
}

cudaStream_t AsStream(void* stream) { return static_cast<cudaStream_t>(stream); }

// cuStreamWriteValue64 from the driver the runtime loaded, or null where it has none.
void* FetchWriteValue64() {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t error = cudaGetDriverEntryPointByVersion(
      "cuStreamWriteValue64", &function, kDriverAbiVersion, cudaEnableDefault, &found);
  if (error != cudaSuccess || found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();  // an absent entry point is not an error of the caller's next call
    return nullptr;
  }
  return function;
}

// A failed driver call, named as cuGetErrorName names it (fetched only on this path).
Status DriverFailed(std::string_view call, CUresult result) {
  std::string name = "CUresult " + std::to_string(static_cast<int>(result));
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion("cuGetErrorName", &function, kDriverAbiVersion,
                                       cudaEnableDefault, &found) == cudaSuccess &&
      found == cudaDriverEntryPointSuccess) {
    const char* text = nullptr;
    if (reinterpret_cast<PFN_cuGetErrorName_v6000>(function)(result, &text) == CUDA_SUCCESS &&
        text != nullptr) {
      name = text;
    }
  } else {
    cudaGetLastError();
  }
  return Status::Assertion(ErrorCode::kBackendError, "CUDA call failed",
                           {{"call", std::string(call)}, {"error", std::move(name)}});
}

}  // namespace

Status MakeCudaRuntimeApi(std::unique_ptr<CudaApi>* out) {
  out->reset();
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error != cudaSuccess) {
    cudaGetLastError();
    return Status::Assertion(ErrorCode::kUnsupportedCapability, "no CUDA device is usable",
                             {{"call", "cudaGetDeviceCount"},
                              {"error", cudaGetErrorName(error)},
                              {"message", cudaGetErrorString(error)}});
  }
  if (count == 0) {
    return Status::Assertion(ErrorCode::kUnsupportedCapability, "no CUDA device is usable",
                             {{"call", "cudaGetDeviceCount"}, {"devices", "0"}});
  }
  *out = std::make_unique<CudaRuntimeApi>(FetchWriteValue64());
  return Status::Ok();
}

CudaRuntimeApi::CudaRuntimeApi(void* write_value64) : write_value64_(write_value64) {}

Status CudaRuntimeApi::GetDevice(int* device) const {
  return Check(cudaGetDevice(device), "cudaGetDevice");
}

Status CudaRuntimeApi::SetDevice(int device) {
  return Check(cudaSetDevice(device), "cudaSetDevice");
}

Status CudaRuntimeApi::DeviceUuid(int device, std::string* uuid) const {
  cudaDeviceProp properties;
  HPS_RETURN_IF_ERROR(Check(cudaGetDeviceProperties(&properties, device),
                            "cudaGetDeviceProperties"));
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string text;
  text.reserve(2 * sizeof properties.uuid.bytes);
  for (const char byte : properties.uuid.bytes) {
    const auto bits = static_cast<unsigned char>(byte);
    text.push_back(kDigits[bits >> 4]);
    text.push_back(kDigits[bits & 0xF]);
  }
  *uuid = std::move(text);
  return Status::Ok();
}

Status CudaRuntimeApi::Malloc(std::size_t bytes, void** ptr) {
  return Check(cudaMalloc(ptr, bytes), "cudaMalloc");
}

Status CudaRuntimeApi::Free(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    std::erase_if(exported_, [ptr](const auto& entry) { return entry.second == ptr; });
  }
  return Check(cudaFree(ptr), "cudaFree");
}

Status CudaRuntimeApi::MallocHost(std::size_t bytes, void** ptr) {
  void* host = nullptr;
  HPS_RETURN_IF_ERROR(Check(cudaHostAlloc(&host, bytes, cudaHostAllocMapped), "cudaHostAlloc"));
  // The kernels write reports through the host address itself, which unified addressing
  // (every 64-bit Linux platform of a supported GPU) makes the device address too.
  void* device = nullptr;
  const cudaError_t error = cudaHostGetDevicePointer(&device, host, 0);
  if (error != cudaSuccess || device != host) {
    cudaFreeHost(host);
    if (error != cudaSuccess) return Failed("cudaHostGetDevicePointer", error);
    return Status::Assertion(ErrorCode::kUnsupportedCapability,
                             "mapped host memory has another address on the device (no unified "
                             "addressing)",
                             {{"host", Hex(host)}, {"device", Hex(device)}});
  }
  *ptr = host;
  return Status::Ok();
}

Status CudaRuntimeApi::FreeHost(void* ptr) { return Check(cudaFreeHost(ptr), "cudaFreeHost"); }

Status CudaRuntimeApi::IpcExport(void* ptr, std::string* handle) {
  cudaIpcMemHandle_t ipc;
  HPS_RETURN_IF_ERROR(Check(cudaIpcGetMemHandle(&ipc, ptr), "cudaIpcGetMemHandle"));
  static_assert(sizeof ipc.reserved == 64, "a cudaIpcMemHandle_t is 64 bytes");
  handle->assign(ipc.reserved, sizeof ipc.reserved);
  std::lock_guard<std::mutex> lock(mutex_);
  exported_[*handle] = ptr;
  return Status::Ok();
}

Status CudaRuntimeApi::IpcOpen(const std::string& handle, void** ptr) {
  cudaIpcMemHandle_t ipc;
  if (handle.size() != sizeof ipc.reserved) {
    return Status::Contract(ErrorCode::kInvalidArgument, "a CUDA IPC handle",
                            std::to_string(sizeof ipc.reserved) + " bytes",
                            std::to_string(handle.size()) + " bytes");
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto own = exported_.find(handle);
    if (own != exported_.end()) {
      ++self_opened_[own->second];
      *ptr = own->second;
      return Status::Ok();
    }
  }
  std::memcpy(ipc.reserved, handle.data(), sizeof ipc.reserved);
  return Check(cudaIpcOpenMemHandle(ptr, ipc, cudaIpcMemLazyEnablePeerAccess),
               "cudaIpcOpenMemHandle");
}

Status CudaRuntimeApi::IpcClose(void* ptr) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto own = self_opened_.find(ptr);
    if (own != self_opened_.end()) {
      if (--own->second == 0) self_opened_.erase(own);
      return Status::Ok();
    }
  }
  return Check(cudaIpcCloseMemHandle(ptr), "cudaIpcCloseMemHandle");
}

Status CudaRuntimeApi::StreamCreate(void** stream) {
  cudaStream_t created = nullptr;
  HPS_RETURN_IF_ERROR(
      Check(cudaStreamCreateWithFlags(&created, cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags"));
  *stream = created;
  return Status::Ok();
}

Status CudaRuntimeApi::StreamDestroy(void* stream) {
  return Check(cudaStreamDestroy(AsStream(stream)), "cudaStreamDestroy");
}

Status CudaRuntimeApi::StreamSynchronize(void* stream) {
  return Check(cudaStreamSynchronize(AsStream(stream)), "cudaStreamSynchronize");
}

Status CudaRuntimeApi::MemcpyAsync(void* dst, const void* src, std::size_t bytes, void* stream) {
  return Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, AsStream(stream)),
               "cudaMemcpyAsync");
}

Status CudaRuntimeApi::WriteValue64(void* stream, void* address, std::int64_t value) {
  if (write_value64_ != nullptr) {
    const auto write = reinterpret_cast<WriteValue64Fn>(write_value64_);
    const CUresult result =
        write(static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(address),
              static_cast<cuuint64_t>(value), CU_STREAM_WRITE_VALUE_DEFAULT);
    if (result == CUDA_SUCCESS) return Status::Ok();
    // Memory the driver's stream memory operations cannot reach: the kernel can.
    if (result != CUDA_ERROR_NOT_SUPPORTED) return DriverFailed("cuStreamWriteValue64", result);
  }
  return Check(LaunchWriteValue64(AsStream(stream), static_cast<std::int64_t*>(address), value),
               "cudaLaunchKernelEx(WriteValue64)");
}

Status CudaRuntimeApi::AddValue64(void* stream, void* address, std::int64_t value) {
  return Check(LaunchAddValue64(AsStream(stream), static_cast<std::int64_t*>(address), value),
               "cudaLaunchKernelEx(AddValue64)");
}

Status CudaRuntimeApi::WaitValue64(void* stream, const void* address, WaitComparison comparison,
                                   std::int64_t value, std::uint64_t timeout_ns,
                                   WaitReport* report) {
  return Check(LaunchWaitValue64(AsStream(stream), static_cast<const std::int64_t*>(address),
                                 comparison, value, timeout_ns, report),
               "cudaLaunchKernelEx(WaitValue64)");
}

}  // namespace hyper_parallel::shmem::cuda
