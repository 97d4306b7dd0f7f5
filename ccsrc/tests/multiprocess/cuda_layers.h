// The CUDA layers the multi-process CUDA tests and the CUDA benchmark run the Runtime's CUDA
// backend on: the fake (testing/fake_cuda/), or the real CUDA runtime with every PE on GPU 0.
//
// CUDA does not survive fork: a child of a process that initialised CUDA cannot use it. So the
// process that forks the PEs never calls CUDA, not even to ask whether a device is there
// (ProbeRealCuda asks in a child of its own), and the real layer is made inside each PE, by the
// backend factory, after the fork.
//
// Thread-safety: call from the single-threaded parent (ProbeRealCuda forks) or inside a PE.
#pragma once

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>

#include "backends/cuda/cuda_backend.h"
#include "testing/fake_cuda/fake_cuda_api.h"
#include "tests/multiprocess/pe_helpers.h"

namespace hyper_parallel::shmem::testing {

enum class CudaLayer { kFake, kReal };

inline std::string_view CudaLayerName(CudaLayer layer) {
  return layer == CudaLayer::kFake ? "fake" : "real";
}

/// A backend factory for a PE: a CudaBackend over a new FakeCudaApi, or over the real CUDA
/// runtime (MakeCudaRuntimeApi, then device 0: all PEs share GPU 0), made when the PE calls it.
/// `api` receives the layer the backend calls and `fake` the fake (null for the real layer);
/// both live as long as the backend.
inline BackendFactory CudaBackendOn(CudaLayer layer, cuda::CudaApi** api = nullptr,
                                    cuda::FakeCudaApi** fake = nullptr) {
  return [layer, api, fake](BackendKind, std::unique_ptr<Backend>* out) {
    std::unique_ptr<cuda::CudaApi> made;
    if (layer == CudaLayer::kFake) {
      auto faked = std::make_unique<cuda::FakeCudaApi>();
      if (fake != nullptr) *fake = faked.get();
      made = std::move(faked);
    } else {
      HPS_RETURN_IF_ERROR(cuda::MakeCudaRuntimeApi(&made));
      HPS_RETURN_IF_ERROR(made->SetDevice(0));
      if (fake != nullptr) *fake = nullptr;
    }
    if (api != nullptr) *api = made.get();
    *out = std::make_unique<cuda::CudaBackend>(std::move(made));
    return Status::Ok();
  };
}

/// What MakeCudaRuntimeApi answers in a forked child.
struct RealCudaProbe {
  bool usable = false;       ///< it made the real layer
  bool unsupported = false;  ///< it answered UNSUPPORTED_CAPABILITY (no driver, no device)
  std::string reason;        ///< its message, or how the probe itself failed
};

/// Asks MakeCudaRuntimeApi in a forked child (once per process), so this process stays free
/// of CUDA and may fork PEs that use it.
inline const RealCudaProbe& ProbeRealCuda() {
  static const RealCudaProbe probe = [] {
    constexpr int kUnsupported = 77;
    const std::vector<PeOutcome> outcomes =
        RunPes(PeLaunch{1, std::chrono::seconds(60), {}}, [](PeContext&) {
          std::unique_ptr<cuda::CudaApi> api;
          const Status status = cuda::MakeCudaRuntimeApi(&api);
          if (status.ok()) return 0;
          std::fprintf(stderr, "%s", status.message().c_str());
          return status.code() == ErrorCode::kUnsupportedCapability ? kUnsupported : 1;
        });
    RealCudaProbe answer;
    const PeOutcome& outcome = outcomes.at(0);
    answer.usable = outcome.exit_code == 0 && outcome.signal == 0;
    answer.unsupported = outcome.exit_code == kUnsupported;
    answer.reason = outcome.output;
    if (!answer.usable && !answer.unsupported) {
      answer.reason = "the CUDA probe failed (exit " + std::to_string(outcome.exit_code) +
                      ", signal " + std::to_string(outcome.signal) + "): " + outcome.output;
    }
    return answer;
  }();
  return probe;
}

}  // namespace hyper_parallel::shmem::testing
