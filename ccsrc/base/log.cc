#include "base/log.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "base/mutex.h"

namespace hyper_parallel::shmem::log {
namespace {

std::atomic<LogLevel> g_level{LogLevel::kError};
std::atomic<int> g_rank{-1};

// The sink log lines go to (empty: stderr), and the mutex that orders them.
struct SinkState {
  Mutex mutex;
  Sink sink GUARDED_BY(mutex);
};

SinkState& Sinks() {
  static SinkState* state = new SinkState();  // outlives static destructors
  return *state;
}

std::string_view BaseName(const char* file) {
  std::string_view path(file);
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

void SetLevel(LogLevel level) { g_level.store(level, std::memory_order_relaxed); }
LogLevel Level() { return g_level.load(std::memory_order_relaxed); }
void SetRank(int rank) { g_rank.store(rank, std::memory_order_relaxed); }

void SetSink(Sink sink) {
  MutexLock lock(&Sinks().mutex);
  Sinks().sink = std::move(sink);
}

std::string FormatLine(LogLevel level, const char* file, int line, std::string_view text) {
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const long micros = static_cast<long>(
      std::chrono::duration_cast<std::chrono::microseconds>(now.time_since_epoch()).count() %
      1'000'000);
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char stamp[64];
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", utc.tm_year + 1900,
                utc.tm_mon + 1, utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, micros);
  const int rank = g_rank.load(std::memory_order_relaxed);
  std::string out = "[HYPER_PARALLEL_SHMEM] ";
  out.append(stamp);
  out.append(rank < 0 ? " rank=?" : " rank=" + std::to_string(rank));
  out.append(" level=").append(LogLevelName(level));
  out.append(" ").append(BaseName(file)).append(":").append(std::to_string(line)).append(" ");
  out.append(text);
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';  // one event, one line
  }
  if (out.size() > kMaxLineBytes) {
    out.resize(kMaxLineBytes - 3);
    out.append("...");
  }
  return out;
}

void Write(LogLevel level, const char* file, int line, std::string_view text) {
  std::string formatted = FormatLine(level, file, line, text);
  {
    MutexLock lock(&Sinks().mutex);
    if (Sinks().sink) {
      Sinks().sink(formatted);
      return;
    }
  }
  formatted.push_back('\n');
  // One write per line keeps lines whole across threads and processes; a short write on
  // stderr is not worth retrying for a log line.
  [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, formatted.data(), formatted.size());
}

}  // namespace hyper_parallel::shmem::log
