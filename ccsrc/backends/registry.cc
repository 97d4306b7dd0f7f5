#include "backends/registry.h"

#include <algorithm>

#include "base/mutex.h"

namespace hyper_parallel::shmem {
namespace {

const std::vector<BackendEntry>& Entries() {
  static const std::vector<BackendEntry> entries = [] {
    std::vector<BackendEntry> made;
    RegisterBuiltinBackends(&made);
    std::stable_sort(made.begin(), made.end(), [](const BackendEntry& a, const BackendEntry& b) {
      return a.auto_priority > b.auto_priority;
    });
    return made;
  }();
  return entries;
}

// Whether `entry` can run here, asked once per process (a probe may load a vendor library or
// start a device runtime; the answer does not change while the process lives).
Status AvailableOnce(const BackendEntry& entry) {
  // Held across the probe, so a probe runs once; it waits for no peer.
  struct Answers {
    Mutex mutex;
    std::vector<std::pair<const BackendEntry*, Status>> known GUARDED_BY(mutex);
  };
  static Answers* answers = new Answers();  // outlives static destructors
  MutexLock lock(&answers->mutex);
  for (const auto& [known, status] : answers->known) {
    if (known == &entry) return status;
  }
  answers->known.emplace_back(&entry, entry.available());
  return answers->known.back().second;
}

// "auto, " and the kinds of `entries`, e.g. "auto, cann, cuda, host".
std::string NamesOf(const std::vector<BackendEntry>& entries) {
  std::string names = "auto";
  for (const BackendEntry& entry : entries) names.append(", ").append(BackendKindName(entry.kind));
  return names;
}

}  // namespace

std::string ProvidedBackends() { return NamesOf(Entries()); }

Status CheckBackendSettings(const Config& config, BackendKind* kind) {
  return CheckBackendSettingsAmong(Entries(), config, kind);
}

Status CheckBackendSettingsAmong(const std::vector<BackendEntry>& entries, const Config& config,
                                 BackendKind* kind) {
  BackendKind named = BackendKind::kAuto;
  HPS_RETURN_IF_ERROR(ParseBackendKind(config.backend, &named));
  for (const BackendEntry& entry : entries) {
    if (entry.check_settings) HPS_RETURN_IF_ERROR(entry.check_settings(config));
  }
  *kind = named;
  return Status::Ok();
}

Status FindConfiguredBackend(const Config& config, const BackendEntry** out) {
  BackendKind kind = BackendKind::kAuto;
  HPS_RETURN_IF_ERROR(CheckBackendSettings(config, &kind));
  return FindBackend(kind, out);
}

Status FindBackend(BackendKind kind, const BackendEntry** out) {
  return FindBackendAmong(Entries(), kind, AvailableOnce, out);
}

Status FindBackendAmong(const std::vector<BackendEntry>& entries, BackendKind kind,
                        const std::function<Status(const BackendEntry&)>& available,
                        const BackendEntry** out) {
  const std::string provided = NamesOf(entries);
  for (const BackendEntry& entry : entries) {
    if (kind == BackendKind::kAuto) {
      const Status answer = available(entry);
      if (answer.ok()) {
        *out = &entry;
        return Status::Ok();
      }
      if (answer.code() == ErrorCode::kUnsupportedCapability) continue;  // none of it here
      std::string fact("backend auto: this machine has the ");
      fact.append(BackendKindName(entry.kind))
          .append(" backend's device or library, but it cannot run (fix it, or set ")
          .append(kEnvBackend)
          .append(" to another backend)");
      return Status::Assertion(answer.code(), fact, {{"reason", answer.message()}});
    }
    if (entry.kind != kind) continue;
    if (Status answer = available(entry); !answer.ok()) {
      // Its own code: UNSUPPORTED_CAPABILITY where nothing of it is here, BACKEND_ERROR where
      // it is present but broken.
      return Status::Contract(answer.code(), std::string(kEnvBackend),
                              "a backend this build provides and this machine can run (" +
                                  provided + ")",
                              std::string(BackendKindName(kind)) + ", which cannot run here: " +
                                  answer.message());
    }
    *out = &entry;
    return Status::Ok();
  }
  return Status::Contract(ErrorCode::kUnsupportedCapability, std::string(kEnvBackend),
                          "a backend this build provides and this machine can run (" +
                              provided + ")",
                          std::string(BackendKindName(kind)));
}

Status CreateBackend(BackendKind kind, std::unique_ptr<Backend>* out) {
  const BackendEntry* entry = nullptr;
  HPS_RETURN_IF_ERROR(FindBackend(kind, &entry));
  *out = entry->create();
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem
