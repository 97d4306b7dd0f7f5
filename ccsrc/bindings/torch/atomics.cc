// Atomics, fence, quiet, the non-blocking put and get, and the waits on several signal words
// (docs/atomics.md): the shared entries on converted operands (primitives.h, also called by
// the custom ops of ops.cc) and the Python functions of the generic module. Includes torch's
// pybind casters: the fetching atomics and the waits return tensors.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include <optional>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bindings/torch/arguments.h"
#include "bindings/torch/errors.h"
#include "bindings/torch/heap_tensors.h"
#include "bindings/torch/primitives.h"
#include "bindings/torch/registration.h"
#include "bindings/torch/streams.h"
#include "bindings/torch/teams.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace hyper_parallel::shmem::binding {
namespace {

constexpr std::pair<std::string_view, AtomicOp> kAtomicOps[] = {
    {"fetch", AtomicOp::kFetch}, {"set", AtomicOp::kSet},
    {"swap", AtomicOp::kSwap},   {"compare_swap", AtomicOp::kCompareSwap},
    {"add", AtomicOp::kAdd},     {"and", AtomicOp::kAnd},
    {"or", AtomicOp::kOr},       {"xor", AtomicOp::kXor}};
constexpr std::pair<std::string_view, WaitSet> kWaitSets[] = {
    {"any", WaitSet::kAny}, {"all", WaitSet::kAll}, {"some", WaitSet::kSome}};

// The word a dtype is, for atomics.
struct Word {
  std::uint8_t width = 0;  // 0: no atomics on this dtype
  bool floating = false;
  bool is_unsigned = false;
};

Word WordOf(at::ScalarType dtype) {
  switch (dtype) {
    case at::kInt: return {4, false, false};
    case at::kLong: return {8, false, false};
    case at::kUInt32: return {4, false, true};
    case at::kUInt64: return {8, false, true};
    case at::kFloat: return {4, true, false};
    case at::kDouble: return {8, true, false};
    default: return {};
  }
}

// The name of the call the user made: atomic_add, atomic_fetch_add, atomic_swap, ...
std::string OpLabel(AtomicOp op, bool fetch) {
  const bool fetches_apart = op == AtomicOp::kAdd || op == AtomicOp::kAnd ||
                             op == AtomicOp::kOr || op == AtomicOp::kXor;
  return std::string(fetch && fetches_apart ? "atomic_fetch_" : "atomic_") +
         std::string(AtomicOpName(op));
}

// The bit pattern of operand `name` as a word of `dtype` (INVALID_ARGUMENT when it does not
// fit: an int out of the dtype's range, a float for an integer word).
std::uint64_t OperandBits(AtomicOp op, bool fetch, std::string_view name, at::ScalarType dtype,
                          Word word,
                          const c10::Scalar& value) {
  const std::string label = OpLabel(op, fetch);
  if (value.isBoolean() || value.isComplex()) {
    Check(Contract(label, name, "a number", std::string(c10::toString(value.type()))));
  }
  if (word.floating) {
    const double number = value.toDouble();
    if (word.width == 4) {
      const float narrowed = static_cast<float>(number);
      std::uint32_t bits = 0;
      std::memcpy(&bits, &narrowed, sizeof bits);
      return bits;
    }
    std::uint64_t bits = 0;
    std::memcpy(&bits, &number, sizeof bits);
    return bits;
  }
  const std::string dtype_name = c10::toString(dtype);
  if (!value.isIntegral(/*includeBool=*/false)) {
    Check(Contract(label, name, "an int for a " + dtype_name + " word", value.toDouble() == 0
                                                                          ? "0.0"
                                                                          : std::to_string(value.toDouble())));
  }
  if (value.type() == c10::ScalarType::UInt64) {  // above int64's range
    const std::uint64_t big = value.to<std::uint64_t>();
    if (dtype != at::kUInt64) {
      Check(Contract(label, name, "representable as " + dtype_name, std::to_string(big)));
    }
    return big;
  }
  const std::int64_t number = value.toLong();
  std::int64_t low = 0, high = 0;
  if (word.width == 4) {
    low = word.is_unsigned ? 0 : std::numeric_limits<std::int32_t>::min();
    high = word.is_unsigned ? std::numeric_limits<std::uint32_t>::max()
                            : std::numeric_limits<std::int32_t>::max();
  } else {
    low = word.is_unsigned ? 0 : std::numeric_limits<std::int64_t>::min();
    high = std::numeric_limits<std::int64_t>::max();
  }
  if (number < low || number > high) {
    Check(Contract(label, name, "representable as " + dtype_name, std::to_string(number)));
  }
  const auto bits = static_cast<std::uint64_t>(number);
  return word.width == 4 ? bits & 0xffffffffu : bits;
}

// A Python number as a Scalar: an int (up to 2^64 - 1) or a float; ShmemTypeError otherwise.
c10::Scalar ScalarArg(std::string_view operation, std::string_view name, py::handle value) {
  if (PyBool_Check(value.ptr()) ||
      (!PyLong_Check(value.ptr()) && !PyFloat_Check(value.ptr()))) {
    ThrowTypeError(operation, name, "an int or a float",
                   TypeName(value) + " " + std::string(py::repr(value)));
  }
  if (PyFloat_Check(value.ptr())) return c10::Scalar(PyFloat_AsDouble(value.ptr()));
  int overflow = 0;
  const long long number = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  if (overflow == 0) return c10::Scalar(static_cast<std::int64_t>(number));
  const unsigned long long big = PyLong_AsUnsignedLongLong(value.ptr());
  if (overflow < 0 || PyErr_Occurred() != nullptr) {
    PyErr_Clear();
    ThrowValueError(operation, name, "representable in 64 bits", std::string(py::str(value)));
  }
  return c10::Scalar(static_cast<std::uint64_t>(big));
}

Word CheckDest(const at::Tensor& dest, AtomicOp op, bool fetch);

py::object Atomic(const std::string& op_name, py::handle dest_arg, py::handle value_arg,
                  py::handle compare_arg, py::handle pe_arg, py::handle team, bool fetch) {
  const AtomicOp* op = AtomicOpNamed(op_name);
  if (op == nullptr) {  // the package's wrappers pass a known one
    ThrowValueError("atomic", "op", "an atomic's name", "'" + op_name + "'");
  }
  const std::string label = OpLabel(*op, fetch);
  const at::Tensor dest = TensorArg(label, "dest", dest_arg);
  (void)CheckDest(dest, *op, fetch);  // the dtype first: it decides what the values may be
  const c10::Scalar value = ScalarArg(label, "value", value_arg);
  const c10::Scalar compare = ScalarArg(label, "cond", compare_arg);
  const int pe = TargetPe(label, pe_arg, team);
  at::Tensor old;
  {
    // A fetch from another host waits for its answer.
    std::optional<py::gil_scoped_release> released;
    if (fetch) released.emplace();
    old = AtomicTensor(dest, *op, value, compare, pe, fetch, CallPath::kFunction);
  }
  if (!fetch) return py::none();
  return py::cast(old);
}

}  // namespace

