// The torch binding: tensors over symmetric-heap memory (CPU tensors over a heap the process
// addresses, CUDA tensors over a CUDA backend's device heap), the protection chain from a tensor
// to its live allocation, storage invalidation at free, the current stream (the backend's own
// host streams, or torch's current CUDA stream), a bootstrap over a Python object (the package
// passes one over its torch.distributed process group), and the Python module
// hyper_parallel_shmem_torch. The only translation unit that includes torch; it includes no
// CUDA header (torch's streams are reached through c10's device-generic interface).
//
// Policy stays in the Runtime; this file translates tensors to SymmetricViews and Status to
// Python exceptions. Every native call that may block releases the GIL.
#include <torch/extension.h>

#include <c10/core/impl/VirtualGuardImpl.h>
#include <pybind11/stl.h>

#include <atomic>
#include <chrono>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "backends/stream.h"
#include "ops/collectives.h"
#include "ops/mega_moe/kernels.h"
#include "base/config.h"
#include "runtime/heap_allocator.h"
#include "base/log.h"
#include "runtime/runtime.h"

namespace py = pybind11;
namespace hps = hyper_parallel::shmem;

namespace {

// ---- errors --------------------------------------------------------------------------------

// A failed Status on its way to Python; the translator raises the package's ShmemError.
struct NativeError {
  hps::Status status;
};

py::object& ErrorClass() {
  static py::object* cls = new py::object();  // set by the package at import; never destroyed
  return *cls;
}

[[noreturn]] void Throw(hps::Status status) {
  hps::Runtime::Process().NoteFailure(status);  // debug_state's latest_failure sees it too
  throw NativeError{std::move(status)};
}

void Check(hps::Status status) {
  if (!status.ok()) Throw(std::move(status));
}

hps::Status Contract(std::string_view operation, std::string_view what, std::string_view rule,
                     std::string_view got) {
  hps::Status status = hps::Status::Contract(hps::ErrorCode::kInvalidArgument, what, rule, got);
  status.At(operation, "validate");
  return status;
}

// ---- tensors over the heap -----------------------------------------------------------------

// Owned by the storage's DataPtr: what the deleter and the protection chain need to know.
struct AllocationContext {
  hps::AllocationId id = 0;
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
    hps::Runtime::Process().ReportOrphan(hps::OrphanReport{
        context->id, context->lifecycle, context->base, context->bytes, context->rank});
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

std::string Describe(const at::Tensor& tensor) {
  if (!tensor.defined()) return "an undefined tensor";
  std::string text = "a " + std::string(c10::toString(tensor.scalar_type())) + " tensor of shape [";
  for (std::size_t i = 0; i < static_cast<std::size_t>(tensor.dim()); ++i) {
    if (i > 0) text += ", ";
    text += std::to_string(tensor.size(static_cast<int64_t>(i)));
  }
  return text + "] on " + tensor.device().str();
}

// The device of tensors over the heap: the CPU for a heap this process addresses, else the
// framework device of the backend at the Runtime's device index (cuda:N). Empty when the
// Runtime is not ready: the call itself then reports the Runtime's state.
std::optional<c10::Device> HeapTensorDevice() {
  hps::DeviceId device;
  bool host = true;
  if (!hps::Runtime::Process().HeapPlacement("device", &device, &host).ok()) return std::nullopt;
  if (!host && device.type == hps::DeviceType::kCuda) {
    return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(device.index));
  }
  return c10::Device(c10::kCPU);  // a host heap, or one empty() refuses to make tensors over
}

// A symmetric operand: on the heap's device. A CPU tensor, or one whose storage empty() made
// (on the heap's device by construction), passes without asking the Runtime; the protection
// chain then resolves its allocation.
void CheckOnHeapDevice(std::string_view operation, std::string_view name, const at::Tensor& tensor) {
  if (tensor.defined() && (tensor.device().is_cpu() || ContextOf(tensor) != nullptr)) return;
  const c10::Device heap = HeapTensorDevice().value_or(c10::Device(c10::kCPU));
  if (!tensor.defined() || tensor.device() != heap) {
    Check(Contract(operation, name, "a tensor on the runtime's device (" + heap.str() + ")",
                   Describe(tensor)));
  }
}

// A local operand: in host memory, or on the heap's device (a copy engine reads either). A
// heap tensor passes without asking the Runtime.
void CheckLocalDevice(std::string_view operation, std::string_view name, const at::Tensor& tensor) {
  if (tensor.defined() && (tensor.device().is_cpu() || ContextOf(tensor) != nullptr)) return;
  const std::optional<c10::Device> known = HeapTensorDevice();
  if (tensor.defined() && !known.has_value()) return;  // the Runtime's state fails the call
  const c10::Device heap = known.value_or(c10::Device(c10::kCPU));
  if (!tensor.defined() || tensor.device() != heap) {
    Check(Contract(operation, name,
                   heap.is_cpu() ? std::string("a tensor on the runtime's device (cpu)")
                                 : "a tensor on the cpu or the runtime's device (" + heap.str() + ")",
                   Describe(tensor)));
  }
}

// Read by the host (MegaMoE's count matrix): a CPU tensor whatever the heap's device.
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

std::uint64_t ByteSize(const at::Tensor& tensor) {
  return static_cast<std::uint64_t>(tensor.numel()) * tensor.element_size();
}

// The protection chain, first link: storage identity -> the allocation it was made for. The
// Runtime then checks the allocation is live in this lifecycle and the byte range inside it.
hps::SymmetricView Symmetric(std::string_view operation, std::string_view name,
                             const at::Tensor& tensor) {
  CheckOnHeapDevice(operation, name, tensor);
  AllocationContext* context = ContextOf(tensor);
  if (context == nullptr) {
    Check(Contract(operation, name, "a symmetric tensor from shmem.empty",
                   Describe(tensor) + " outside the symmetric heap"));
  }
  CheckContiguous(operation, name, tensor);
  const std::uint64_t offset = static_cast<std::uint64_t>(tensor.storage_offset()) *
                               tensor.element_size();
  return hps::SymmetricView{context->id, static_cast<std::byte*>(context->base) + offset,
                            ByteSize(tensor)};
}

// A local (non-symmetric side) operand: any contiguous tensor in host memory or on the heap's
// device that was not freed.
void* Local(std::string_view operation, std::string_view name, const at::Tensor& tensor) {
  CheckLocalDevice(operation, name, tensor);
  CheckContiguous(operation, name, tensor);
  if (AllocationContext* context = ContextOf(tensor);
      context != nullptr && context->freed.load(std::memory_order_acquire)) {
    hps::Status status = hps::Status::Assertion(
        hps::ErrorCode::kUseAfterFree, "tensor was freed by shmem.free",
        {{"operand", std::string(name)}, {"allocation_id", std::to_string(context->id)}});
    Check(status.At(operation, "validate"));
  }
  return tensor.numel() == 0 ? nullptr : tensor.data_ptr();
}

// The backend entry HYPER_PARALLEL_SHMEM_BACKEND selects, looked up once (null: invalid
// setting, which Init reports).
const hps::BackendEntry* SelectedBackend() {
  static const hps::BackendEntry* const entry = []() -> const hps::BackendEntry* {
    hps::Config config;
    if (!hps::Config::FromEnvironment(hps::ProcessEnvironment(), &config).ok()) return nullptr;
    const hps::BackendEntry* found = nullptr;
    return hps::FindConfiguredBackend(config, &found).ok() ? found : nullptr;
  }();
  return entry;
}

// The user streams of the selected backend (null: it has none, or the setting is invalid).
hps::StreamProvider* Streams() {
  const hps::BackendEntry* entry = SelectedBackend();
  return entry == nullptr ? nullptr : entry->streams;
}

hps::StreamProvider& RequireStreams() {
  hps::StreamProvider* provider = Streams();
  if (provider == nullptr) {
    throw NativeError{hps::Status::Assertion(
        hps::ErrorCode::kUnsupportedCapability,
        "the selected backend has no streams of its own: use the framework's streams",
        {{"backend_setting", std::string(hps::kEnvBackend)}})};
  }
  return *provider;
}

// The calling thread's current stream (a thread-local read, no lock: every entry checks the
// Runtime's state itself): the backend's own current stream where it has streams; torch's
// current CUDA stream on the current device where the backend uses CUDA's streams (the Runtime
// rejects a current device other than its own); else the backend's default stream.
hps::StreamRef CurrentStream() {
  if (hps::StreamProvider* provider = Streams()) return provider->CurrentStream();
  const hps::BackendEntry* entry = SelectedBackend();
  if (entry == nullptr || !entry->framework_stream ||
      entry->framework_device != hps::DeviceType::kCuda ||
      !c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) {
    return hps::StreamRef{};
  }
  const c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
  return entry->framework_stream(cuda.getStream(cuda.getDevice()).native_handle());
}

// ---- Python arguments -----------------------------------------------------------------------

// Argument mistakes raise TypeError / ValueError in the contract shape, here, before anything
// native runs; what the protection chain decides raises ShmemError. Checking in C++ keeps a
// call from Python to one crossing (the Python wrappers only pass arguments through).
std::string ContractText(std::string_view what, std::string_view rule, std::string_view got) {
  return std::string(what) + " must be " + std::string(rule) + ", but got " + std::string(got);
}

std::string TypeName(py::handle value) {
  return py::str(py::type::handle_of(value).attr("__name__"));
}

at::Tensor TensorArg(std::string_view name, py::handle value) {
  if (!THPVariable_Check(value.ptr())) {
    throw py::type_error(ContractText(name, "a torch.Tensor", TypeName(value)));
  }
  return THPVariable_Unpack(value.ptr());
}

// An int (not a bool); `in_range` false when it does not fit int64.
std::int64_t IntArg(std::string_view name, py::handle value, bool* in_range) {
  if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr())) {
    throw py::type_error(ContractText(name, "an int",
                                      TypeName(value) + " " + std::string(py::repr(value))));
  }
  int overflow = 0;
  const long long result = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  *in_range = overflow == 0;
  return overflow == 0 ? result : 0;
}

