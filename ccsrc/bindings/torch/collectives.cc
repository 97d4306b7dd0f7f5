// The collectives (a collective unit of ops/collectives.h run by name, all_gather_v, the split
// all_to_all) and the refusals that keep the PEs in step (docs/architecture.md, "A refused call
// keeps its place"): on converted operands (primitives.h, shared with the custom ops of ops.cc),
// and as Python functions: collective, all_gather_v, all_to_all, refuse_collective. A Python
// function converts its arguments (arguments.h) and calls the shared entry with the GIL
// released; policy stays in the Runtime. An optional team (teams.h) runs the collective over
// the team; None takes the world path. Includes ATen's Tensor, not torch's Python headers.
#include <ATen/core/Tensor.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bindings/torch/arguments.h"
#include "bindings/torch/eager_range.h"
#include "bindings/torch/errors.h"
#include "bindings/torch/heap_tensors.h"
#include "bindings/torch/primitives.h"
#include "bindings/torch/registration.h"
#include "bindings/torch/streams.h"
#include "bindings/torch/teams.h"
#include "ops/collectives.h"
#include "ops/reduce/element.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace hyper_parallel::shmem::binding {
namespace {

// Runs the collective unit called `name` over the Root WORLD, or over `team` when it is not
// None (results in team-PE order).
void RunCollective(const std::string& name, py::handle output_arg, py::handle input_arg,
                   py::handle team_arg, py::handle root_arg, py::handle op_arg) {
  HPS_EAGER_RANGE("hps::" + name);
  const data_plane::Collective& collective = CollectiveNamed(name);
  const TeamHandle team = team_arg.is_none() ? kWorldTeam : TeamArgument(name, team_arg);
  if (!collective.TakesOperands()) {
    py::gil_scoped_release no_gil;
    RunCollectiveTensors(collective, team, nullptr, nullptr, CallPath::kFunction);
    return;
  }
  struct Converted {
    at::Tensor output, input;
    data_plane::CollectiveArguments arguments{};
  };
  const Converted call = Refusable(name, team, [&] {
    Converted converted{TensorArg(name, "output", output_arg),
                        TensorArg(name, "input", input_arg)};
    if (!root_arg.is_none()) converted.arguments[0] = PeArg(name, root_arg, "root");
    if (!op_arg.is_none()) {
      if (!py::isinstance<py::str>(op_arg)) {
        ThrowTypeError(name, "op", "a str", TypeName(op_arg));
      }
      converted.arguments[0] = ReduceOpCode(name, op_arg.cast<std::string>());
    }
    return converted;
  });
  py::gil_scoped_release no_gil;
  RunCollectiveTensors(collective, team, &call.output, &call.input, CallPath::kFunction,
                       call.arguments);
}

// A collective's input has its output's dtype.
void CheckSameDtype(std::string_view op, const at::Tensor& output, const at::Tensor& input) {
  if (input.scalar_type() != output.scalar_type()) {
    Check(Contract(op, "input dtype",
                   "output's dtype " + std::string(c10::toString(output.scalar_type())),
                   c10::toString(input.scalar_type())));
  }
}

}  // namespace

const data_plane::Collective& CollectiveNamed(std::string_view name) {
  const data_plane::Collective* collective = ops::FindCollective(name);
  if (collective == nullptr) {
    std::string names;
    for (const data_plane::Collective* known : ops::Collectives()) {
      names += (names.empty() ? "" : ", ") + std::string(known->name());
    }
    Check(Contract("collective", "collective", "one of this build's (" + names + ")", name));
  }
  return *collective;
}

std::int64_t ReduceOpCode(std::string_view operation, std::string_view name) {
  const std::optional<ops::ReduceOp> op = ops::ReduceOpNamed(name);
  if (!op) {
    Check(Contract(operation, "op", "one of sum, prod, min, max, and, or, xor",
                   "'" + std::string(name) + "'"));
  }
  return static_cast<std::int64_t>(*op);
}

void RefuseInPlace(std::string_view kind, const TeamHandle& team, std::exception_ptr error) {
  RefuseWith(kind, team, ReasonOf(error));
}

