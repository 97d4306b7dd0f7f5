// The backends this build provides. The only file outside a backend's folder that names one.
#include "backends/cann/cann_backend.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/host/host_backend.h"
#include "backends/host/host_stream_provider.h"
#include "backends/wait/wait_policy.h"
#include "backends/registry.h"

namespace hyper_parallel::shmem {

void RegisterBuiltinBackends(std::vector<BackendEntry>* entries) {
  BackendEntry host;
  host.kind = BackendKind::kHost;
  host.auto_priority = 0;  // every machine has it: the fallback of kAuto
  host.available = [] { return Status::Ok(); };
  host.create = [] { return std::make_unique<host::HostBackend>(); };
  host.streams = &host::HostStreams();
  host.check_settings = [](const Config& config) {
    WaitMode mode = WaitMode::kAuto;
    return ParseWaitMode(config.wait, &mode);
  };
  entries->push_back(std::move(host));

  BackendEntry cann;
  cann.kind = BackendKind::kCann;
  cann.auto_priority = 20;  // preferred wherever the vendor library loads
  cann.available = [] { return cann::CannBackend::Available(); };
  cann.create = [] { return std::make_unique<cann::CannBackend>(); };
  cann.streams = nullptr;  // the framework's NPU streams (torch_npu's current stream)
  cann.framework_device = DeviceType::kNpu;
  cann.framework_stream = [](void* native) { return StreamRef{native}; };
  entries->push_back(std::move(cann));

  BackendEntry cuda;
  cuda.kind = BackendKind::kCuda;
  cuda.auto_priority = 10;  // preferred to host wherever a GPU is visible
  cuda.available = [] { return cuda::CudaBackend::Available(); };
  cuda.create = [] {
    std::unique_ptr<cuda::CudaApi> api;
    (void)cuda::MakeCudaRuntimeApi(&api);  // available() said it works
    return std::make_unique<cuda::CudaBackend>(std::move(api));
  };
  cuda.streams = nullptr;  // torch's CUDA streams
  cuda.framework_device = DeviceType::kCuda;
  cuda.framework_stream = cuda::CallerStream;
  entries->push_back(std::move(cuda));
}

}  // namespace hyper_parallel::shmem
