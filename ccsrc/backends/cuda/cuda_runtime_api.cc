#include "backends/cuda/cuda_runtime_api.h"

#include <cuda.h>  // driver types of cuStreamWriteValue64 only; nothing links libcuda.so
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_probe.h"
#include "backends/cuda/write_value.h"

namespace hyper_parallel::shmem::cuda {
namespace {

using WriteValue64Fn = PFN_cuStreamWriteValue64_v11070;
using PointerAttributesFn = PFN_cuPointerGetAttributes_v7000;

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

// The driver's entry point `symbol` (cuStreamWriteValue64, cuPointerGetAttributes), or null
// where the driver the runtime loaded has none.
void* FetchDriverEntryPoint(const char* symbol) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  const cudaError_t error = cudaGetDriverEntryPointByVersion(symbol, &function, kDriverAbiVersion,
                                                             cudaEnableDefault, &found);
  if (error != cudaSuccess || found != cudaDriverEntryPointSuccess) {
    cudaGetLastError();  // an absent entry point is not an error of the caller's next call
    return nullptr;
  }
  return function;
}

// The device addresses of one CopyBlocksAsync call's pointers. cudaPointerGetAttributes costs
// up to a microsecond, and an all_gather's batch holds hundreds of blocks in a few allocations:
// once a pointer is known to be device memory, the driver's address range of its allocation
// (cuPointerGetAttributes: RANGE_START_ADDR, RANGE_SIZE) answers for every later pointer inside
// it. The ranges are kept for one call only: memory may be freed and its addresses reused.
class DeviceAddresses {
 public:
  /// `pointer_attributes`: the driver's cuPointerGetAttributes, or null (no ranges kept).
  explicit DeviceAddresses(void* pointer_attributes) : pointer_attributes_(pointer_attributes) {}

  /// The address a kernel uses for `pointer`, or null where the device cannot address it:
  /// pageable host memory the runtime does not know (cudaMemoryTypeUnregistered), or host
  /// memory without a device mapping.
  Status Of(const void* pointer, void** device) {
    const auto at = reinterpret_cast<std::uintptr_t>(pointer);
    for (const Range& range : device_ranges_) {
      if (at - range.begin < range.bytes) {  // unsigned: below begin wraps to a huge value
        *device = const_cast<void*>(pointer);
        return Status::Ok();
      }
    }
    cudaPointerAttributes attributes = {};
    const cudaError_t error = cudaPointerGetAttributes(&attributes, pointer);
    if (error != cudaSuccess) return Failed("cudaPointerGetAttributes", error);
    if (attributes.type == cudaMemoryTypeUnregistered) {
      *device = nullptr;
      return Status::Ok();
    }
    if (attributes.type == cudaMemoryTypeDevice) {
      // Another GPU's memory: a kernel here may touch it only with peer access; the copy
      // engines can copy it regardless.
      int current = 0, can_access = 0;
      const cudaError_t asked = cudaGetDevice(&current);
      if (asked != cudaSuccess) return Failed("cudaGetDevice", asked);
      if (attributes.device != current &&
          (cudaDeviceCanAccessPeer(&can_access, current, attributes.device) != cudaSuccess ||
           can_access == 0)) {
        *device = nullptr;
        return Status::Ok();
      }
    }
    *device = attributes.devicePointer;
    if (attributes.type == cudaMemoryTypeDevice && attributes.devicePointer == pointer) {
      Remember(at);
    }
    return Status::Ok();
  }

 private:
  struct Range {
    std::uintptr_t begin;
    std::size_t bytes;
  };

