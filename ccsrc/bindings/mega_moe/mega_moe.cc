// The MegaMoE extension module hyper_parallel_mega_moe_torch (the package's mega_moe/_native.py
// imports it): MegaMoE's layout, dispatch and combine from Python. The count matrix becomes a
// layout (ops/mega_moe/layout.h) and the two fused kernels (ops/mega_moe/kernels.h) are
// launched through the Runtime on the current stream, over operands resolved by the generic
// binding's protection chain (bindings/torch/heap_tensors.h). Includes ATen's Tensor, not
// torch's Python headers.
//
// The module links the generic binding's shared library: the process Runtime, the heap tensors
// and the translation of native errors are that library's, so it must be imported after the
// generic module (_native.py imports the shmem package first).
//
// Every native takes an optional `team` (None: the world team; a shmem Team): the layout counts
// the team's PEs, in team-PE order, and the kernels are launched over the team
// (Runtime::Launch(team, ...)), so their KernelApi numbers PEs in the team and MegaMoE runs
// expert parallel over it unchanged.
//
// The module also defines the torch custom ops `torch.ops.hps_moe.forward` and `backward`
// (TORCH_LIBRARY below): one expert-parallel call of MegaMoE each, which the layer reaches
// under torch.compile (docs/mega_moe.md, "Compiling"). Their kernels are the layer's Python
// pipeline (mega_moe/_ops.py registers them for the CPU and CUDA keys); the schemas are here,
// beside the native calls they make. Each kernel launched here runs inside a profiler range of
// its own name, on the thread that runs it (the caller's, or a stream's executor).
#include <ATen/ThreadLocalState.h>
#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bindings/torch/arguments.h"
#include "bindings/torch/errors.h"
#include "bindings/torch/heap_tensors.h"
#include "bindings/torch/order_token.h"
#include "bindings/torch/streams.h"
#include "bindings/torch/teams.h"
#include "ops/mega_moe/kernels.h"
#include "ops/mega_moe/layout.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace hyper_parallel::shmem::binding {
namespace {

// The team a MegaMoE native runs over: its handle, its size and this PE's number in it.
struct MoeTeam {
  TeamHandle handle;
  int pes = 0;
  int rank = -1;
};

MoeTeam MoeTeamOf(std::string_view operation, py::handle team_arg) {
  MoeTeam team{TeamArgument(operation, team_arg)};
  TeamInfo info;
  Check(Runtime::Process().DescribeTeam(team.handle, &info).At(operation, "validate"));
  team.pes = static_cast<int>(info.pes.size());
  team.rank = info.my_pe;
  return team;
}

// The count matrix [pes * experts] (pes: the team's) as a layout of rows of `row_bytes`.
ops::MoeLayout MoeLayoutOf(std::string_view operation, const MoeTeam& team,
                           const at::Tensor& counts, int experts, std::int64_t chunk_rows,
                           std::uint64_t row_bytes) {
  CheckCpu(operation, "counts", counts);
  CheckContiguous(operation, "counts", counts);
  if (counts.scalar_type() != at::kLong) {
    Check(Contract(operation, "counts dtype", "torch.int64", c10::toString(counts.scalar_type())));
  }
  if (chunk_rows <= 0) {
    Check(Contract(operation, "chunk_rows", "positive", std::to_string(chunk_rows)));
  }
  const std::int64_t* begin = counts.data_ptr<std::int64_t>();
  ops::MoeLayout layout(
      ops::MoeShape{team.pes, experts, row_bytes,
                    static_cast<std::uint64_t>(chunk_rows)},
      std::vector<std::int64_t>(begin, begin + counts.numel()));
  Check(layout.Validate().At(operation, "validate"));
  return layout;
}

// A step's team and layout, for rows like `rows` (argument `name`): a 2-D tensor, whose dim 1
// is the hidden size.
struct MoeStep {
  MoeTeam team;
  ops::MoeLayout layout;
};

MoeStep MoeStepOf(std::string_view operation, std::string_view name, const at::Tensor& rows,
                  py::handle team_arg, const at::Tensor& counts, int experts,
                  std::int64_t chunk_rows) {
  if (rows.dim() != 2) Check(Contract(operation, name, "a 2-D tensor", Describe(rows)));
  const std::uint64_t row_bytes = rows.size(1) * rows.element_size();
  const MoeTeam team = MoeTeamOf(operation, team_arg);
  return MoeStep{team, MoeLayoutOf(operation, team, counts, experts, chunk_rows, row_bytes)};
}

// The most rows any PE of the layout sends.
std::int64_t MostSent(const ops::MoeLayout& layout) {
  std::int64_t most = 0;
  for (int pe = 0; pe < layout.shape().pes; ++pe) most = std::max(most, layout.SendRows(pe));
  return most;
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
SymmetricView Counters(std::string_view operation, std::string_view name,
                       const at::Tensor& tensor, std::int64_t count) {
  const SymmetricView view = Symmetric(operation, name, tensor);
  if (tensor.scalar_type() != at::kLong || tensor.dim() != 2 || tensor.size(1) != 8 ||
      tensor.size(0) < count) {
    Check(Contract(operation, std::string(name),
                   "an int64 tensor of at least " + std::to_string(count) + " rows of 8",
                   Describe(tensor)));
  }
  return view;
}

py::dict MoeLayoutDict(py::handle counts_arg, int experts, std::int64_t chunk_rows,
                       py::handle team_arg) {
  const at::Tensor counts = TensorArg("moe_layout", "counts", counts_arg);
  const MoeTeam team = MoeTeamOf("moe_layout", team_arg);
  const ops::MoeLayout layout = MoeLayoutOf("moe_layout", team, counts, experts, chunk_rows, 1);
  const int rank = team.rank;
  const int locals = layout.shape().local_experts();
  py::dict out;
  out["send_rows"] = layout.SendRows(rank);
  out["max_send_rows"] = MostSent(layout);
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
                 py::handle counters_arg, int experts, std::int64_t chunk_rows,
                 py::handle team_arg) {
  constexpr std::string_view kOp = "moe_dispatch";
  const at::Tensor rows = TensorArg(kOp, "rows", rows_arg);
  const at::Tensor counts = TensorArg(kOp, "counts", counts_arg);
  const at::Tensor recv = TensorArg(kOp, "recv", recv_arg);
  const at::Tensor counters = TensorArg(kOp, "counters", counters_arg);
  const MoeStep step = MoeStepOf(kOp, "rows", rows, team_arg, counts, experts, chunk_rows);
  const ops::MoeLayout& layout = step.layout;
  const int rank = step.team.rank;
  CheckRows(kOp, "rows", rows, layout.SendRows(rank), rows);
  CheckRows(kOp, "recv", recv, layout.MaxRecvRows(), rows);
  const SymmetricView recv_view = Symmetric(kOp, "recv", recv);
  const SymmetricView counter_view =
      Counters(kOp, "counters", counters, layout.shape().local_experts());
  const auto* source = static_cast<const std::byte*>(rows.data_ptr());
  const StreamRef stream = CurrentStream();
  const KeepAlive hold = Hold(stream, rows, counts);
  py::gil_scoped_release no_gil;
  Check(Runtime::Process().Launch(
      step.team.handle, kOp, {recv_view, counter_view}, stream,
      [layout, source, profiled = at::ThreadLocalState()](
          data_plane::KernelApi& api, const std::vector<std::uint64_t>& at) {
        const at::ThreadLocalStateGuard caller_state(profiled);  // the caller's profiler
        RECORD_FUNCTION("hps_moe::dispatch", std::vector<c10::IValue>());
        return ops::Dispatch(api, layout, ops::DispatchPlan{source, at[0], at[1]});
      },
      hold));
}

void MoeCombine(py::handle results_arg, py::handle counts_arg, py::handle returned_arg,
                py::handle return_counter_arg, py::handle done_arg,
                std::vector<std::int64_t> done_targets, int experts, std::int64_t chunk_rows,
                py::handle team_arg) {
  constexpr std::string_view kOp = "moe_combine";
  const at::Tensor results = TensorArg(kOp, "results", results_arg);
  const at::Tensor counts = TensorArg(kOp, "counts", counts_arg);
  const at::Tensor returned = TensorArg(kOp, "returned", returned_arg);
  const at::Tensor return_counter = TensorArg(kOp, "return_counter", return_counter_arg);
  const at::Tensor done = TensorArg(kOp, "done", done_arg);
  const MoeStep step =
      MoeStepOf(kOp, "returned", returned, team_arg, counts, experts, chunk_rows);
  const ops::MoeLayout& layout = step.layout;
  const int rank = step.team.rank;
  CheckRows(kOp, "results", results, layout.RecvRows(rank), returned);
  CheckRows(kOp, "returned", returned, MostSent(layout), returned);
  const SymmetricView returned_view = Symmetric(kOp, "returned", returned);
  const SymmetricView counter_view = Counters(kOp, "return_counter", return_counter, 1);
  const SymmetricView done_view = Counters(kOp, "done", done, layout.shape().local_experts());
  if (static_cast<int>(done_targets.size()) != layout.shape().local_experts()) {
    Check(Contract(kOp, "done_targets", std::to_string(layout.shape().local_experts()) + " targets",
                   std::to_string(done_targets.size())));
  }
  const auto* source = static_cast<const std::byte*>(results.data_ptr());
  const StreamRef stream = CurrentStream();
  const KeepAlive hold = Hold(stream, results, counts);
  py::gil_scoped_release no_gil;
  Check(Runtime::Process().Launch(
      step.team.handle, kOp, {returned_view, counter_view, done_view}, stream,
      [layout, source, targets = std::move(done_targets), profiled = at::ThreadLocalState()](
          data_plane::KernelApi& api, const std::vector<std::uint64_t>& at) {
        const at::ThreadLocalStateGuard caller_state(profiled);  // the caller's profiler
        RECORD_FUNCTION("hps_moe::combine", std::vector<c10::IValue>());
        return ops::Combine(api, layout, ops::CombinePlan{source, at[0], at[1], at[2], targets});
      },
      hold));
}

void RegisterMegaMoe(py::module_& m) {
  m.def(
      "check_order_token",
      [](py::handle order, const std::string& op) {
        CheckOrderToken(TensorArg(op, "order", order), op.c_str());
      },
      py::arg("order"), py::arg("op"),
      "Raises ShmemError unless `order` is the live lifecycle's order token (or a copy).");
  m.def("moe_layout", &MoeLayoutDict, py::arg("counts"), py::arg("experts"),
        py::arg("chunk_rows"), py::arg("team") = py::none(),
        "This PE's view of a MegaMoE step's layout over `team` (None: the world).");
  m.def("moe_dispatch", &MoeDispatch, py::arg("rows"), py::arg("counts"), py::arg("recv"),
        py::arg("counters"), py::arg("experts"), py::arg("chunk_rows"),
        py::arg("team") = py::none());
  m.def("moe_combine", &MoeCombine, py::arg("results"), py::arg("counts"), py::arg("returned"),
        py::arg("return_counter"), py::arg("done"), py::arg("done_targets"), py::arg("experts"),
        py::arg("chunk_rows"), py::arg("team") = py::none());
}

}  // namespace
}  // namespace hyper_parallel::shmem::binding

