// SocketBootstrap: a Bootstrap over stream sockets, for PEs without torch (C++ tests, the native
// demo and benchmark).
//
// Rank 0 listens and every other rank connects to it; all-gather is a gather to rank 0 followed
// by a broadcast. The name says where:
//   - "<name>": a Unix-domain socket in the abstract namespace ("\0<name>"), for PEs of one
//     machine. Only processes of the same user are accepted (SO_PEERCRED). The abstract name
//     vanishes with the socket, so nothing is left in the file system.
//   - "tcp:<IPv4 address>:<port>": rank 0 listens there (TCP), for PEs on several hosts, e.g.
//     the native benchmark across hosts. Anyone who can reach the port and speaks the hello may
//     join: use it on a trusted network only (docs/api.md, "Trust model").
// Rank 0 admits a peer with one byte, so a refused process fails in Create. Not thread-safe;
// one collective at a time.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/bootstrap.h"
#include "base/config.h"

namespace hyper_parallel::shmem {

inline constexpr std::string_view kEnvBootstrapName = "HYPER_PARALLEL_SHMEM_BOOTSTRAP_NAME";
inline constexpr std::string_view kEnvRank = "HYPER_PARALLEL_SHMEM_RANK";
inline constexpr std::string_view kEnvWorldSize = "HYPER_PARALLEL_SHMEM_WORLD_SIZE";

class SocketBootstrap final : public Bootstrap {
 public:
  /// The largest Root WORLD this bootstrap forms.
  static constexpr int kMaxPes = 1024;

  /// Forms the group: every rank calls this with the same `name` and `size`.
  static Status Create(std::string_view name, int rank, int size,
                       std::chrono::milliseconds timeout,
                       std::unique_ptr<SocketBootstrap>* out);

  /// Create() with name, rank and size from HYPER_PARALLEL_SHMEM_BOOTSTRAP_NAME, _RANK and
  /// _WORLD_SIZE, as set by a launcher.
  static Status FromEnvironment(const EnvLookup& env, std::chrono::milliseconds timeout,
                                std::unique_ptr<SocketBootstrap>* out);

  /// A fresh name no other live job uses (pid, time and randomness).
  static std::string UniqueName();

  ~SocketBootstrap() override;
  SocketBootstrap(const SocketBootstrap&) = delete;
  SocketBootstrap& operator=(const SocketBootstrap&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  Status AllGather(std::string_view mine, std::chrono::milliseconds timeout,
                   std::vector<std::string>* all) override;
  Status Barrier(std::chrono::milliseconds timeout) override;

 private:
  SocketBootstrap(int rank, int size) : rank_(rank), size_(size) {}

  int rank_;
  int size_;
  std::vector<int> peers_;  // rank 0: one socket per rank (-1 for itself); others: [root]
};

}  // namespace hyper_parallel::shmem