const AtomicOp* AtomicOpNamed(std::string_view name) { return Named(kAtomicOps, name); }

const WaitSet* WaitSetNamed(std::string_view name) { return Named(kWaitSets, name); }

namespace {

// dest's dtype takes `op`, and dest is one element; its word.
Word CheckDest(const at::Tensor& dest, AtomicOp op, bool fetch) {
  const std::string label = OpLabel(op, fetch);
  const Word word = WordOf(dest.scalar_type());
  if (word.width == 0 || (word.floating && op != AtomicOp::kFetch && op != AtomicOp::kSet &&
                          op != AtomicOp::kSwap)) {
    Check(Contract(label, "dest dtype",
                   word.floating ? "an integer dtype (int32, int64, uint32, uint64): float32 "
                                   "and float64 take atomic_fetch, atomic_set and atomic_swap "
                                   "only"
                                 : "int32, int64, uint32 or uint64 (float32 and float64 for "
                                   "atomic_fetch, atomic_set and atomic_swap)",
                   c10::toString(dest.scalar_type())));
  }
  if (dest.numel() != 1) {
    Check(Contract(label, "dest", "one element (a 0-dim tensor or a one-element view)",
                   std::to_string(dest.numel()) + " elements"));
  }
  return word;
}

}  // namespace

at::Tensor AtomicTensor(const at::Tensor& dest, AtomicOp op, const c10::Scalar& value,
                        const c10::Scalar& compare, int pe, bool fetch, CallPath path) {
  const std::string label = OpLabel(op, fetch);
  const Word word = CheckDest(dest, op, fetch);
  const std::uint64_t value_bits =
      OperandBits(op, fetch, "value", dest.scalar_type(), word, value);
  const std::uint64_t compare_bits =
      op == AtomicOp::kCompareSwap
          ? OperandBits(op, fetch, "cond", dest.scalar_type(), word, compare)
                                   : 0;
  const SymmetricView view = Symmetric(label, "dest", dest);
  const StreamRef stream = CurrentStream();
  at::Tensor old;
  if (fetch) old = at::empty({}, at::TensorOptions().dtype(dest.scalar_type()));
  // The Runtime tags its failures "atomic": named here as the call the user made.
  const Status done = Runtime::Process().Atomic(view, word.width, op, value_bits, compare_bits,
                                                pe, fetch ? old.mutable_data_ptr() : nullptr,
                                                stream, fetch ? Hold(stream, dest, old) : nullptr);
  if (!done.ok()) Throw(done.Retagged(label, done.phase()));
  RecordOp("atomic", pe, path);
  return old;
}

