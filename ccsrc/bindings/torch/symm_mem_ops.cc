// The symm_mem operators' CPU kernels on this runtime (docs/api.md, "torch's symmetric-memory
// API"): what they share (symm_mem_ops.h), the one- and two-shot all-reduces,
// reduce_scatter_out, memset32_ and stream_write_value32_, and the registration of every
// operator (the all_to_all_vdev family is symm_mem_all_to_all.cc's), with torch's schemas and
// semantics. Every transfer is this runtime's get or put, so they work across hosts too. Each
// runs in three steps: local checks, then a barrier that every PE reaches whether its checks
// passed or not (a failure is refused in place, so every PE raises and the PEs stay in step:
// docs/architecture.md, "A refused call keeps its place"), then the transfers, then a barrier
// (no PE reuses its input while a peer still reads it). The operands are symm_mem.empty's
// tensors; they need no rendezvous of their own (the group's team is resolved by name). Each
// rank pulls what it receives, so only what peers read must be symmetric: the input, its
// splits, and a reduction's input; outputs may be any tensor of the device.
#include "bindings/torch/symm_mem_ops.h"

#include <ATen/ATen.h>
#include <pybind11/pybind11.h>
#include <torch/library.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "base/mutex.h"
#include "bindings/torch/errors.h"
#include "bindings/torch/heap_tensors.h"
#include "bindings/torch/primitives.h"
#include "bindings/torch/streams.h"
#include "bindings/torch/symm_mem.h"

namespace py = pybind11;

