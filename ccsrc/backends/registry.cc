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

}  // namespace

std::string ProvidedBackends() {
  std::string names = "auto";
  for (const BackendEntry& entry : Entries()) names += ", " + std::string(BackendKindName(entry.kind));
  return names;
}

Status FindBackend(BackendKind kind, const BackendEntry** out) {
  for (const BackendEntry& entry : Entries()) {
    if (kind == BackendKind::kAuto) {
      if (AvailableOnce(entry).ok()) {
        *out = &entry;
        return Status::Ok();
      }
      continue;
    }
    if (entry.kind != kind) continue;
    if (Status available = AvailableOnce(entry); !available.ok()) {
      return Status::Contract(ErrorCode::kUnsupportedCapability, std::string(kEnvBackend),
                              "a backend this build provides and this machine can run (" +
                                  ProvidedBackends() + ")",
                              std::string(BackendKindName(kind)) + ", which cannot run here: " +
                                  available.message());
    }
    *out = &entry;
    return Status::Ok();
  }
  return Status::Contract(ErrorCode::kUnsupportedCapability, std::string(kEnvBackend),
                          "a backend this build provides and this machine can run (" +
                              ProvidedBackends() + ")",
                          std::string(BackendKindName(kind)));
}

Status CreateBackend(BackendKind kind, std::unique_ptr<Backend>* out) {
  const BackendEntry* entry = nullptr;
  HPS_RETURN_IF_ERROR(FindBackend(kind, &entry));
  *out = entry->create();
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem
