// The primitives as torch custom ops (ops.cc, docs/compile.md): schemas and kernels registered
// with torch's dispatcher as torch.ops.hps.<op>, and the order token's life (order_token.h),
// which the lifecycle entries (bootstrap.cc) open and close. Includes pybind11, not torch.
#pragma once

#include <pybind11/pybind11.h>

#include "bindings/torch/export.h"

namespace hyper_parallel::shmem::binding {

/// Adds order_token to `m`; the generic module's init calls it last. The ops themselves
/// register with the dispatcher when the binding's library loads (TORCH_LIBRARY in ops.cc).
HPS_BINDING_API void RegisterOps(pybind11::module_& m);

/// A new order token for the lifecycle that has just begun (after a successful init); this and
/// CloseOrderToken are order_token.cc's.
void OpenOrderToken();

/// Drops the token (the lifecycle has ended); afterwards every op raises INVALID_STATE.
void CloseOrderToken();

}  // namespace hyper_parallel::shmem::binding