namespace hyper_parallel::shmem::binding {

SymmetricView SymmetricOperand(std::string_view operation, std::string_view name,
                               const at::Tensor& tensor) {
  std::optional<SymmetricView> view = SymmMemView(operation, name, tensor);
  TORCH_CHECK(view.has_value(), operation, ": ", name,
              " must be symmetric memory from symm_mem.empty (the HPS backend), but got ",
              Describe(tensor));
  return *view;
}

void Barrier(const SymmGroup& group) {
  RunCollectiveTensors(CollectiveNamed("barrier"), group.team, nullptr, nullptr,
                       CallPath::kCustomOp);
}

void GetBytes(const c10::Device& device, void* destination, const SymmetricView& source,
              std::uint64_t from, std::uint64_t bytes, int pe) {
  if (bytes == 0) return;
  const SymmetricView part{source.id, static_cast<const std::byte*>(source.data) + from, bytes};
  Check(Runtime::Process().Get(destination, part, pe, StreamFor(device)));
}

void PutBytes(const c10::Device& device, const SymmetricView& destination, std::uint64_t at,
              const void* source, std::uint64_t bytes, int pe) {
  if (bytes == 0) return;
  const SymmetricView part{destination.id,
                           static_cast<const std::byte*>(destination.data) + at, bytes};
  Check(Runtime::Process().Put(part, source, pe, StreamFor(device)));
}

at::Tensor OnHost(const at::Tensor& tensor) { return tensor.to(at::kCPU).contiguous(); }

namespace {

void CheckSum(std::string_view op, const std::string& reduce_op) {
  TORCH_CHECK(reduce_op == "sum", op, ": reduce_op must be \"sum\", but got \"", reduce_op, "\"");
}

// out = the sum over the group's ranks, in rank order, of `numel` elements of symmetric
// `buffer` (its first ones); every PE gets the same bits.
void OneShotInto(std::string_view op, const SymmGroup& group, const at::Tensor& buffer,
                 std::int64_t numel, at::Tensor& out) {
  const SymmetricView view = SymmetricOperand(op, "input", buffer);
  const std::uint64_t bytes = static_cast<std::uint64_t>(numel) * buffer.element_size();
  at::Tensor flat = out.view({-1});
  at::Tensor part = at::empty({numel}, buffer.options());
  for (int r = 0; r < group.world(); ++r) {
    GetBytes(buffer.device(), r == 0 ? flat.data_ptr() : part.data_ptr(), view, 0, bytes,
             group.pes[r]);
    if (r > 0) flat.add_(part);
  }
  Barrier(group);
  Synchronize(buffer.device());
}

at::Tensor OneShotAllReduceOut(const at::Tensor& input, std::string reduce_op,
                               std::string group_name, at::Tensor& out) {
  constexpr std::string_view kOp = "one_shot_all_reduce";
  const SymmGroup group = GroupNamed(kOp, group_name);
  CheckedBarrier(group, [&] {
    CheckSum(kOp, reduce_op);
    TORCH_CHECK(input.is_contiguous() && out.is_contiguous() && out.numel() == input.numel() &&
                    out.dtype() == input.dtype(),
                kOp, ": out must be a contiguous tensor of input's dtype and size");
    SymmetricOperand(kOp, "input", input);
  });
  OneShotInto(kOp, group, input, input.numel(), out);
  return out;
}

at::Tensor OneShotAllReduce(const at::Tensor& input, std::string reduce_op,
                            std::string group_name) {
  at::Tensor out = at::empty_like(input, at::MemoryFormat::Contiguous);
  return OneShotAllReduceOut(input, std::move(reduce_op), std::move(group_name), out);
}

at::Tensor OneShotAllReduceCopyOut(const at::Tensor& symm_buffer, const at::Tensor& local_input,
                                   std::string reduce_op, std::string group_name,
                                   at::Tensor& out) {
  constexpr std::string_view kOp = "one_shot_all_reduce_copy";
  const SymmGroup group = GroupNamed(kOp, group_name);
  CheckedBarrier(group, [&] {
    CheckSum(kOp, reduce_op);
    TORCH_CHECK(symm_buffer.is_contiguous() && local_input.is_contiguous() &&
                    out.is_contiguous() && symm_buffer.dtype() == local_input.dtype() &&
                    out.dtype() == local_input.dtype() && out.numel() == local_input.numel(),
                kOp, ": symm_buffer, local_input and out must be contiguous, of one dtype, out "
                "as large as local_input");
    TORCH_CHECK(symm_buffer.numel() >= local_input.numel(), kOp,
                ": symm_buffer must hold local_input (", local_input.numel(), " elements), but "
                "has ", symm_buffer.numel());
    SymmetricOperand(kOp, "symm_buffer", symm_buffer);
    symm_buffer.view({-1}).narrow(0, 0, local_input.numel()).copy_(local_input.view({-1}));
  });
  OneShotInto(kOp, group, symm_buffer, local_input.numel(), out);
  return out;
}

at::Tensor OneShotAllReduceCopy(const at::Tensor& symm_buffer, const at::Tensor& local_input,
                                std::string reduce_op, std::string group_name) {
  at::Tensor out = at::empty_like(local_input, at::MemoryFormat::Contiguous);
  return OneShotAllReduceCopyOut(symm_buffer, local_input, std::move(reduce_op),
                                 std::move(group_name), out);
}

// Two shots: each rank sums its shard of every peer's input (rank order), then puts the sum
// into every peer's input; `input` ends all-reduced on every rank.
void TwoShot(std::string_view op, const SymmGroup& group, at::Tensor& input) {
  const SymmetricView view = SymmetricOperand(op, "input", input);
  const std::int64_t numel = input.numel();
  const std::int64_t shard = (numel + group.world() - 1) / group.world();
  const std::int64_t first = std::min(numel, shard * group.rank);
  const std::int64_t count = std::min(numel, first + shard) - first;
  const std::uint64_t element = input.element_size();
  const c10::Device device = input.device();
  at::Tensor sum = at::empty({count}, input.options());
  at::Tensor part = at::empty({count}, sum.options());
  for (int r = 0; r < group.world(); ++r) {
    GetBytes(device, r == 0 ? sum.data_ptr() : part.data_ptr(), view, first * element,
             count * element, group.pes[r]);
    if (r > 0) sum.add_(part);
  }
  // Every PE read its shard of everyone before anyone overwrites it.
  Barrier(group);
  for (int r = 0; r < group.world(); ++r) {
    PutBytes(device, view, first * element, sum.data_ptr(), count * element, group.pes[r]);
  }
  Barrier(group);
  Synchronize(device);
}

at::Tensor TwoShotAllReduce(at::Tensor& input, std::string reduce_op, std::string group_name) {
  constexpr std::string_view kOp = "two_shot_all_reduce_";
  const SymmGroup group = GroupNamed(kOp, group_name);
  CheckedBarrier(group, [&] {
    CheckSum(kOp, reduce_op);
    TORCH_CHECK(input.is_contiguous(), kOp, ": input must be contiguous");
    SymmetricOperand(kOp, "input", input);
  });
  TwoShot(kOp, group, input);
  return input;
}

at::Tensor TwoShotAllReduceOut(at::Tensor& input, std::string reduce_op, std::string group_name,
                               at::Tensor& output) {
  constexpr std::string_view kOp = "two_shot_all_reduce_out";
  const SymmGroup group = GroupNamed(kOp, group_name);
  CheckedBarrier(group, [&] {
    CheckSum(kOp, reduce_op);
    TORCH_CHECK(input.is_contiguous() && output.numel() == input.numel() &&
                    output.dtype() == input.dtype(),
                kOp, ": output must have input's dtype and size, input contiguous");
    SymmetricOperand(kOp, "input", input);
  });
  TwoShot(kOp, group, input);
  output.copy_(input.view(output.sizes()));
  return output;
}

at::Tensor ReduceScatterOut(at::Tensor& input, std::string group_name, bool split_last_dim,
                            at::Tensor& output) {
  constexpr std::string_view kOp = "reduce_scatter_out";
  const SymmGroup group = GroupNamed(kOp, group_name);
  const int world = group.world();
  const int dim = split_last_dim ? static_cast<int>(input.dim()) - 1 : 0;
  CheckedBarrier(group, [&] {
    TORCH_CHECK(input.dim() > 0 && input.is_contiguous(), kOp,
                ": input must be a contiguous tensor of at least one dimension");
    TORCH_CHECK(input.size(dim) % world == 0, kOp, ": input's dim ", dim, " (",
                input.size(dim), ") must be divisible by the group size (", world, ")");
    std::vector<std::int64_t> shape = input.sizes().vec();
    shape[dim] /= world;
    TORCH_CHECK(output.sizes().vec() == shape && output.dtype() == input.dtype(), kOp,
                ": output must have input's dtype and shape with dim ", dim,
                " divided by the group size");
    SymmetricOperand(kOp, "input", input);
  });
  const SymmetricView view = SymmetricOperand(kOp, "input", input);
  at::Tensor sum;
  if (dim == 0) {
    // Chunk `rank` along dim 0 is contiguous: one get per peer.
    const std::uint64_t bytes = ByteSize(input) / world;
    sum = at::empty(output.sizes(), input.options());
    at::Tensor part = at::empty_like(sum);
    for (int r = 0; r < world; ++r) {
      GetBytes(input.device(), r == 0 ? sum.data_ptr() : part.data_ptr(), view,
               bytes * group.rank, bytes, group.pes[r]);
      if (r > 0) sum.add_(part);
    }
  } else {
    at::Tensor whole = at::empty_like(input, at::MemoryFormat::Contiguous);
    for (int r = 0; r < world; ++r) {
      GetBytes(input.device(), whole.data_ptr(), view, 0, ByteSize(input), group.pes[r]);
      at::Tensor chunk = whole.chunk(world, dim)[group.rank];
      sum = r == 0 ? chunk.clone(at::MemoryFormat::Contiguous) : sum.add_(chunk);
    }
  }
  Barrier(group);
  output.copy_(sum);
  Synchronize(input.device());
  return output;
}

at::Tensor Memset32(at::Tensor& input, std::int64_t offset, std::int64_t val,
                    std::int64_t count) {
  TORCH_CHECK(input.element_size() == 4 && input.is_contiguous(),
              "memset32_: input must be a contiguous tensor of a 32-bit dtype");
  TORCH_CHECK(offset >= 0 && count >= 0 && offset + count <= input.numel(),
              "memset32_: offset + count (", offset, " + ", count,
              ") exceeds the number of elements (", input.numel(), ")");
  TORCH_CHECK(val >= 0 && val <= 0xFFFFFFFFll, "memset32_: val must fit in 32 bits, but got ",
              val);
  // The 32-bit pattern of `val`, written by the framework (on the NPU: on its current stream).
  input.view({-1}).view(at::kInt).narrow(0, offset, count)
      .fill_(static_cast<std::int32_t>(static_cast<std::uint32_t>(val)));
  return input;
}

at::Tensor StreamWriteValue32(at::Tensor& input, std::int64_t offset, std::int64_t val) {
  return Memset32(input, offset, val, 1);
}

// Calls `add(name, kernel)` for every operator: the one list both registrations use.
template <typename Add>
void ForEachKernel(Add&& add) {
  add("all_to_all_vdev", AllToAllVdev);
  add("all_to_all_vdev_2d", AllToAllVdev2d);
  add("all_to_all_vdev_2d_offset", AllToAllVdev2dOffset);
  add("one_shot_all_reduce", OneShotAllReduce);
  add("one_shot_all_reduce_out", OneShotAllReduceOut);
  add("one_shot_all_reduce_copy", OneShotAllReduceCopy);
  add("one_shot_all_reduce_copy_out", OneShotAllReduceCopyOut);
  add("two_shot_all_reduce_", TwoShotAllReduce);
  add("two_shot_all_reduce_out", TwoShotAllReduceOut);
  add("reduce_scatter_out", ReduceScatterOut);
  add("memset32_", Memset32);
  add("stream_write_value32_", StreamWriteValue32);
}

}  // namespace

std::vector<std::string> RegisterNpuKernels() {
  static Mutex mutex;
  static torch::Library* library = nullptr;  // kept for the process: the kernels stay registered
  static std::vector<std::string> registered;
  MutexLock lock(&mutex);
  if (library != nullptr) return registered;
  library = new torch::Library(torch::Library::IMPL, "symm_mem", c10::DispatchKey::PrivateUse1,
                               __FILE__, __LINE__);
  ForEachKernel([&](const char* name, auto kernel) {
    const auto op = c10::Dispatcher::singleton().findOp({std::string("symm_mem::") + name, ""});
    if (op && op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) return;  // torch_npu's
    library->impl(name, kernel);
    registered.emplace_back(name);
  });
  return registered;
}

TORCH_LIBRARY_IMPL(symm_mem, CPU, m) {
  ForEachKernel([&](const char* name, auto kernel) { m.impl(name, kernel); });
}

}  // namespace hyper_parallel::shmem::binding
