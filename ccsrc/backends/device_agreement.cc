#include "backends/device_agreement.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

namespace hyper_parallel::shmem {
namespace {

// A descriptor's words, padded to whole cache lines.
constexpr std::uint64_t kSlotBytes =
    (CollectiveDescriptor::kWords * sizeof(std::uint64_t) + 63) / 64 * 64;

std::atomic_ref<std::uint64_t> Word(std::uint64_t* slot, int i) {
  return std::atomic_ref<std::uint64_t>(slot[i]);
}

Status Errno(std::string_view what, int error) {
  return Status::Assertion(ErrorCode::kBackendError, std::string(what),
                           {{"errno", std::to_string(error)}, {"reason", std::strerror(error)}});
}

}  // namespace

Status HostAgreement::Open(int rank, int size, int teams, std::chrono::milliseconds timeout,
                           const AllGather& all_gather) {
  Close();
  rank_ = rank;
  size_ = size;
  teams_ = teams;
  timeout_ = timeout;
  bytes_ = static_cast<std::uint64_t>(teams) * 2 * static_cast<std::uint64_t>(size) * kSlotBytes;
  std::string mine;
  Status made;
  if (rank == 0) {
    fd_ = ::memfd_create("hps_device_agreement", MFD_CLOEXEC);
    if (fd_ < 0) {
      made = Errno("memfd_create failed", errno);
    } else if (::ftruncate(fd_, static_cast<off_t>(bytes_)) != 0) {
      made = Errno("ftruncate of the agreement segment failed", errno);
    } else {
      mine = std::to_string(::getpid()) + "/" + std::to_string(fd_);
    }
  }
  // Every PE takes part in the all-gather, also after a local failure (PE 0's empty answer
  // then fails the others).
  std::vector<std::string> all;
  Status gathered = all_gather(mine, &all);
  HPS_RETURN_IF_ERROR(made);
  HPS_RETURN_IF_ERROR(gathered);
  if (all.empty() || all[0].empty()) {
    return Status::Assertion(ErrorCode::kBackendError,
                             "PE 0 could not make the host agreement segment", {});
  }
  int fd = fd_;
  if (rank != 0) {
    const std::string path = "/proc/" + all[0].substr(0, all[0].find('/')) + "/fd/" +
                             all[0].substr(all[0].find('/') + 1);
    fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd < 0) return Errno("cannot open PE 0's agreement segment " + path, errno);
  }
  void* mapped = ::mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int mapped_errno = errno;
  if (rank != 0) ::close(fd);
  if (mapped == MAP_FAILED) return Errno("mmap of the agreement segment failed", mapped_errno);
  base_ = mapped;
  return Status::Ok();
}

void HostAgreement::Close() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
  base_ = nullptr;
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::uint64_t* HostAgreement::Slot(int team, std::uint64_t sequence, int pe) const {
  const std::uint64_t index =
      (static_cast<std::uint64_t>(team) * 2 + sequence % 2) * static_cast<std::uint64_t>(size_) +
      static_cast<std::uint64_t>(pe);
  return reinterpret_cast<std::uint64_t*>(static_cast<std::byte*>(base_) + index * kSlotBytes);
}

Status HostAgreement::Agree(const data_plane::CollectiveGroup& group,
                            const CollectiveDescriptor& mine, std::string_view operation,
                            std::vector<CollectiveDescriptor>* all) const {
  if (base_ == nullptr || group.sync_slot < 0 || group.sync_slot >= teams_) {
    return Status::Assertion(ErrorCode::kInvalidState, "the host agreement segment is not open",
                             {{"operation", std::string(operation)}});
  }
  const std::array<std::uint64_t, CollectiveDescriptor::kWords> words = mine.Pack();
  std::uint64_t* own = Slot(group.sync_slot, mine.sequence, rank_);
  for (int i = 1; i < CollectiveDescriptor::kWords; ++i) {
    Word(own, i).store(words[i], std::memory_order_relaxed);
  }
  Word(own, 0).store(words[0], std::memory_order_release);

  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  all->clear();
  all->reserve(static_cast<std::size_t>(group.size()));
  for (int member = 0; member < group.size(); ++member) {
    const int pe = group.pe(member);
    std::uint64_t* slot = Slot(group.sync_slot, mine.sequence, pe);
    // Spin briefly, then sleep with a growing pause (PEs may outnumber cores).
    std::chrono::microseconds pause{20};
    for (int spins = 0; Word(slot, 0).load(std::memory_order_acquire) < mine.sequence; ++spins) {
      if (spins < 200) continue;
      if (std::chrono::steady_clock::now() >= deadline) {
        return Status::Assertion(
            ErrorCode::kTimeout, "a PE did not reach the collective within the timeout",
            {{"operation", std::string(operation)}, {"pe", std::to_string(pe)},
             {"sequence", std::to_string(mine.sequence)},
             {"timeout_ms", std::to_string(timeout_.count())}});
      }
      std::this_thread::sleep_for(pause);
      if (pause < std::chrono::microseconds(1000)) pause *= 2;
    }
    std::array<std::uint64_t, CollectiveDescriptor::kWords> theirs;
    theirs[0] = Word(slot, 0).load(std::memory_order_acquire);
    for (int i = 1; i < CollectiveDescriptor::kWords; ++i) {
      theirs[i] = Word(slot, i).load(std::memory_order_relaxed);
    }
    all->push_back(CollectiveDescriptor::Unpack(theirs));
  }
  return Status::Ok();
}

}  // namespace hyper_parallel::shmem
