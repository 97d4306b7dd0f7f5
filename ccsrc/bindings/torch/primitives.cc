// The one-sided primitives: on converted operands (primitives.h, shared with the custom ops of
// ops.cc), and as Python functions: put, get, signal, put_signal and wait_signal; the
// collectives are collectives.cc's. A Python function converts its arguments (arguments.h) and
// calls the shared entry; policy stays in the Runtime. Every call that may block releases the
// GIL. An optional team (teams.h) makes a PE argument a team PE; None takes the world path,
// with no lookup of its own. Includes ATen's Tensor, not torch's Python headers.
#include "bindings/torch/primitives.h"

#include <ATen/core/Tensor.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "bindings/torch/arguments.h"
#include "bindings/torch/eager_range.h"
#include "bindings/torch/errors.h"
#include "bindings/torch/heap_tensors.h"
#include "bindings/torch/registration.h"
#include "bindings/torch/streams.h"
#include "bindings/torch/teams.h"
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

constexpr std::pair<std::string_view, SignalOp> kSignalOps[] = {{"set", SignalOp::kSet},
                                                                {"add", SignalOp::kAdd}};
constexpr std::pair<std::string_view, Comparison> kComparisons[] = {
    {"eq", Comparison::kEq}, {"ne", Comparison::kNe}, {"gt", Comparison::kGt},
    {"ge", Comparison::kGe}, {"lt", Comparison::kLt}, {"le", Comparison::kLe}};

// Releases the GIL for the rest of the scope when a transfer of `bytes` may wait (larger
// than kKeepGilBytes).
class ReleaseFor {
 public:
  explicit ReleaseFor(std::uint64_t bytes) {
    if (bytes > kKeepGilBytes) released_.emplace();
  }

 private:
  std::optional<py::gil_scoped_release> released_;
};

// A non-blocking operation's operands, whatever the stream: on the default stream too, it may
// still read or write them once the call returned (until a quiet).
KeepAlive HoldUntilQuiet(const at::Tensor& dst, const at::Tensor& src) {
  return std::make_shared<std::pair<at::Tensor, at::Tensor>>(dst, src);
}

SignalOp SignalOpArg(std::string_view op, py::handle value) {
  return *SignalOpNamed(ChoiceArg(op, "operation", value, {"set", "add"}));
}

// put (`put`) or get from Python: the symmetric side is dst for a put, src for a get.
void Transfer(bool put, py::handle dst, py::handle src, py::handle pe_arg, py::handle team) {
  HPS_EAGER_RANGE(put ? "hps::put" : "hps::get");
  const std::string_view op = put ? "put" : "get";
  const at::Tensor destination = TensorArg(op, "dst", dst);
  const at::Tensor source = TensorArg(op, "src", src);
  const int pe = TargetPe(op, pe_arg, team);
  const ReleaseFor released(ByteSize(put ? destination : source));
  (put ? PutTensors : GetTensors)(destination, source, pe, CallPath::kFunction, /*nbi=*/false);
}

void Signal(py::handle sig, py::handle value_arg, py::handle pe_arg, py::handle operation,
            py::handle team) {
  HPS_EAGER_RANGE("hps::signal");
  const at::Tensor signal = SignalArg("signal", sig);
  const std::int64_t value = ValueArg("signal", value_arg);
  const int pe = TargetPe("signal", pe_arg, team);
  SignalTensor(signal, value, pe, SignalOpArg("signal", operation), CallPath::kFunction);
}

void PutSignal(py::handle dst, py::handle src, py::handle sig, py::handle value_arg,
               py::handle pe_arg, py::handle operation, py::handle team) {
  HPS_EAGER_RANGE("hps::put_signal");
  const at::Tensor signal = SignalArg("put_signal", sig);
  const at::Tensor destination = TensorArg("put_signal", "dst", dst);
  const at::Tensor source = TensorArg("put_signal", "src", src);
  const std::int64_t value = ValueArg("put_signal", value_arg);
  const int pe = TargetPe("put_signal", pe_arg, team);
  const SignalOp op = SignalOpArg("put_signal", operation);
  const ReleaseFor released(ByteSize(destination));
  PutSignalTensors(destination, source, signal, value, pe, op, CallPath::kFunction);
}

void WaitSignal(py::handle sig, py::handle value_arg, py::handle comparison_arg) {
  HPS_EAGER_RANGE("hps::wait_signal");
  const at::Tensor signal = SignalArg("wait_signal", sig);
  const std::int64_t value = ValueArg("wait_signal", value_arg);
  const Comparison comparison = ComparisonArg("wait_signal", comparison_arg);
  py::gil_scoped_release no_gil;  // it may wait: another thread may need the GIL to signal
  WaitSignalTensor(signal, value, comparison, CallPath::kFunction);
}

}  // namespace

SignalWidth Width(std::string_view operation, const at::Tensor& signal,
                  std::string_view name) {
  if (signal.scalar_type() == at::kInt) return SignalWidth::k32;
  if (signal.scalar_type() == at::kLong) return SignalWidth::k64;
  Check(Contract(operation, std::string(name) + " dtype", "torch.int32 or torch.int64",
                 c10::toString(signal.scalar_type())));
  return SignalWidth::k64;
}

