// torch's symmetric-memory API on this runtime (symm_mem.h; docs/api.md, "torch's
// symmetric-memory API"): the "HPS" allocator registered with torch for the CPU (and made
// available as "HPS_NPU" for the NPU), its allocations and rendezvous, which makes the handle
// (symm_mem_handle.cc). Includes torch's SymmetricMemory interface and pybind11.
#include "bindings/torch/symm_mem.h"

#include <c10/core/ScalarType.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>

#include "base/mutex.h"
#include "bindings/torch/errors.h"
#include "bindings/torch/heap_tensors.h"
#include "bindings/torch/primitives.h"
#include "bindings/torch/registration.h"
#include "bindings/torch/streams.h"
#include "bindings/torch/teams.h"
#include "runtime/heap_allocator.h"

namespace py = pybind11;
namespace symm = c10d::symmetric_memory;

namespace hyper_parallel::shmem::binding {
namespace {

constexpr const char* kPythonSide = "hyper_parallel.core.multicore.shmem._symm_mem";
constexpr std::uint64_t kPadAlignment = 16;

// Allocations of the "HPS" allocators by base address, live or released and not yet reclaimed
// (a view into a released one is then named), and the handles rendezvous made for them.
// A block's `released` is written and read under the mutex too.
struct Table {
  Mutex mutex;
  std::map<std::uintptr_t, std::shared_ptr<SymmBlock>> blocks GUARDED_BY(mutex);
  std::map<std::pair<std::uintptr_t, std::string>, c10::intrusive_ptr<HpsSymmetricMemory>>
      handles GUARDED_BY(mutex);
};

Table& Blocks() {
  static auto* table = new Table();  // never destroyed: torch's deleters may run at exit
  return *table;
}

std::uintptr_t Address(const void* pointer) { return reinterpret_cast<std::uintptr_t>(pointer); }

// The block whose extent (buffer and signal pad) holds `pointer`, or null.
std::shared_ptr<SymmBlock> Containing(Table& table, const void* pointer) REQUIRES(table.mutex) {
  auto it = table.blocks.upper_bound(Address(pointer));
  if (it == table.blocks.begin()) return nullptr;
  --it;
  const SymmBlock& block = *it->second;
  const std::uint64_t extent = block.pad_offset + block.pad_bytes;
  return Address(pointer) - it->first <= extent ? it->second : nullptr;
}

// Forgets reclaimed blocks and, given the current lifecycle, those of an ended one.
void Forget(Table& table, const std::vector<AllocationId>& reclaimed,
            std::optional<std::uint64_t> lifecycle) REQUIRES(table.mutex) {
  for (auto it = table.blocks.begin(); it != table.blocks.end();) {
    const SymmBlock& block = *it->second;
    const bool gone = (lifecycle && block.lifecycle != *lifecycle) ||
                      std::find(reclaimed.begin(), reclaimed.end(), block.id) != reclaimed.end();
    it = gone ? table.blocks.erase(it) : std::next(it);
  }
}

class HpsAllocator final : public symm::SymmetricMemoryAllocator {
 public:
  HpsAllocator(c10::DeviceType type, std::string name) : type_(type), name_(std::move(name)) {}

  void* alloc(size_t size, int device_idx,
              const std::optional<std::string>& group_name) override;
  void free(void* ptr) override;
  size_t get_alloc_size(void* ptr) override;
  c10::intrusive_ptr<symm::SymmetricMemory> rendezvous(
      void* ptr, const std::optional<std::string>& group_name) override;
  bool has_multicast_support(int /*device_idx*/) override { return false; }
  c10::DeviceType supported_device_type() override { return type_; }
  std::string name() override { return name_; }
  bool has_allocation(void* ptr) override {
    Table& table = Blocks();
    MutexLock lock(&table.mutex);
    auto it = table.blocks.find(Address(ptr));
    return it != table.blocks.end() && !it->second->released;
  }

 private:
  // The device of tensors over the heap, for this allocator's device type; refuses a heap on
  // another device.
  c10::Device DeviceFor(std::string_view operation) const;

