// RunPes: runs a test body in N forked PE processes on the host backend and reports every
// PE's outcome. The parent keeps a deadline: a PE that hangs is killed and reported, a PE that
// crashes is reported with its signal, and each PE's stderr is captured for the report.
//
// Call from a single-threaded parent (fork). The body runs in the child and returns an exit
// code (0 = pass); CHECK_PE records a failure with its location and keeps going.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/runtime.h"
#include "runtime/socket_bootstrap.h"

namespace hyper_parallel::shmem::testing {

struct PeContext {
  int rank = 0;
  int size = 1;
  std::string bootstrap_name;
  int failures = 0;

  /// Forms the bootstrap and initialises the process Runtime (on the configured backend, or on
  /// what `factory` makes).
  Status InitRuntime(std::chrono::milliseconds bootstrap_timeout = std::chrono::seconds(20),
                     BackendFactory factory = {});
  /// Records a failure (printed to this PE's stderr) unless `ok`.
  bool Check(bool ok, const char* file, int line, const std::string& what);
};

#define CHECK_PE(ctx, condition, what) (ctx).Check((condition), __FILE__, __LINE__, (what))
#define CHECK_PE_OK(ctx, status_expr)                                             \
  do {                                                                            \
    const ::hyper_parallel::shmem::Status hps_checked_ = (status_expr);           \
    (ctx).Check(hps_checked_.ok(), __FILE__, __LINE__,                            \
                std::string(#status_expr) + " -> " + hps_checked_.ToString());    \
  } while (false)

struct PeOutcome {
  int rank = 0;
  int pid = 0;
  int exit_code = -1;  ///< when it exited normally
  int signal = 0;      ///< when it was killed by a signal
  bool timed_out = false;
  std::string output;  ///< everything the PE wrote to stderr
};

struct PeLaunch {
  int size = 2;
  std::chrono::milliseconds deadline = std::chrono::seconds(60);
  std::map<std::string, std::string> env;  ///< set in every PE before the body runs
};

std::vector<PeOutcome> RunPes(const PeLaunch& launch, const std::function<int(PeContext&)>& body);

/// Passes when every PE exited with 0; otherwise lists each failed PE and its output.
::testing::AssertionResult AllPesPassed(const std::vector<PeOutcome>& outcomes);

/// EXPECT that every PE passed, without echoing the (long) body in the failure message.
#define EXPECT_ALL_PES_PASS(outcomes_expression)                                 \
  do {                                                                            \
    const auto hps_outcomes_ = (outcomes_expression);                             \
    EXPECT_TRUE(::hyper_parallel::shmem::testing::AllPesPassed(hps_outcomes_));   \
  } while (false)

/// Segments whose memfd name carries one of `pids` still mapped by any process on the machine.
std::vector<std::string> LiveSegmentsOf(const std::vector<int>& pids);
/// Children of `parent` still alive.
std::vector<int> LiveChildrenOf(int parent);
/// Memfd segments of this library mapped or open in the calling process.
int OwnSegmentCount();

}  // namespace hyper_parallel::shmem::testing
