// UcxTransport's progress: who drives the UCX worker and when (ucx_transport.h; the reasons
// and the measurements: docs/scale-out.md, "Waiting").
//
//   - Poll: one thread at a time progresses the worker (the progress token); a thread that
//     finds it taken goes on (the holder handles what arrives, and rings the doorbell).
//   - A waiting thread (Waiting) polls while it spins. When it would sleep, one waiter of the
//     PE at a time sleeps on the worker's event fd and the PE's wake socket (Arm, Sleep): a
//     message from another host wakes it directly; a ring from this host kicks the socket.
//   - The progress thread: while any thread waits it leaves the worker to them and only sends
//     heartbeats; while none does, it sleeps on the event fd and progresses whatever arrives.
#include "backends/transport/ucx/library.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace hyper_parallel::shmem::transport {

#if HPS_HAVE_UCX_HEADERS

namespace {

// How long the progress thread leaves the worker to waiting threads before it looks again:
// the longest a message waits for the progress thread after the last waiter left.
constexpr std::chrono::milliseconds kWaiterCheck{1};

// At most this many progress calls per Poll, so a flood cannot hold the token for long.
constexpr int kProgressBurst = 16;

// How long a waiter keeps polling after progress last handled something, before it may sleep:
// back-to-back messages (a put's rendezvous handshake, a stream of puts) would otherwise each
// pay a wake-up of tens of microseconds (docs/scale-out.md, "Waiting").
constexpr std::chrono::microseconds kStayAwake{100};

std::int64_t Now() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

int Milliseconds(std::chrono::nanoseconds duration) {
  const auto ms = std::chrono::ceil<std::chrono::milliseconds>(duration).count();
  return static_cast<int>(std::clamp<long long>(ms, 1, 1 << 30));
}

}  // namespace

bool UcxTransport::Poll() {
  if (worker_ == nullptr) return false;
  if (progressing_.load(std::memory_order_relaxed) ||
      progressing_.exchange(true, std::memory_order_acquire)) {
    return false;
  }
  auto* worker = static_cast<ucp_worker_h>(worker_);
  unsigned handled = 0;
  for (int i = 0; i < kProgressBurst; ++i) {
    const unsigned events = lib_->worker_progress(worker);
    if (events == 0) break;
    handled += events;
  }
  progressing_.store(false, std::memory_order_release);
  // Out of UCX now: what handlers posted to peers without an endpoint can go.
  if (has_queued_.load(std::memory_order_acquire)) SendQueued();
  if (handled == 0) return false;
  last_activity_.store(Now(), std::memory_order_relaxed);
  // The rma path lands writes inside progress without a handler of ours: whoever waits here
  // looks again (the messages path's handlers ring for what they land).
  if (own_bell_ != nullptr) Ring<CallSite::kHostThread>(own_bell_);
  return true;
}

EventSleeper::Armed UcxTransport::Arm(Doorbell* bell) {
  if (sleep_epoll_ < 0) return Armed::kTaken;
  // Bulk data is streaming: a sleeper would wake for every segment (tens of microseconds each
  // on an idle core) while the socket fills up. Keep progressing, yielding the core between.
  if (streaming_.load(std::memory_order_relaxed) > 0 ||
      Now() - last_activity_.load(std::memory_order_relaxed) <
          std::chrono::nanoseconds(kStayAwake).count()) {
    Poll();
    host::internal::Yield();
    return Armed::kBusy;
  }
  if (event_role_.load(std::memory_order_relaxed) ||
      event_role_.exchange(true, std::memory_order_acquire)) {
    return Armed::kTaken;
  }
  bell->event_sleepers.fetch_add(1, std::memory_order_seq_cst);
  wake_.Drain();
  // From here on every event signals the worker's fd; BUSY: some are already pending.
  if (lib_->worker_arm(static_cast<ucp_worker_h>(worker_)) == UCS_ERR_BUSY) {
    bell->event_sleepers.fetch_sub(1, std::memory_order_seq_cst);
    event_role_.store(false, std::memory_order_release);
    Poll();
    return Armed::kBusy;
  }
  return Armed::kArmed;
}

