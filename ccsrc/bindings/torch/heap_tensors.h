// Tensors over symmetric-heap memory and the operand checks every entry shares. empty() makes
// the tensors (CPU tensors over a heap this process addresses, CUDA tensors over a CUDA
// backend's device heap) with a storage deleter that reports an allocation dropped without
// free() as a leak; free() invalidates the storage. Symmetric() is the protection chain's
// first link: a tensor's storage identity -> the allocation it was made for; the Runtime then
// checks the allocation is live in this lifecycle and the byte range inside it.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "backends/backend.h"
#include "bindings/torch/export.h"
#include "runtime/runtime.h"

namespace hyper_parallel::shmem::binding {

/// "a <dtype> tensor of shape [..] on <device>", for a message.
HPS_BINDING_API std::string Describe(const at::Tensor& tensor);

/// The tensor's byte size (elements x element size).
HPS_BINDING_API std::uint64_t ByteSize(const at::Tensor& tensor);

/// A local operand's device: in host memory, or on the heap's device (a copy engine reads
/// either). A heap tensor passes without asking the Runtime.
HPS_BINDING_API void CheckLocalDevice(std::string_view operation, std::string_view name,
                                      const at::Tensor& tensor);

/// Read by the host: a CPU tensor whatever the heap's device.
HPS_BINDING_API void CheckCpu(std::string_view operation, std::string_view name,
                              const at::Tensor& tensor);

HPS_BINDING_API void CheckContiguous(std::string_view operation, std::string_view name,
                                     const at::Tensor& tensor);

/// True for a tensor over an allocation of empty() (freed or not): what a copy is not.
HPS_BINDING_API bool IsSymmetric(const at::Tensor& tensor);

/// A symmetric operand: a contiguous tensor over an allocation of empty(), on the heap's
/// device, as the view the Runtime checks.
HPS_BINDING_API SymmetricView Symmetric(std::string_view operation, std::string_view name,
                                        const at::Tensor& tensor);

/// The tensor's bytes as an operand of the Runtime when it lies in an allocation of torch's
/// symm_mem on this runtime (symm_mem.cc; docs/api.md); a released one raises USE_AFTER_FREE.
/// Empty for any other tensor. Symmetric() falls back to it.
std::optional<SymmetricView> SymmMemView(std::string_view operation, std::string_view name,
                                         const at::Tensor& tensor);

/// A local (non-symmetric side) operand: any contiguous tensor in host memory or on the heap's
/// device that was not freed; its data (null when it has no elements).
HPS_BINDING_API void* Local(std::string_view operation, std::string_view name,
                            const at::Tensor& tensor);

/// Queued work keeps the tensors it reads or writes alive until it has run (nothing is held on
/// the default stream, which runs before the call returns).
HPS_BINDING_API KeepAlive Hold(StreamRef stream, const at::Tensor& a, const at::Tensor& b);

}  // namespace hyper_parallel::shmem::binding
