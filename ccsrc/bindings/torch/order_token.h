// The order token (docs/compile.md): a one-element torch.int64 CPU tensor that every custom op
// of the binding (torch.ops.hps.*) and of a consumer's module takes first and declares mutated,
// `Tensor(t!) order`. The shared mutation is a data dependency that keeps the ops in program
// order through every compiler pass; no kernel writes the token. The binding makes the token
// when a lifecycle begins (init) and drops it when the lifecycle ends (shutdown); Python reads
// it as shmem._ops.order_token(). It holds a value unique to its lifecycle and process, so a
// copy of it (functionalization's clone) is still recognised, and the token of an earlier
// lifecycle is refused as stale. Includes ATen's Tensor only.
#pragma once

#include <ATen/core/Tensor.h>

#include "bindings/torch/export.h"

namespace hyper_parallel::shmem::binding {

/// Raises ShmemError unless `order` is the live lifecycle's token (or a copy of it), tagged
/// with `op`: INVALID_STATE outside a lifecycle, STALE_LIFECYCLE for an earlier lifecycle's
/// token, INVALID_ARGUMENT for any other tensor. Reads one int64; needs no GIL.
HPS_BINDING_API void CheckOrderToken(const at::Tensor& order, const char* op);

/// The live lifecycle's token (order_token.cc), for the generic module's order_token() (ops.cc):
/// INVALID_STATE outside a lifecycle.
at::Tensor OrderToken();

}  // namespace hyper_parallel::shmem::binding
