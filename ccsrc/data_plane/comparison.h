// The comparison of a wait or a test on a word (docs/atomics.md: wait_signal*, test_signal;
// docs/openshmem.md: shmem_wait_until and shmem_test): `observed <comparison> expected`,
// written once for the CPU's waits (backends/backend.cc, the OpenSHMEM library, the fake CUDA
// layer) and the CUDA wait kernel (backends/cuda/cuda_kernels.cu, where nvcc compiles it for
// the device too).
//
// Every comparison enum of the project names the same six in the same order, kEq, kNe, kGt,
// kGe, kLt, kLe (backends/backend.h's Comparison, the CUDA layer's WaitComparison; OpenSHMEM's
// SHMEM_CMP_* numbers them so too), so one template serves each.
//
// Thread-safety: pure functions.
#pragma once

#include "data_plane/device_qualifiers.h"

namespace hyper_parallel::shmem::data_plane {

/// Whether `observed <comparison> expected` holds, compared as T (unsigned words unsigned);
/// false for a value outside the six.
template <typename Comparison, typename T>
HPS_HOST_DEVICE constexpr bool Satisfies(T observed, Comparison comparison, T expected) {
  switch (comparison) {
    case Comparison::kEq: return observed == expected;
    case Comparison::kNe: return observed != expected;
    case Comparison::kGt: return observed > expected;
    case Comparison::kGe: return observed >= expected;
    case Comparison::kLt: return observed < expected;
    case Comparison::kLe: return observed <= expected;
  }
  return false;
}

}  // namespace hyper_parallel::shmem::data_plane
