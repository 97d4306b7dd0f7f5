// Streams from Python: the backend's own host streams and events (Stream, Event,
// set_current_stream) where the selected backend has them, and the current stream every entry
// enqueues on (streams.h), which is torch's current CUDA stream where the backend uses CUDA's
// streams. Includes pybind11 and c10's device-generic stream interface, no CUDA header and no
// ATen: torch's streams are reached through c10::impl::VirtualGuardImpl.
#include "bindings/torch/streams.h"

#include <c10/core/DeviceType.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <pybind11/pybind11.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "backends/registry.h"
#include "backends/stream.h"
#include "base/config.h"
#include "bindings/torch/errors.h"
#include "bindings/torch/registration.h"

namespace py = pybind11;

namespace hyper_parallel::shmem::binding {
namespace {

// The backend entry HYPER_PARALLEL_SHMEM_BACKEND selects, looked up once (null: invalid
// setting, which Init reports).
const BackendEntry* SelectedBackend() {
  static const BackendEntry* const entry = []() -> const BackendEntry* {
    Config config;
    if (!Config::FromEnvironment(ProcessEnvironment(), &config).ok()) return nullptr;
    const BackendEntry* found = nullptr;
    return FindConfiguredBackend(config, &found).ok() ? found : nullptr;
  }();
  return entry;
}

// The user streams of the selected backend (null: it has none, or the setting is invalid).
StreamProvider* Streams() {
  const BackendEntry* entry = SelectedBackend();
  return entry == nullptr ? nullptr : entry->streams;
}

StreamProvider& RequireStreams() {
  StreamProvider* provider = Streams();
  if (provider == nullptr) {
    ThrowUnnoted(Status::Assertion(
        ErrorCode::kUnsupportedCapability,
        "the selected backend has no streams of its own: use the framework's streams",
        {{"backend_setting", std::string(kEnvBackend)}}));
  }
  return *provider;
}

std::chrono::milliseconds Seconds(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
}

}  // namespace

bool IsQueuedOwnStream(StreamRef stream) {
  return stream.native != nullptr && Streams() != nullptr;
}

bool NpuFrameworkLoaded() {
  return c10::impl::hasDeviceGuardImpl(c10::DeviceType::PrivateUse1) &&
         c10::get_privateuse1_backend() == "npu";
}

StreamRef CurrentStream() {
  if (StreamProvider* provider = Streams()) return provider->CurrentStream();
  const BackendEntry* entry = SelectedBackend();
  if (entry == nullptr || !entry->framework_stream) return StreamRef{};
  if (entry->framework_device == DeviceType::kCuda &&
      c10::impl::hasDeviceGuardImpl(c10::DeviceType::CUDA)) {
    const c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
    return entry->framework_stream(cuda.getStream(cuda.getDevice()).native_handle());
  }
  if (entry->framework_device == DeviceType::kNpu && NpuFrameworkLoaded()) {
    // torch_npu's own way (docs/backends.md, "NPU tensors and streams"): its guard has no
    // native handle, and reading npu_stream first moves torch_npu's host-side task queue onto
    // the stream, so the work torch queued before this call runs before it.
    py::gil_scoped_acquire gil;
    static py::object* const current_stream = new py::object(  // kept past interpreter exit
        py::module_::import("torch").attr("npu").attr("current_stream"));
    const py::object handle = (*current_stream)().attr("npu_stream");
    return entry->framework_stream(reinterpret_cast<void*>(handle.cast<std::uintptr_t>()));
  }
  return StreamRef{};
}

void RegisterStreams(py::module_& m) {
  py::class_<Stream, std::shared_ptr<Stream>>(m, "Stream")
      .def(py::init([] { return RequireStreams().CreateStream(); }))
      .def("synchronize",
           [](Stream& stream, double timeout_s) {
             py::gil_scoped_release no_gil;
             Check(stream.Synchronize(Seconds(timeout_s)).At("stream_synchronize", "execute"));
           },
           py::arg("timeout_s"))
      .def("query", &Stream::Query, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("id", &Stream::id);

  py::class_<Event>(m, "Event")
      .def(py::init([] { return RequireStreams().CreateEvent(); }))
      .def("record", [](Event& event, Stream* stream) { event.Record(stream); },
           py::arg("stream").none(true))
      .def("wait",
           [](Event& event, Stream* stream, double timeout_s) {
             py::gil_scoped_release no_gil;
             Check(event.Wait(stream, Seconds(timeout_s)).At("event_wait", "execute"));
           },
           py::arg("stream").none(true), py::arg("timeout_s"))
      .def("synchronize",
           [](Event& event, double timeout_s) {
             py::gil_scoped_release no_gil;
             Check(event.Synchronize(Seconds(timeout_s)).At("event_synchronize", "execute"));
           },
           py::arg("timeout_s"))
      .def("query", &Event::Query);

  m.def("set_current_stream",
        [](Stream* stream) { RequireStreams().SetCurrentStream(stream); },
        py::arg("stream").none(true),
        "Sets the calling thread's current stream (None: the default stream).");
}

}  // namespace hyper_parallel::shmem::binding