void UcxTransport::Sleep(Doorbell* bell, std::chrono::nanoseconds timeout) {
  if (timeout.count() > 0) {
    counters_.event_sleeps.fetch_add(1, std::memory_order_relaxed);
    epoll_event events[2];
    (void)::epoll_wait(sleep_epoll_, events, 2, Milliseconds(timeout));
  }
  bell->event_sleepers.fetch_sub(1, std::memory_order_seq_cst);
  event_role_.store(false, std::memory_order_release);
}

Status UcxTransport::Start(Liveness liveness, const std::atomic<bool>* abort,
                           Doorbell* own_bell, WaitPolicy policy) {
  abort_ = abort;
  liveness_ = std::move(liveness);
  wait_policy_ = policy;
  const auto now = std::chrono::steady_clock::now();
  for (Peer& peer : peers_) {
    if (!peer.watched) continue;
    peer.last_beat = liveness_.observed_beat ? liveness_.observed_beat(peer.pe) : 0;
    peer.last_change = now;
  }
  auto system_error = [](const char* what) {
    return Status::Assertion(ErrorCode::kBackendError, what, {{"errno", std::strerror(errno)}});
  };
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop_fd_ < 0) return system_error("eventfd failed");
  if (lib_->worker_get_efd(static_cast<ucp_worker_h>(worker_), &event_fd_) != UCS_OK) {
    event_fd_ = -1;
  }
  // The waiters' sleep: the worker's events and the wake socket that rings kick.
  if (event_fd_ >= 0) {
    HPS_RETURN_IF_ERROR(wake_.Open());
    sleep_epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
    if (sleep_epoll_ < 0) return system_error("epoll_create1 failed");
    for (int fd : {event_fd_, wake_.fd()}) {
      epoll_event event{};
      event.events = EPOLLIN;
      event.data.fd = fd;
      if (::epoll_ctl(sleep_epoll_, EPOLL_CTL_ADD, fd, &event) != 0) {
        return system_error("epoll_ctl failed");
      }
    }
    own_bell->wake_name.store(wake_.name(), std::memory_order_relaxed);
  }
  own_bell_ = own_bell;
  stopping_.store(false);
  thread_ = std::thread([this] { Run(); });
  return Status::Ok();
}

void UcxTransport::Run() {
  auto* worker = static_cast<ucp_worker_h>(worker_);
  // Two sets: with the worker's events (nobody waits) and without (waiters drive it).
  const int all = ::epoll_create1(EPOLL_CLOEXEC);
  const int quiet = ::epoll_create1(EPOLL_CLOEXEC);
  auto add = [](int epoll, int fd) {
    if (epoll < 0 || fd < 0) return;
    epoll_event event{};
    event.events = EPOLLIN;
    event.data.fd = fd;
    ::epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event);
  };
  add(all, event_fd_);
  add(all, stop_fd_);
  add(quiet, stop_fd_);
  const auto beat_every = std::max(std::chrono::milliseconds(10), liveness_.silence / 8);
  auto next_beat = std::chrono::steady_clock::now();
  while (!stopping_.load(std::memory_order_acquire)) {
    const bool waited_on = waiters() > 0;
    if (!waited_on) {
      while (Poll()) {
      }
    }
    auto now = std::chrono::steady_clock::now();
    if (now >= next_beat) {
      Heartbeat(now);
      next_beat = now + beat_every;
    }
    epoll_event events[2];
    const auto until_beat = std::chrono::duration_cast<std::chrono::nanoseconds>(
        next_beat - std::chrono::steady_clock::now());
    if (waited_on || all < 0 || event_fd_ < 0) {
      const auto wait = event_fd_ < 0 ? std::chrono::nanoseconds(std::chrono::milliseconds(1))
                                      : std::min<std::chrono::nanoseconds>(until_beat, kWaiterCheck);
      (void)::epoll_wait(quiet, events, 2, Milliseconds(wait));
      continue;
    }
    if (progressing_.load(std::memory_order_acquire) ||
        lib_->worker_arm(worker) == UCS_ERR_BUSY) {
      continue;
    }
    (void)::epoll_wait(all, events, 2, Milliseconds(until_beat));
  }
  if (all >= 0) ::close(all);
  if (quiet >= 0) ::close(quiet);
}

#endif

}  // namespace hyper_parallel::shmem::transport
