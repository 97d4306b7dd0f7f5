// Whether this machine has a CUDA device the backend can use, judged from what the CUDA runtime
// answered when asked (cudaDriverGetVersion, cudaRuntimeGetVersion, cudaGetDeviceCount).
//
// The judgement is kept apart from the calls so that every answer the runtime can give is
// tested on machines without a GPU: "no device here" (auto then falls back to another backend)
// must not be confused with "a device or driver is here but the runtime cannot use it", which
// is an error to fix, never a silent fallback.
//
// Thread-safety: a pure function.
#pragma once

#include <string>

#include "base/status.h"

namespace hyper_parallel::shmem::cuda {

/// What the CUDA runtime answered, in its own words.
struct DeviceProbe {
  /// cudaDriverGetVersion: 0 where no driver is installed (e.g. 12040 for CUDA 12.4).
  int driver_version = 0;
  /// cudaRuntimeGetVersion: the CUDA runtime this build links statically (e.g. 13000).
  int runtime_version = 0;
  /// cudaGetDeviceCount's error by name ("cudaSuccess", "cudaErrorNoDevice", ...), and its
  /// text.
  std::string count_error = "cudaSuccess";
  std::string count_message;
  int count = 0;
};

/// OK where a device is usable. UNSUPPORTED_CAPABILITY where this machine has none: no driver
/// installed, no device (cudaErrorNoDevice), or none counted. BACKEND_ERROR where a driver or a
/// device is present but the runtime cannot use it, with what to fix: a driver older than the
/// runtime (cudaErrorInsufficientDriver with a driver installed), every device busy or
/// prohibited by its compute mode (cudaErrorDevicesUnavailable), CUDA initialised before this
/// process was forked (cudaErrorInitializationError), or any other error.
Status JudgeDeviceProbe(const DeviceProbe& probe);

}  // namespace hyper_parallel::shmem::cuda
