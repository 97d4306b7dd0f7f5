// The symm_mem operators' CPU kernels on this runtime (docs/api.md, "torch's symmetric-memory
// API"): the all_to_all_vdev family, the one- and two-shot all-reduces, reduce_scatter_out,
// memset32_ and stream_write_value32_, with torch's schemas and semantics. Every transfer is
// this runtime's get or put, so they work across hosts too. Each runs in three steps: local
// checks, then a barrier that every PE reaches whether its checks passed or not (a failure is
// refused in place, so every PE raises and the PEs stay in step: docs/architecture.md, "A
// refused call keeps its place"), then the transfers, then a barrier (no PE reuses its input
// while a peer still reads it). The operands are symm_mem.empty's tensors; they need no
// rendezvous of their own (the group's team is resolved by name). Each rank pulls what it
// receives, so only what peers read must be symmetric: the input, its splits, and a reduction's
// input; outputs may be any tensor of the device.
#include <ATen/ATen.h>
#include <pybind11/pybind11.h>
#include <torch/library.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <cstring>
#include <numeric>
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
namespace {

// A symmetric operand of `operation`: torch's error for a tensor outside symm_mem.empty's.
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

// Runs `checks` and then a barrier of the group: a failure of any PE's checks fails every
// PE's barrier (the failing PE raises its own error), so no PE moves data. On the CPU the
// operators run on the calling thread: not under a shmem.Stream.
template <typename Checks>
auto CheckedBarrier(const SymmGroup& group, Checks&& checks) -> decltype(checks()) {
  auto all_checks = [&] {
    TORCH_CHECK(!IsQueuedOwnStream(CurrentStream()),
                "the symm_mem operators run on the calling thread: call them outside "
                "shmem.stream()");
    return checks();
  };
  if constexpr (std::is_void_v<decltype(checks())>) {
    Refusable("barrier", group.team, all_checks);
    Barrier(group);
  } else {
    auto result = Refusable("barrier", group.team, all_checks);
    Barrier(group);
    return result;
  }
}

// Copies `bytes` at byte `from` of symmetric `source` on world PE `pe` to local `destination`
// (host memory, or memory of the heap's device), on `device`'s stream.
void GetBytes(const c10::Device& device, void* destination, const SymmetricView& source,
              std::uint64_t from, std::uint64_t bytes, int pe) {
  if (bytes == 0) return;
  const SymmetricView part{source.id, static_cast<const std::byte*>(source.data) + from, bytes};
  Check(Runtime::Process().Get(destination, part, pe, StreamFor(device)));
}

// Copies local `source` to byte `at` of symmetric `destination` on world PE `pe`.
void PutBytes(const c10::Device& device, const SymmetricView& destination, std::uint64_t at,
              const void* source, std::uint64_t bytes, int pe) {
  if (bytes == 0) return;
  const SymmetricView part{destination.id,
                           static_cast<const std::byte*>(destination.data) + at, bytes};
  Check(Runtime::Process().Put(part, source, pe, StreamFor(device)));
}

// A tensor's elements on the host (itself on the CPU).
at::Tensor OnHost(const at::Tensor& tensor) { return tensor.to(at::kCPU).contiguous(); }

// Every peer's copy of the int64 symmetric `splits`, by group rank.
std::vector<std::vector<std::int64_t>> PeerSplits(const SymmGroup& group,
                                                  const SymmetricView& splits,
                                                  const c10::Device& device) {
  std::vector<std::vector<std::int64_t>> all(static_cast<std::size_t>(group.world()));
  for (int r = 0; r < group.world(); ++r) {
    all[r].resize(splits.bytes / sizeof(std::int64_t));
    GetBytes(device, all[r].data(), splits, 0, splits.bytes, group.pes[r]);
  }
  Synchronize(device);
  return all;
}

std::uint64_t RowBytes(const at::Tensor& tensor) {
  if (tensor.dim() == 0) return tensor.element_size();
  return static_cast<std::uint64_t>(tensor.stride(0)) * tensor.element_size();
}

std::int64_t Rows(const at::Tensor& tensor) { return tensor.dim() == 0 ? 1 : tensor.size(0); }

// One chunk to pull: `rows` rows from row `from` of the source on group rank `peer`, to row
// `to` of the output.
struct Pull {
  int peer;
  std::int64_t from;
  std::int64_t to;
  std::int64_t rows;
};

// The checks every member of the family makes of its data operands.
void CheckData(std::string_view op, const at::Tensor& input, const at::Tensor& out) {
  TORCH_CHECK(input.is_contiguous() && out.is_contiguous(), op,
              ": input and out must be contiguous");
  TORCH_CHECK(input.dtype() == out.dtype() &&
                  (input.dim() == 0 || out.dim() == 0 || input.stride(0) == out.stride(0)),
              "input and out must have the same dtype and same stride at dim 0");
  // Peers read input; out is written by this rank only (it pulls), so it may be any tensor
  // (a compiled graph's functionalized copy of a symmetric one included).
  SymmetricOperand(op, "input", input);
  TORCH_CHECK(out.device() == input.device(), op, ": out must be on input's device");
}

// Splits peers read (`symmetric`) or this rank alone writes.
void CheckSplits(std::string_view op, std::string_view name, const at::Tensor& splits,
                 bool symmetric) {
  TORCH_CHECK(splits.scalar_type() == at::kLong, "splits and offsets must be int64");
  TORCH_CHECK(splits.is_contiguous(), op, ": ", name, " must be contiguous");
  if (symmetric) SymmetricOperand(op, name, splits);
}

// A group's pulls, after every PE's checks and the barrier; then the output fit is agreed
// (a PE whose output cannot hold what it receives refuses, so every PE raises and nothing is
// written), the splits and offsets are written, the rows pulled, and a barrier ends the call.
void RunPulls(std::string_view op, const SymmGroup& group, const at::Tensor& input,
              const at::Tensor& out, const at::Tensor& out_splits_offsets,
              const std::vector<std::int64_t>& splits, const std::vector<std::int64_t>& offsets,
              const std::vector<Pull>& pulls) {
  std::int64_t end = 0;
  for (const Pull& pull : pulls) end = std::max(end, pull.to + pull.rows);
  CheckedBarrier(group, [&] {
    TORCH_CHECK(end <= Rows(out), op, ": the splits do not fit out: the rows received end at ",
                end, " but out has ", Rows(out), " rows");
  });
  std::vector<std::int64_t> both(splits);
  both.insert(both.end(), offsets.begin(), offsets.end());
  out_splits_offsets.copy_(
      at::from_blob(both.data(), out_splits_offsets.sizes(), at::TensorOptions(at::kLong)));
  const SymmetricView source = SymmetricOperand(op, "input", input);
  const std::uint64_t row = RowBytes(input);
  auto* destination = static_cast<std::byte*>(out.data_ptr());
  for (const Pull& pull : pulls) {
    GetBytes(out.device(), destination + pull.to * row, source, pull.from * row,
             pull.rows * row, group.pes[pull.peer]);
  }
  Barrier(group);
  Synchronize(out.device());  // `both` is read by the copy until the stream ran it
}

// Non-negative splits whose rows lie inside `input` (with offsets where given).
void CheckLocalSplits(std::string_view op, const at::Tensor& input, const std::int64_t* splits,
                      const std::int64_t* offsets, std::int64_t count) {
  std::int64_t sum = 0;
  for (std::int64_t i = 0; i < count; ++i) {
    TORCH_CHECK(splits[i] >= 0, op, ": split ", i, " is negative (", splits[i], ")");
    if (offsets != nullptr) {
      TORCH_CHECK(offsets[i] >= 0 && offsets[i] + splits[i] <= Rows(input), op, ": chunk ", i,
                  " (offset ", offsets[i], ", split ", splits[i], ") lies outside input's ",
                  Rows(input), " rows");
    }
    sum += splits[i];
  }
  TORCH_CHECK(offsets != nullptr || sum <= Rows(input),
              "sum of splits is larger than input dim (", sum, " > ", Rows(input), ")");
}

void AllToAllVdev(const at::Tensor& input, at::Tensor& out, const at::Tensor& in_splits,
                  at::Tensor& out_splits_offsets, std::string group_name) {
  constexpr std::string_view kOp = "all_to_all_vdev";
  const SymmGroup group = GroupNamed(kOp, group_name);
  const int world = group.world();
  const SymmetricView splits_view = CheckedBarrier(group, [&] {
    CheckData(kOp, input, out);
    CheckSplits(kOp, "in_splits", in_splits, true);
    CheckSplits(kOp, "out_splits_offsets", out_splits_offsets, false);
    TORCH_CHECK(in_splits.numel() == world, "in_splits must have world_size (", world,
                ") elements, but got ", in_splits.numel());
    TORCH_CHECK(out_splits_offsets.dim() == 2 && out_splits_offsets.size(0) == 2 &&
                    out_splits_offsets.size(1) == world,
                "out_splits_offsets must be 2D with 2 rows of world_size (", world, ")");
    CheckLocalSplits(kOp, input, OnHost(in_splits).data_ptr<std::int64_t>(), nullptr, world);
    return SymmetricOperand(kOp, "in_splits", in_splits);
  });
  const auto peers = PeerSplits(group, splits_view, input.device());
  std::vector<std::int64_t> splits(world), offsets(world);
  std::vector<Pull> pulls;
  std::int64_t at = 0;
  for (int p = 0; p < world; ++p) {
    const auto& theirs = peers[p];
    const std::int64_t from = std::accumulate(theirs.begin(), theirs.begin() + group.rank,
                                              std::int64_t{0});
    splits[p] = theirs[group.rank];
    offsets[p] = at;
    pulls.push_back(Pull{p, from, at, splits[p]});
    at += splits[p];
  }
  RunPulls(kOp, group, input, out, out_splits_offsets, splits, offsets, pulls);
}

void AllToAllVdev2d(const at::Tensor& input, at::Tensor& out, const at::Tensor& in_splits,
                    at::Tensor& out_splits_offsets, std::string group_name,
                    std::optional<std::int64_t> major_align) {
  constexpr std::string_view kOp = "all_to_all_vdev_2d";
  const SymmGroup group = GroupNamed(kOp, group_name);
  const int world = group.world();
  const std::int64_t align = major_align.value_or(1);
  const SymmetricView splits_view = CheckedBarrier(group, [&] {
    TORCH_CHECK(align > 0, "major_align must be positive");
    CheckData(kOp, input, out);
    CheckSplits(kOp, "in_splits", in_splits, true);
    CheckSplits(kOp, "out_splits_offsets", out_splits_offsets, false);
    TORCH_CHECK(out_splits_offsets.dim() == 2 && out_splits_offsets.size(0) == 2 &&
                    out_splits_offsets.size(1) == in_splits.numel() &&
                    in_splits.numel() % world == 0,
                "out_splits_offsets must be 2D with 2 rows, each row must be a multiple of "
                "world_size");
    const at::Tensor host = OnHost(in_splits);
    CheckLocalSplits(kOp, input, host.data_ptr<std::int64_t>(), nullptr, in_splits.numel());
    return SymmetricOperand(kOp, "in_splits", in_splits);
  });
  const std::int64_t experts = in_splits.numel() / world;
  const auto peers = PeerSplits(group, splits_view, input.device());
  // Output in expert-major order: expert e's rows from every source rank, in rank order; each
  // expert's block up-aligned to major_align (at least major_align when empty).
  const std::size_t count = static_cast<std::size_t>(experts * world);
  std::vector<std::int64_t> splits(count), offsets(count);
  std::vector<Pull> pulls;
  std::int64_t start = 0;
  for (std::int64_t e = 0; e < experts; ++e) {
    std::int64_t at = start;
    for (int src = 0; src < world; ++src) {
      const auto& theirs = peers[src];
      const std::int64_t chunk = group.rank * experts + e;
      const std::int64_t from =
          std::accumulate(theirs.begin(), theirs.begin() + chunk, std::int64_t{0});
      splits[e * world + src] = theirs[chunk];
      offsets[e * world + src] = at;
      pulls.push_back(Pull{src, from, at, theirs[chunk]});
      at += theirs[chunk];
    }
    const std::int64_t length = at - start;
    start += std::max((length + align - 1) / align * align, align);
  }
  RunPulls(kOp, group, input, out, out_splits_offsets, splits, offsets, pulls);
}

void AllToAllVdev2dOffset(const at::Tensor& input, at::Tensor& out,
                          const at::Tensor& in_splits_offsets, at::Tensor& out_splits_offsets,
                          std::string group_name) {
  constexpr std::string_view kOp = "all_to_all_vdev_2d_offset";
  const SymmGroup group = GroupNamed(kOp, group_name);
  const int world = group.world();
  const SymmetricView splits_view = CheckedBarrier(group, [&] {
    CheckData(kOp, input, out);
    CheckSplits(kOp, "in_splits_offsets", in_splits_offsets, true);
    CheckSplits(kOp, "out_splits_offsets", out_splits_offsets, false);
    TORCH_CHECK(in_splits_offsets.dim() == 2 && in_splits_offsets.size(0) == 2 &&
                    in_splits_offsets.size(1) % world == 0,
                "in_splits_offsets must be 2D with 2 rows, each row must be a multiple of "
                "world_size");
    TORCH_CHECK(out_splits_offsets.dim() == 2 && out_splits_offsets.size(0) == 2 &&
                    out_splits_offsets.size(1) == in_splits_offsets.size(1),
                "out_splits_offsets must be 2D with 2 rows of the same length as "
                "in_splits_offsets'");
    const std::int64_t n = in_splits_offsets.size(1);
    const at::Tensor host = OnHost(in_splits_offsets);
    const auto* data = host.data_ptr<std::int64_t>();
    CheckLocalSplits(kOp, input, data, data + n, n);
    return SymmetricOperand(kOp, "in_splits_offsets", in_splits_offsets);
  });
  const std::int64_t n = in_splits_offsets.size(1);
  const std::int64_t experts = n / world;
  const auto peers = PeerSplits(group, splits_view, input.device());
  // Input in expert-major order (chunk e * world + destination rank), with offsets; output in
  // rank-major order (source rank * experts + e), packed.
  std::vector<std::int64_t> splits(static_cast<std::size_t>(n)), offsets(splits.size());
  std::vector<Pull> pulls;
  std::int64_t at = 0;
  for (int src = 0; src < world; ++src) {
    for (std::int64_t e = 0; e < experts; ++e) {
      const std::int64_t chunk = e * world + group.rank;
      const std::int64_t rows = peers[src][chunk];
      splits[src * experts + e] = rows;
      offsets[src * experts + e] = at;
      pulls.push_back(Pull{src, peers[src][n + chunk], at, rows});
      at += rows;
    }
  }
  RunPulls(kOp, group, input, out, out_splits_offsets, splits, offsets, pulls);
}

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

}  // namespace

