// The trust model: one node, one user. The bootstrap endpoint and the heap segments are
// reachable only by processes of the owning user; run as root, a child that drops to another
// uid fails to join the bootstrap and fails to open a PE's heap segment.
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <thread>

#include "backends/host/host_backend.h"
#include "runtime/socket_bootstrap.h"
#include "tests/multiprocess/pe_helpers.h"

namespace hyper_parallel::shmem::testing {
namespace {

using namespace std::chrono_literals;

constexpr uid_t kNobody = 65534;

// Runs `attempt` in a child that dropped to uid/gid 65534; returns its exit code.
int AsAnotherUser(const std::function<int()>& attempt) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::setgroups(0, nullptr) != 0 || ::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) {
      ::_exit(90);
    }
    ::_exit(attempt());
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100 + WTERMSIG(status);
}

// "/proc/<pid>/fd/<n>" of this process's own heap segment, or "".
std::string OwnSegmentPath() {
  DIR* dir = ::opendir("/proc/self/fd");
  std::string found;
  for (dirent* entry; dir != nullptr && (entry = ::readdir(dir)) != nullptr;) {
    char target[512];
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    const ssize_t length = ::readlink(link.c_str(), target, sizeof target - 1);
    if (length <= 0) continue;
    target[length] = '\0';
    if (std::string(target).find(host::HostBackend::kSegmentNamePrefix) != std::string::npos) {
      found = "/proc/" + std::to_string(::getpid()) + "/fd/" + entry->d_name;
    }
  }
  if (dir != nullptr) ::closedir(dir);
  return found;
}

TEST(Trust, AnotherUserCanNeitherJoinTheBootstrapNorOpenAHeap) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to switch to another uid";
  EXPECT_ALL_PES_PASS(RunPes(PeLaunch{2, 60s, {}}, [](PeContext& ctx) {
    if (ctx.rank == 1) {
      // Another user's process tries to take rank 1 first: rank 0 refuses it.
      const int foreign = AsAnotherUser([&] {
        std::unique_ptr<SocketBootstrap> boot;
        const Status joined =
            SocketBootstrap::Create(ctx.bootstrap_name, 1, 2, 10s, &boot);
        if (joined.ok()) return 1;
        return Contains(joined.message(), "bootstrap root refused this process") ? 0 : 2;
      });
      CHECK_PE(ctx, foreign == 0, "the other user's join must be refused, got " +
                                      std::to_string(foreign));
    }
    CHECK_PE_OK(ctx, ctx.InitRuntime());  // the owner's processes still join
    const std::string segment = OwnSegmentPath();
    CHECK_PE(ctx, !segment.empty(), "the heap segment is open in this process");
    // The owner's processes may open it (that is how peers map it)...
    const int own = ::open(segment.c_str(), O_RDWR | O_CLOEXEC);
    CHECK_PE(ctx, own >= 0, "the owning user opens " + segment);
    if (own >= 0) ::close(own);
    // ...another user may not, to read or to write.
    const int other = AsAnotherUser([&] {
      const int fd = ::open(segment.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) return 1;
      return errno == EACCES || errno == EPERM ? 0 : 2;
    });
    CHECK_PE(ctx, other == 0, "another user must not open " + segment + ", got " +
                                  std::to_string(other));
    CHECK_PE_OK(ctx, Rt().Shutdown());
    return 0;
  }));
}

}  // namespace
}  // namespace hyper_parallel::shmem::testing
