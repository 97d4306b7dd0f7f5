// HostAgreement: where the PEs of a device backend (CANN, CUDA) agree on a collective's
// descriptor, in host memory, so that a collective enqueued on a caller's stream is checked
// across PEs at the call without synchronising any stream (docs/backends.md, "Streams").
//
// A device backend's PEs share one host (they refuse several at init), so PE 0 makes one small
// memfd segment and the others open it through /proc/<pid>/fd/<fd>, learnt through the
// bootstrap's all-gather during OpenPeers; nothing is left in /dev/shm, and the segment goes
// with the last process that maps it. Layout, for T team slots and P PEs:
//   slots [T][2][P]   CollectiveDescriptor words, one cache line apart per word group: PE p's
//                     descriptor of team slot t's collective n lives in [t][n % 2][p], word 0
//                     (the sequence number) stored last (release) and read first (acquire).
// A PE publishes n + 2 only after every member published n + 1, which each does only after it
// read n: no slot is overwritten before every member read it (the host backend's rule,
// backends/host/control_block.h).
//
// Only the descriptors travel here: data, signals and the device-side ordering of collectives
// stay on the streams (DeviceBackend). A wait spins briefly, then sleeps, and gives up at the
// timeout (TIMEOUT naming the PE waited for).
//
// Thread-safety: Agree may be called from several threads at once for different team slots
// (the Runtime serialises one slot's collectives); Open and Close from one thread, with no
// Agree running.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/collective_descriptor.h"
#include "base/status.h"
#include "data_plane/collective.h"

namespace hyper_parallel::shmem {

class HostAgreement {
 public:
  using AllGather = std::function<Status(std::string_view mine, std::vector<std::string>* all)>;

  HostAgreement() = default;
  ~HostAgreement() { Close(); }
  HostAgreement(const HostAgreement&) = delete;
  HostAgreement& operator=(const HostAgreement&) = delete;

  /// Collective (one all-gather): PE 0 makes the segment, every other PE maps it.
  Status Open(int rank, int size, int teams, std::chrono::milliseconds timeout,
              const AllGather& all_gather);
  void Close();
  bool open() const { return base_ != nullptr; }

  /// Publishes `mine` for `group` (its sync slot) and waits until every member published the
  /// same collective number; `all` then holds the members' descriptors in member order.
  Status Agree(const data_plane::CollectiveGroup& group, const CollectiveDescriptor& mine,
               std::string_view operation, std::vector<CollectiveDescriptor>* all) const;

 private:
  std::uint64_t* Slot(int team, std::uint64_t sequence, int pe) const;

  int rank_ = 0;
  int size_ = 1;
  int teams_ = 1;
  std::chrono::milliseconds timeout_{0};
  int fd_ = -1;  // PE 0's memfd, kept until Close
  void* base_ = nullptr;
  std::uint64_t bytes_ = 0;
};

}  // namespace hyper_parallel::shmem
