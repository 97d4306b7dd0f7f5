// BackendRegistry: the backends this build provides, by kind, as factories.
//
// The Runtime and the torch binding know backends only through backend.h, stream.h and this
// registry: HYPER_PARALLEL_SHMEM_BACKEND names a kind (backend_kind.h), the registry checks
// the name and every backend's own settings, and makes the backend. The
// build registers its backends in one place (builtin_backends.cc), so that adding one touches
// neither the Runtime nor the binding. kAuto takes the available backend of highest priority
// (and fails where one is present but broken: see FindBackend).
//
// Thread-safety: the registry is filled once, on first use, and read-only afterwards; every
// function may be called from any thread.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/backend_kind.h"
#include "backends/stream.h"
#include "base/config.h"
#include "base/status.h"

namespace hyper_parallel::shmem {

struct BackendEntry {
  BackendKind kind = BackendKind::kHost;
  /// Higher is preferred by kAuto.
  int auto_priority = 0;
  /// Whether this machine can run it (a device and the vendor library present); kAuto skips
  /// an unavailable backend, and naming it explicitly fails with the reason. Asked once per
  /// process.
  std::function<Status()> available;
  std::function<std::unique_ptr<Backend>()> create;
  /// Checks this backend's own settings in the configuration (e.g. the host backend's wait
  /// setting); INVALID_CONFIG when one is wrong. Unset: it has none. Every registered
  /// backend's check runs at every init, whichever backend is chosen.
  std::function<Status(const Config&)> check_settings;
  /// Its user streams (null: the framework's streams are used; see stream.h).
  StreamProvider* streams = nullptr;
  /// Where the framework's streams are used: the framework's device type whose tensors live on
  /// this backend's heap (kCuda, kNpu), and the StreamRef of a framework stream given by its
  /// native handle (CUDA's null is its default stream). Unset: no framework streams (host).
  DeviceType framework_device = DeviceType::kCpu;
  std::function<StreamRef(void* native_handle)> framework_stream;
};

/// Registers the backends of this build into `entries` (builtin_backends.cc).
void RegisterBuiltinBackends(std::vector<BackendEntry>* entries);

/// The entry for `kind` (kAuto resolved); UNSUPPORTED_CAPABILITY naming the kinds this build
/// provides, or the reason the machine cannot run it. kAuto passes over a backend whose answer
/// is UNSUPPORTED_CAPABILITY (nothing of it on this machine) and stops at any other failure: a
/// device or vendor library that is present but cannot run is an error to fix, never a silent
/// fallback to a slower backend.
Status FindBackend(BackendKind kind, const BackendEntry** out);

/// FindBackend over `entries` (in order of preference), asking `available` for each: the
/// registry's rule, testable with entries of a test's own.
Status FindBackendAmong(const std::vector<BackendEntry>& entries, BackendKind kind,
                        const std::function<Status(const BackendEntry&)>& available,
                        const BackendEntry** out);

/// The configured backend's kind, after checking its name and every registered backend's
/// settings (INVALID_CONFIG naming the variable and value).
Status CheckBackendSettings(const Config& config, BackendKind* kind);

/// CheckBackendSettings over `entries`: the rule, testable with entries of a test's own.
Status CheckBackendSettingsAmong(const std::vector<BackendEntry>& entries, const Config& config,
                                 BackendKind* kind);

/// FindBackend for the configured name (the binding's lookup of the backend a Runtime would
/// choose, before one runs).
Status FindConfiguredBackend(const Config& config, const BackendEntry** out);

/// Makes the backend for a configured kind (the Runtime's default factory).
Status CreateBackend(BackendKind kind, std::unique_ptr<Backend>* out);

/// The kinds this build provides, e.g. "auto, host, cann".
std::string ProvidedBackends();

}  // namespace hyper_parallel::shmem