void RefuseWith(std::string_view kind, const TeamHandle& team, const Status& why) {
  try {
    const StreamRef stream = CurrentStream();  // may take the GIL (the NPU's current stream)
    if (PyGILState_Check()) {
      py::gil_scoped_release no_gil;  // the refusal waits for the peers' calls
      (void)Runtime::Process().RefuseCollective(team, kind, why, stream);
    } else {
      (void)Runtime::Process().RefuseCollective(team, kind, why, stream);
    }
  } catch (...) {
    // No stream to refuse on (no Runtime): the failure in flight says why.
  }
}

void RunCollectiveTensors(const data_plane::Collective& collective, const TeamHandle& team,
                          const at::Tensor* output, const at::Tensor* input, CallPath path,
                          const data_plane::CollectiveArguments& arguments) {
  const bool world = team == kWorldTeam;
  const StreamRef stream = CurrentStream();
  if (!collective.TakesOperands()) {
    Check(world ? Runtime::Process().RunCollective(collective, {}, stream)
                : Runtime::Process().RunCollective(team, collective, {}, stream));
    RecordOp(collective.name(), -1, path);
    return;
  }
  const std::string_view op = collective.name();
  const CollectiveOperands operands = Refusable(op, team, [&] {
    const SymmetricView view = Symmetric(op, "output", *output);
    const void* local = Local(op, "input", *input);
    CheckSameDtype(op, *output, *input);
    return CollectiveOperands{view, local, ByteSize(*input),
                              static_cast<std::uint64_t>(output->element_size()),
                              c10::getDtypeNames(output->scalar_type()).first, arguments};
  });
  KeepAlive hold = Hold(stream, *output, *input);
  Check(world ? Runtime::Process().RunCollective(collective, operands, stream, std::move(hold))
              : Runtime::Process().RunCollective(team, collective, operands, stream,
                                                 std::move(hold)));
  RecordOp(collective.name(), -1, path);
}

namespace {

std::string ShapeText(at::IntArrayRef sizes) {
  std::string text = "[";
  for (std::size_t i = 0; i < sizes.size(); ++i) text += (i ? ", " : "") + std::to_string(sizes[i]);
  return text + "]";
}

// The bytes of one row of dim 0, once `output` and `input` are seen to share their dtype and
// the shape past dim 0.
std::uint64_t RowBytes(std::string_view op, const at::Tensor& output, const at::Tensor& input) {
  if (input.dim() == 0 || output.dim() == 0) {
    Check(Contract(op, "input and output dims", "at least 1 (rows of dim 0)", "0"));
  }
  CheckSameDtype(op, output, input);
  if (input.sizes().slice(1) != output.sizes().slice(1)) {
    Check(Contract(op, "output's shape past dim 0", "input's " + ShapeText(input.sizes().slice(1)),
                   ShapeText(output.sizes().slice(1))));
  }
  std::uint64_t row = static_cast<std::uint64_t>(input.element_size());
  for (std::int64_t d : input.sizes().slice(1)) row *= static_cast<std::uint64_t>(d);
  if (row == 0) Check(Contract(op, "row size", "at least one element", "0"));
  return row;
}

// A split list from Python: None, or a sequence of ints.
std::optional<std::vector<std::int64_t>> SplitArg(std::string_view name, py::handle value) {
  if (value.is_none()) return std::nullopt;
  if (!py::isinstance<py::sequence>(value) || py::isinstance<py::str>(value)) {
    ThrowTypeError("all_to_all", name, "a sequence of ints or None", TypeName(value));
  }
  std::vector<std::int64_t> sizes;
  for (py::handle item : value) {
    bool in_range = true;
    sizes.push_back(IntArg("all_to_all", name, item, &in_range));
    if (!in_range) ThrowValueError("all_to_all", name, "ints that fit int64", "a larger one");
  }
  return sizes;
}

int TeamSize(const TeamHandle& team) {
  TeamInfo info;
  Check(Runtime::Process().DescribeTeam(team, &info));
  return static_cast<int>(info.pes.size());
}

void RunVariable(const data_plane::Collective& collective, const TeamHandle& team,
                 CollectiveOperands operands, const at::Tensor& output, const at::Tensor& input,
                 StreamRef stream) {
  KeepAlive hold = Hold(stream, output, input);
  Check(team == kWorldTeam
            ? Runtime::Process().RunCollective(collective, operands, stream, std::move(hold))
            : Runtime::Process().RunCollective(team, collective, operands, stream,
                                               std::move(hold)));
}

// Split sizes in rows: `given`, else the tensor's rows cut equally.
std::vector<std::uint64_t> SplitBytes(std::string_view op, std::string_view name,
                                      const std::optional<std::vector<std::int64_t>>& given,
                                      std::int64_t rows, int members, std::uint64_t row_bytes) {
  std::vector<std::uint64_t> bytes(static_cast<std::size_t>(members));
  if (!given) {
    if (rows % members != 0) {
      Check(Contract(op, std::string(name) + " rows",
                     "divisible by the team size (" + std::to_string(members) +
                         ") when its split sizes are not given",
                     std::to_string(rows)));
    }
    for (auto& b : bytes) b = static_cast<std::uint64_t>(rows / members) * row_bytes;
    return bytes;
  }
  if (given->size() != static_cast<std::size_t>(members)) {
    Check(Contract(op, std::string(name) + "_split_sizes length",
                   "the team size (" + std::to_string(members) + ")",
                   std::to_string(given->size())));
  }
  std::int64_t sum = 0;
  for (std::size_t j = 0; j < given->size(); ++j) {
    if ((*given)[j] < 0) {
      Check(Contract(op, std::string(name) + "_split_sizes[" + std::to_string(j) + "]",
                     "non-negative", std::to_string((*given)[j])));
    }
    sum += (*given)[j];
    bytes[j] = static_cast<std::uint64_t>((*given)[j]) * row_bytes;
  }
  if (sum != rows) {
    Check(Contract(op, std::string(name) + "_split_sizes' sum",
                   "the " + std::string(name) + "'s rows (" + std::to_string(rows) + ")",
                   std::to_string(sum)));
  }
  return bytes;
}

}  // namespace

