// Which host a PE runs on (backends share it; the Runtime compares it at init): the host
// backend's PEs reach each other's heaps by mapping memory (/proc/<pid>/fd of a memfd), which
// needs one kernel, one PID namespace and, for the same view of the machine, one network
// namespace. Hosts made of Linux namespaces
// share the kernel and so its boot id; the namespaces tell them apart (docs/architecture.md,
// "Hosts").
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace hyper_parallel::shmem {

/// Fixed-size, so that it travels inside the segment handle as bytes.
struct HostIdentity {
  std::array<char, 40> boot_id{};   ///< /proc/sys/kernel/random/boot_id ("" when unreadable)
  std::uint64_t pid_namespace = 0;  ///< inode of /proc/self/ns/pid (0 when unreadable)
  std::uint64_t net_namespace = 0;  ///< inode of /proc/self/ns/net (0 when unreadable)
  std::array<char, 65> hostname{};  ///< the UTS hostname, for messages only

  /// This process's host.
  static HostIdentity Current();

  /// Same kernel and the same PID and network namespaces: its memory can be mapped directly.
  bool SameHost(const HostIdentity& other) const;

  /// Same kernel (boot id), so the same cores: hosts made of namespaces are distinct hosts
  /// that share one machine's cores.
  bool SameCores(const HostIdentity& other) const;

  /// "host0 (net:[4026531840])": the hostname and the network namespace's inode.
  std::string Label() const;
};

}  // namespace hyper_parallel::shmem

namespace hyper_parallel::shmem::host {
using shmem::HostIdentity;  // the host backend's name for it
}  // namespace hyper_parallel::shmem::host
