#include "testing/multiprocess.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "backends/host/host_backend.h"
#include "ops/collectives.h"

namespace hyper_parallel::shmem::testing {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> names;
  if (DIR* dir = ::opendir(path.c_str())) {
    while (dirent* entry = ::readdir(dir)) {
      if (entry->d_name[0] != '.') names.emplace_back(entry->d_name);
    }
    ::closedir(dir);
  }
  return names;
}

bool IsNumber(const std::string& text) {
  return !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

Status PeContext::InitRuntime(std::chrono::milliseconds bootstrap_timeout,
                              BackendFactory factory) {
  std::unique_ptr<SocketBootstrap> bootstrap;
  HPS_RETURN_IF_ERROR(
      SocketBootstrap::Create(bootstrap_name, rank, size, bootstrap_timeout, &bootstrap));
  InitOptions options;
  options.bootstrap = std::move(bootstrap);
  options.backend_factory = std::move(factory);
  options.collectives = ops::Collectives();
  return Runtime::Process().Init(std::move(options));
}

bool PeContext::Check(bool ok, const char* file, int line, const std::string& what) {
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "PE %d: CHECK FAILED at %s:%d: %s\n", rank, file, line, what.c_str());
  }
  return ok;
}

std::vector<PeOutcome> RunPes(const PeLaunch& launch,
                              const std::function<int(PeContext&)>& body) {
  const std::string name = SocketBootstrap::UniqueName();
  std::vector<PeOutcome> outcomes(launch.size);
  std::vector<int> pipes(launch.size, -1);
  std::fflush(nullptr);
  for (int rank = 0; rank < launch.size; ++rank) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) std::abort();
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fds[1], STDERR_FILENO);
      for (const auto& [key, value] : launch.env) ::setenv(key.c_str(), value.c_str(), 1);
      PeContext context{rank, launch.size, name, 0};
      int code = 1;
      try {
        code = body(context);
        if (code == 0 && context.failures > 0) code = 1;
      } catch (const std::exception& error) {
        std::fprintf(stderr, "PE %d: uncaught exception: %s\n", rank, error.what());
      }
      std::fflush(nullptr);
      ::_exit(code);  // never run the parent's gtest teardown or atexit handlers
    }
    ::close(fds[1]);
    pipes[rank] = fds[0];
    outcomes[rank].rank = rank;
    outcomes[rank].pid = pid;
  }

  const auto deadline = Clock::now() + launch.deadline;
  int running = launch.size;
  std::vector<bool> done(launch.size, false);
  while (running > 0) {
    // Drain output so a chatty PE never blocks on a full pipe.
    std::vector<pollfd> polls;
    for (int rank = 0; rank < launch.size; ++rank) {
      if (pipes[rank] >= 0) polls.push_back(pollfd{pipes[rank], POLLIN, 0});
    }
    ::poll(polls.data(), polls.size(), 10);
    for (int rank = 0; rank < launch.size; ++rank) {
      if (pipes[rank] < 0) continue;
      char buffer[4096];
      pollfd single{pipes[rank], POLLIN, 0};
      while (::poll(&single, 1, 0) > 0) {
        const ssize_t got = ::read(pipes[rank], buffer, sizeof buffer);
        if (got <= 0) {
          ::close(pipes[rank]);
          pipes[rank] = -1;
          break;
        }
        outcomes[rank].output.append(buffer, static_cast<std::size_t>(got));
      }
    }
    for (int rank = 0; rank < launch.size; ++rank) {
      if (done[rank]) continue;
      int status = 0;
      if (::waitpid(outcomes[rank].pid, &status, WNOHANG) == outcomes[rank].pid) {
        done[rank] = true;
        --running;
        if (WIFEXITED(status)) outcomes[rank].exit_code = WEXITSTATUS(status);
        if (WIFSIGNALED(status)) outcomes[rank].signal = WTERMSIG(status);
      }
    }
    if (running > 0 && Clock::now() > deadline) {
      for (int rank = 0; rank < launch.size; ++rank) {
        if (done[rank]) continue;
        outcomes[rank].timed_out = true;
        ::kill(outcomes[rank].pid, SIGKILL);
        int status = 0;
        ::waitpid(outcomes[rank].pid, &status, 0);
        outcomes[rank].signal = SIGKILL;
        done[rank] = true;
        --running;
      }
    }
  }
  for (int rank = 0; rank < launch.size; ++rank) {
    if (pipes[rank] < 0) continue;
    char buffer[4096];
    ssize_t got;
    while ((got = ::read(pipes[rank], buffer, sizeof buffer)) > 0) {
      outcomes[rank].output.append(buffer, static_cast<std::size_t>(got));
    }
    ::close(pipes[rank]);
  }
  return outcomes;
}

::testing::AssertionResult AllPesPassed(const std::vector<PeOutcome>& outcomes) {
  std::ostringstream report;
  bool ok = true;
  for (const PeOutcome& outcome : outcomes) {
    if (outcome.exit_code == 0 && outcome.signal == 0) continue;
    ok = false;
    report << "\nPE " << outcome.rank << " (pid " << outcome.pid << ") ";
    if (outcome.timed_out) {
      report << "hung and was killed at the deadline";
    } else if (outcome.signal != 0) {
      report << "died of signal " << outcome.signal;
    } else {
      report << "exited with " << outcome.exit_code;
    }
    report << "; its output:\n" << outcome.output;
  }
  if (ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << report.str();
}

std::vector<std::string> LiveSegmentsOf(const std::vector<int>& pids) {
  std::vector<std::string> found;
  for (const std::string& pid : ListDir("/proc")) {
    if (!IsNumber(pid)) continue;
    std::ifstream maps("/proc/" + pid + "/maps");
    std::string line;
    while (std::getline(maps, line)) {
      for (int creator : pids) {
        const std::string marker = "." + std::to_string(creator);
        const std::size_t at = line.find(host::HostBackend::kSegmentNamePrefix);
        if (at == std::string::npos) continue;
        const std::string tail = line.substr(at);
        const std::size_t dot = tail.find('.', host::HostBackend::kSegmentNamePrefix.size());
        if (dot != std::string::npos &&
            tail.compare(dot, marker.size(), marker) == 0 &&
            (dot + marker.size() == tail.size() || tail[dot + marker.size()] == ' ')) {
          found.push_back("pid " + pid + ": " + line);
        }
      }
    }
  }
  return found;
}

std::vector<int> LiveChildrenOf(int parent) {
  std::vector<int> children;
  for (const std::string& pid : ListDir("/proc")) {
    if (!IsNumber(pid)) continue;
    std::ifstream status("/proc/" + pid + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (line.rfind("PPid:", 0) == 0) {
        if (std::atoi(line.c_str() + 5) == parent) children.push_back(std::atoi(pid.c_str()));
        break;
      }
    }
  }
  return children;
}

int OwnSegmentCount() {
  int count = 0;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find(host::HostBackend::kSegmentNamePrefix) != std::string::npos) ++count;
  }
  for (const std::string& fd : ListDir("/proc/self/fd")) {
    char target[512];
    const std::string link = "/proc/self/fd/" + fd;
    const ssize_t length = ::readlink(link.c_str(), target, sizeof target - 1);
    if (length <= 0) continue;
    target[length] = '\0';
    if (std::string(target).find(host::HostBackend::kSegmentNamePrefix) != std::string::npos) {
      ++count;
    }
  }
  return count;
}

}  // namespace hyper_parallel::shmem::testing
