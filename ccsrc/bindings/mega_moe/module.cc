// The MegaMoE extension module hyper_parallel_mega_moe_torch (the package's mega_moe/_native.py
// imports it). It links the generic binding's shared library: the process Runtime, the heap
// tensors and the translation of native errors are that library's, so this module must be
// imported after the generic one (_native.py imports the shmem package first).
#include <pybind11/pybind11.h>

#include "bindings/mega_moe/mega_moe.h"

PYBIND11_MODULE(hyper_parallel_mega_moe_torch, m) {
  m.doc() = "Hyper-Parallel SHMEM MegaMoE native ops (use hyper_parallel.core.multicore.mega_moe)";
  hyper_parallel::shmem::binding::RegisterMegaMoe(m);
}
