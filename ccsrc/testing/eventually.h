// Eventually: polls a condition that another thread or process makes true, for a bounded time.
// Tests use it to wait for a state (a wait registered, a peer noticed gone); the bound is a
// deadline against hangs, never an expectation of speed.
#pragma once

#include <chrono>
#include <thread>

namespace hyper_parallel::shmem::testing {

/// Polls `condition` every millisecond for up to 20 s; returns its last value.
template <class Condition>
bool Eventually(Condition condition) {
  using namespace std::chrono_literals;
  for (int i = 0; i < 20000 && !condition(); ++i) std::this_thread::sleep_for(1ms);
  return condition();
}

}  // namespace hyper_parallel::shmem::testing