std::vector<std::int64_t> AllGatherVTensors(const at::Tensor& output, const at::Tensor& input,
                                            const TeamHandle& team, CallPath path) {
  constexpr std::string_view kOp = "all_gather_v";
  const StreamRef stream = CurrentStream();
  std::uint64_t row = 0;
  CollectiveOperands operands = Refusable(kOp, team, [&] {
    const SymmetricView view = Symmetric(kOp, "output", output);
    const void* local = Local(kOp, "input", input);
    row = RowBytes(kOp, output, input);
    if (IsQueuedOwnStream(stream)) {
      Check(Status::Assertion(ErrorCode::kInvalidState,
                              "all_gather_v returns every PE's row count when it has run: call "
                              "it on the default stream")
                .At(kOp, "validate"));
    }
    return CollectiveOperands{view, local, ByteSize(input),
                              static_cast<std::uint64_t>(output.element_size()),
                              c10::getDtypeNames(output.scalar_type()).first};
  });
  operands.results = std::make_shared<std::vector<std::uint64_t>>();
  RunVariable(CollectiveNamed(kOp), team, operands, output, input, stream);
  RecordOp(kOp, -1, path);
  std::vector<std::int64_t> rows;
  for (std::uint64_t bytes : *operands.results) rows.push_back(static_cast<std::int64_t>(bytes / row));
  return rows;
}

