#include "backends/cuda/device_probe.h"

namespace hyper_parallel::shmem::cuda {
namespace {

// "12.4" from 12040.
std::string VersionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// "<fact>: call=cudaGetDeviceCount, error=..., message=..., driver=..., runtime=...".
Status Judged(ErrorCode code, std::string_view fact, const DeviceProbe& probe) {
  const std::string driver =
      probe.driver_version == 0 ? "none installed" : VersionText(probe.driver_version);
  return Status::Assertion(code, fact,
                           {{"call", "cudaGetDeviceCount"},
                            {"error", probe.count_error},
                            {"message", probe.count_message},
                            {"driver", driver},
                            {"runtime", VersionText(probe.runtime_version)}});
}

}  // namespace

Status JudgeDeviceProbe(const DeviceProbe& probe) {
  const std::string_view error = probe.count_error;
  if (error == "cudaSuccess") {
    if (probe.count > 0) return Status::Ok();
    return Status::Assertion(ErrorCode::kUnsupportedCapability, "no CUDA device is usable",
                             {{"call", "cudaGetDeviceCount"}, {"devices", "0"}});
  }
  if (error == "cudaErrorNoDevice" ||
      (error == "cudaErrorInsufficientDriver" && probe.driver_version == 0)) {
    return Judged(ErrorCode::kUnsupportedCapability, "no CUDA device is usable", probe);
  }
  if (error == "cudaErrorInsufficientDriver") {
    return Judged(ErrorCode::kBackendError,
                  "the CUDA driver is older than the CUDA runtime this build links (update the "
                  "driver, or build with a CUDA toolkit it supports)",
                  probe);
  }
  if (error == "cudaErrorDevicesUnavailable") {
    return Judged(ErrorCode::kBackendError,
                  "every CUDA device is busy or unavailable (a GPU in EXCLUSIVE_PROCESS compute "
                  "mode held by another process, or in PROHIBITED mode: see nvidia-smi "
                  "--query-gpu=compute_mode)",
                  probe);
  }
  if (error == "cudaErrorInitializationError") {
    return Judged(ErrorCode::kBackendError,
                  "the CUDA runtime cannot initialise in this process (CUDA used before this "
                  "process was forked? start PEs with spawn, not fork)",
                  probe);
  }
  return Judged(ErrorCode::kBackendError,
                "a CUDA driver is present but the runtime cannot use it", probe);
}

}  // namespace hyper_parallel::shmem::cuda
