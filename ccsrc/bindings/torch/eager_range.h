// The profiler range of an eager call from Python (primitives.cc, collectives.cc): a range
// named as the call's custom op ("hps::put") while a profiler records, so torch.profiler shows
// eager communication as it shows compiled code's and NCCL's. With no callback registered it
// costs torch's own test for callbacks, which its dispatcher makes for every op (an 8-byte put
// from Python: 0.295 -> 0.321 us, docs/api.md). Includes ATen's record_function.h.
#pragma once

#include <ATen/record_function.h>

#include <optional>

// Opens the range `name` for the rest of the scope.
#define HPS_EAGER_RANGE(name)                                    \
  std::optional<at::RecordFunction> hps_range;                   \
  if (at::hasCallbacks()) [[unlikely]] {                         \
    hps_range.emplace(at::RecordScope::FUNCTION);                \
    if (hps_range->isActive()) hps_range->before(name);          \
  }
