// Leveled log: one bounded line per event on stderr.
//
//   [HYPER_PARALLEL_SHMEM] 2026-12-01T19:25:08.123456Z rank=0 level=ERROR runtime.cc:123 <text>
//
// A line is at most kMaxLineBytes (longer text is cut and ends in "..."), and is written with
// a single write(2), so lines of concurrent threads and processes never interleave. The level
// and rank are process-wide and may be set and read from any thread.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "base/config.h"

namespace hyper_parallel::shmem::log {

inline constexpr std::size_t kMaxLineBytes = 1024;

/// Events below this level are dropped. Default: kError.
void SetLevel(LogLevel level);
LogLevel Level();
inline bool Enabled(LogLevel level) { return level >= Level(); }

/// The Root rank printed in each line; negative prints "rank=?".
void SetRank(int rank);

/// Replaces where lines go (stderr by default); an empty function restores stderr. For tests.
using Sink = std::function<void(std::string_view line)>;
void SetSink(Sink sink);

/// Formats and emits one line. Prefer HPS_LOG, which skips formatting when disabled.
void Write(LogLevel level, const char* file, int line, std::string_view text);

/// Builds the line Write would emit (without the trailing newline).
std::string FormatLine(LogLevel level, const char* file, int line, std::string_view text);

}  // namespace hyper_parallel::shmem::log

#define HPS_LOG(level, text)                                                          \
  do {                                                                                \
    if (::hyper_parallel::shmem::log::Enabled(level)) {                               \
      ::hyper_parallel::shmem::log::Write((level), __FILE__, __LINE__, (text));        \
    }                                                                                 \
  } while (false)

#define HPS_LOG_DEBUG(text) HPS_LOG(::hyper_parallel::shmem::LogLevel::kDebug, text)
#define HPS_LOG_INFO(text) HPS_LOG(::hyper_parallel::shmem::LogLevel::kInfo, text)
#define HPS_LOG_ERROR(text) HPS_LOG(::hyper_parallel::shmem::LogLevel::kError, text)
