// The seam for the primitives as torch custom ops (torch.ops.<namespace>.put, ...): their
// schemas and kernels are registered here, over the same entries primitives.cc binds as Python
// functions. Nothing is registered yet, so this file includes neither pybind11 nor torch.
#include "bindings/torch/ops.h"

namespace hyper_parallel::shmem::binding {

void RegisterOps() {}

}  // namespace hyper_parallel::shmem::binding