// MegaMoE's expert-parallel call as two custom ops, for torch.compile (docs/mega_moe.md,
// "Compiling"). Every op takes the binding's order token first and declares it mutated
// (`Tensor(t!) order`, docs/compile.md): the shared mutation keeps the calls in program order
// through every compiler pass and keeps them from being dropped; their communication and the
// resident buffers are the layer's own, not arguments, so no other operand is written.
//   forward(order, rows [N, H], ids [N], gate, up, down, layer, keep)
//     -> (results [N, H], local counts [E], every PE's counts [P, E], call)
//   backward(order, grad [N, H], call, gate, up, down, layer)
//     -> (rows' gradient [N, H], d_gate, d_up, d_down)
// `layer` names the MegaMoE layer (mega_moe/_ops.py keeps the table); `call` is a 0-dim int64
// tensor naming what a forward with `keep` saved for its backward. Every output is a new
// tensor whose shape follows from the inputs' (the fake kernels say so): N, the routed rows,
// may change from call to call without a recompilation.
TORCH_LIBRARY(hps_moe, m) {
  m.def(
      "forward(Tensor(t!) order, Tensor rows, Tensor ids, Tensor gate, Tensor up, Tensor down, "
      "int layer, bool keep) -> (Tensor, Tensor, Tensor, Tensor)",
      {at::Tag::pt2_compliant_tag});
  m.def(
      "backward(Tensor(t!) order, Tensor grad, Tensor call, Tensor gate, Tensor up, "
      "Tensor down, int layer) -> (Tensor, Tensor, Tensor, Tensor)",
      {at::Tag::pt2_compliant_tag});
}

PYBIND11_MODULE(hyper_parallel_mega_moe_torch, m) {
  m.doc() = "Hyper-Parallel SHMEM MegaMoE native ops (use hyper_parallel.core.multicore.mega_moe)";
  hyper_parallel::shmem::binding::RegisterMegaMoe(m);
}
