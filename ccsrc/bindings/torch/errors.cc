// Native errors: the NativeError a failed Status travels as, and its translation into the
// package's ShmemError (set_error_class). Includes pybind11 only, no torch.
#include "bindings/torch/errors.h"

#include <utility>

#include "bindings/torch/registration.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace hyper_parallel::shmem::binding {
namespace {

// A failed Status on its way to Python; the translator raises the package's ShmemError.
struct NativeError {
  Status status;
};

py::object& ErrorClass() {
  static py::object* cls = new py::object();  // set by the package at import; never destroyed
  return *cls;
}

}  // namespace

void Throw(Status status) {
  Runtime::Process().NoteFailure(status);  // debug_state's latest_failure sees it too
  throw NativeError{std::move(status)};
}

void ThrowUnnoted(Status status) { throw NativeError{std::move(status)}; }

void Check(Status status) {
  if (!status.ok()) Throw(std::move(status));
}

Status Contract(std::string_view operation, std::string_view what, std::string_view rule,
                std::string_view got) {
  Status status = Status::Contract(ErrorCode::kInvalidArgument, what, rule, got);
  status.At(operation, "validate");
  return status;
}

std::string ContractText(std::string_view what, std::string_view rule, std::string_view got) {
  return std::string(what) + " must be " + std::string(rule) + ", but got " + std::string(got);
}

void RegisterErrors(py::module_& m) {
  // Registered once for the process (every module linking this library): a consumer's
  // module is imported after this one.
  py::register_exception_translator([](std::exception_ptr pointer) {
    try {
      if (pointer) std::rethrow_exception(pointer);
    } catch (const NativeError& error) {
      const Status& status = error.status;
      py::object cls = ErrorClass();
      if (!cls) cls = py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
      py::object instance =
          cls(status.ToString(), std::string(ErrorCodeName(status.code())),
              status.operation(), status.phase());
      PyErr_SetObject(cls.ptr(), instance.ptr());
    }
  });

  m.def("set_error_class", [](py::object cls) { ErrorClass() = std::move(cls); },
        "Registers the exception class native errors are raised as.");
}

}  // namespace hyper_parallel::shmem::binding
