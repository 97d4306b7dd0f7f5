#include "base/status.h"

#include <cstdio>

namespace hyper_parallel::shmem {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk: return "OK";
    case ErrorCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case ErrorCode::kInvalidState: return "INVALID_STATE";
    case ErrorCode::kInvalidConfig: return "INVALID_CONFIG";
    case ErrorCode::kDoubleFree: return "DOUBLE_FREE";
    case ErrorCode::kUseAfterFree: return "USE_AFTER_FREE";
    case ErrorCode::kStaleLifecycle: return "STALE_LIFECYCLE";
    case ErrorCode::kDeviceMismatch: return "DEVICE_MISMATCH";
    case ErrorCode::kOutOfMemory: return "OUT_OF_MEMORY";
    case ErrorCode::kCollectiveMismatch: return "COLLECTIVE_MISMATCH";
    case ErrorCode::kUnsupportedCapability: return "UNSUPPORTED_CAPABILITY";
    case ErrorCode::kBackendError: return "BACKEND_ERROR";
    case ErrorCode::kTimeout: return "TIMEOUT";
    case ErrorCode::kPeerLost: return "PEER_LOST";
  }
  return "UNKNOWN";
}

std::string Hex(std::uint64_t value) {
  char buffer[24];
  std::snprintf(buffer, sizeof buffer, "0x%llx", static_cast<unsigned long long>(value));
  return buffer;
}

std::string Hex(const void* pointer) {
  return Hex(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(pointer)));
}

Status Status::Contract(ErrorCode code, std::string_view what, std::string_view rule,
                        std::string_view got) {
  std::string message;
  message.reserve(what.size() + rule.size() + got.size() + 20);
  message.append(what).append(" must be ").append(rule).append(", but got ").append(got);
  return Status(code, std::move(message));
}

Status Status::Assertion(ErrorCode code, std::string_view fact,
                         std::initializer_list<Field> fields) {
  return Assertion(code, fact, std::vector<Field>(fields));
}

Status Status::Assertion(ErrorCode code, std::string_view fact,
                         const std::vector<Field>& fields) {
  std::string message(fact);
  const char* separator = ": ";
  for (const Field& field : fields) {
    message.append(separator).append(field.key).append("=").append(field.value);
    separator = ", ";
  }
  return Status(code, std::move(message));
}

Status::Status(ErrorCode code, std::string message)
    : rep_(code == ErrorCode::kOk ? nullptr
                                  : std::make_unique<Rep>(Rep{code, std::move(message), {}, {}})) {}

void Status::Tag(std::string_view operation, std::string_view phase) {
  rep_->operation = operation;
  rep_->phase = phase;
}

Status Status::Retagged(std::string_view operation, std::string_view phase) const {
  if (ok()) return Status();
  Status copy(rep_->code, rep_->message);
  copy.Tag(operation, phase);
  return copy;
}

const std::string& Status::Empty() {
  static const std::string* empty = new std::string();
  return *empty;
}

bool Status::operator==(const Status& other) const {
  if (ok() || other.ok()) return ok() == other.ok();
  return rep_->code == other.rep_->code && rep_->message == other.rep_->message &&
         rep_->operation == other.rep_->operation && rep_->phase == other.rep_->phase;
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string text = "[HYPER_PARALLEL_SHMEM_ERROR] error_code=";
  text.append(ErrorCodeName(rep_->code));
  text.append(" operation=").append(rep_->operation.empty() ? "unknown" : rep_->operation);
  text.append(" phase=").append(rep_->phase.empty() ? "unknown" : rep_->phase);
  text.append(" ").append(rep_->message);
  return text;
}

}  // namespace hyper_parallel::shmem
