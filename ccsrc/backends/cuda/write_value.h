// How the CUDA backend sets a 64-bit word on a stream (CudaApi::WriteValue64), as a policy kept
// apart from the CUDA calls so that every answer of the driver is tested on machines without a
// GPU.
//
// The driver's stream memory operation (cuStreamWriteValue64) is the cheaper way; a one-thread
// store kernel is the way that always works. The driver refuses the operation for more reasons
// than "not supported" (memory opened from another process's IPC handle, no current driver
// context on the legacy stream, a device without stream memory operations), and a refusal on
// those grounds must not fail every barrier and all_gather: any refusal falls back to the
// kernel. Only when the kernel fails too is the write an error, and it names both answers.
//
// Thread-safety: a pure function of its callables.
#pragma once

#include <string>
#include <utility>

#include "base/status.h"

namespace hyper_parallel::shmem::cuda {

/// `driver()` returns the name of the driver's refusal ("" where it wrote the word, or where
/// the driver has no such entry point and it was not asked: pass `has_driver` false); `kernel()`
/// launches the store kernel. The driver's way first, the kernel's on any refusal.
template <class Driver, class Kernel>
Status WriteValueWithFallback(bool has_driver, Driver&& driver, Kernel&& kernel) {
  std::string refusal;
  if (has_driver) {
    refusal = std::forward<Driver>(driver)();
    if (refusal.empty()) return Status::Ok();
  }
  Status launched = std::forward<Kernel>(kernel)();
  if (launched.ok() || refusal.empty()) return launched;
  return Status::Assertion(launched.code(),
                           "cannot set a word on the stream: the driver refused "
                           "cuStreamWriteValue64 and the store kernel failed",
                           {{"driver", refusal}, {"kernel", launched.message()}});
}

}  // namespace hyper_parallel::shmem::cuda
