// MakeCudaRuntimeApi of a build without a CUDA toolkit (HPS_CUDA=OFF, or AUTO with none found):
// the CUDA backend is then unavailable, and says so.
#include "backends/cuda/cuda_api.h"

namespace hyper_parallel::shmem::cuda {

Status MakeCudaRuntimeApi(std::unique_ptr<CudaApi>* out) {
  out->reset();
  return Status::Assertion(ErrorCode::kUnsupportedCapability,
                           "this build has no CUDA toolkit",
                           {{"option", "HPS_CUDA=AUTO or ON with a CUDA toolkit and nvcc"}});
}

}  // namespace hyper_parallel::shmem::cuda
