// The CUDA backend's stream kernels, as host launchers (cuda_kernels.cu): the one-thread
// signal and wait kernels, and the batched copy kernel; and the reductions' element-wise kernel
// (cuda_reduce.cu).
//
// Each launcher enqueues one kernel on `stream` (one block of one thread, except the copy
// kernel) and returns the launch's cudaError_t (cudaLaunchKernelEx), never a stale error of an
// earlier call. The kernels
// use every pointer as given: device memory, memory opened through IPC, or host memory from
// cudaHostAlloc(cudaHostAllocMapped), which unified addressing lets a kernel use at its host
// address. Words are 64-bit and must be 8-byte aligned.
//
// Thread-safety: any thread may launch; kernels on one stream run in the order enqueued.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "backends/cuda/cuda_api.h"
#include "data_plane/elementwise.h"

namespace hyper_parallel::shmem::cuda {

/// Loads every kernel below into the current device's context (cudaFuncGetAttributes of each
/// forces CUDA's lazy loading to load it now), so that no later first launch waits for the
/// kernels running on the device (CudaApi::LoadKernels).
cudaError_t LoadKernels();
/// The same for the reductions' kernels (cuda_reduce.cu); LoadKernels calls it.
cudaError_t LoadReduceKernels();
/// cudaFuncGetAttributes of each of the `count` kernels at `kernels` (what both loaders do):
/// the first error, or cudaSuccess. (The .cu files are C++17: no std::span.)
cudaError_t LoadEach(const void* const* kernels, std::size_t count);

/// Enqueues one element-wise step of a reduction (data_plane/elementwise.h; cuda_reduce.cu):
/// a grid-stride kernel over device-addressable memory whose pointers are aligned to their
/// element type; widening or narrowing a type that accumulates in itself is a cudaMemcpyAsync
/// (nothing when source and destination are one). Nothing for zero elements.
cudaError_t LaunchElementwise(cudaStream_t stream, const data_plane::ElementwiseStep& step);

/// Copies `count` (1 .. kCopyBlocksPerLaunch) blocks with one launch. The descriptors travel
/// by value in the kernel's parameters. Each block is cut into 64 KiB slices; the grid has one
/// thread block per slice (at most 1024, which then loop over the rest) and each thread block
/// copies its slice with 16-, 8-, 4- or 2-byte loads and stores where the block's destination
/// and source are equally aligned (byte copies at the edges), and byte by byte only where they
/// differ by an odd number of bytes (copy_unit.h).
/// Every block has bytes > 0 and pointers the device can address; blocks overlap as
/// CudaApi::CopyBlocksAsync allows. The writes are complete, for the stream's later work, when
/// the kernel ends.
cudaError_t LaunchCopyBlocks(cudaStream_t stream, const CopyBlock* blocks, int count);

/// Adds each of `count` (1 .. kCopyBlocksPerLaunch) blocks' `add` to its `counter` (the copies
/// are not touched) with one launch of one thread per addition: __threadfence_system(), then
/// atomicAdd_system. Enqueued right after the copy kernel of the same blocks, so a waiter that
/// sees an addition sees every block of the launch before it.
cudaError_t LaunchAddValues64(cudaStream_t stream, const SignalledCopyBlock* blocks, int count);

/// Stores `value` at `address` with system-scope release, after a __threadfence_system() (the
/// stand-in for cuStreamWriteValue64 where the driver does not offer it).
cudaError_t LaunchWriteValue64(cudaStream_t stream, std::int64_t* address, std::int64_t value);

/// Adds `value` to the word at `address` with atomicAdd_system, after a __threadfence_system().
cudaError_t LaunchAddValue64(cudaStream_t stream, std::int64_t* address, std::int64_t value);

/// Polls the word at `address` with system-scope acquire loads until it satisfies
/// `comparison` against `value` (signed). When `timeout_ns` has passed on the GPU's
/// %globaltimer first, it writes the last value read to report->observed and 1 to
/// report->timed_out, then returns (it never traps and never spins forever); on success the
/// report is left untouched. With timeout_ns 0 it checks the word once.
cudaError_t LaunchWaitValue64(cudaStream_t stream, const std::int64_t* address,
                              WaitComparison comparison, std::int64_t value,
                              std::uint64_t timeout_ns, WaitReport* report);

}  // namespace hyper_parallel::shmem::cuda
