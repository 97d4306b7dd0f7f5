// Tensors over symmetric-heap memory (heap_tensors.h): empty() and free() from Python, the
// storage deleter, invalidation at free, the protection chain's first link and the operand
// checks. Includes ATen's Tensor and torch's pybind casters (a dtype, a tensor).
#include "bindings/torch/heap_tensors.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/utils/pybind.h>

#include <atomic>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "bindings/torch/errors.h"
#include "bindings/torch/primitives.h"
#include "bindings/torch/registration.h"
#include "bindings/torch/streams.h"
#include "runtime/heap_allocator.h"

namespace py = pybind11;

namespace hyper_parallel::shmem::binding {
namespace {

// Owned by the storage's DataPtr: what the deleter and the protection chain need to know.
struct AllocationContext {
  AllocationId id = 0;
  std::uint64_t lifecycle = 0;
  void* base = nullptr;
  std::uint64_t bytes = 0;
  int rank = -1;
  // The tensor empty() returned: free() accepts exactly it, never a view of it.
  c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl> owner{
      c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>()};
  std::atomic<bool> freed{false};
};

// The storage deleter. A live allocation losing its last reference is a leak: report it at
// once; nothing collective may run here.
void DeleteAllocationContext(void* raw) {
  auto* context = static_cast<AllocationContext*>(raw);
  if (!context->freed.load(std::memory_order_acquire)) {
    Runtime::Process().ReportOrphan(OrphanReport{context->id, context->lifecycle, context->base,
                                                 context->bytes, context->rank});
  }
  delete context;
}

AllocationContext* ContextOf(const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage()) return nullptr;
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  at::DataPtr& data_ptr = storage->_mutable_data_ptr_no_checks();  // freed storages throw otherwise
  if (data_ptr.get_deleter() != &DeleteAllocationContext) return nullptr;
  return static_cast<AllocationContext*>(data_ptr.get_context());
}

// The framework device of tensors over a heap on `device`, where the framework has one: CUDA
// tensors over a CUDA device heap; NPU tensors (torch's PrivateUse1 device "npu") over an NPU
// heap once torch_npu is imported, also where the heap is host memory (the fake vendor
// library's). Empty: CPU tensors over a host heap, or none (empty() says why).
std::optional<c10::Device> FrameworkDevice(const DeviceId& device, bool host) {
  const auto index = static_cast<c10::DeviceIndex>(device.index);
  if (!host && device.type == DeviceType::kCuda) return c10::Device(c10::kCUDA, index);
  if (device.type == DeviceType::kNpu && NpuFrameworkLoaded()) {
    return c10::Device(c10::DeviceType::PrivateUse1, index);
  }
  return std::nullopt;
}

// The device of tensors over the heap: the framework device (FrameworkDevice), else the CPU.
// Empty when the Runtime is not ready: the call itself then reports the Runtime's state.
std::optional<c10::Device> HeapTensorDevice() {
  DeviceId device;
  bool host = true;
  if (!Runtime::Process().HeapPlacement("device", &device, &host).ok()) return std::nullopt;
  // The CPU for a host heap, or one empty() refuses to make tensors over.
  return FrameworkDevice(device, host).value_or(c10::Device(c10::kCPU));
}

// A symmetric operand: on the heap's device. A CPU tensor, or one whose storage empty() made
// (on the heap's device by construction), passes without asking the Runtime; the protection
// chain then resolves its allocation.
void CheckOnHeapDevice(std::string_view operation, std::string_view name,
                       const at::Tensor& tensor) {
  if (tensor.defined() && (tensor.device().is_cpu() || ContextOf(tensor) != nullptr)) return;
  const c10::Device heap = HeapTensorDevice().value_or(c10::Device(c10::kCPU));
  if (!tensor.defined() || tensor.device() != heap) {
    Check(Contract(operation, name, "a tensor on the runtime's device (" + heap.str() + ")",
                   Describe(tensor)));
  }
}

at::Tensor Empty(const std::vector<int64_t>& sizes, at::ScalarType dtype, std::uint64_t alignment,
                 const std::string& note) {
  // A request refused here still takes its place (docs/architecture.md, "A refused call keeps
  // its place"); one the heap cannot place, the Runtime refuses alike.
  const std::uint64_t bytes = Refusable("empty", kWorldTeam, [&] {
    std::uint64_t numel = 1;
    for (int64_t size : sizes) {
      if (size < 0) Check(Contract("empty", "size", "non-negative", std::to_string(size)));
      if (size != 0 && numel > (std::uint64_t{1} << 62) / static_cast<std::uint64_t>(size)) {
        Check(Contract("empty", "number of elements", "below 2^62", "an overflowing shape"));
      }
      numel *= static_cast<std::uint64_t>(size);
    }
    const std::uint64_t element = c10::elementSize(dtype);
    if (numel > (std::uint64_t{1} << 62) / element) {
      Check(Contract("empty", "byte size", "below 2^62", "an overflowing shape"));
    }
    return numel * element;
  });
  Runtime& runtime = Runtime::Process();
  Allocation allocation;
  c10::Device device(c10::kCPU);
  c10::DispatchKey key = c10::DispatchKey::CPU;
  {
    py::gil_scoped_release no_gil;
    // Tensors on the framework's device where it has one (FrameworkDevice); else CPU tensors
    // over a heap this process addresses; no tensors over any other device's heap.
    DeviceId heap_device;
    bool host = true;
    Check(runtime.HeapPlacement("empty", &heap_device, &host));
    if (const std::optional<c10::Device> framework = FrameworkDevice(heap_device, host)) {
      if (!c10::impl::hasDeviceGuardImpl(framework->type())) {
        Check(Status::Assertion(ErrorCode::kUnsupportedCapability,
                                "the heap is CUDA device memory and this torch has no CUDA support",
                                {{"device", heap_device.ToString()}})
                  .At("empty", "validate"));
      }
      device = *framework;
      key = framework->is_cuda() ? c10::DispatchKey::CUDA : c10::DispatchKey::PrivateUse1;
    } else if (!host) {
      Check(runtime.RequireHostAddressableHeap("empty"));
    }
    Check(runtime.Allocate(bytes, alignment, &allocation, note));
  }
  auto* context = new AllocationContext();
  context->id = allocation.id;
  context->lifecycle = allocation.lifecycle;
  context->base = allocation.data;
  context->bytes = allocation.bytes;
  context->rank = runtime.rank();
  c10::DataPtr data_ptr(allocation.data, context, &DeleteAllocationContext, device);
  c10::Storage storage(c10::Storage::use_byte_size_t(), bytes, std::move(data_ptr),
                       /*allocator=*/nullptr, /*resizable=*/false);
  at::Tensor tensor = at::detail::make_tensor<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(key), c10::scalarTypeToTypeMeta(dtype));
  tensor.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  context->owner = c10::weak_intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>(
      tensor.getIntrusivePtr());
  return tensor;
}