  // Keeps the address range of the device allocation at `at`, where the driver tells it (where
  // it does not, later pointers are only asked again).
  void Remember(std::uintptr_t at) {
    if (pointer_attributes_ == nullptr) return;
    CUpointer_attribute asked[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    CUdeviceptr start = 0;
    std::size_t bytes = 0;
    void* answers[] = {&start, &bytes};
    const auto get = reinterpret_cast<PointerAttributesFn>(pointer_attributes_);
    if (get(2, asked, answers, static_cast<CUdeviceptr>(at)) != CUDA_SUCCESS) return;
    const auto begin = static_cast<std::uintptr_t>(start);
    if (bytes == 0 || at - begin >= bytes) return;  // an answer that does not hold `at`
    device_ranges_.push_back({begin, bytes});
  }

  void* const pointer_attributes_;
  std::vector<Range> device_ranges_;
};

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
  DeviceProbe probe;
  if (cudaDriverGetVersion(&probe.driver_version) != cudaSuccess) probe.driver_version = 0;
  if (cudaRuntimeGetVersion(&probe.runtime_version) != cudaSuccess) probe.runtime_version = 0;
  const cudaError_t error = cudaGetDeviceCount(&probe.count);
  if (error != cudaSuccess) {
    cudaGetLastError();
    probe.count_error = cudaGetErrorName(error);
    probe.count_message = cudaGetErrorString(error);
  }
  HPS_RETURN_IF_ERROR(JudgeDeviceProbe(probe));
  *out = std::make_unique<CudaRuntimeApi>(FetchDriverEntryPoint("cuStreamWriteValue64"),
                                          FetchDriverEntryPoint("cuPointerGetAttributes"));
  return Status::Ok();
}

CudaRuntimeApi::CudaRuntimeApi(void* write_value64, void* pointer_attributes)
    : write_value64_(write_value64), pointer_attributes_(pointer_attributes) {}

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
    MutexLock lock(&mutex_);
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
  MutexLock lock(&mutex_);
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
    MutexLock lock(&mutex_);
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
    MutexLock lock(&mutex_);
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

Status CudaRuntimeApi::CopyBlocksAsync(void* stream, const CopyBlock* blocks,
                                       std::size_t count) {
  constexpr std::string_view kLaunch = "cudaLaunchKernelEx(CopyBlocks)";
  if (count > 0 && blocks == nullptr) return Failed(kLaunch, cudaErrorInvalidValue);
  DeviceAddresses addresses(pointer_attributes_);
  CopyBlock launch[kCopyBlocksPerLaunch];
  int batched = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const CopyBlock& block = blocks[i];
    if (block.bytes == 0) continue;
    if (block.dst == nullptr || block.src == nullptr) return Failed(kLaunch, cudaErrorInvalidValue);
    void* dst = nullptr;
    void* src = nullptr;
    HPS_RETURN_IF_ERROR(addresses.Of(block.dst, &dst));
    HPS_RETURN_IF_ERROR(addresses.Of(block.src, &src));
    if (dst == nullptr || src == nullptr) {
      // The copy engines stage pageable memory; on the same stream, so this block too lands
      // before the stream's later work.
      HPS_RETURN_IF_ERROR(MemcpyAsync(block.dst, block.src, block.bytes, stream));
      continue;
    }
    launch[batched++] = CopyBlock{dst, src, block.bytes};
    if (batched == static_cast<int>(kCopyBlocksPerLaunch)) {
      HPS_RETURN_IF_ERROR(Check(LaunchCopyBlocks(AsStream(stream), launch, batched), kLaunch));
      batched = 0;
    }
  }
  if (batched == 0) return Status::Ok();
  return Check(LaunchCopyBlocks(AsStream(stream), launch, batched), kLaunch);
}

Status CudaRuntimeApi::CopyBlocksAndAddAsync(void* stream, const SignalledCopyBlock* blocks,
                                             std::size_t count) {
  constexpr std::string_view kLaunch = "cudaLaunchKernelEx(CopyBlocksAndAdd)";
  if (count > 0 && blocks == nullptr) return Failed(kLaunch, cudaErrorInvalidValue);
  // Per kCopyBlocksPerLaunch blocks: their bytes through CopyBlocksAsync (the copy kernel, or
  // the copy engines for memory it cannot address, on this stream), then one kernel of their
  // additions after it. The counters are heap words, used as given (as AddValue64 does).
  for (std::size_t first = 0; first < count; first += kCopyBlocksPerLaunch) {
    const std::size_t n = std::min(count - first, kCopyBlocksPerLaunch);
    CopyBlock copies[kCopyBlocksPerLaunch];
    for (std::size_t i = 0; i < n; ++i) {
      const SignalledCopyBlock& block = blocks[first + i];
      if (block.counter == nullptr) return Failed(kLaunch, cudaErrorInvalidValue);
      copies[i] = CopyBlock{block.dst, block.src, block.bytes};
    }
    HPS_RETURN_IF_ERROR(CopyBlocksAsync(stream, copies, n));
    HPS_RETURN_IF_ERROR(Check(
        LaunchAddValues64(AsStream(stream), blocks + first, static_cast<int>(n)), kLaunch));
  }
  return Status::Ok();
}

Status CudaRuntimeApi::LoadKernels() {
  return Check(cuda::LoadKernels(), "cudaFuncGetAttributes");
}

Status CudaRuntimeApi::WriteValue64(void* stream, void* address, std::int64_t value) {
  // Any refusal of the driver's stream write falls back to the store kernel (write_value.h).
  return WriteValueWithFallback(
      write_value64_ != nullptr,
      [&]() -> std::string {
        const auto write = reinterpret_cast<WriteValue64Fn>(write_value64_);
        const CUresult result =
            write(static_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(address),
                  static_cast<cuuint64_t>(value), CU_STREAM_WRITE_VALUE_DEFAULT);
        if (result == CUDA_SUCCESS) return {};
        return DriverFailed("cuStreamWriteValue64", result).message();
      },
      [&] {
        return Check(LaunchWriteValue64(AsStream(stream), static_cast<std::int64_t*>(address),
                                        value),
                     "cudaLaunchKernelEx(WriteValue64)");
      });
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

Status CudaRuntimeApi::ElementwiseAsync(void* stream, const data_plane::ElementwiseStep& step) {
  return Check(LaunchElementwise(AsStream(stream), step), "cudaLaunchKernelEx(Elementwise)");
}

}  // namespace hyper_parallel::shmem::cuda
