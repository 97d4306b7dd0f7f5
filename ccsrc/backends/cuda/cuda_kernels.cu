#include "backends/cuda/cuda_kernels.h"

#include "backends/cuda/copy_unit.h"
#include "data_plane/comparison.h"

#include <cuda/atomic>
#include <cuda_runtime.h>

#include <algorithm>
#include <iterator>

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

// The copy kernel's shape: a 64 KiB slice per thread block (its 512 threads move 16 bytes each
// per word, four words in flight per thread: 32 KiB per step), at most 1024 thread blocks.
constexpr unsigned kCopyThreads = 512;
constexpr std::uint64_t kCopySliceBytes = 64ull << 10;
constexpr std::uint64_t kMaxCopyGrid = 1024;
constexpr int kCopyUnroll = 4;

// One launch's blocks, passed by value in the kernel's parameters.
struct CopyLaunch {
  unsigned char* dst[kCopyBlocksPerLaunch];
  const unsigned char* src[kCopyBlocksPerLaunch];
  std::uint64_t bytes[kCopyBlocksPerLaunch];
  std::uint64_t first_slice[kCopyBlocksPerLaunch + 1];  // [count]: the launch's slices in all
  int count;
};
static_assert(sizeof(CopyLaunch) <= 4000, "a launch's blocks fit in the 4 KiB of parameters");

// Copies `count` words, the thread block's threads striding over them, each with kCopyUnroll
// loads in flight before their stores.
template <class Word>
__device__ void CopyWords(Word* dst, const Word* src, std::uint64_t count) {
  const std::uint64_t stride = blockDim.x;
  std::uint64_t i = threadIdx.x;
  for (; i + (kCopyUnroll - 1) * stride < count; i += kCopyUnroll * stride) {
    Word words[kCopyUnroll];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) words[u] = src[i + u * stride];
#pragma unroll
    for (int u = 0; u < kCopyUnroll; ++u) dst[i + u * stride] = words[u];
  }
  for (; i < count; i += stride) dst[i] = src[i];
}

// Copies `bytes` whose destination and source are equally aligned modulo sizeof(Word): bytes up
// to the first aligned destination address, then words, then the bytes left.
template <class Word>
__device__ void CopyEquallyAligned(unsigned char* dst, const unsigned char* src,
                                   std::uint64_t bytes) {
  constexpr std::uint64_t kWidth = sizeof(Word);
  const std::uint64_t misaligned = reinterpret_cast<std::uintptr_t>(dst) % kWidth;
  const std::uint64_t to_aligned = misaligned == 0 ? 0 : kWidth - misaligned;
  const std::uint64_t head = to_aligned < bytes ? to_aligned : bytes;
  const std::uint64_t words = (bytes - head) / kWidth;
  const std::uint64_t body_end = head + words * kWidth;
  CopyWords(dst, src, head);
  CopyWords(reinterpret_cast<Word*>(dst + head), reinterpret_cast<const Word*>(src + head), words);
  CopyWords(dst + body_end, src + body_end, bytes - body_end);
}

// One slice with the widest word its two pointers allow (copy_unit.h). The choice is the same
// for every thread of the block (one block, one slice), so the threads do not diverge.
__device__ void CopySlice(unsigned char* dst, const unsigned char* src, std::uint64_t bytes) {
  switch (CopyUnitBytes(reinterpret_cast<std::uintptr_t>(dst),
                        reinterpret_cast<std::uintptr_t>(src))) {
    case 16: CopyEquallyAligned<uint4>(dst, src, bytes); break;
    case 8: CopyEquallyAligned<uint2>(dst, src, bytes); break;
    case 4: CopyEquallyAligned<unsigned>(dst, src, bytes); break;
    case 2: CopyEquallyAligned<unsigned short>(dst, src, bytes); break;
    default: CopyWords(dst, src, bytes); break;
  }
}

// __grid_constant__: the blocks are read where the parameters are (indexed by a value known
// only at run time), not copied into every thread's local memory first.
__global__ void __launch_bounds__(kCopyThreads)
    CopyBlocksKernel(const __grid_constant__ CopyLaunch launch) {
  const std::uint64_t slices = launch.first_slice[launch.count];
  for (std::uint64_t slice = blockIdx.x; slice < slices; slice += gridDim.x) {
    // The block the slice is in: the last whose first slice is at most `slice`.
    int low = 0, high = launch.count - 1;
    while (low < high) {
      const int middle = (low + high + 1) / 2;
      if (launch.first_slice[middle] <= slice) {
        low = middle;
      } else {
        high = middle - 1;
      }
    }
    const std::uint64_t at = (slice - launch.first_slice[low]) * kCopySliceBytes;
    const std::uint64_t left = launch.bytes[low] - at;
    CopySlice(launch.dst[low] + at, launch.src[low] + at,
              left < kCopySliceBytes ? left : kCopySliceBytes);
  }
}

