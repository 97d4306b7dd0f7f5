#include "backends/host/liveness.h"

#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

namespace hyper_parallel::shmem::host {
namespace {

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif

constexpr std::chrono::milliseconds kFallbackPeriod{50};

int PidfdOpen(int pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

// For the fallback: gone, or a zombie that nobody reaped yet.
bool ProcessGone(int pid) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const std::size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() &&
         (line[close + 2] == 'Z' || line[close + 2] == 'X');
}

}  // namespace

std::vector<int> WatchPartners(int rank, int size) {
  std::vector<int> partners;
  for (long long distance = 1; distance < size; distance *= 2) {
    for (long long to : {rank + distance, rank - distance + size}) {
      const int pe = static_cast<int>(to % size);
      if (pe != rank) partners.push_back(pe);
    }
  }
  std::sort(partners.begin(), partners.end());
  partners.erase(std::unique(partners.begin(), partners.end()), partners.end());
  return partners;
}

Status PeerLost(int pe, int pid, int after, int after_pid) {
  if (after < 0) {
    return Status::Assertion(ErrorCode::kPeerLost, "a peer PE exited while this PE depends on it",
                             {{"pe", std::to_string(pe)}, {"pid", std::to_string(pid)}});
  }
  return Status::Assertion(ErrorCode::kPeerLost, "a peer PE exited while this PE depends on it",
                           {{"pe", std::to_string(pe)},
                            {"pid", std::to_string(pid)},
                            {"noticed_through", "pe " + std::to_string(after) + " (pid " +
                                                    std::to_string(after_pid) +
                                                    "), which exited after losing it"}});
}

Status PeerMonitor::Start(int rank, const std::vector<int>& pids, FailureLatch* latch,
                          Doorbell* bell, std::vector<std::atomic<std::int32_t>*> lost_words,
                          std::function<void(int)> exited,
                          std::vector<std::atomic<std::int32_t>*> departed_words) {
  Stop();
  rank_ = rank;
  departed_words_ = std::move(departed_words);
  exited_ = std::move(exited);
  pids_ = pids;
  latch_ = latch;
  bell_ = bell;
  lost_words_ = std::move(lost_words);
  pidfds_.assign(pids.size(), -1);
  uses_pidfds_ = true;
  int already_gone = -1;
  for (int pe = 0; pe < static_cast<int>(pids.size()); ++pe) {
    if (pe == rank || pids[pe] < 0) continue;  // < 0: on another host, watched by the network
    const int fd = PidfdOpen(pids[pe]);
    if (fd >= 0) {
      pidfds_[pe] = fd;
    } else if (errno == ESRCH) {
      if (already_gone < 0) already_gone = pe;
    } else {
      uses_pidfds_ = false;  // no pidfds here (old kernel, seccomp): poll instead
    }
  }
  if (!uses_pidfds_) {
    for (int& fd : pidfds_) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
  }
  if (already_gone >= 0) Lost(already_gone);
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (stop_fd_ < 0) {
    const int error = errno;
    for (int& fd : pidfds_) {
      if (fd >= 0) ::close(fd);
      fd = -1;
    }
    return Status::Assertion(ErrorCode::kBackendError, "creating the peer monitor failed",
                             {{"errno", std::to_string(error)}});
  }
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void PeerMonitor::Stop() {
  if (thread_.joinable()) {
    const std::uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(stop_fd_, &one, sizeof one);
    thread_.join();
  }
  if (stop_fd_ >= 0) ::close(stop_fd_);
  stop_fd_ = -1;
  for (int& fd : pidfds_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

void PeerMonitor::Lost(int pe) {
  const int size = static_cast<int>(pids_.size());
  if (departed_words_.size() == pids_.size() && departed_words_[pe] != nullptr &&
      departed_words_[pe]->load(std::memory_order_acquire) != 0) {
    return;  // it closed with everyone's agreement: a departure, not a loss
  }
  int cause = pe;
  if (lost_words_.size() == pids_.size()) {
    // A peer that exited because it had lost another one: name that first one.
    const int reported =
        lost_words_[pe] != nullptr ? lost_words_[pe]->load(std::memory_order_acquire) : -1;
    if (reported >= 0 && reported < size && reported != rank_ && reported != pe) cause = reported;
  }
  const bool first = latch_->Set(cause == pe ? PeerLost(pe, pids_[pe])
                                             : PeerLost(cause, pids_[cause], pe, pids_[pe]));
  if (first && lost_words_.size() == pids_.size() && lost_words_[rank_] != nullptr) {
    lost_words_[rank_]->store(cause, std::memory_order_release);
  }
  if (bell_ != nullptr) Ring<CallSite::kHostThread>(bell_);
  if (exited_) exited_(pe);
}

void PeerMonitor::Run() {
  std::vector<pollfd> watched;
  std::vector<int> pe_of;
  watched.push_back(pollfd{stop_fd_, POLLIN, 0});
  pe_of.push_back(-1);
  for (int pe = 0; pe < static_cast<int>(pidfds_.size()); ++pe) {
    if (pidfds_[pe] < 0) continue;
    watched.push_back(pollfd{pidfds_[pe], POLLIN, 0});
    pe_of.push_back(pe);
  }
  const int period = uses_pidfds_ ? -1 : static_cast<int>(kFallbackPeriod.count());
  for (;;) {
    const int ready = ::poll(watched.data(), watched.size(), period);
    if (ready < 0 && errno != EINTR) return;
    if (watched[0].revents != 0) return;  // Stop()
    if (uses_pidfds_) {
      for (std::size_t i = 1; i < watched.size(); ++i) {
        if (watched[i].revents == 0) continue;
        Lost(pe_of[i]);
        watched[i].fd = -1;  // reported; poll ignores negative descriptors
      }
    } else {
      for (int pe = 0; pe < static_cast<int>(pids_.size()); ++pe) {
        if (pe != rank_ && pids_[pe] >= 0 && ProcessGone(pids_[pe])) {
          Lost(pe);
          return;
        }
      }
    }
  }
}

}  // namespace hyper_parallel::shmem::host