// A signal value: an int representable as int64.
std::int64_t ValueArg(py::handle value) {
  bool in_range = true;
  const std::int64_t result = IntArg("value", value, &in_range);
  if (!in_range) {
    throw py::value_error(
        ContractText("value", "representable as int64", std::string(py::str(value))));
  }
  return result;
}

// A PE: an int; one outside every PE range is the Runtime's INVALID_ARGUMENT, like -1.
int PeArg(std::string_view operation, py::handle value) {
  bool in_range = true;
  const std::int64_t pe = IntArg("pe", value, &in_range);
  if (!in_range || pe < std::numeric_limits<int>::min() || pe > std::numeric_limits<int>::max()) {
    Check(Contract(operation, "pe", "in [0, " + std::to_string(hps::Runtime::Process().size()) + ")",
                   std::string(py::str(value))));
  }
  return static_cast<int>(pe);
}

// One of `choices` (joined by ", " in the message).
std::string ChoiceArg(std::string_view name, py::handle value,
                      std::initializer_list<std::string_view> choices) {
  if (!PyUnicode_Check(value.ptr())) {
    throw py::type_error(ContractText(name, "a str", TypeName(value)));
  }
  const std::string text = py::str(value);
  std::string joined;
  for (std::string_view choice : choices) {
    if (text == choice) return text;
    joined += (joined.empty() ? "" : ", ") + std::string(choice);
  }
  throw py::value_error(ContractText(name, "one of " + joined, std::string(py::repr(value))));
}