// One launch's additions, passed by value in the kernel's parameters.
struct AddLaunch {
  unsigned long long* counter[kCopyBlocksPerLaunch];
  unsigned long long add[kCopyBlocksPerLaunch];  // two's complement: adds negatives too
  int count;
};
static_assert(sizeof(AddLaunch) <= 4000, "a launch's additions fit in the 4 KiB of parameters");

// Thread i adds addition i, after a system-scope fence (the copy kernel before it on the stream
// has completed; the fence makes its writes visible to other processes first).
__global__ void AddValuesKernel(const __grid_constant__ AddLaunch launch) {
  const int i = static_cast<int>(threadIdx.x);
  if (i >= launch.count) return;
  __threadfence_system();
  atomicAdd_system(launch.counter[i], launch.add[i]);
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
  while (!data_plane::Satisfies(observed, comparison, value)) {
    // Unsigned difference: no overflow however large timeout_ns is.
    if (GlobalTimerNs() - start >= timeout_ns) {
      report->observed = observed;
      report->timed_out = 1;
      break;
    }
    __nanosleep(kPollSleepNs);
    observed = word.load(::cuda::memory_order_acquire);
  }
  // Last: the record is the backend's again (it reads timed_out/observed after this).
  ::cuda::atomic_ref<std::uint64_t, ::cuda::thread_scope_system>(report->finished)
      .store(1, ::cuda::memory_order_release);
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

cudaError_t LoadEach(const void* const* kernels, std::size_t count) {
  cudaFuncAttributes attributes = {};
  for (std::size_t i = 0; i < count; ++i) {
    const cudaError_t error = cudaFuncGetAttributes(&attributes, kernels[i]);
    if (error != cudaSuccess) return error;
  }
  return cudaSuccess;
}

cudaError_t LoadKernels() {
  const void* const kernels[] = {
      reinterpret_cast<const void*>(&CopyBlocksKernel),
      reinterpret_cast<const void*>(&AddValuesKernel),
      reinterpret_cast<const void*>(&WriteValue64Kernel),
      reinterpret_cast<const void*>(&AddValue64Kernel),
      reinterpret_cast<const void*>(&WaitValue64Kernel),
  };
  if (const cudaError_t error = LoadEach(kernels, std::size(kernels)); error != cudaSuccess) {
    return error;
  }
  return LoadReduceKernels();
}

cudaError_t LaunchCopyBlocks(cudaStream_t stream, const CopyBlock* blocks, int count) {
  if (count <= 0 || count > static_cast<int>(kCopyBlocksPerLaunch)) return cudaErrorInvalidValue;
  CopyLaunch launch = {};
  launch.count = count;
  std::uint64_t slices = 0;
  for (int i = 0; i < count; ++i) {
    launch.dst[i] = static_cast<unsigned char*>(blocks[i].dst);
    launch.src[i] = static_cast<const unsigned char*>(blocks[i].src);
    launch.bytes[i] = blocks[i].bytes;
    launch.first_slice[i] = slices;
    slices += (blocks[i].bytes + kCopySliceBytes - 1) / kCopySliceBytes;
  }
  launch.first_slice[count] = slices;
  if (slices == 0) return cudaSuccess;  // only empty blocks: nothing to launch
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(std::min(slices, kMaxCopyGrid)));
  config.blockDim = dim3(kCopyThreads);
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  return cudaLaunchKernelEx(&config, CopyBlocksKernel, launch);
}

cudaError_t LaunchAddValues64(cudaStream_t stream, const SignalledCopyBlock* blocks, int count) {
  if (count <= 0 || count > static_cast<int>(kCopyBlocksPerLaunch)) return cudaErrorInvalidValue;
  AddLaunch launch = {};
  launch.count = count;
  for (int i = 0; i < count; ++i) {
    launch.counter[i] = static_cast<unsigned long long*>(blocks[i].counter);
    launch.add[i] = static_cast<unsigned long long>(blocks[i].add);
  }
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(1);
  config.blockDim = dim3(static_cast<unsigned>(kCopyBlocksPerLaunch));
  config.dynamicSmemBytes = 0;
  config.stream = stream;
  return cudaLaunchKernelEx(&config, AddValuesKernel, launch);
}

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
