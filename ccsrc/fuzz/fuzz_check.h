// FuzzCheck: the one way a fuzz harness reports a broken property.
//
// A violation prints what broke and where to stderr, then traps, so libFuzzer saves the input
// and the corpus replay (replay_main.cc) fails. It never depends on NDEBUG: the harnesses are
// built in Release like the rest of the tree and must still check.
#pragma once

#include <cstdio>
#include <string>

namespace hyper_parallel::shmem::fuzz {

[[noreturn]] inline void Fail(const char* file, int line, const char* condition,
                              const std::string& detail) {
  std::fprintf(stderr, "%s:%d: fuzz property violated: %s\n  %s\n", file, line, condition,
               detail.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

}  // namespace hyper_parallel::shmem::fuzz

/// Traps with `detail` (a std::string expression, built only on failure) unless `condition`.
#define HPS_FUZZ_CHECK(condition, detail)                                          \
  do {                                                                             \
    if (!(condition)) {                                                            \
      ::hyper_parallel::shmem::fuzz::Fail(__FILE__, __LINE__, #condition, (detail)); \
    }                                                                              \
  } while (false)
