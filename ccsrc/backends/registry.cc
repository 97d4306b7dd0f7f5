#include "backends/registry.h"

#include <algorithm>

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

}  // namespace

std::string ProvidedBackends() {
  std::string names = "auto";
  for (const BackendEntry& entry : Entries()) names += ", " + std::string(BackendKindName(entry.kind));
  return names;
}

Status FindBackend(BackendKind kind, const BackendEntry** out) {
  for (const BackendEntry& entry : Entries()) {
    if (kind == BackendKind::kAuto) {
      if (entry.available().ok()) {
        *out = &entry;
        return Status::Ok();
      }
      continue;
    }
    if (entry.kind != kind) continue;
    if (Status available = entry.available(); !available.ok()) return available;
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