void AllToAllTensors(const at::Tensor& output, const at::Tensor& input,
                     const std::optional<std::vector<std::int64_t>>& output_split_sizes,
                     const std::optional<std::vector<std::int64_t>>& input_split_sizes,
                     const TeamHandle& team, CallPath path) {
  if (!output_split_sizes && !input_split_sizes) {
    RunCollectiveTensors(CollectiveNamed("all_to_all"), team, &output, &input, path);
    return;
  }
  constexpr std::string_view kOp = "all_to_all";
  // The split call's kind: every PE's refusal takes the place of that call.
  const CollectiveOperands operands = Refusable("all_to_all_v", team, [&] {
    const SymmetricView view = Symmetric(kOp, "output", output);
    const void* local = Local(kOp, "input", input);
    const std::uint64_t row = RowBytes(kOp, output, input);
    const int members = TeamSize(team);
    CollectiveOperands checked{view, local, ByteSize(input),
                               static_cast<std::uint64_t>(output.element_size()),
                               c10::getDtypeNames(output.scalar_type()).first};
    checked.sizes = SplitBytes(kOp, "input", input_split_sizes, input.size(0), members, row);
    const std::vector<std::uint64_t> receive =
        SplitBytes(kOp, "output", output_split_sizes, output.size(0), members, row);
    checked.sizes.insert(checked.sizes.end(), receive.begin(), receive.end());
    return checked;
  });
  RunVariable(CollectiveNamed("all_to_all_v"), team, operands, output, input, CurrentStream());
  RecordOp(kOp, -1, path);
}

void RegisterCollectives(py::module_& m) {
  // Plain py::handle arguments and a py::list result: this file does not include
  // pybind11/stl.h, whose std::vector caster would differ from the one the other binding files
  // see (one caster per type across the module).
  m.def(
      "all_gather_v",
      [](py::handle output, py::handle input, py::handle team_arg) {
        const TeamHandle team = team_arg.is_none() ? kWorldTeam : TeamArgument("all_gather_v", team_arg);
        const auto [out, in] = Refusable("all_gather_v", team, [&] {
          return std::pair{TensorArg("all_gather_v", "output", output),
                           TensorArg("all_gather_v", "input", input)};
        });
        std::vector<std::int64_t> rows;
        {
          py::gil_scoped_release no_gil;
          rows = AllGatherVTensors(out, in, team, CallPath::kFunction);
        }
        py::list counts;
        for (std::int64_t count : rows) counts.append(py::int_(count));
        return counts;
      },
      py::arg("output"), py::arg("input"), py::arg("team") = py::none());
  m.def(
      "all_to_all",
      [](py::handle output, py::handle input, py::handle out_splits, py::handle in_splits,
         py::handle team_arg) {
        const TeamHandle team = team_arg.is_none() ? kWorldTeam : TeamArgument("all_to_all", team_arg);
        struct Converted {
          at::Tensor out, in;
          std::optional<std::vector<std::int64_t>> output_splits, input_splits;
        };
        const Converted call = Refusable("all_to_all_v", team, [&] {
          return Converted{TensorArg("all_to_all", "output", output),
                           TensorArg("all_to_all", "input", input),
                           SplitArg("output_split_sizes", out_splits),
                           SplitArg("input_split_sizes", in_splits)};
        });
        py::gil_scoped_release no_gil;
        AllToAllTensors(call.out, call.in, call.output_splits, call.input_splits, team,
                        CallPath::kFunction);
      },
      py::arg("output"), py::arg("input"), py::arg("output_split_sizes") = py::none(),
      py::arg("input_split_sizes") = py::none(), py::arg("team") = py::none());
  m.def(
      "refuse_collective",
      [](const std::string& kind, py::handle team_arg, const std::string& reason) {
        const TeamHandle team =
            team_arg.is_none() ? kWorldTeam : TeamArgument(std::string_view(kind), team_arg);
        RefuseWith(kind, team, Status::Assertion(ErrorCode::kInvalidArgument, reason));
      },
      py::arg("kind"), py::arg("team"), py::arg("reason"),
      "Publishes this PE's refusal of a collective of kind `kind` (a check of the Python layer "
      "failed): the call's place in the team's sequence, so the peers' call fails naming it.");
  m.def("collective", &RunCollective, py::arg("name"), py::arg("output") = py::none(),
        py::arg("input") = py::none(), py::arg("team") = py::none(),
        py::arg("root") = py::none(), py::arg("op") = py::none(),
        "Runs the collective called `name` (barrier, all_gather, all_to_all, broadcast, "
        "all_reduce, ...) over the world, or over `team`; `root` a broadcast's, `op` a "
        "reduction's operator by name.");
}

}  // namespace hyper_parallel::shmem::binding
