// The CUDA backend's one-thread stream kernels, as host launchers (cuda_kernels.cu).
//
// Each launcher enqueues one kernel of one block of one thread on `stream` and returns the
// launch's cudaError_t (cudaLaunchKernelEx), never a stale error of an earlier call. The kernels
// use every pointer as given: device memory, memory opened through IPC, or host memory from
// cudaHostAlloc(cudaHostAllocMapped), which unified addressing lets a kernel use at its host
// address. Words are 64-bit and must be 8-byte aligned.
//
// Thread-safety: any thread may launch; kernels on one stream run in the order enqueued.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "backends/cuda/cuda_api.h"

namespace hyper_parallel::shmem::cuda {

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
