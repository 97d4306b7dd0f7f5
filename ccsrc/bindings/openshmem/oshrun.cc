// hps-oshrun: starts the PEs of an OpenSHMEM program on this machine (docs/openshmem.md).
//
//   hps-oshrun -np N [--] program [args...]
//
// Each PE is a child process with HYPER_PARALLEL_SHMEM_RANK, _WORLD_SIZE and _BOOTSTRAP_NAME
// set (shmem_init finds the others through them). The exit status is the PEs': 0 when every PE
// exits 0, otherwise the first non-zero one (a PE killed by signal S counts as 128 + S), so a
// test's skip code 77 passes through. When a PE fails or calls shmem_global_exit, the others
// are stopped (SIGTERM, then SIGKILL after a grace period); SIGINT and SIGTERM sent to the
// launcher are forwarded to every PE. It returns only once every PE has been reaped.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/socket_bootstrap.h"

namespace {

volatile sig_atomic_t forwarded_signal = 0;
void OnSignal(int signal) { forwarded_signal = signal; }

int Usage(const char* message) {
  std::fprintf(stderr,
               "hps-oshrun: %s\nusage: hps-oshrun -np N [--] program [args...]\n"
               "  starts N PEs of an OpenSHMEM program built with hps-oshcc on this machine\n",
               message);
  return 2;
}

constexpr int kGraceMs = 3000;

}  // namespace

int main(int argc, char** argv) {
  int pes = 1;
  int first = 1;
  for (; first < argc; ++first) {
    const std::string arg = argv[first];
    if (arg == "-np" || arg == "-n" || arg == "--np") {
      if (first + 1 >= argc) return Usage("-np needs a number");
      char* end = nullptr;
      const long n = std::strtol(argv[++first], &end, 10);
      if (*end != '\0' || n < 1 || n > hyper_parallel::shmem::SocketBootstrap::kMaxPes) {
        return Usage("-np takes a number of PEs from 1 to 1024");
      }
      pes = static_cast<int>(n);
    } else if (arg == "-h" || arg == "--help") {
      Usage("starts PEs");
      return 0;
    } else if (arg == "--") {
      ++first;
      break;
    } else if (!arg.empty() && arg[0] == '-') {
      return Usage(("unknown option " + arg).c_str());
    } else {
      break;
    }
  }
  if (first >= argc) return Usage("no program given");

  int control[2];
  if (::pipe2(control, O_CLOEXEC) != 0) {
    std::perror("hps-oshrun: pipe");
    return 1;
  }
  struct sigaction action {};
  action.sa_handler = &OnSignal;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGHUP, &action, nullptr);

  const std::string name = hyper_parallel::shmem::SocketBootstrap::UniqueName();
  std::vector<pid_t> children;
  for (int rank = 0; rank < pes; ++rank) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      std::perror("hps-oshrun: fork");
      for (pid_t child : children) ::kill(child, SIGKILL);
      return 1;
    }
    if (pid == 0) {
      ::setenv("HYPER_PARALLEL_SHMEM_BOOTSTRAP_NAME", name.c_str(), 1);
      ::setenv("HYPER_PARALLEL_SHMEM_RANK", std::to_string(rank).c_str(), 1);
      ::setenv("HYPER_PARALLEL_SHMEM_WORLD_SIZE", std::to_string(pes).c_str(), 1);
      // The write end stays open across exec: shmem_global_exit reports its status on it.
      const int fd = ::dup(control[1]);
      ::setenv("HPS_OSHRUN_CONTROL_FD", std::to_string(fd).c_str(), 1);
      ::signal(SIGINT, SIG_DFL);
      ::signal(SIGTERM, SIG_DFL);
      ::signal(SIGHUP, SIG_DFL);
      ::execvp(argv[first], argv + first);
      std::fprintf(stderr, "hps-oshrun: cannot run %s: %s\n", argv[first], std::strerror(errno));
      std::_Exit(127);
    }
    children.push_back(pid);
  }
  ::close(control[1]);

  int status_out = 0;
  bool stopping = false;
  auto stop_started = std::chrono::steady_clock::now();
  bool killed = false;
  std::size_t alive = children.size();
  const auto stop_all = [&](int signal) {
    for (pid_t child : children) {
      if (child > 0) ::kill(child, signal);
    }
  };
  const auto begin_stop = [&] {
    if (stopping) return;
    stopping = true;
    stop_started = std::chrono::steady_clock::now();
    stop_all(SIGTERM);
  };
  while (alive > 0) {
    if (forwarded_signal != 0) {
      const int signal = forwarded_signal;
      forwarded_signal = 0;
      stop_all(signal);
      if (status_out == 0) status_out = 128 + signal;
      stopping = true;
      stop_started = std::chrono::steady_clock::now();
    }
    pollfd fd{control[0], POLLIN, 0};
    if (::poll(&fd, 1, 20) > 0) {
      int code = 0;
      const ssize_t got = ::read(control[0], &code, sizeof(code));
      if (got == static_cast<ssize_t>(sizeof(code))) {
        // shmem_global_exit: its status is the job's, and every other PE stops.
        if (!stopping) status_out = code;
        begin_stop();
      }
    }
    for (pid_t& child : children) {
      if (child <= 0) continue;
      int wstatus = 0;
      const pid_t done = ::waitpid(child, &wstatus, WNOHANG);
      if (done != child) continue;
      child = -1;
      --alive;
      int code = 0;
      if (WIFEXITED(wstatus)) code = WEXITSTATUS(wstatus);
      if (WIFSIGNALED(wstatus)) code = 128 + WTERMSIG(wstatus);
      if (code != 0 && !stopping) {
        status_out = code;
        begin_stop();
      }
    }
    if (stopping && !killed &&
        std::chrono::steady_clock::now() - stop_started > std::chrono::milliseconds(kGraceMs)) {
      stop_all(SIGKILL);
      killed = true;
    }
  }
  return status_out;
}