void OrderingCall(bool quiet, CallPath path) {
  const StreamRef stream = CurrentStream();
  Check(quiet ? Runtime::Process().Quiet(stream) : Runtime::Process().Fence(stream));
  RecordOp(quiet ? "quiet" : "fence", -1, path);
}

at::Tensor WaitSignalsTensor(const at::Tensor& signals, std::int64_t value, Comparison comparison,
                             WaitSet set, std::vector<std::uint8_t> mask, CallPath path) {
  const std::string label = "wait_signal_" + std::string(WaitSetName(set));
  const SignalWidth width = Width(label, signals, "signals");
  if (signals.dim() != 1 || !signals.is_contiguous()) {
    Check(Contract(label, "signals", "a contiguous 1-D tensor",
                   std::to_string(signals.dim()) + "-D" +
                       (signals.is_contiguous() ? "" : ", not contiguous")));
  }
  const SymmetricView view = Symmetric(label, "signals", signals);
  const StreamRef stream = CurrentStream();
  at::Tensor satisfied = at::empty({signals.numel()}, at::TensorOptions().dtype(at::kBool));
  Check(Runtime::Process().WaitSignals(view, width, value, comparison, std::move(mask), set,
                                       reinterpret_cast<std::uint8_t*>(satisfied.mutable_data_ptr()),
                                       stream, Hold(stream, signals, satisfied)));
  RecordOp("wait_signals", -1, path);
  return satisfied;
}

bool TestSignalTensor(const at::Tensor& sig, std::int64_t value, Comparison comparison,
                      CallPath path) {
  const SignalWidth width = Width("test_signal", sig, "signals");
  const SymmetricView view = Symmetric("test_signal", "signal", sig);
  bool satisfied = false;
  Check(Runtime::Process().TestSignal(view, width, value, comparison, &satisfied));
  RecordOp("test_signal", -1, path);
  return satisfied;
}

namespace {

void Nbi(bool put, py::handle dst, py::handle src, py::handle pe_arg, py::handle team) {
  const std::string_view operation = put ? "put_nbi" : "get_nbi";
  const at::Tensor destination = TensorArg(operation, "dst", dst);
  const at::Tensor source = TensorArg(operation, "src", src);
  const int pe = TargetPe(operation, pe_arg, team);
  if (put) {
    PutTensors(destination, source, pe, CallPath::kFunction, /*nbi=*/true);
  } else {
    GetTensors(destination, source, pe, CallPath::kFunction, /*nbi=*/true);
  }
}

}  // namespace

void RegisterAtomics(py::module_& m) {
  m.def("atomic", &Atomic, py::arg("op"), py::arg("dest"), py::arg("value"), py::arg("cond"),
        py::arg("pe"), py::arg("team"), py::arg("fetch"),
        "The atomic `op` on the one-element symmetric dest of PE pe; the old value as a 0-dim "
        "tensor when fetch, else None.");
  m.def("fence", [] { OrderingCall(false, CallPath::kFunction); });
  m.def("quiet", [] {
    py::gil_scoped_release no_gil;  // it waits for remote completion
    OrderingCall(true, CallPath::kFunction);
  });
  m.def("put_nbi", [](py::handle dst, py::handle src, py::handle pe, py::handle team) {
    Nbi(true, dst, src, pe, team);
  });
  m.def("get_nbi", [](py::handle dst, py::handle src, py::handle pe, py::handle team) {
    Nbi(false, dst, src, pe, team);
  });
  m.def(
      "wait_signals",
      [](py::handle signals_arg, py::handle value_arg, py::handle comparison_arg,
         const std::string& wait, std::vector<bool> mask) {
        const WaitSet* set = WaitSetNamed(wait);  // the package's wrappers pass a known one
        if (set == nullptr) ThrowValueError("wait_signals", "wait", "any, all or some", wait);
        const std::string label = "wait_signal_" + wait;  // the function the user called
        const at::Tensor signals = TensorArg(label, "signals", signals_arg);
        const std::int64_t value = ValueArg(label, value_arg);
        const Comparison comparison = ComparisonArg(label, comparison_arg);
        std::vector<std::uint8_t> bytes(mask.begin(), mask.end());
        py::gil_scoped_release no_gil;  // it may wait: another thread may need the GIL
        return WaitSignalsTensor(signals, value, comparison, *set, std::move(bytes),
                                 CallPath::kFunction);
      },
      py::arg("signals"), py::arg("value"), py::arg("comparison"), py::arg("wait"),
      py::arg("mask"));
  m.def("test_signal", [](py::handle sig, py::handle value_arg, py::handle comparison_arg) {
    const at::Tensor signal = TensorArg("test_signal", "signal", sig);
    const std::int64_t value = ValueArg("test_signal", value_arg);
    return TestSignalTensor(signal, value, ComparisonArg("test_signal", comparison_arg),
                            CallPath::kFunction);
  });
}

}  // namespace hyper_parallel::shmem::binding
