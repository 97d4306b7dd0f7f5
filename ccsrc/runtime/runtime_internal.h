// Runtime: what several of its source files share, private to them (the class is runtime.h;
// docs/architecture.md): JoinInts, for messages (Init and Shutdown), and the definition of the
// member template Execute (the one-sided operations and Launch). Include it from the Runtime's
// own runtime*.cc only.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "runtime/runtime.h"

namespace hyper_parallel::shmem {

inline std::string JoinInts(const std::vector<int>& values) {
  std::string text = "[";
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i > 0) text += ",";
    text += std::to_string(values[i]);
  }
  return text + "]";
}

template <class Work>
Status Runtime::Execute(std::string_view operation, bool small, StreamRef stream, Work work) {
  Backend& backend = *backend_;
  // Only enqueued, or a little work on this thread's CPU: it cannot wait.
  if (!backend.RunsInline(stream) || (small && !backend.SynchronizesInline())) {
    return ConcludeLocked(work(backend), operation, "execute");
  }
  Status done;
  {
    CallScope call(this);
    mutex_.Unlock();
    done = work(backend);
    mutex_.Lock();
  }
  return ConcludeLocked(std::move(done), operation, "execute");
}

}  // namespace hyper_parallel::shmem
