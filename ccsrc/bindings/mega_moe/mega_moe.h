// MegaMoE's native ops from Python (mega_moe.cc), registered on their own extension module.
// Includes pybind11 only, so the module init includes no torch.
#pragma once

#include <pybind11/pybind11.h>

namespace hyper_parallel::shmem::binding {

/// moe_layout, moe_dispatch and moe_combine (ops/mega_moe).
void RegisterMegaMoe(pybind11::module_& m);

}  // namespace hyper_parallel::shmem::binding
