#include "backends/host/affinity.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace hyper_parallel::shmem::host {

void ThreadPin::PinForPe(int rank, int local_pes) {
  Restore();
  const long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (::sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    description_ = std::string("none (sched_getaffinity failed: ") + std::strerror(errno) + ")";
    return;
  }
  const int usable = CPU_COUNT(&allowed);
  if (online > 0 && usable < online) {
    description_ = "none (the thread's affinity was already narrowed to " +
                   std::to_string(usable) + " of " + std::to_string(online) + " cpus)";
    return;
  }
  if (local_pes > usable) {
    description_ = "none (" + std::to_string(local_pes) + " PEs share " +
                   std::to_string(usable) + " cpus)";
    return;
  }
  int wanted = rank % usable;
  int cpu = -1;
  for (int candidate = 0; candidate < CPU_SETSIZE; ++candidate) {
    if (CPU_ISSET(candidate, &allowed) && wanted-- == 0) {
      cpu = candidate;
      break;
    }
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (cpu < 0 || ::sched_setaffinity(0, sizeof one, &one) != 0) {
    description_ = std::string("none (sched_setaffinity failed: ") + std::strerror(errno) + ")";
    return;
  }
  thread_ = static_cast<pid_t>(::syscall(SYS_gettid));
  previous_ = allowed;
  pinned_ = true;
  description_ = "cpu " + std::to_string(cpu);
}

void ThreadPin::Restore() {
  // By thread id, since teardown may run on another thread; only while that id is still a
  // thread of this process (a thread that ended has no mask to restore).
  if (pinned_ && ::access(("/proc/self/task/" + std::to_string(thread_)).c_str(), F_OK) == 0) {
    ::sched_setaffinity(thread_, sizeof previous_, &previous_);
  }
  pinned_ = false;
  description_ = "none (not initialised)";
}

}  // namespace hyper_parallel::shmem::host
