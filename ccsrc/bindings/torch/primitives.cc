// The one-sided primitives and the collectives from Python: put, get, signal, put_signal,
// wait_signal, and collective (a collective unit of ops/collectives.h run by name). Each
// converts its arguments (arguments.h), resolves its operands through the protection chain
// (heap_tensors.h) and calls the Runtime; policy stays in the Runtime. Every call that may
// block releases the GIL. An optional team (teams.h) makes a PE argument a team PE and runs a
// collective over the team; None takes the world path, with no lookup of its own. Includes
// ATen's Tensor, not torch's Python headers.
#include <ATen/core/Tensor.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "bindings/torch/arguments.h"
#include "bindings/torch/errors.h"
#include "bindings/torch/heap_tensors.h"
#include "bindings/torch/registration.h"
#include "bindings/torch/streams.h"
#include "bindings/torch/teams.h"
#include "ops/collectives.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace hyper_parallel::shmem::binding {
namespace {

// Copies up to this size and signals cannot wait (the Runtime runs them under its mutex): the
// GIL stays held, which costs less than releasing and taking it back.
constexpr std::uint64_t kKeepGilBytes = 64ull << 10;

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

SignalOp SignalOpArg(py::handle value) {
  return ChoiceArg("operation", value, {"set", "add"}) == "add" ? SignalOp::kAdd : SignalOp::kSet;
}

// Runs `call` holding the GIL when it cannot wait, else without it.
template <class Call>
Status Run(std::uint64_t bytes, Call call) {
  if (bytes <= kKeepGilBytes) return call();
  py::gil_scoped_release no_gil;
  return call();
}

// The world PE a `pe` argument names: itself without a team, else the team's PE `pe`.
int TargetPe(std::string_view operation, py::handle pe_arg, py::handle team) {
  const int pe = PeArg(operation, pe_arg);
  if (team.is_none()) [[likely]] return pe;
  return WorldPe(operation, team, pe);
}

void Put(py::handle dst, py::handle src, py::handle pe_arg, py::handle team) {
  const at::Tensor destination = TensorArg("dst", dst);
  const at::Tensor source = TensorArg("src", src);
  const int pe = TargetPe("put", pe_arg, team);
  const SymmetricView view = Symmetric("put", "dst", destination);
  const void* local = Local("put", "src", source);
  CheckMatches("put", "src", source, "dst", destination);
  const StreamRef stream = CurrentStream();
  Check(Run(view.bytes, [&] {
    return Runtime::Process().Put(view, local, pe, stream, Hold(stream, destination, source));
  }));
}

void Get(py::handle dst, py::handle src, py::handle pe_arg, py::handle team) {
  const at::Tensor destination = TensorArg("dst", dst);
  const at::Tensor source = TensorArg("src", src);
  const int pe = TargetPe("get", pe_arg, team);
  const SymmetricView view = Symmetric("get", "src", source);
  void* local = Local("get", "dst", destination);
  CheckMatches("get", "dst", destination, "src", source);
  const StreamRef stream = CurrentStream();
  Check(Run(view.bytes, [&] {
    return Runtime::Process().Get(local, view, pe, stream, Hold(stream, destination, source));
  }));
}

SignalWidth Width(std::string_view operation, const at::Tensor& signal) {
  if (signal.scalar_type() == at::kInt) return SignalWidth::k32;
  if (signal.scalar_type() == at::kLong) return SignalWidth::k64;
  Check(Contract(operation, "sig dtype", "torch.int32 or torch.int64",
                 c10::toString(signal.scalar_type())));
  return SignalWidth::k64;
}

void Signal(py::handle sig, py::handle value_arg, py::handle pe_arg, py::handle operation,
            py::handle team) {
  const at::Tensor signal = SignalArg(sig);
  const std::int64_t value = ValueArg(value_arg);
  const int pe = TargetPe("signal", pe_arg, team);
  const SignalOp op = SignalOpArg(operation);
  const SignalWidth width = Width("signal", signal);
  const SymmetricView view = Symmetric("signal", "sig", signal);
  Check(Runtime::Process().Signal(view, width, value, pe, op, CurrentStream()));
}

void PutSignal(py::handle dst, py::handle src, py::handle sig, py::handle value_arg,
               py::handle pe_arg, py::handle operation, py::handle team) {
  const at::Tensor signal = SignalArg(sig);
  const at::Tensor destination = TensorArg("dst", dst);
  const at::Tensor source = TensorArg("src", src);
  const std::int64_t value = ValueArg(value_arg);
  const int pe = TargetPe("put_signal", pe_arg, team);
  const SignalOp op = SignalOpArg(operation);
  const SymmetricView view = Symmetric("put_signal", "dst", destination);
  const void* local = Local("put_signal", "src", source);
  CheckMatches("put_signal", "src", source, "dst", destination);
  const SignalWidth width = Width("put_signal", signal);
  const SymmetricView signal_view = Symmetric("put_signal", "sig", signal);
  const StreamRef stream = CurrentStream();
  Check(Run(view.bytes, [&] {
    return Runtime::Process().PutSignal(view, local, signal_view, width, value, pe, op, stream,
                                        Hold(stream, destination, source));
  }));
}

void WaitSignal(py::handle sig, py::handle value_arg, py::handle comparison_arg) {
  const at::Tensor signal = SignalArg(sig);
  const std::int64_t value = ValueArg(value_arg);
  const std::string comparison =
      ChoiceArg("comparison", comparison_arg, {"eq", "ne", "gt", "ge", "lt", "le"});
  static const std::pair<std::string_view, Comparison> kComparisons[] = {
      {"eq", Comparison::kEq}, {"ne", Comparison::kNe}, {"gt", Comparison::kGt},
      {"ge", Comparison::kGe}, {"lt", Comparison::kLt}, {"le", Comparison::kLe}};
  Comparison chosen = Comparison::kEq;
  for (const auto& [name, value_comparison] : kComparisons) {
    if (comparison == name) chosen = value_comparison;
  }
  const SignalWidth width = Width("wait_signal", signal);
  const SymmetricView view = Symmetric("wait_signal", "sig", signal);
  const StreamRef stream = CurrentStream();
  py::gil_scoped_release no_gil;  // it may wait: another thread may need the GIL to signal
  Check(Runtime::Process().WaitSignal(view, width, value, chosen, stream));
}

// Runs the collective unit called `name` (ops/collectives.h) over the Root WORLD, or over
// `team` when it is not None (results in team-PE order): with no operand (barrier), or with a
// symmetric output and a local input of the same dtype, whose sizes the collective's own
// checks count in elements.
void RunCollective(const std::string& name, py::handle output_arg, py::handle input_arg,
                   py::handle team_arg) {
  const data_plane::Collective* collective = ops::FindCollective(name);
  if (collective == nullptr) {
    std::string names;
    for (const data_plane::Collective* known : ops::Collectives()) {
      names += (names.empty() ? "" : ", ") + std::string(known->name());
    }
    Check(Contract("collective", "collective", "one of this build's (" + names + ")", name));
  }
  const bool world = team_arg.is_none();
  const TeamHandle team = world ? kWorldTeam : TeamArgument(team_arg);
  const StreamRef stream = CurrentStream();
  if (!collective->TakesOperands()) {
    py::gil_scoped_release no_gil;
    Check(world ? Runtime::Process().RunCollective(*collective, {}, stream)
                : Runtime::Process().RunCollective(team, *collective, {}, stream));
    return;
  }
  const std::string_view op = collective->name();
  const at::Tensor output = TensorArg("output", output_arg);
  const at::Tensor input = TensorArg("input", input_arg);
  const SymmetricView view = Symmetric(op, "output", output);
  const void* local = Local(op, "input", input);
  if (input.scalar_type() != output.scalar_type()) {
    Check(Contract(op, "input dtype",
                   "output's dtype " + std::string(c10::toString(output.scalar_type())),
                   c10::toString(input.scalar_type())));
  }
  const CollectiveOperands operands{
      view, local, ByteSize(input), static_cast<std::uint64_t>(output.element_size()),
      c10::getDtypeNames(output.scalar_type()).first};
  KeepAlive hold = Hold(stream, output, input);
  py::gil_scoped_release no_gil;
  Check(world ? Runtime::Process().RunCollective(*collective, operands, stream, std::move(hold))
              : Runtime::Process().RunCollective(team, *collective, operands, stream,
                                                 std::move(hold)));
}

}  // namespace

void RegisterPrimitives(py::module_& m) {
  // team: None (the world) or a shmem.Team, whose PE numbers `pe` then is.
  m.def("put", &Put, py::arg("dst"), py::arg("src"), py::arg("pe"), py::arg("team") = py::none());
  m.def("get", &Get, py::arg("dst"), py::arg("src"), py::arg("pe"), py::arg("team") = py::none());
  m.def("signal", &Signal, py::arg("sig"), py::arg("value"), py::arg("pe"),
        py::arg("operation"), py::arg("team") = py::none());
  m.def("put_signal", &PutSignal, py::arg("dst"), py::arg("src"), py::arg("sig"), py::arg("value"),
        py::arg("pe"), py::arg("operation"), py::arg("team") = py::none());
  m.def("wait_signal", &WaitSignal, py::arg("sig"), py::arg("value"), py::arg("comparison"));
  m.def("collective", &RunCollective, py::arg("name"), py::arg("output") = py::none(),
        py::arg("input") = py::none(), py::arg("team") = py::none(),
        "Runs the collective called `name` (barrier, all_gather, all_to_all, ...) over the "
        "world, or over `team`.");
}

}  // namespace hyper_parallel::shmem::binding
