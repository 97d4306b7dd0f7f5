// Native errors: the NativeError a failed Status travels as, and its translation into the
// package's ShmemError classes (set_error_factory). Includes pybind11 only, no torch.
#include "bindings/torch/errors.h"

#include <utility>

#include "bindings/torch/registration.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace hyper_parallel::shmem::binding {
namespace {

// A failed Status on its way to Python; the translator raises the package's error for it.
struct NativeError {
  Status status;
  bool type_mistake = false;  // an argument of the wrong type (ThrowTypeError)
};

// The package's factory: (text, error_code, operation, phase, type_mistake) -> the exception.
py::object& ErrorFactory() {
  static py::object* factory = new py::object();  // set by the package at import; never destroyed
  return *factory;
}

}  // namespace

void Throw(Status status) {
  Runtime::Process().NoteFailure(status);  // debug_state's latest_failure sees it too
  throw NativeError{std::move(status)};
}

void ThrowUnnoted(Status status) { throw NativeError{std::move(status)}; }

void ThrowTypeError(std::string_view operation, std::string_view what, std::string_view rule,
                    std::string_view got) {
  Status status = Contract(operation, what, rule, got);
  Runtime::Process().NoteFailure(status);
  throw NativeError{std::move(status), /*type_mistake=*/true};
}

void ThrowValueError(std::string_view operation, std::string_view what, std::string_view rule,
                     std::string_view got) {
  Throw(Contract(operation, what, rule, got));
}

Status ReasonOf(std::exception_ptr error) {
  try {
    if (error) std::rethrow_exception(error);
  } catch (const NativeError& native) {
    return native.status;
  } catch (const std::exception& other) {
    return Status::Assertion(ErrorCode::kInvalidArgument, other.what());
  } catch (...) {
  }
  return Status::Assertion(ErrorCode::kInvalidArgument, "an argument was refused");
}

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
      const py::object& factory = ErrorFactory();
      if (!factory) {
        PyErr_SetString(error.type_mistake ? PyExc_TypeError : PyExc_RuntimeError,
                        status.ToString().c_str());
        return;
      }
      try {
        py::object instance =
            factory(status.ToString(), std::string(ErrorCodeName(status.code())),
                    status.operation(), status.phase(), error.type_mistake);
        PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(instance.ptr())), instance.ptr());
      } catch (py::error_already_set& failed) {
        failed.restore();  // the factory itself raised: that error is what Python sees
      }
    }
  });

  m.def("set_error_factory", [](py::object factory) { ErrorFactory() = std::move(factory); },
        "Registers factory(text, error_code, operation, phase, type_mistake), which makes the "
        "exception a native error is raised as.");
}

}  // namespace hyper_parallel::shmem::binding