// A signal operand: a one-element int32/int64 tensor (its symmetry is checked natively).
at::Tensor SignalArg(py::handle value) {
  at::Tensor signal = TensorArg("sig", value);
  if (signal.scalar_type() != at::kInt && signal.scalar_type() != at::kLong) {
    throw py::type_error(ContractText(
        "sig dtype", "torch.int32 or torch.int64",
        "torch." + std::string(c10::getDtypeNames(signal.scalar_type()).first)));
  }
  if (signal.numel() != 1) {
    throw py::value_error(
        ContractText("sig", "a one-element tensor", std::to_string(signal.numel()) + " elements"));
  }
  return signal;
}

// Copies up to this size and signals cannot wait (the Runtime runs them under its mutex): the
// GIL stays held, which costs less than releasing and taking it back.
constexpr std::uint64_t kKeepGilBytes = 64ull << 10;

// Queued work keeps the tensors it reads or writes alive until it has run.
hps::KeepAlive Hold(hps::StreamRef stream, const at::Tensor& a, const at::Tensor& b) {
  if (stream.native == nullptr) return nullptr;  // the default stream runs before returning
  return std::make_shared<std::pair<at::Tensor, at::Tensor>>(a, b);
}

at::Tensor Empty(const std::vector<int64_t>& sizes, at::ScalarType dtype, std::uint64_t alignment,
                 const std::string& note) {
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
  const std::uint64_t bytes = numel * element;
  hps::Runtime& runtime = hps::Runtime::Process();
  hps::Allocation allocation;
  c10::Device device(c10::kCPU);
  c10::DispatchKey key = c10::DispatchKey::CPU;
  {
    py::gil_scoped_release no_gil;
    // CPU tensors over a heap this process addresses; CUDA tensors over a CUDA device heap
    // (which needs a torch built with CUDA); no tensors over any other device's heap yet.
    hps::DeviceId heap_device;
    bool host = true;
    Check(runtime.HeapPlacement("empty", &heap_device, &host));
    if (!host) {
      if (heap_device.type != hps::DeviceType::kCuda) {
        Check(runtime.RequireHostAddressableHeap("empty"));
      }
      if (!c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) {
        Check(hps::Status::Assertion(
                  hps::ErrorCode::kUnsupportedCapability,
                  "the heap is CUDA device memory and this torch has no CUDA support",
                  {{"device", heap_device.ToString()}})
                  .At("empty", "validate"));
      }
      device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(heap_device.index));
      key = c10::DispatchKey::CUDA;
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
// use of freed memory) but loses its memory: null data, zero bytes, and every data access in
// torch raises instead of dereferencing null.
void InvalidateStorage(const at::Tensor& tensor, AllocationContext* context) {
  c10::StorageImpl* storage = tensor.storage().unsafeGetStorageImpl();
  context->freed.store(true, std::memory_order_release);
  at::DataPtr& current = storage->_mutable_data_ptr_no_checks();
  const c10::Device device = current.device();
  void* owned = current.release_context();  // the context moves to the new DataPtr
  storage->set_data_ptr_noswap(c10::DataPtr(nullptr, owned, &DeleteAllocationContext, device));
  storage->set_nbytes(0);
  storage->set_throw_on_mutable_data_ptr();
  storage->release_data_and_set_meta_custom_data_ptr_error_msg_(
      "[HYPER_PARALLEL_SHMEM_ERROR] error_code=USE_AFTER_FREE operation=tensor_access "
      "phase=validate tensor was freed by shmem.free: allocation_id=" +
      std::to_string(context->id));
}

void Free(const at::Tensor& tensor, const std::string& note) {
  CheckOnHeapDevice("free", "tensor", tensor);
  AllocationContext* context = ContextOf(tensor);
  if (context == nullptr) {
    Check(Contract("free", "tensor", "a symmetric tensor from shmem.empty",
                   Describe(tensor) + " outside the symmetric heap"));
  }
  const bool already_freed = context->freed.load(std::memory_order_acquire);
  if (!already_freed) {
    // Only the tensor empty() returned, with its original extent, frees the allocation: a
    // view, slice or reshape of it is rejected here, before anything collective.
    const bool is_owner = context->owner.lock().get() == tensor.unsafeGetTensorImpl();
    const bool whole = tensor.storage_offset() == 0 && ByteSize(tensor) == context->bytes;
    if (!is_owner || !whole) {
      Check(Contract("free", "freed tensor",
                     "the tensor shmem.empty returned (not a view, slice or reshape of it)",
                     Describe(tensor) + " viewing allocation " + std::to_string(context->id)));
    }
  }
  // An already freed tensor still goes to the Runtime, which reports DOUBLE_FREE (or
  // STALE_LIFECYCLE for a tensor of an earlier lifecycle) by its allocation id.
  const hps::SymmetricView whole{context->id, context->base, context->bytes};
  {
    py::gil_scoped_release no_gil;
    Check(hps::Runtime::Process().Free(whole, note));
  }
  InvalidateStorage(tensor, context);
}

// A transfer's local side must match its symmetric side: the same dtype and byte size.
void CheckMatches(std::string_view operation, std::string_view local_name, const at::Tensor& local,
                  std::string_view symmetric_name, const at::Tensor& symmetric) {
  const std::string theirs = std::string(symmetric_name) + "'s ";
  if (local.scalar_type() != symmetric.scalar_type()) {
    Check(Contract(operation, std::string(local_name) + " dtype",
                   theirs + "dtype " + c10::toString(symmetric.scalar_type()),
                   c10::toString(local.scalar_type())));
  }
  if (ByteSize(local) != ByteSize(symmetric)) {
    Check(Contract(operation, std::string(local_name) + " byte size",
                   theirs + "byte size " + std::to_string(ByteSize(symmetric)),
                   std::to_string(ByteSize(local))));
  }
}

hps::SignalOp SignalOpArg(py::handle value) {
  return ChoiceArg("operation", value, {"set", "add"}) == "add" ? hps::SignalOp::kAdd
                                                                : hps::SignalOp::kSet;
}

// Runs `call` holding the GIL when it cannot wait, else without it.
template <class Call>
hps::Status Run(std::uint64_t bytes, Call call) {
  if (bytes <= kKeepGilBytes) return call();
  py::gil_scoped_release no_gil;
  return call();
}

void Put(py::handle dst, py::handle src, py::handle pe_arg) {
  const at::Tensor destination = TensorArg("dst", dst);
  const at::Tensor source = TensorArg("src", src);
  const int pe = PeArg("put", pe_arg);
  const hps::SymmetricView view = Symmetric("put", "dst", destination);
  const void* local = Local("put", "src", source);
  CheckMatches("put", "src", source, "dst", destination);
  const hps::StreamRef stream = CurrentStream();
  Check(Run(view.bytes, [&] {
    return hps::Runtime::Process().Put(view, local, pe, stream, Hold(stream, destination, source));
  }));
}

void Get(py::handle dst, py::handle src, py::handle pe_arg) {
  const at::Tensor destination = TensorArg("dst", dst);
  const at::Tensor source = TensorArg("src", src);
  const int pe = PeArg("get", pe_arg);
  const hps::SymmetricView view = Symmetric("get", "src", source);
  void* local = Local("get", "dst", destination);
  CheckMatches("get", "dst", destination, "src", source);
  const hps::StreamRef stream = CurrentStream();
  Check(Run(view.bytes, [&] {
    return hps::Runtime::Process().Get(local, view, pe, stream, Hold(stream, destination, source));
  }));
}

hps::SignalWidth Width(std::string_view operation, const at::Tensor& signal) {
  if (signal.scalar_type() == at::kInt) return hps::SignalWidth::k32;
  if (signal.scalar_type() == at::kLong) return hps::SignalWidth::k64;
  Check(Contract(operation, "sig dtype", "torch.int32 or torch.int64",
                 c10::toString(signal.scalar_type())));
  return hps::SignalWidth::k64;
}

void Signal(py::handle sig, py::handle value_arg, py::handle pe_arg, py::handle operation) {
  const at::Tensor signal = SignalArg(sig);
  const std::int64_t value = ValueArg(value_arg);
  const int pe = PeArg("signal", pe_arg);
  const hps::SignalOp op = SignalOpArg(operation);
  const hps::SignalWidth width = Width("signal", signal);
  const hps::SymmetricView view = Symmetric("signal", "sig", signal);
  Check(hps::Runtime::Process().Signal(view, width, value, pe, op, CurrentStream()));
}

void PutSignal(py::handle dst, py::handle src, py::handle sig, py::handle value_arg,
               py::handle pe_arg, py::handle operation) {
  const at::Tensor signal = SignalArg(sig);
  const at::Tensor destination = TensorArg("dst", dst);
  const at::Tensor source = TensorArg("src", src);
  const std::int64_t value = ValueArg(value_arg);
  const int pe = PeArg("put_signal", pe_arg);
  const hps::SignalOp op = SignalOpArg(operation);
  const hps::SymmetricView view = Symmetric("put_signal", "dst", destination);
  const void* local = Local("put_signal", "src", source);
  CheckMatches("put_signal", "src", source, "dst", destination);
  const hps::SignalWidth width = Width("put_signal", signal);
  const hps::SymmetricView signal_view = Symmetric("put_signal", "sig", signal);
  const hps::StreamRef stream = CurrentStream();
  Check(Run(view.bytes, [&] {
    return hps::Runtime::Process().PutSignal(view, local, signal_view, width, value, pe, op,
                                             stream, Hold(stream, destination, source));
  }));
}

void WaitSignal(py::handle sig, py::handle value_arg, py::handle comparison_arg) {
  const at::Tensor signal = SignalArg(sig);
  const std::int64_t value = ValueArg(value_arg);
  const std::string comparison =
      ChoiceArg("comparison", comparison_arg, {"eq", "ne", "gt", "ge", "lt", "le"});
  static const std::pair<std::string_view, hps::Comparison> kComparisons[] = {
      {"eq", hps::Comparison::kEq}, {"ne", hps::Comparison::kNe}, {"gt", hps::Comparison::kGt},
      {"ge", hps::Comparison::kGe}, {"lt", hps::Comparison::kLt}, {"le", hps::Comparison::kLe}};
  hps::Comparison chosen = hps::Comparison::kEq;
  for (const auto& [name, value_comparison] : kComparisons) {
    if (comparison == name) chosen = value_comparison;
  }
  const hps::SignalWidth width = Width("wait_signal", signal);
  const hps::SymmetricView view = Symmetric("wait_signal", "sig", signal);
  const hps::StreamRef stream = CurrentStream();
  py::gil_scoped_release no_gil;  // it may wait: another thread may need the GIL to signal
  Check(hps::Runtime::Process().WaitSignal(view, width, value, chosen, stream));
}

// Runs the collective unit called `name` (ops/collectives.h) over the Root WORLD: with no
// operand (barrier), or with a symmetric output and a local input of the same dtype, whose
// sizes the collective's own checks count in elements.
void RunCollective(const std::string& name, py::handle output_arg, py::handle input_arg) {
  const hps::data_plane::Collective* collective = hps::ops::FindCollective(name);
  if (collective == nullptr) {
    std::string names;
    for (const hps::data_plane::Collective* known : hps::ops::Collectives()) {
      names += (names.empty() ? "" : ", ") + std::string(known->name());
    }
    Check(Contract("collective", "collective", "one of this build's (" + names + ")", name));
  }
  const hps::StreamRef stream = CurrentStream();
  if (!collective->TakesOperands()) {
    py::gil_scoped_release no_gil;
    Check(hps::Runtime::Process().RunCollective(*collective, {}, stream));
    return;
  }
  const std::string_view op = collective->name();
  const at::Tensor output = TensorArg("output", output_arg);
  const at::Tensor input = TensorArg("input", input_arg);
  const hps::SymmetricView view = Symmetric(op, "output", output);
  const void* local = Local(op, "input", input);
  if (input.scalar_type() != output.scalar_type()) {
    Check(Contract(op, "input dtype",
                   "output's dtype " + std::string(c10::toString(output.scalar_type())),
                   c10::toString(input.scalar_type())));
  }
  const hps::CollectiveOperands operands{
      view, local, ByteSize(input), static_cast<std::uint64_t>(output.element_size()),
      c10::getDtypeNames(output.scalar_type()).first};
  py::gil_scoped_release no_gil;
  Check(hps::Runtime::Process().RunCollective(*collective, operands, stream,
                                              Hold(stream, output, input)));
}

// ---- MegaMoE dispatch and combine ----------------------------------------------------------

// The count matrix [pes * experts] as a layout of rows of `row_bytes`.
hps::ops::MoeLayout MoeLayoutOf(std::string_view operation, const at::Tensor& counts,
                                int experts, std::int64_t chunk_rows, std::uint64_t row_bytes) {
  CheckCpu(operation, "counts", counts);
  CheckContiguous(operation, "counts", counts);
  if (counts.scalar_type() != at::kLong) {
    Check(Contract(operation, "counts dtype", "torch.int64", c10::toString(counts.scalar_type())));
  }
  if (chunk_rows <= 0) {
    Check(Contract(operation, "chunk_rows", "positive", std::to_string(chunk_rows)));
  }
  const std::int64_t* begin = counts.data_ptr<std::int64_t>();
  hps::ops::MoeLayout layout(
      hps::ops::MoeShape{hps::Runtime::Process().size(), experts, row_bytes,
                         static_cast<std::uint64_t>(chunk_rows)},
      std::vector<std::int64_t>(begin, begin + counts.numel()));
  Check(layout.Validate().At(operation, "validate"));
  return layout;
}

// Rows of `rows` x hidden elements: a contiguous 2-D CPU tensor.
void CheckRows(std::string_view operation, std::string_view name, const at::Tensor& tensor,
               std::int64_t rows_at_least, const at::Tensor& like) {
  CheckLocalDevice(operation, name, tensor);
  CheckContiguous(operation, name, tensor);
  if (tensor.dim() != 2 || tensor.size(0) < rows_at_least || tensor.size(1) != like.size(1) ||
      tensor.scalar_type() != like.scalar_type()) {
    Check(Contract(operation, std::string(name),
                   "a 2-D " + std::string(c10::toString(like.scalar_type())) + " tensor of at "
                   "least " + std::to_string(rows_at_least) + " rows of " +
                       std::to_string(like.size(1)),
                   Describe(tensor)));
  }
}

// Counter rows: an int64 [n, 8] symmetric view (one 64-byte line per counter), n >= `count`.
hps::SymmetricView Counters(std::string_view operation, std::string_view name,
                            const at::Tensor& tensor, std::int64_t count) {
  const hps::SymmetricView view = Symmetric(operation, name, tensor);
  if (tensor.scalar_type() != at::kLong || tensor.dim() != 2 || tensor.size(1) != 8 ||
      tensor.size(0) < count) {
    Check(Contract(operation, std::string(name),
                   "an int64 tensor of at least " + std::to_string(count) + " rows of 8",
                   Describe(tensor)));
  }
  return view;
}

py::dict MoeLayoutDict(py::handle counts_arg, int experts, std::int64_t chunk_rows) {
  const at::Tensor counts = TensorArg("counts", counts_arg);
  const hps::ops::MoeLayout layout = MoeLayoutOf("moe_layout", counts, experts, chunk_rows, 1);
  const int rank = hps::Runtime::Process().rank();
  const int pes = layout.shape().pes;
  const int locals = layout.shape().local_experts();
  py::dict out;
  std::int64_t most_sent = 0;
  for (int pe = 0; pe < pes; ++pe) most_sent = std::max(most_sent, layout.SendRows(pe));
  out["send_rows"] = layout.SendRows(rank);
  out["max_send_rows"] = most_sent;
  out["recv_rows"] = layout.RecvRows(rank);
  out["max_recv_rows"] = layout.MaxRecvRows();
  py::list expert_row, expert_rows, expected;
  for (int l = 0; l < locals; ++l) {
    expert_row.append(layout.ExpertRow(rank, l));
    expert_rows.append(layout.ExpertRows(rank, l));
    expected.append(layout.ExpectedChunks(rank, l));
  }
  out["expert_row"] = expert_row;
  out["expert_rows"] = expert_rows;
  out["expected_chunks"] = expected;
  return out;
}

void MoeDispatch(py::handle rows_arg, py::handle counts_arg, py::handle recv_arg,
                 py::handle counters_arg, int experts, std::int64_t chunk_rows) {
  constexpr std::string_view kOp = "moe_dispatch";
  const at::Tensor rows = TensorArg("rows", rows_arg);
  const at::Tensor counts = TensorArg("counts", counts_arg);
  const at::Tensor recv = TensorArg("recv", recv_arg);
  const at::Tensor counters = TensorArg("counters", counters_arg);
  if (rows.dim() != 2) Check(Contract(kOp, "rows", "a 2-D tensor", Describe(rows)));
  const std::uint64_t row_bytes = rows.size(1) * rows.element_size();
  const hps::ops::MoeLayout layout = MoeLayoutOf(kOp, counts, experts, chunk_rows, row_bytes);
  const int rank = hps::Runtime::Process().rank();
  CheckRows(kOp, "rows", rows, layout.SendRows(rank), rows);
  CheckRows(kOp, "recv", recv, layout.MaxRecvRows(), rows);
  const hps::SymmetricView recv_view = Symmetric(kOp, "recv", recv);
  const hps::SymmetricView counter_view =
      Counters(kOp, "counters", counters, layout.shape().local_experts());
  const auto* source = static_cast<const std::byte*>(rows.data_ptr());
  const hps::StreamRef stream = CurrentStream();
  const hps::KeepAlive hold = Hold(stream, rows, counts);
  py::gil_scoped_release no_gil;
  Check(hps::Runtime::Process().Launch(
      kOp, {recv_view, counter_view}, stream,
      [layout, source](hps::data_plane::KernelApi& api, const std::vector<std::uint64_t>& at) {
        return hps::ops::Dispatch(api, layout, hps::ops::DispatchPlan{source, at[0], at[1]});
      },
      hold));
}

void MoeCombine(py::handle results_arg, py::handle counts_arg, py::handle returned_arg,
                py::handle return_counter_arg, py::handle done_arg,
                std::vector<std::int64_t> done_targets, int experts, std::int64_t chunk_rows) {
  constexpr std::string_view kOp = "moe_combine";
  const at::Tensor results = TensorArg("results", results_arg);
  const at::Tensor counts = TensorArg("counts", counts_arg);
  const at::Tensor returned = TensorArg("returned", returned_arg);
  const at::Tensor return_counter = TensorArg("return_counter", return_counter_arg);
  const at::Tensor done = TensorArg("done", done_arg);
  if (returned.dim() != 2) Check(Contract(kOp, "returned", "a 2-D tensor", Describe(returned)));
  const std::uint64_t row_bytes = returned.size(1) * returned.element_size();
  const hps::ops::MoeLayout layout = MoeLayoutOf(kOp, counts, experts, chunk_rows, row_bytes);
  const int rank = hps::Runtime::Process().rank();
  std::int64_t most_sent = 0;
  for (int pe = 0; pe < layout.shape().pes; ++pe) most_sent = std::max(most_sent, layout.SendRows(pe));
  CheckRows(kOp, "results", results, layout.RecvRows(rank), returned);
  CheckRows(kOp, "returned", returned, most_sent, returned);
  const hps::SymmetricView returned_view = Symmetric(kOp, "returned", returned);
  const hps::SymmetricView counter_view = Counters(kOp, "return_counter", return_counter, 1);
  const hps::SymmetricView done_view =
      Counters(kOp, "done", done, layout.shape().local_experts());
  if (static_cast<int>(done_targets.size()) != layout.shape().local_experts()) {
    Check(Contract(kOp, "done_targets", std::to_string(layout.shape().local_experts()) + " targets",
                   std::to_string(done_targets.size())));
  }
  const auto* source = static_cast<const std::byte*>(results.data_ptr());
  const hps::StreamRef stream = CurrentStream();
  const hps::KeepAlive hold = Hold(stream, results, counts);
  py::gil_scoped_release no_gil;
  Check(hps::Runtime::Process().Launch(
      kOp, {returned_view, counter_view, done_view}, stream,
      [layout, source, targets = std::move(done_targets)](
          hps::data_plane::KernelApi& api, const std::vector<std::uint64_t>& at) {
        return hps::ops::Combine(api, layout,
                                 hps::ops::CombinePlan{source, at[0], at[1], at[2], targets});
      },
      hold));
}

// ---- bootstrap over a Python object --------------------------------------------------------

// Calls `all_gather(bytes, timeout_s) -> list[bytes]` and `barrier(timeout_s)` on a Python
// object (the package's process-group bootstrap). Python's TimeoutError becomes TIMEOUT.
class PythonBootstrap final : public hps::Bootstrap {
 public:
  PythonBootstrap(py::object target, int rank, int size)
      : target_(std::move(target)), rank_(rank), size_(size) {}
  ~PythonBootstrap() override {
    py::gil_scoped_acquire gil;
    target_ = py::object();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  hps::Status AllGather(std::string_view mine, std::chrono::milliseconds timeout,
                        std::vector<std::string>* all) override {
    py::gil_scoped_acquire gil;
    try {
      py::list gathered = target_.attr("all_gather")(py::bytes(mine.data(), mine.size()),
                                                    timeout.count() / 1000.0);
      all->clear();
      for (py::handle item : gathered) all->push_back(item.cast<std::string>());
      if (static_cast<int>(all->size()) != size_) {
        return hps::Status::Contract(hps::ErrorCode::kBackendError, "bootstrap all_gather result",
                                     std::to_string(size_) + " entries",
                                     std::to_string(all->size()));
      }
      return hps::Status::Ok();
    } catch (py::error_already_set& error) {
      return FromPython(error, "all_gather");
    }
  }

  hps::Status Barrier(std::chrono::milliseconds timeout) override {
    py::gil_scoped_acquire gil;
    try {
      target_.attr("barrier")(timeout.count() / 1000.0);
      return hps::Status::Ok();
    } catch (py::error_already_set& error) {
      return FromPython(error, "barrier");
    }
  }

 private:
  static hps::Status FromPython(py::error_already_set& error, std::string_view step) {
    const bool timed_out = error.matches(PyExc_TimeoutError);
    return hps::Status::Assertion(
        timed_out ? hps::ErrorCode::kTimeout : hps::ErrorCode::kBackendError,
        "process-group bootstrap failed",
        {{"step", std::string(step)}, {"reason", std::string(error.what())}});
  }

  py::object target_;
  int rank_;
  int size_;
};

void Init(py::object bootstrap, int rank, int size, std::vector<int> global_ranks) {
  hps::InitOptions options;
  options.bootstrap = std::make_shared<PythonBootstrap>(std::move(bootstrap), rank, size);
  options.global_ranks = std::move(global_ranks);
  py::gil_scoped_release no_gil;
  Check(hps::Runtime::Process().Init(std::move(options)));
}

void Shutdown() {
  py::gil_scoped_release no_gil;
  Check(hps::Runtime::Process().Shutdown());
}

// ---- diagnostics ---------------------------------------------------------------------------

void Allocations(const std::vector<hps::AllocationRecord>& records, const void* heap_base,
                 py::list* out) {
  for (const hps::AllocationRecord& record : records) {
    py::dict entry;
    entry["id"] = record.id;
    entry["base"] = reinterpret_cast<std::uintptr_t>(heap_base) + record.offset;
    entry["bytes"] = record.bytes;
    entry["alignment"] = record.alignment;
    out->append(entry);
  }
}

py::dict Snapshot() {
  hps::Diagnostics d;
  {
    py::gil_scoped_release no_gil;
    d = hps::Runtime::Process().Snapshot();
  }
  py::dict state;
  state["state"] = std::string(hps::RuntimeStateName(d.state));
  state["lifecycle"] = d.lifecycle;
  state["root_rank"] = d.rank;
  state["root_size"] = d.size;
  state["global_ranks"] = d.global_ranks;
  state["device"] = d.device;
  state["backend"] = d.backend;
  py::dict config;
  config["heap_size"] = d.config.heap_bytes;
  config["timeout_sec"] = d.config.timeout_sec;
  config["log_level"] = static_cast<int>(d.config.log_level);
  config["backend"] = d.config.backend;
  config["wait"] = d.config.wait;
  config["quarantine_bytes"] = d.config.quarantine();
  state["config"] = config;
  state["heap_base"] = reinterpret_cast<std::uintptr_t>(d.heap_base);
  py::dict heap;
  heap["heap_size"] = d.heap.heap_bytes;
  heap["allocated"] = d.heap.allocated_bytes;
  heap["max_allocated"] = d.heap.max_allocated_bytes;
  heap["remaining"] = d.heap.remaining_bytes;
  heap["largest_free_block"] = d.heap.largest_free_block;
  heap["quarantined"] = d.heap.quarantined_bytes;
  heap["quarantined_blocks"] = d.heap.quarantined_blocks;
  state["heap"] = heap;
  py::list live, leaks;
  Allocations(d.live, d.heap_base, &live);
  Allocations(d.leaks, d.heap_base, &leaks);
  state["live_allocations"] = live;
  state["leaks"] = leaks;
  state["latest_failure"] =
      d.latest_failure.ok() ? py::object(py::none()) : py::object(py::str(d.latest_failure.ToString()));
  state["terminal_failure"] = d.terminal_failure.ok()
                                  ? py::object(py::none())
                                  : py::object(py::str(d.terminal_failure.ToString()));
  py::dict collectives;
  collectives["sequence"] = d.collective_sequence;
  collectives["in_flight"] = d.collectives_in_flight;
  collectives["stream"] = d.collective_stream.empty() ? py::object(py::none())
                                                      : py::object(py::str(d.collective_stream));
  state["collectives"] = collectives;
  state["calls_in_flight"] = d.calls_in_flight;
  py::dict wait;
  wait["mode"] = d.wait.mode;
  const bool forever = d.wait.spin == std::chrono::nanoseconds::max();
  wait["spin_us"] = forever ? py::object(py::str("until the timeout"))
                            : py::object(py::float_(d.wait.spin.count() / 1000.0));
  wait["yield_us"] = d.wait.yield.count() / 1000.0;
  wait["sleeps"] = d.wait.sleeps;
  wait["pinned"] = d.wait.pinning;
  state["wait"] = wait;
  const auto now = std::chrono::system_clock::now();
  py::list blocked;
  for (const hps::BlockingOp& op : d.blocking) {
    py::dict entry;
    entry["operation"] = op.operation;
    entry["stream"] = op.stream;
    entry["since"] = std::chrono::duration<double>(op.since.time_since_epoch()).count();
    entry["waited_s"] = std::chrono::duration<double>(now - op.since).count();
    entry["waiting_for"] = op.waiting_for;
    blocked.append(entry);
  }
  state["blocked"] = blocked;
  return state;
}

// ---- host streams --------------------------------------------------------------------------

std::chrono::milliseconds Seconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

}  // namespace

namespace {

// The running backend's facts for shmem.backend_info() (runtime.h, BackendDescription).
py::dict DescribeBackend() {
  hps::BackendDescription d;
  hps::Status status;
  {
    py::gil_scoped_release no_gil;
    status = hps::Runtime::Process().DescribeBackend("backend_info", &d);
  }
  Check(status);
  py::dict out;
  out["name"] = d.name;
  out["own_core"] = d.own_core;
  out["host_addressable_heap"] = d.host_addressable_heap;
  out["granule_bytes"] = d.granule_bytes;
  out["timeout_s"] = d.timeout.count() / 1000.0;
  return out;
}

}  // namespace

PYBIND11_MODULE(hyper_parallel_shmem_torch, m) {
  m.doc() = "Hyper-Parallel SHMEM native binding (use hyper_parallel.core.multicore.shmem)";

  py::register_exception_translator([](std::exception_ptr pointer) {
    try {
      if (pointer) std::rethrow_exception(pointer);
    } catch (const NativeError& error) {
      const hps::Status& status = error.status;
      py::object cls = ErrorClass();
      if (!cls) cls = py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
      py::object instance =
          cls(status.ToString(), std::string(hps::ErrorCodeName(status.code())),
              status.operation(), status.phase());
      PyErr_SetObject(cls.ptr(), instance.ptr());
    }
  });

  m.def("set_error_class", [](py::object cls) { ErrorClass() = std::move(cls); },
        "Registers the exception class native errors are raised as.");
  m.def("init", &Init, py::arg("bootstrap"), py::arg("rank"), py::arg("size"),
        py::arg("global_ranks"), "Collective: initialise the process Runtime.");
  m.def("shutdown", &Shutdown, "Collective: shut the process Runtime down.");
  m.def("state", [] { return std::string(hps::RuntimeStateName(hps::Runtime::Process().state())); });
  m.def("log_level", [] { return static_cast<int>(hps::log::Level()); },
        "The level currently in force (frozen from the config at init).");
  m.def("empty", &Empty, py::arg("sizes"), py::arg("dtype"), py::arg("alignment"),
        py::arg("note") = "");
  m.def("free", &Free, py::arg("tensor"), py::arg("note") = "");
  m.def("is_symmetric",
        [](const at::Tensor& tensor) { return ContextOf(tensor) != nullptr; },
        py::arg("tensor"), "Whether the tensor's storage is (or was) a symmetric allocation.");
  m.def("put", &Put, py::arg("dst"), py::arg("src"), py::arg("pe"));
  m.def("get", &Get, py::arg("dst"), py::arg("src"), py::arg("pe"));
  m.def("signal", &Signal, py::arg("sig"), py::arg("value"), py::arg("pe"),
        py::arg("operation"));
  m.def("put_signal", &PutSignal, py::arg("dst"), py::arg("src"), py::arg("sig"), py::arg("value"),
        py::arg("pe"), py::arg("operation"));
  m.def("wait_signal", &WaitSignal, py::arg("sig"), py::arg("value"), py::arg("comparison"));
  m.def("collective", &RunCollective, py::arg("name"), py::arg("output") = py::none(),
        py::arg("input") = py::none(),
        "Runs the collective called `name` (barrier, all_gather, all_to_all, ...).");
  m.def("moe_layout", &MoeLayoutDict, py::arg("counts"), py::arg("experts"),
        py::arg("chunk_rows"), "This PE's view of a MegaMoE step's layout (ops/mega_moe).");
  m.def("moe_dispatch", &MoeDispatch, py::arg("rows"), py::arg("counts"), py::arg("recv"),
        py::arg("counters"), py::arg("experts"), py::arg("chunk_rows"));
  m.def("moe_combine", &MoeCombine, py::arg("results"), py::arg("counts"), py::arg("returned"),
        py::arg("return_counter"), py::arg("done"), py::arg("done_targets"), py::arg("experts"),
        py::arg("chunk_rows"));
  m.def("snapshot", &Snapshot, "Process-local diagnostics (not collective).");
  m.def("backend_description", &DescribeBackend,
        "The running backend's description (not collective; INVALID_STATE when not ready).");
  m.def("timeout_seconds", [] {
    return static_cast<double>(hps::Runtime::Process().timeout().count()) / 1000.0;
  });
  m.def("default_alignment", [] { return hps::HeapAllocator::kGranule; });

  py::class_<hps::Stream, std::shared_ptr<hps::Stream>>(m, "Stream")
      .def(py::init([] { return RequireStreams().CreateStream(); }))
      .def("synchronize",
           [](hps::Stream& stream, double timeout_s) {
             py::gil_scoped_release no_gil;
             Check(stream.Synchronize(Seconds(timeout_s)).At("stream_synchronize", "execute"));
           },
           py::arg("timeout_s"))
      .def("query", &hps::Stream::Query, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("id", &hps::Stream::id);

  py::class_<hps::Event>(m, "Event")
      .def(py::init([] { return RequireStreams().CreateEvent(); }))
      .def("record", [](hps::Event& event, hps::Stream* stream) { event.Record(stream); },
           py::arg("stream").none(true))
      .def("wait",
           [](hps::Event& event, hps::Stream* stream, double timeout_s) {
             py::gil_scoped_release no_gil;
             Check(event.Wait(stream, Seconds(timeout_s)).At("event_wait", "execute"));
           },
           py::arg("stream").none(true), py::arg("timeout_s"))
      .def("synchronize",
           [](hps::Event& event, double timeout_s) {
             py::gil_scoped_release no_gil;
             Check(event.Synchronize(Seconds(timeout_s)).At("event_synchronize", "execute"));
           },
           py::arg("timeout_s"))
      .def("query", &hps::Event::Query);

  m.def("set_current_stream",
        [](hps::Stream* stream) { RequireStreams().SetCurrentStream(stream); },
        py::arg("stream").none(true),
        "Sets the calling thread's current stream (None: the default stream).");
}
