// The Runtime's lifecycle from Python: init over a bootstrap that is a Python object (the
// package passes one over its torch.distributed process group), shutdown, and the state. The
// custom ops' order token (ops.h) begins and ends with the lifecycle.
// Includes pybind11 only, no torch. Both collective calls release the GIL; the bootstrap takes
// it back for each call into Python.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bindings/torch/errors.h"
#include "bindings/torch/ops.h"
#include "bindings/torch/registration.h"
#include "ops/collectives.h"
#include "runtime/bootstrap.h"
#include "runtime/runtime.h"

namespace py = pybind11;

namespace hyper_parallel::shmem::binding {
namespace {

// Calls `all_gather(bytes, timeout_s) -> list[bytes]` and `barrier(timeout_s)` on a Python
// object (the package's process-group bootstrap). Python's TimeoutError becomes TIMEOUT.
class PythonBootstrap final : public Bootstrap {
 public:
  PythonBootstrap(py::object target, int rank, int size)
      : target_(std::move(target)), rank_(rank), size_(size) {}
  ~PythonBootstrap() override {
    py::gil_scoped_acquire gil;
    target_ = py::object();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }

  Status AllGather(std::string_view mine, std::chrono::milliseconds timeout,
                   std::vector<std::string>* all) override {
    py::gil_scoped_acquire gil;
    try {
      py::list gathered = target_.attr("all_gather")(py::bytes(mine.data(), mine.size()),
                                                    timeout.count() / 1000.0);
      all->clear();
      for (py::handle item : gathered) all->push_back(item.cast<std::string>());
      if (static_cast<int>(all->size()) != size_) {
        return Status::Contract(ErrorCode::kBackendError, "bootstrap all_gather result",
                                std::to_string(size_) + " entries", std::to_string(all->size()));
      }
      return Status::Ok();
    } catch (py::error_already_set& error) {
      return FromPython(error, "all_gather");
    }
  }

  Status Barrier(std::chrono::milliseconds timeout) override {
    py::gil_scoped_acquire gil;
    try {
      target_.attr("barrier")(timeout.count() / 1000.0);
      return Status::Ok();
    } catch (py::error_already_set& error) {
      return FromPython(error, "barrier");
    }
  }

 private:
  static Status FromPython(py::error_already_set& error, std::string_view step) {
    const bool timed_out = error.matches(PyExc_TimeoutError);
    return Status::Assertion(timed_out ? ErrorCode::kTimeout : ErrorCode::kBackendError,
                             "process-group bootstrap failed",
                             {{"step", std::string(step)}, {"reason", std::string(error.what())}});
  }

  py::object target_;
  int rank_;
  int size_;
};

void Init(py::object bootstrap, int rank, int size, std::vector<int> global_ranks) {
  InitOptions options;
  options.bootstrap = std::make_shared<PythonBootstrap>(std::move(bootstrap), rank, size);
  options.global_ranks = std::move(global_ranks);
  options.collectives = ops::Collectives();
  py::gil_scoped_release no_gil;
  Check(Runtime::Process().Init(std::move(options)));
  OpenOrderToken();
}

// The token goes with the lifecycle: when the shutdown completed or left the Runtime failed,
// not when it was refused (the lifecycle goes on).
void Shutdown() {
  py::gil_scoped_release no_gil;
  const Status status = Runtime::Process().Shutdown();
  if (Runtime::Process().state() != RuntimeState::kReady) CloseOrderToken();
  Check(status);
}

}  // namespace

void RegisterBootstrap(py::module_& m) {
  m.def("init", &Init, py::arg("bootstrap"), py::arg("rank"), py::arg("size"),
        py::arg("global_ranks"), "Collective: initialise the process Runtime.");
  m.def("shutdown", &Shutdown, "Collective: shut the process Runtime down.");
  m.def("state", [] { return std::string(RuntimeStateName(Runtime::Process().state())); });
}

}  // namespace hyper_parallel::shmem::binding
