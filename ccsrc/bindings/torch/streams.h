// The stream an operation is enqueued on: the calling thread's current stream, as every entry
// of every module that links the binding's shared library reads it (streams.cc).
#pragma once

#include "backends/backend.h"
#include "bindings/torch/export.h"

namespace hyper_parallel::shmem::binding {

/// The calling thread's current stream (no lock: every entry checks the Runtime's state
/// itself): the backend's own current stream where it has streams; torch's current CUDA
/// stream on the current device where the backend uses CUDA's streams; torch_npu's current NPU
/// stream (torch.npu.current_stream().npu_stream, read under the GIL) where the backend uses
/// NPU streams and torch_npu is imported (the Runtime rejects a current device other than its
/// own); else the backend's default stream.
HPS_BINDING_API StreamRef CurrentStream();

/// Whether `stream` is one of the backend's own queued streams (a shmem.Stream of the host
/// backend), whose work has not run when the call returns. A framework stream (CUDA's, an
/// NPU's) is not: a device backend reads a collective's results back by synchronising it.
HPS_BINDING_API bool IsQueuedOwnStream(StreamRef stream);

/// Whether torch_npu (or a stand-in) registered the NPU as torch's PrivateUse1 device "npu".
HPS_BINDING_API bool NpuFrameworkLoaded();

}  // namespace hyper_parallel::shmem::binding
