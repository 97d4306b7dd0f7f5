// hyper_parallel_shmem_demo: N PEs on the host backend, launched as processes by this program.
//
// Each PE allocates a symmetric inbox and a signal word, puts a message into the next PE's
// inbox, raises that PE's signal (data before signal), waits for its own, gets a word back from
// the previous PE, and prints what it received and its heap diagnostics.
//
//   hyper_parallel_shmem_demo [--pes N]      (default 4, at most 64)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ops/collectives.h"
#include "runtime/runtime.h"
#include "runtime/socket_bootstrap.h"

namespace shmem = hyper_parallel::shmem;

namespace {

// The build's barrier (ops/collectives.h) on the calling thread's default stream.
shmem::Status Barrier(shmem::Runtime& runtime) {
  return runtime.RunCollective(*shmem::ops::FindCollective("barrier"), {}, {});
}

int Fail(int rank, const shmem::Status& status) {
  std::fprintf(stderr, "[pe %d] %s\n", rank, status.ToString().c_str());
  return 1;
}

int RunPe(const std::string& name, int rank, int size) {
  using namespace std::chrono_literals;
  std::unique_ptr<shmem::SocketBootstrap> bootstrap;
  if (auto s = shmem::SocketBootstrap::Create(name, rank, size, 60s, &bootstrap); !s.ok()) {
    return Fail(rank, s);
  }
  shmem::Runtime& runtime = shmem::Runtime::Process();
  shmem::InitOptions options;
  options.bootstrap = std::move(bootstrap);
  options.collectives = shmem::ops::Collectives();
  if (auto s = runtime.Init(std::move(options)); !s.ok()) return Fail(rank, s);

  constexpr std::uint64_t kMessage = 64;
  shmem::Allocation inbox, flag;
  if (auto s = runtime.Allocate(kMessage, 64, &inbox); !s.ok()) return Fail(rank, s);
  if (auto s = runtime.Allocate(8, 8, &flag); !s.ok()) return Fail(rank, s);
  std::memset(inbox.data, 0, kMessage);
  *static_cast<std::int64_t*>(flag.data) = 0;
  if (auto s = Barrier(runtime); !s.ok()) return Fail(rank, s);

  const int next = (rank + 1) % size;
  const int previous = (rank + size - 1) % size;
  char message[kMessage] = {};
  std::snprintf(message, sizeof message, "hello from PE %d to PE %d", rank, next);
  const shmem::SymmetricView inbox_view{inbox.id, inbox.data, kMessage};
  const shmem::SymmetricView flag_view{flag.id, flag.data, 8};
  if (auto s = runtime.Put(inbox_view, message, next, {}); !s.ok()) return Fail(rank, s);
  if (auto s = runtime.Signal(flag_view, shmem::SignalWidth::k64, rank + 1, next,
                              shmem::SignalOp::kSet, {});
      !s.ok()) {
    return Fail(rank, s);
  }
  if (auto s = runtime.WaitSignal(flag_view, shmem::SignalWidth::k64, previous + 1,
                                  shmem::Comparison::kEq, {});
      !s.ok()) {
    return Fail(rank, s);
  }
  // One-sided read: the signal value the previous PE holds (set by its own predecessor), once
  // every PE has received its signal.
  if (auto s = Barrier(runtime); !s.ok()) return Fail(rank, s);
  std::int64_t remote_flag = -1;
  if (auto s = runtime.Get(&remote_flag, flag_view, previous, {}); !s.ok()) return Fail(rank, s);
  if (auto s = Barrier(runtime); !s.ok()) return Fail(rank, s);

  // Print in rank order, one PE at a time.
  for (int turn = 0; turn < size; ++turn) {
    if (turn == rank) {
      const shmem::Diagnostics d = runtime.Snapshot();
      std::printf("[pe %d] received: \"%s\" (signal=%lld)\n", rank,
                  static_cast<const char*>(inbox.data),
                  static_cast<long long>(*static_cast<std::int64_t*>(flag.data)));
      std::printf("[pe %d] get from pe %d: its signal word is %lld\n", rank, previous,
                  static_cast<long long>(remote_flag));
      std::printf("[pe %d] heap: base=%s size=%llu allocated=%llu max_allocated=%llu "
                  "remaining=%llu live=%zu leaks=%zu backend=%s device=%s\n",
                  rank, shmem::Hex(d.heap_base).c_str(),
                  static_cast<unsigned long long>(d.heap.heap_bytes),
                  static_cast<unsigned long long>(d.heap.allocated_bytes),
                  static_cast<unsigned long long>(d.heap.max_allocated_bytes),
                  static_cast<unsigned long long>(d.heap.remaining_bytes), d.live.size(),
                  d.leaks.size(), d.backend.c_str(), d.device.c_str());
      for (const shmem::AllocationRecord& record : d.live) {
        std::printf("[pe %d]   allocation id=%llu offset=%s bytes=%llu\n", rank,
                    static_cast<unsigned long long>(record.id), shmem::Hex(record.offset).c_str(),
                    static_cast<unsigned long long>(record.bytes));
      }
      std::fflush(stdout);
    }
    if (auto s = Barrier(runtime); !s.ok()) return Fail(rank, s);
  }

  if (auto s = runtime.Free(flag_view); !s.ok()) return Fail(rank, s);
  if (auto s = runtime.Free(inbox_view); !s.ok()) return Fail(rank, s);
  if (auto s = runtime.Shutdown(); !s.ok()) return Fail(rank, s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int pes = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--pes" || arg == "-n") && i + 1 < argc) {
      // The whole word must be a number in range: "x" or "4x" is named as given.
      const char* text = argv[++i];
      char* end = nullptr;
      errno = 0;
      const long value = std::strtol(text, &end, 10);
      if (end == text || *end != '\0' || errno != 0 || value < 1 || value > 64) {
        std::fprintf(stderr, "--pes must be an integer in [1, 64], but got \"%s\"\n", text);
        return 2;
      }
      pes = static_cast<int>(value);
    } else if (arg == "--help" || arg == "-h") {
      std::printf("usage: %s [--pes N]\n  Runs N PEs (default 4, 1..64) on the host backend.\n",
                  argv[0]);
      return 0;
    } else {
      std::fprintf(stderr, "unknown argument: %s (try --help)\n", arg.c_str());
      return 2;
    }
  }
  const std::string name = shmem::SocketBootstrap::UniqueName();
  std::printf("hyper_parallel_shmem_demo: %d PEs on the host backend\n", pes);
  std::fflush(stdout);
  std::vector<pid_t> children;
  for (int rank = 0; rank < pes; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(RunPe(name, rank, pes));
    children.push_back(pid);
  }
  int failed = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  for (int rank = 0; rank < pes; ++rank) {
    int status = 0;
    while (::waitpid(children[rank], &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        for (pid_t child : children) ::kill(child, SIGKILL);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "PE %d failed (status %d)\n", rank, status);
      ++failed;
    }
  }
  std::printf("%s\n", failed == 0 ? "all PEs finished cleanly" : "some PEs failed");
  return failed == 0 ? 0 : 1;
}
