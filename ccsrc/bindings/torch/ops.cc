// The seam for the primitives as torch custom ops (torch.ops.<namespace>.put, ...): their
// schema and kernels are registered here, over the same entries primitives.cc registers as
// Python functions (TORCH_LIBRARY registrations run when the shared library loads; anything
// Python-visible goes through RegisterOps). Nothing is registered yet.
#include "bindings/torch/registration.h"

namespace hyper_parallel::shmem::binding {

void RegisterOps(pybind11::module_& /*m*/) {}

}  // namespace hyper_parallel::shmem::binding
