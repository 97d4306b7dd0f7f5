// The reductions' element-wise kernel on the device (LaunchElementwise, cuda_kernels.h): the
// steps of data_plane/elementwise.h with the rules of docs/architecture.md, "Reductions", as
// the CPU's version in ops/reduce/element.cc applies them: half types widen to float32 and
// narrow once, rounding to nearest even (cuda_fp16.h, cuda_bf16.h); the operators are the
// CPU's own (data_plane/reduce_op.h). One grid-stride loop over the elements, 256 threads a block and at
// most 1024 blocks.
#include "backends/cuda/cuda_kernels.h"
#include "data_plane/reduce_op.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <iterator>

namespace hyper_parallel::shmem::cuda {
namespace {

using data_plane::ElementType;
using data_plane::ReduceOp;
using Kind = data_plane::ElementwiseStep::Kind;

constexpr unsigned kThreads = 256;
constexpr std::uint64_t kMaxGrid = 1024;

__device__ std::uint64_t FirstIndex() {
  return static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ std::uint64_t Stride() { return static_cast<std::uint64_t>(gridDim.x) * blockDim.x; }

template <typename T>
__global__ void CombineKernel(ReduceOp op, const T* lower, const T* upper, T* out,
                              std::uint64_t count) {
  for (std::uint64_t i = FirstIndex(); i < count; i += Stride()) {
    out[i] = data_plane::ApplyReduceOp(op, lower[i], upper[i]);
  }
}

__global__ void WidenHalfKernel(const __half* source, float* out, std::uint64_t count) {
  for (std::uint64_t i = FirstIndex(); i < count; i += Stride()) out[i] = __half2float(source[i]);
}
__global__ void WidenBFloat16Kernel(const __nv_bfloat16* source, float* out, std::uint64_t count) {
  for (std::uint64_t i = FirstIndex(); i < count; i += Stride()) {
    out[i] = __bfloat162float(source[i]);
  }
}
__global__ void NarrowHalfKernel(const float* source, __half* out, std::uint64_t count) {
  for (std::uint64_t i = FirstIndex(); i < count; i += Stride()) {
    out[i] = __float2half_rn(source[i]);
  }
}
__global__ void NarrowBFloat16Kernel(const float* source, __nv_bfloat16* out,
                                     std::uint64_t count) {
  for (std::uint64_t i = FirstIndex(); i < count; i += Stride()) {
    out[i] = __float2bfloat16_rn(source[i]);
  }
}

cudaLaunchConfig_t GridFor(cudaStream_t stream, std::uint64_t count) {
  cudaLaunchConfig_t config = {};
  const std::uint64_t blocks = std::min(kMaxGrid, (count + kThreads - 1) / kThreads);
  config.gridDim = dim3(static_cast<unsigned>(blocks));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  return config;
}

template <typename T>
cudaError_t LaunchCombine(cudaStream_t stream, const data_plane::ElementwiseStep& step) {
  const cudaLaunchConfig_t config = GridFor(stream, step.count);
  return cudaLaunchKernelEx(&config, CombineKernel<T>, step.op, static_cast<const T*>(step.lower),
                            static_cast<const T*>(step.upper), static_cast<T*>(step.out),
                            step.count);
}

// A widening or narrowing kernel over the step's `lower` into its `out`.
template <typename From, typename To>
cudaError_t LaunchConversion(const cudaLaunchConfig_t& config,
                             void (*kernel)(const From*, To*, std::uint64_t),
                             const data_plane::ElementwiseStep& step) {
  return cudaLaunchKernelEx(&config, kernel, static_cast<const From*>(step.lower),
                            static_cast<To*>(step.out), step.count);
}

std::uint64_t ElementBytes(ElementType type) {
  switch (type) {
    case ElementType::kInt8: case ElementType::kUInt8: return 1;
    case ElementType::kFloat16: case ElementType::kBFloat16:
    case ElementType::kInt16: case ElementType::kUInt16: return 2;
    case ElementType::kFloat32: case ElementType::kInt32: case ElementType::kUInt32: return 4;
    default: return 8;
  }
}

}  // namespace

cudaError_t LoadReduceKernels() {
  const void* const kernels[] = {
      reinterpret_cast<const void*>(&CombineKernel<float>),
      reinterpret_cast<const void*>(&CombineKernel<double>),
      reinterpret_cast<const void*>(&CombineKernel<std::int8_t>),
      reinterpret_cast<const void*>(&CombineKernel<std::uint8_t>),
      reinterpret_cast<const void*>(&CombineKernel<std::int16_t>),
      reinterpret_cast<const void*>(&CombineKernel<std::uint16_t>),
      reinterpret_cast<const void*>(&CombineKernel<std::int32_t>),
      reinterpret_cast<const void*>(&CombineKernel<std::uint32_t>),
      reinterpret_cast<const void*>(&CombineKernel<std::int64_t>),
      reinterpret_cast<const void*>(&CombineKernel<std::uint64_t>),
      reinterpret_cast<const void*>(&WidenHalfKernel),
      reinterpret_cast<const void*>(&WidenBFloat16Kernel),
      reinterpret_cast<const void*>(&NarrowHalfKernel),
      reinterpret_cast<const void*>(&NarrowBFloat16Kernel),
  };
  return LoadEach(kernels, std::size(kernels));
}

cudaError_t LaunchElementwise(cudaStream_t stream, const data_plane::ElementwiseStep& step) {
  if (step.count == 0) return cudaSuccess;
  const bool half = step.type == ElementType::kFloat16;
  const bool bfloat = step.type == ElementType::kBFloat16;
  const cudaLaunchConfig_t config = GridFor(stream, step.count);
  switch (step.kind) {
    case Kind::kWiden:
      if (half) return LaunchConversion(config, WidenHalfKernel, step);
      if (bfloat) return LaunchConversion(config, WidenBFloat16Kernel, step);
      break;
    case Kind::kNarrow:
      if (half) return LaunchConversion(config, NarrowHalfKernel, step);
      if (bfloat) return LaunchConversion(config, NarrowBFloat16Kernel, step);
      break;
    case Kind::kCombine:
      switch (step.type) {
        case ElementType::kFloat16:
        case ElementType::kBFloat16:
        case ElementType::kFloat32: return LaunchCombine<float>(stream, step);
        case ElementType::kFloat64: return LaunchCombine<double>(stream, step);
        case ElementType::kInt8: return LaunchCombine<std::int8_t>(stream, step);
        case ElementType::kUInt8: return LaunchCombine<std::uint8_t>(stream, step);
        case ElementType::kInt16: return LaunchCombine<std::int16_t>(stream, step);
        case ElementType::kUInt16: return LaunchCombine<std::uint16_t>(stream, step);
        case ElementType::kInt32: return LaunchCombine<std::int32_t>(stream, step);
        case ElementType::kUInt32: return LaunchCombine<std::uint32_t>(stream, step);
        case ElementType::kInt64: return LaunchCombine<std::int64_t>(stream, step);
        case ElementType::kUInt64: return LaunchCombine<std::uint64_t>(stream, step);
      }
      return cudaErrorInvalidValue;
  }
  // Widening or narrowing a type that accumulates in itself: a copy.
  if (step.out == step.lower) return cudaSuccess;
  return cudaMemcpyAsync(step.out, step.lower, step.count * ElementBytes(step.type),
                         cudaMemcpyDefault, stream);
}

}  // namespace hyper_parallel::shmem::cuda
