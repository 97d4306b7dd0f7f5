// Bootstrap: how the PEs of one Root WORLD find each other while the Runtime initialises and
// shuts down. It is never on the data path.
//
// An implementation offers an all-gather of byte strings and a barrier, both bounded by a
// timeout. SocketBootstrap serves C++ tests and the native demo; the torch binding adds one
// over a torch.distributed process group. Calls are collective and made from one thread at a
// time (the Runtime's mutex guarantees it).
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace hyper_parallel::shmem {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;

  /// This PE's index in the Root WORLD, in [0, size()).
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// Every PE contributes `mine`; on success `all` holds every PE's bytes in rank order.
  virtual Status AllGather(std::string_view mine, std::chrono::milliseconds timeout,
                           std::vector<std::string>* all) = 0;

  /// Returns once every PE has entered, or fails after `timeout`.
  virtual Status Barrier(std::chrono::milliseconds timeout) = 0;
};

}  // namespace hyper_parallel::shmem