std::vector<std::string> RegisterNpuKernels() {
  static Mutex mutex;
  static torch::Library* library = nullptr;  // kept for the process: the kernels stay registered
  static std::vector<std::string> registered;
  MutexLock lock(&mutex);
  if (library != nullptr) return registered;
  library = new torch::Library(torch::Library::IMPL, "symm_mem", c10::DispatchKey::PrivateUse1,
                               __FILE__, __LINE__);
  auto add = [&](const char* name, auto kernel) {
    const auto op = c10::Dispatcher::singleton().findOp({std::string("symm_mem::") + name, ""});
    if (op && op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) return;  // torch_npu's
    library->impl(name, kernel);
    registered.emplace_back(name);
  };
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
  return registered;
}

TORCH_LIBRARY_IMPL(symm_mem, CPU, m) {
  m.impl("all_to_all_vdev", AllToAllVdev);
  m.impl("all_to_all_vdev_2d", AllToAllVdev2d);
  m.impl("all_to_all_vdev_2d_offset", AllToAllVdev2dOffset);
  m.impl("one_shot_all_reduce", OneShotAllReduce);
  m.impl("one_shot_all_reduce_out", OneShotAllReduceOut);
  m.impl("one_shot_all_reduce_copy", OneShotAllReduceCopy);
  m.impl("one_shot_all_reduce_copy_out", OneShotAllReduceCopyOut);
  m.impl("two_shot_all_reduce_", TwoShotAllReduce);
  m.impl("two_shot_all_reduce_out", TwoShotAllReduceOut);
  m.impl("reduce_scatter_out", ReduceScatterOut);
  m.impl("memset32_", Memset32);
  m.impl("stream_write_value32_", StreamWriteValue32);
}

}  // namespace hyper_parallel::shmem::binding
