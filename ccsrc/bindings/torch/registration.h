// The parts of the generic module's Python API, one registration each: module.cc's init is
// the list of them. Each adds its functions and classes to `m`; all live in the binding's
// shared library. Includes pybind11 only, so a file that registers includes no torch.
#pragma once

#include <pybind11/pybind11.h>

#include "bindings/torch/export.h"

namespace hyper_parallel::shmem::binding {

/// errors.cc: set_error_factory and the translator of native errors (once per process).
HPS_BINDING_API void RegisterErrors(pybind11::module_& m);
/// bootstrap.cc: init (over a Python bootstrap object), shutdown, state.
HPS_BINDING_API void RegisterBootstrap(pybind11::module_& m);
/// heap_tensors.cc: empty, free, is_symmetric, default_alignment.
HPS_BINDING_API void RegisterHeapTensors(pybind11::module_& m);
/// primitives.cc: put, get, signal, put_signal, wait_signal.
HPS_BINDING_API void RegisterPrimitives(pybind11::module_& m);
/// collectives.cc: collective, all_gather_v, all_to_all, refuse_collective.
HPS_BINDING_API void RegisterCollectives(pybind11::module_& m);
/// atomics.cc: atomic, fence, quiet, put_nbi, get_nbi, wait_signals, test_signal.
HPS_BINDING_API void RegisterAtomics(pybind11::module_& m);
/// streams.cc: Stream, Event, set_current_stream.
HPS_BINDING_API void RegisterStreams(pybind11::module_& m);
/// diagnostics.cc: snapshot, log_level, timeout_seconds.
HPS_BINDING_API void RegisterDiagnostics(pybind11::module_& m);
/// teams.cc: TeamHandle, set_team_class, the team splits, create, destroy, describe, team_pe.
HPS_BINDING_API void RegisterTeams(pybind11::module_& m);
/// symm_mem.cc: the "HPS" allocators of torch's symm_mem API (symm_mem_register) and their
/// reclaim; symm_mem_ops.cc registers the symm_mem operators' CPU kernels with torch.
HPS_BINDING_API void RegisterSymmMem(pybind11::module_& m);
// The custom ops register with torch's dispatcher (and order_token on the module): ops.h.

}  // namespace hyper_parallel::shmem::binding
