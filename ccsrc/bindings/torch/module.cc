// The generic extension module hyper_parallel_shmem_torch (the package's shmem/_runtime.py
// imports it as `native`): a list of registrations, each in the file that does that job. It
// names no consumer: a consumer's ops have a module of their own (bindings/<consumer>/), which
// links the same shared library and so shares the process Runtime.
#include <pybind11/pybind11.h>

#include "bindings/torch/ops.h"
#include "bindings/torch/registration.h"

namespace binding = hyper_parallel::shmem::binding;

PYBIND11_MODULE(hyper_parallel_shmem_torch, m) {
  m.doc() = "Hyper-Parallel SHMEM native binding (use hyper_parallel.core.multicore.shmem)";
  binding::RegisterErrors(m);  // first: everything below may raise ShmemError
  binding::RegisterBootstrap(m);
  binding::RegisterHeapTensors(m);
  binding::RegisterPrimitives(m);
  binding::RegisterCollectives(m);
  binding::RegisterAtomics(m);
  binding::RegisterStreams(m);
  binding::RegisterDiagnostics(m);
  binding::RegisterTeams(m);
  binding::RegisterSymmMem(m);  // torch's symm_mem API on this runtime
  binding::RegisterOps(m);  // the primitives as torch custom ops, and the order token
}