// After a successful free: the storage keeps its context (so a later use is recognised as a
// use of freed memory) but loses its memory: null data, and every data access in torch raises
// our USE_AFTER_FREE message instead of dereferencing null. The byte size stays the
// allocation's: views of the tensor (indexing, print's slicing) are metadata only and are
// still built, so their first data access names the free, where a storage of zero bytes made
// torch's own view bounds check fail first with "out of bounds for storage of size 0".
void InvalidateStorage(const at::Tensor& tensor, AllocationContext* context) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  context->freed.store(true, std::memory_order_release);
  at::DataPtr& current = storage->_mutable_data_ptr_no_checks();
  const c10::Device device = current.device();
  void* owned = current.release_context();  // the context moves to the new DataPtr
  storage->set_data_ptr_noswap(c10::DataPtr(nullptr, owned, &DeleteAllocationContext, device));
  storage->set_throw_on_mutable_data_ptr();
  storage->release_data_and_set_meta_custom_data_ptr_error_msg_(
      "[HYPER_PARALLEL_SHMEM_ERROR] error_code=USE_AFTER_FREE operation=tensor_access "
      "phase=validate tensor was freed by shmem.free: allocation_id=" +
      std::to_string(context->id));
}

void Free(const at::Tensor& tensor, const std::string& note) {
  // Refused here, the free still takes its place (docs/architecture.md, "A refused call keeps
  // its place"): the other PEs' free of that number fails too.
  AllocationContext* context = Refusable("free", kWorldTeam, [&] {
    CheckOnHeapDevice("free", "tensor", tensor);
    AllocationContext* found = ContextOf(tensor);
    if (found == nullptr) {
      Check(Contract("free", "tensor", "a symmetric tensor from shmem.empty",
                     Describe(tensor) + " outside the symmetric heap"));
    }
    if (!found->freed.load(std::memory_order_acquire)) {
      // Only the tensor empty() returned, with its original extent, frees the allocation: a
      // view, slice or reshape of it is refused.
      const bool is_owner = found->owner.lock().get() == tensor.unsafeGetTensorImpl();
      const bool whole = tensor.storage_offset() == 0 && ByteSize(tensor) == found->bytes;
      if (!is_owner || !whole) {
        Check(Contract("free", "freed tensor",
                       "the tensor shmem.empty returned (not a view, slice or reshape of it)",
                       Describe(tensor) + " viewing allocation " + std::to_string(found->id)));
      }
    }
    return found;
  });
  // An already freed tensor still goes to the Runtime, which reports DOUBLE_FREE (or
  // STALE_LIFECYCLE for a tensor of an earlier lifecycle) by its allocation id.
  const SymmetricView whole{context->id, context->base, context->bytes};
  {
    py::gil_scoped_release no_gil;
    Check(Runtime::Process().Free(whole, note));
  }
  InvalidateStorage(tensor, context);
}

}  // namespace