  c10::DeviceType type_;
  std::string name_;
};

c10::Device HpsAllocator::DeviceFor(std::string_view operation) const {
  DeviceId heap_device;
  bool host = true;
  Check(Runtime::Process().HeapPlacement(operation, &heap_device, &host));
  const bool npu_heap = heap_device.type == DeviceType::kNpu;
  if (type_ == c10::DeviceType::PrivateUse1) {
    if (!npu_heap || !NpuFrameworkLoaded()) {
      Throw(Status::Assertion(ErrorCode::kUnsupportedCapability,
                              "symm_mem on the npu needs the CANN backend's heap and torch_npu",
                              {{"heap_device", heap_device.ToString()}})
                .At(operation, "validate"));
    }
    return c10::Device(c10::DeviceType::PrivateUse1,
                       static_cast<c10::DeviceIndex>(heap_device.index));
  }
  if (npu_heap && NpuFrameworkLoaded()) {
    Throw(Status::Assertion(ErrorCode::kUnsupportedCapability,
                            "the runtime's heap is NPU memory: allocate with device='npu' after "
                            "symm_mem.set_backend('HPS_NPU')",
                            {{"heap_device", heap_device.ToString()}})
              .At(operation, "validate"));
  }
  if (!host) Check(Runtime::Process().RequireHostAddressableHeap(operation));
  return c10::Device(c10::kCPU);
}

void* HpsAllocator::alloc(size_t size, int /*device_idx*/,
                          const std::optional<std::string>& /*group_name*/) {
  constexpr std::string_view kOp = "symm_mem.empty";
  {
    // The first allocation acquires the runtime over the WORLD when the program has not.
    py::gil_scoped_acquire gil;
    py::module_::import(kPythonSide).attr("_ensure_runtime")();
  }
  Runtime& runtime = Runtime::Process();
  const c10::Device device = DeviceFor(kOp);
  if (!device.is_cpu()) {
    // The operators' NPU kernels, where torch_npu has none (once torch_npu is loaded).
    py::gil_scoped_acquire gil;
    py::module_::import(kPythonSide).attr("_register_npu")();
  }
  const std::uint64_t pad = symm::get_signal_pad_size();
  const std::uint64_t pad_offset = (size + kPadAlignment - 1) / kPadAlignment * kPadAlignment;
  std::vector<AllocationId> reclaimed;
  // A point every PE reaches (allocation is collective): what every PE released goes back.
  Check(WithoutGil([&] { return runtime.ReclaimReleased(kOp, &reclaimed); }));
  Allocation allocation;
  Status allocated = WithoutGil([&] {
    return runtime.Allocate(pad_offset + pad, HeapAllocator::kGranule, &allocation,
                            "symm_mem bytes=" + std::to_string(size));
  });
  if (allocated.code() == ErrorCode::kCollectiveMismatch) {
    // Name the rule: torch's own backends allocate locally, this one collectively.
    allocated = Status::Assertion(
        ErrorCode::kCollectiveMismatch,
        "symm_mem.empty is collective on this backend: every rank allocates the same size in "
        "the same order (docs/api.md)",
        {{"bytes", std::to_string(size)}, {"why", allocated.message()}})
                    .At(kOp, "agree");
  }
  Check(std::move(allocated));
  std::vector<std::byte*> heaps;
  Check(runtime.PeerHeapAddresses(kOp, &heaps));
  auto block = std::make_shared<SymmBlock>();
  block->id = allocation.id;
  block->lifecycle = allocation.lifecycle;
  block->base = static_cast<std::byte*>(allocation.data);
  block->bytes = size;
  block->pad_offset = pad_offset;
  block->pad_bytes = pad;
  // Where this process maps its own heap (a host heap), the offset locates the peers' copies.
  const std::byte* mine = heaps.at(static_cast<std::size_t>(runtime.rank()));
  block->heap_offset = mine == nullptr ? 0 : static_cast<std::uint64_t>(block->base - mine);
  // The pad starts at zero (torch's rule for signal pads); rendezvous's barrier orders this
  // before any peer's signal. Device memory is zeroed by the framework, on its current stream
  // (the stream the barrier is enqueued on).
  if (device.is_cpu()) {
    std::memset(block->base + pad_offset, 0, pad);
  } else {
    at::from_blob(block->base + pad_offset, {static_cast<std::int64_t>(pad)},
                  at::TensorOptions().dtype(at::kByte).device(device))
        .zero_();
  }
  Table& table = Blocks();
  MutexLock lock(&table.mutex);
  Forget(table, reclaimed, allocation.lifecycle);
  table.blocks[Address(block->base)] = block;
  return block->base;
}

void HpsAllocator::free(void* ptr) {
  // torch's deleter: local only, never collective (docs/api.md). The memory goes back at the
  // next point every PE reaches (Runtime::ReclaimReleased).
  Table& table = Blocks();
  std::shared_ptr<SymmBlock> block;
  std::vector<c10::intrusive_ptr<HpsSymmetricMemory>> handles;  // dropped outside the mutex
  {
    MutexLock lock(&table.mutex);
    auto it = table.blocks.find(Address(ptr));
    if (it == table.blocks.end() || it->second->released) return;
    block = it->second;
    block->released = true;
    for (auto h = table.handles.begin(); h != table.handles.end();) {
      if (h->first.first == Address(ptr)) {
        handles.push_back(std::move(h->second));
        h = table.handles.erase(h);
      } else {
        ++h;
      }
    }
  }
  Runtime::Process().Release(OrphanReport{block->id, block->lifecycle, block->base,
                                          block->pad_offset + block->pad_bytes, -1, true});
}

size_t HpsAllocator::get_alloc_size(void* ptr) {
  Table& table = Blocks();
  MutexLock lock(&table.mutex);
  auto it = table.blocks.find(Address(ptr));
  TORCH_CHECK(it != table.blocks.end(), "symm_mem (HPS): no allocation at ", ptr);
  return it->second->bytes;
}

c10::intrusive_ptr<symm::SymmetricMemory> HpsAllocator::rendezvous(
    void* ptr, const std::optional<std::string>& group_name) {
  constexpr std::string_view kOp = "symm_mem.rendezvous";
  const std::string group = group_name.value_or("0");
  Table& table = Blocks();
  std::shared_ptr<SymmBlock> block;
  {
    MutexLock lock(&table.mutex);
    auto it = table.blocks.find(Address(ptr));
    TORCH_CHECK(it != table.blocks.end(),
                "symm_mem.rendezvous: the tensor is not symmetric memory of the HPS backend "
                "(allocate it with symm_mem.empty)");
    block = it->second;
    if (block->released) {
      Throw(Status::Assertion(ErrorCode::kUseAfterFree,
                              "the allocation was released (its tensor is gone)",
                              {{"allocation_id", std::to_string(block->id)}})
                .At(kOp, "validate"));
    }
    if (auto cached = table.handles.find({Address(ptr), group}); cached != table.handles.end()) {
      return cached->second;
    }
  }
  // The group's team and ranks (Python resolves torch's group name; collective over the
  // group's members when it makes a team).
  SymmGroup resolved = GroupNamed(kOp, group_name);
  TeamHandle team = resolved.team;
  std::vector<int> pes = std::move(resolved.pes);
  const int rank = resolved.rank;
  Runtime& runtime = Runtime::Process();
  std::vector<std::byte*> heaps;
  Check(runtime.PeerHeapAddresses(kOp, &heaps));
  std::vector<void*> buffers(pes.size(), nullptr), pads(pes.size(), nullptr);
  for (std::size_t r = 0; r < pes.size(); ++r) {
    std::byte* heap = heaps.at(static_cast<std::size_t>(pes[r]));
    if (static_cast<int>(r) == rank) {
      buffers[r] = block->base;  // this rank's own, on any device
      pads[r] = block->base + block->pad_offset;
    } else if (heap != nullptr) {
      buffers[r] = heap + block->heap_offset;
      pads[r] = heap + block->heap_offset + block->pad_offset;
    }  // else not mapped here: 0, as torch's API allows (docs/api.md)
  }
  const c10::Device device = DeviceFor(kOp);
  // Collective: every member has allocated and zeroed its pad before anyone signals.
  WithoutGil([&] {
    RunCollectiveTensors(CollectiveNamed("barrier"), team, nullptr, nullptr, CallPath::kFunction);
  });
  auto handle = c10::make_intrusive<HpsSymmetricMemory>(block, team, std::move(pes), rank, device,
                                                        std::move(buffers), std::move(pads));
  MutexLock lock(&table.mutex);
  table.handles[{Address(ptr), group}] = handle;
  return handle;
}

}  // namespace

StreamRef StreamFor(const c10::Device& device) {
  return device.is_cpu() ? StreamRef{} : CurrentStream();
}

void Synchronize(const c10::Device& device) {
  if (device.is_cpu()) return;
  py::gil_scoped_acquire gil;
  py::module_::import("torch").attr("npu").attr("current_stream")().attr("synchronize")();
}

SymmGroup GroupNamed(std::string_view operation, const std::optional<std::string>& group_name) {
  py::gil_scoped_acquire gil;
  py::tuple info = py::module_::import(kPythonSide)
                       .attr("_group_info")(group_name ? py::cast(*group_name) : py::none());
  SymmGroup group;
  group.team = TeamArgument(operation, info[0]);
  group.pes = info[1].cast<std::vector<int>>();
  group.rank = info[2].cast<int>();
  return group;
}

std::optional<SymmetricView> SymmMemView(std::string_view operation, std::string_view name,
                                         const at::Tensor& tensor) {
  if (!tensor.defined() || !tensor.has_storage()) return std::nullopt;
  const void* data = tensor.storage().data();
  Table& table = Blocks();
  std::shared_ptr<SymmBlock> block;
  bool released = false;
  {
    MutexLock lock(&table.mutex);
    block = Containing(table, data);
    released = block != nullptr && block->released;
  }
  if (block == nullptr) return std::nullopt;
  if (released) {
    Throw(Status::Assertion(ErrorCode::kUseAfterFree,
                            "tensor is in a symm_mem allocation that was released (its tensor "
                            "is gone)",
                            {{"operand", std::string(name)},
                             {"allocation_id", std::to_string(block->id)}})
              .At(operation, "validate"));
  }
  CheckContiguous(operation, name, tensor);
  const auto* first = static_cast<const std::byte*>(data) +
                      static_cast<std::uint64_t>(tensor.storage_offset()) * tensor.element_size();
  return SymmetricView{block->id, first, ByteSize(tensor)};
}

void RegisterSymmMem(py::module_& m) {
  m.def(
      "symm_mem_register",
      [](bool cpu_default) {
        // torch keeps one allocator per availability name: "HPS" for the CPU, "HPS_NPU" for
        // the NPU; the CPU's default only where no backend took the CPU first.
        auto cpu = c10::make_intrusive<HpsAllocator>(c10::kCPU, "HPS");
        symm::register_availability("HPS", cpu);
        symm::register_availability(
            "HPS_NPU", c10::make_intrusive<HpsAllocator>(c10::DeviceType::PrivateUse1, "HPS_NPU"));
        if (cpu_default && !symm::has_allocator(c10::kCPU)) {
          symm::register_allocator(c10::kCPU, cpu);
          return true;
        }
        return false;
      },
      py::arg("cpu_default"));
  m.def("symm_mem_register_npu", [] { return RegisterNpuKernels(); });
  m.def("symm_mem_reclaim", [] {
    // Collective over the WORLD: gives back what every PE released.
    std::vector<AllocationId> reclaimed;
    Runtime& runtime = Runtime::Process();
    {
      py::gil_scoped_release no_gil;
      Check(runtime.ReclaimReleased("symm_mem.reclaim", &reclaimed));
    }
    Table& table = Blocks();
    MutexLock lock(&table.mutex);
    Forget(table, reclaimed, std::nullopt);
    return reclaimed;
  });
  m.def("symm_mem_forget_handles", [] {
    // At the runtime's close: the handles' teams end with it.
    Table& table = Blocks();
    std::map<std::pair<std::uintptr_t, std::string>, c10::intrusive_ptr<HpsSymmetricMemory>> gone;
    MutexLock lock(&table.mutex);
    gone.swap(table.handles);
  });
}

}  // namespace hyper_parallel::shmem::binding
