#include "backends/wait/wait_policy.h"

#include "base/config.h"

namespace hyper_parallel::shmem {

std::string_view WaitModeName(WaitMode mode) {
  switch (mode) {
    case WaitMode::kAuto: return "auto";
    case WaitMode::kSpin: return "spin";
    case WaitMode::kBlock: return "block";
  }
  return "unknown";
}

Status ParseWaitMode(std::string_view text, WaitMode* out) {
  for (WaitMode mode : {WaitMode::kAuto, WaitMode::kSpin, WaitMode::kBlock}) {
    if (WaitModeName(mode) == text) {
      *out = mode;
      return Status::Ok();
    }
  }
  return InvalidConfig(kEnvWait, "one of auto, spin, block", text);
}

}  // namespace hyper_parallel::shmem
