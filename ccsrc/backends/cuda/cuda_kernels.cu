#include "backends/cuda/cuda_kernels.h"

#include <cuda/atomic>
#include <cuda_runtime.h>

namespace hyper_parallel::shmem::cuda {
namespace {

using SystemWord = ::cuda::atomic_ref<std::int64_t, ::cuda::thread_scope_system>;

// Between two polls: long enough to leave the memory system alone, short against any timeout.
constexpr unsigned kPollSleepNs = 200;

__device__ std::uint64_t GlobalTimerNs() {
  std::uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

__device__ bool Satisfied(std::int64_t word, WaitComparison comparison, std::int64_t value) {
  switch (comparison) {
    case WaitComparison::kEq: return word == value;
    case WaitComparison::kNe: return word != value;
    case WaitComparison::kGt: return word > value;
    case WaitComparison::kGe: return word >= value;
    case WaitComparison::kLt: return word < value;
    case WaitComparison::kLe: return word <= value;
  }
  return false;
}

__global__ void WriteValue64Kernel(std::int64_t* address, std::int64_t value) {
  __threadfence_system();
  SystemWord(*address).store(value, ::cuda::memory_order_release);
}

__global__ void AddValue64Kernel(std::int64_t* address, std::int64_t value) {
  __threadfence_system();
  // Two's-complement addition: the unsigned atomic adds a negative value correctly.
  atomicAdd_system(reinterpret_cast<unsigned long long*>(address),
                   static_cast<unsigned long long>(value));
}

__global__ void WaitValue64Kernel(const std::int64_t* address, WaitComparison comparison,
                                  std::int64_t value, std::uint64_t timeout_ns,
                                  WaitReport* report) {
  // The load writes nothing; atomic_ref wants a non-const referent.
  SystemWord word(*const_cast<std::int64_t*>(address));
  const std::uint64_t start = GlobalTimerNs();
  std::int64_t observed = word.load(::cuda::memory_order_acquire);
  while (!Satisfied(observed, comparison, value)) {
    // Unsigned difference: no overflow however large timeout_ns is.
    if (GlobalTimerNs() - start >= timeout_ns) {
      report->observed = observed;
      report->timed_out = 1;
      __threadfence_system();
      return;
    }
    __nanosleep(kPollSleepNs);
    observed = word.load(::cuda::memory_order_acquire);
  }
}

cudaLaunchConfig_t OneThreadOn(cudaStream_t stream) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(1);
  config.blockDim = dim3(1);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  return config;
}

}  // namespace

cudaError_t LaunchWriteValue64(cudaStream_t stream, std::int64_t* address, std::int64_t value) {
  const cudaLaunchConfig_t config = OneThreadOn(stream);
  return cudaLaunchKernelEx(&config, WriteValue64Kernel, address, value);
}

cudaError_t LaunchAddValue64(cudaStream_t stream, std::int64_t* address, std::int64_t value) {
  const cudaLaunchConfig_t config = OneThreadOn(stream);
  return cudaLaunchKernelEx(&config, AddValue64Kernel, address, value);
}

cudaError_t LaunchWaitValue64(cudaStream_t stream, const std::int64_t* address,
                              WaitComparison comparison, std::int64_t value,
                              std::uint64_t timeout_ns, WaitReport* report) {
  const cudaLaunchConfig_t config = OneThreadOn(stream);
  return cudaLaunchKernelEx(&config, WaitValue64Kernel, address, comparison, value, timeout_ns,
                            report);
}

}  // namespace hyper_parallel::shmem::cuda
