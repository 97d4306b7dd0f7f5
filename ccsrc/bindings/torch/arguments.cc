// Python arguments to native values (arguments.h). Includes torch's pybind casters, for the
// tensor's (torch's autograd headers are not needed).
#include "bindings/torch/arguments.h"

#include <torch/csrc/utils/pybind.h>

#include <limits>
#include <utility>

#include "bindings/torch/errors.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace hyper_parallel::shmem::binding {

std::string TypeName(py::handle value) {
  return py::str(py::type::handle_of(value).attr("__name__"));
}

at::Tensor TensorArg(std::string_view operation, std::string_view name, py::handle value) {
  py::detail::make_caster<at::Tensor> tensor;  // torch's: a torch.Tensor, or a subclass's
  if (!tensor.load(value, /*convert=*/false)) {
    ThrowTypeError(operation, name, "a torch.Tensor", TypeName(value));
  }
  return py::detail::cast_op<at::Tensor>(std::move(tensor));
}

std::int64_t IntArg(std::string_view operation, std::string_view name, py::handle value,
                    bool* in_range) {
  if (!PyLong_Check(value.ptr()) || PyBool_Check(value.ptr())) {
    ThrowTypeError(operation, name, "an int",
                   TypeName(value) + " " + std::string(py::repr(value)));
  }
  int overflow = 0;
  const long long result = PyLong_AsLongLongAndOverflow(value.ptr(), &overflow);
  *in_range = overflow == 0;
  return overflow == 0 ? result : 0;
}

std::int64_t ValueArg(std::string_view operation, py::handle value) {
  bool in_range = true;
  const std::int64_t result = IntArg(operation, "value", value, &in_range);
  if (!in_range) {
    ThrowValueError(operation, "value", "representable as int64", std::string(py::str(value)));
  }
  return result;
}

int PeArg(std::string_view operation, py::handle value, std::string_view name) {
  bool in_range = true;
  const std::int64_t pe = IntArg(operation, name, value, &in_range);
  if (!in_range || pe < std::numeric_limits<int>::min() || pe > std::numeric_limits<int>::max()) {
    Check(Contract(operation, name, "in [0, " + std::to_string(Runtime::Process().size()) + ")",
                   std::string(py::str(value))));
  }
  return static_cast<int>(pe);
}

std::string ChoiceArg(std::string_view operation, std::string_view name, py::handle value,
                      std::initializer_list<std::string_view> choices) {
  if (!PyUnicode_Check(value.ptr())) {
    ThrowTypeError(operation, name, "a str", TypeName(value));
  }
  const std::string text = py::str(value);
  std::string joined;
  for (std::string_view choice : choices) {
    if (text == choice) return text;
    joined += (joined.empty() ? "" : ", ") + std::string(choice);
  }
  ThrowValueError(operation, name, "one of " + joined, std::string(py::repr(value)));
}

at::Tensor SignalArg(std::string_view operation, py::handle value) {
  at::Tensor signal = TensorArg(operation, "sig", value);
  // A tensor of the wrong dtype is a value mistake, as the Runtime's own check of the width
  // (primitives.h, Width) and every other dtype check make it (docs/api.md, "Errors and logs").
  if (signal.scalar_type() != at::kInt && signal.scalar_type() != at::kLong) {
    ThrowValueError(operation, "sig dtype", "torch.int32 or torch.int64",
                    "torch." + std::string(c10::getDtypeNames(signal.scalar_type()).first));
  }
  if (signal.numel() != 1) {
    ThrowValueError(operation, "sig", "a one-element tensor",
                    std::to_string(signal.numel()) + " elements");
  }
  return signal;
}

}  // namespace hyper_parallel::shmem::binding
