#include "backends/host/affinity.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

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
  // The usable cpus split into local_pes contiguous shares (the first `usable % local_pes`
  // shares one cpu larger); PE `rank` takes share rank % local_pes.
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &allowed)) cpus.push_back(cpu);
  }
  const int share = rank % local_pes;
  const int base = usable / local_pes;
  const int extra = usable % local_pes;
  const int first = share * base + std::min(share, extra);
  const int count = base + (share < extra ? 1 : 0);
  cpu_set_t mine;
  CPU_ZERO(&mine);
  for (int i = first; i < first + count; ++i) CPU_SET(cpus[i], &mine);
  if (::sched_setaffinity(0, sizeof mine, &mine) != 0) {
    description_ = std::string("none (sched_setaffinity failed: ") + std::strerror(errno) + ")";
    return;
  }
  thread_ = static_cast<pid_t>(::syscall(SYS_gettid));
  previous_ = allowed;
  pinned_ = true;
  description_ = count == 1 ? "cpu " + std::to_string(cpus[first])
                            : "cpus " + std::to_string(cpus[first]) + "-" +
                                  std::to_string(cpus[first + count - 1]);
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
