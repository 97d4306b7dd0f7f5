// The primitives as torch custom ops (ops.cc). They are registered with torch's dispatcher
// (torch.ops.<namespace>.<op>), not on the Python module, so this header includes nothing of
// pybind11 or torch.
#pragma once

#include "bindings/torch/export.h"

namespace hyper_parallel::shmem::binding {

/// Registers the custom ops (nothing yet); the generic module's init calls it last.
HPS_BINDING_API void RegisterOps();

}  // namespace hyper_parallel::shmem::binding
