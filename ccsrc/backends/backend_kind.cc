#include "backends/backend_kind.h"

#include <string>

#include "base/config.h"

namespace hyper_parallel::shmem {

std::string_view BackendKindName(BackendKind kind) {
  for (const auto& [known, name] : kBackendNames) {
    if (known == kind) return name;
  }
  return "unknown";
}

Status ParseBackendKind(std::string_view name, BackendKind* out) {
  std::string names;
  for (const auto& [kind, known] : kBackendNames) {
    if (known == name) {
      *out = kind;
      return Status::Ok();
    }
    names.append(names.empty() ? "one of " : ", ").append(known);
  }
  return InvalidConfig(kEnvBackend, names, name);
}

}  // namespace hyper_parallel::shmem
