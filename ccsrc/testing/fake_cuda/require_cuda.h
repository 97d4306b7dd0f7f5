// Whether this run must have a usable GPU. HPS_TEST_REQUIRE_CUDA=1 (scripts/gpu_check.sh sets it)
// turns the real CUDA layer's skips into failures, so that a GPU check cannot pass by skipping
// (a driver the runtime cannot use, a GPU no test could reach). Unset, a machine without a GPU
// skips those tests, saying why.
//
// Thread-safety: reads the environment only.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string_view>

namespace hyper_parallel::shmem::testing {

inline constexpr const char* kRequireCudaEnv = "HPS_TEST_REQUIRE_CUDA";

inline bool CudaRequired() {
  const char* value = std::getenv(kRequireCudaEnv);
  return value != nullptr && std::string_view(value) == "1";
}

}  // namespace hyper_parallel::shmem::testing

/// Skips the current test (or fixture's SetUp) with `reason`, or fails it where a GPU is
/// required.
#define HPS_SKIP_UNLESS_CUDA_REQUIRED(reason)                                                 \
  do {                                                                                        \
    if (::hyper_parallel::shmem::testing::CudaRequired()) {                                   \
      FAIL() << ::hyper_parallel::shmem::testing::kRequireCudaEnv << "=1, but " << (reason); \
    }                                                                                         \
    GTEST_SKIP() << (reason);                                                                 \
  } while (false)