int TargetPe(std::string_view operation, py::handle pe_arg, py::handle team) {
  const int pe = PeArg(operation, pe_arg);
  if (team.is_none()) [[likely]] return pe;
  return WorldPe(operation, team, pe);
}

Comparison ComparisonArg(std::string_view operation, py::handle value) {
  return *ComparisonNamed(ChoiceArg(operation, "comparison", value, {"eq", "ne", "gt", "ge", "lt", "le"}));
}

const SignalOp* SignalOpNamed(std::string_view name) { return Named(kSignalOps, name); }

const Comparison* ComparisonNamed(std::string_view name) { return Named(kComparisons, name); }

namespace {

// A put (`put`) or a get on converted operands: the symmetric side is dst for a put, src for a
// get, and the other side is local.
void TransferTensors(bool put, const at::Tensor& dst, const at::Tensor& src, int pe,
                     CallPath path, bool nbi) {
  const std::string_view op = put ? (nbi ? "put_nbi" : "put") : (nbi ? "get_nbi" : "get");
  const std::string_view symmetric_name = put ? "dst" : "src";
  const std::string_view local_name = put ? "src" : "dst";
  const at::Tensor& symmetric = put ? dst : src;
  const at::Tensor& local = put ? src : dst;
  const SymmetricView view = Symmetric(op, symmetric_name, symmetric);
  void* data = Local(op, local_name, local);
  CheckMatches(op, local_name, local, symmetric_name, symmetric);
  const StreamRef stream = CurrentStream();
  KeepAlive hold = nbi ? HoldUntilQuiet(dst, src) : Hold(stream, dst, src);
  Runtime& runtime = Runtime::Process();
  if (put) {
    Check(nbi ? runtime.PutNbi(view, data, pe, stream, std::move(hold))
              : runtime.Put(view, data, pe, stream, std::move(hold)));
  } else {
    Check(nbi ? runtime.GetNbi(data, view, pe, stream, std::move(hold))
              : runtime.Get(data, view, pe, stream, std::move(hold)));
  }
  RecordOp(op, pe, path);
}

}  // namespace

void PutTensors(const at::Tensor& dst, const at::Tensor& src, int pe, CallPath path, bool nbi) {
  TransferTensors(true, dst, src, pe, path, nbi);
}

void GetTensors(const at::Tensor& dst, const at::Tensor& src, int pe, CallPath path, bool nbi) {
  TransferTensors(false, dst, src, pe, path, nbi);
}

void SignalTensor(const at::Tensor& sig, std::int64_t value, int pe, SignalOp op,
                  CallPath path) {
  const SignalWidth width = Width("signal", sig);
  const SymmetricView view = Symmetric("signal", "sig", sig);
  Check(Runtime::Process().Signal(view, width, value, pe, op, CurrentStream()));
  RecordOp("signal", pe, path);
}

void PutSignalTensors(const at::Tensor& dst, const at::Tensor& src, const at::Tensor& sig,
                      std::int64_t value, int pe, SignalOp op, CallPath path) {
  const SymmetricView view = Symmetric("put_signal", "dst", dst);
  const void* local = Local("put_signal", "src", src);
  CheckMatches("put_signal", "src", src, "dst", dst);
  const SignalWidth width = Width("put_signal", sig);
  const SymmetricView signal_view = Symmetric("put_signal", "sig", sig);
  const StreamRef stream = CurrentStream();
  Check(Runtime::Process().PutSignal(view, local, signal_view, width, value, pe, op, stream,
                                     Hold(stream, dst, src)));
  RecordOp("put_signal", pe, path);
}

void WaitSignalTensor(const at::Tensor& sig, std::int64_t value, Comparison comparison,
                      CallPath path) {
  const SignalWidth width = Width("wait_signal", sig);
  const SymmetricView view = Symmetric("wait_signal", "sig", sig);
  Check(Runtime::Process().WaitSignal(view, width, value, comparison, CurrentStream()));
  RecordOp("wait_signal", -1, path);
}

void RegisterPrimitives(py::module_& m) {
  // team: None (the world) or a shmem.Team, whose PE numbers `pe` then is.
  m.def(
      "put",
      [](py::handle dst, py::handle src, py::handle pe, py::handle team) {
        Transfer(true, dst, src, pe, team);
      },
      py::arg("dst"), py::arg("src"), py::arg("pe"), py::arg("team") = py::none());
  m.def(
      "get",
      [](py::handle dst, py::handle src, py::handle pe, py::handle team) {
        Transfer(false, dst, src, pe, team);
      },
      py::arg("dst"), py::arg("src"), py::arg("pe"), py::arg("team") = py::none());
  m.def("signal", &Signal, py::arg("sig"), py::arg("value"), py::arg("pe"),
        py::arg("operation"), py::arg("team") = py::none());
  m.def("put_signal", &PutSignal, py::arg("dst"), py::arg("src"), py::arg("sig"), py::arg("value"),
        py::arg("pe"), py::arg("operation"), py::arg("team") = py::none());
  m.def("wait_signal", &WaitSignal, py::arg("sig"), py::arg("value"), py::arg("comparison"));
}

}  // namespace hyper_parallel::shmem::binding