std::string Describe(const at::Tensor& tensor) {
  if (!tensor.defined()) return "an undefined tensor";
  std::string text = "a " + std::string(c10::toString(tensor.scalar_type())) + " tensor of shape [";
  for (std::size_t i = 0; i < static_cast<std::size_t>(tensor.dim()); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(tensor.size(static_cast<int64_t>(i)));
  }
  return text + "] on " + tensor.device().str();
}

std::uint64_t ByteSize(const at::Tensor& tensor) {
  return static_cast<std::uint64_t>(tensor.numel()) * tensor.element_size();
}

void CheckLocalDevice(std::string_view operation, std::string_view name, const at::Tensor& tensor) {
  if (tensor.defined() && (tensor.device().is_cpu() || ContextOf(tensor) != nullptr)) return;
  const std::optional<c10::Device> known = HeapTensorDevice();
  if (tensor.defined() && !known.has_value()) return;  // the Runtime's state fails the call
  const c10::Device heap = known.value_or(c10::Device(c10::kCPU));
  if (!tensor.defined() || tensor.device() != heap) {
    const std::string rule =
        heap.is_cpu() ? std::string("a tensor on the runtime's device (cpu)")
                      : "a tensor on the cpu or the runtime's device (" + heap.str() + ")";
    Check(Contract(operation, name, rule, Describe(tensor)));
  }
}

void CheckCpu(std::string_view operation, std::string_view name, const at::Tensor& tensor) {
  if (!tensor.defined() || tensor.device().type() != c10::kCPU) {
    Check(Contract(operation, name, "a tensor in host memory (cpu)", Describe(tensor)));
  }
}

void CheckContiguous(std::string_view operation, std::string_view name, const at::Tensor& tensor) {
  if (!tensor.is_contiguous()) {
    std::string strides = "strides [";
    for (int64_t i = 0; i < tensor.dim(); ++i) {
      strides += (i > 0 ? ", " : "") + std::to_string(tensor.stride(i));
    }
    Check(Contract(operation, name, "contiguous", Describe(tensor) + " with " + strides + "]"));
  }
}

bool IsSymmetric(const at::Tensor& tensor) { return ContextOf(tensor) != nullptr; }

SymmetricView Symmetric(std::string_view operation, std::string_view name,
                        const at::Tensor& tensor) {
  CheckOnHeapDevice(operation, name, tensor);
  AllocationContext* context = ContextOf(tensor);
  if (context == nullptr) {
    if (std::optional<SymmetricView> view = SymmMemView(operation, name, tensor)) return *view;
    Check(Contract(operation, name, "a symmetric tensor from shmem.empty or symm_mem.empty",
                   Describe(tensor) + " outside the symmetric heap"));
  }
  CheckContiguous(operation, name, tensor);
  const std::uint64_t offset = static_cast<std::uint64_t>(tensor.storage_offset()) *
                               tensor.element_size();
  return SymmetricView{context->id, static_cast<std::byte*>(context->base) + offset,
                       ByteSize(tensor)};
}

void* Local(std::string_view operation, std::string_view name, const at::Tensor& tensor) {
  CheckLocalDevice(operation, name, tensor);
  CheckContiguous(operation, name, tensor);
  if (AllocationContext* context = ContextOf(tensor);
      context != nullptr && context->freed.load(std::memory_order_acquire)) {
    Status status = Status::Assertion(
        ErrorCode::kUseAfterFree, "tensor was freed by shmem.free",
        {{"operand", std::string(name)}, {"allocation_id", std::to_string(context->id)}});
    Check(status.At(operation, "validate"));
  }
  return tensor.numel() == 0 ? nullptr : tensor.data_ptr();
}

KeepAlive Hold(StreamRef stream, const at::Tensor& a, const at::Tensor& b) {
  if (stream.native == nullptr) return nullptr;  // the default stream runs before returning
  return std::make_shared<std::pair<at::Tensor, at::Tensor>>(a, b);
}

void RegisterHeapTensors(py::module_& m) {
  m.def("empty", &Empty, py::arg("sizes"), py::arg("dtype"), py::arg("alignment"),
        py::arg("note") = "");
  m.def("free", &Free, py::arg("tensor"), py::arg("note") = "");
  m.def("is_symmetric",
        [](const at::Tensor& tensor) { return IsSymmetric(tensor); },
        py::arg("tensor"), "Whether the tensor's storage is (or was) a symmetric allocation.");
  m.def("default_alignment", [] { return HeapAllocator::kGranule; });
}

}  // namespace hyper_parallel::shmem::binding
