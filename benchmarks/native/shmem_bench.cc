// shmem_bench: the runtime measured from C++, without Python, so it can stand beside OSHMEM.
//
//   shmem_bench --test put|get|pingpong|pingpong_fused|barrier|allgather|memcpy
//               --pes N --sizes S1,S2,... --reps R --min-time-us T
//
// The program forks N PEs on the host backend (memcpy runs in this one process: the limit a
// transfer can reach). For every size it warms up, lets PE 0 pick an iteration count so one
// repetition lasts at least T microseconds, shares it with every PE, and records R
// repetitions of the mean time per iteration. memcpy runs --pes threads in this process. PE 0
// prints one JSON line per size:
//   {"impl": "hps_native", "test": ..., "pes": N, "bytes": S, "iters": k, "samples_us": [...]}
// Patterns mirror the OSHMEM peer (oshmem_bench.c): put/get from PE 0 to PE 1 on the default
// stream (complete when the call returns), put + signal -> wait_signal ping-pong reported as a
// half round trip (pingpong_fused: the same with the one-call PutSignal), barrier, and
// all_gather with S bytes per PE.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "ops/collectives.h"
#include "runtime/runtime.h"
#include "runtime/unix_socket_bootstrap.h"

namespace shmem = hyper_parallel::shmem;
using Clock = std::chrono::steady_clock;

namespace {

// The build's barrier (ops/collectives.h) on the calling thread's default stream.
shmem::Status Barrier(shmem::Runtime& runtime) {
  return runtime.RunCollective(*shmem::ops::FindCollective("barrier"), {}, {});
}

struct Options {
  std::string test;
  int pes = 2;
  std::vector<std::uint64_t> sizes;
  int reps = 5;
  double min_time_us = 20000;
};

[[noreturn]] void Usage(const std::string& problem) {
  std::fprintf(stderr,
               "shmem_bench: %s\nusage: shmem_bench --test put|get|pingpong|pingpong_fused|"
               "barrier|allgather|memcpy --pes N --sizes S1,S2,... --reps R "
               "--min-time-us T\n",
               problem.c_str());
  std::exit(2);
}

std::uint64_t ParseCount(const std::string& text, const char* what) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) {
    Usage(std::string(what) + " must be a non-negative integer, but got \"" + text + "\"");
  }
  return std::stoull(text);
}

Options Parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (i + 1 >= argc) Usage("missing value after " + arg);
    const std::string value = argv[++i];
    if (arg == "--test") {
      options.test = value;
    } else if (arg == "--pes") {
      options.pes = static_cast<int>(ParseCount(value, "--pes"));
    } else if (arg == "--reps") {
      options.reps = static_cast<int>(ParseCount(value, "--reps"));
    } else if (arg == "--min-time-us") {
      options.min_time_us = static_cast<double>(ParseCount(value, "--min-time-us"));
    } else if (arg == "--sizes") {
      std::stringstream list(value);
      std::string item;
      while (std::getline(list, item, ',')) options.sizes.push_back(ParseCount(item, "a size"));
    } else {
      Usage("unknown argument " + arg);
    }
  }
  static const std::vector<std::string> kTests = {"put", "get", "pingpong", "pingpong_fused",
                                                  "barrier", "allgather", "memcpy"};
  if (std::find(kTests.begin(), kTests.end(), options.test) == kTests.end()) {
    Usage("--test must be one of the listed patterns, but got \"" + options.test + "\"");
  }
  if (options.pes < 1 || options.pes > 64) Usage("--pes must be in [1, 64]");
  if (options.reps < 1) Usage("--reps must be at least 1");
  if (options.sizes.empty()) Usage("--sizes must list at least one size");
  return options;
}

void Die(const shmem::Status& status) {
  std::fprintf(stderr, "shmem_bench: %s\n", status.ToString().c_str());
  std::fflush(stderr);
  ::_exit(1);
}

void Ok(const shmem::Status& status) {
  if (!status.ok()) Die(status);
}

double MicrosPerIteration(const std::function<void()>& body, std::uint64_t iters) {
  const auto start = Clock::now();
  for (std::uint64_t i = 0; i < iters; ++i) body();
  const std::chrono::duration<double, std::micro> elapsed = Clock::now() - start;
  return elapsed.count() / static_cast<double>(iters);
}

// PE 0 doubles a trial count until one batch lasts min_time_us.
std::uint64_t PickIterations(const std::function<void()>& body, double min_time_us) {
  std::uint64_t iters = 1;
  while (iters < (1u << 20) && MicrosPerIteration(body, iters) * iters < min_time_us) iters *= 2;
  return iters;
}

void Report(const Options& options, std::uint64_t bytes, std::uint64_t iters,
            const std::vector<double>& samples, const std::vector<double>& baseline = {}) {
  std::printf("{\"impl\": \"%s\", \"test\": \"%s\", \"pes\": %d, \"bytes\": %llu, "
              "\"iters\": %llu, \"samples_us\": [",
              options.test == "memcpy" ? "memcpy" : "hps_native", options.test.c_str(),
              options.pes, static_cast<unsigned long long>(bytes),
              static_cast<unsigned long long>(iters));
  for (std::size_t i = 0; i < samples.size(); ++i) {
    std::printf("%s%.4f", i ? ", " : "", samples[i]);
  }
  std::printf("]");
  if (!baseline.empty()) {
    // A local memcpy of the same size, measured between the repetitions: the same noise.
    std::printf(", \"memcpy_us\": [");
    for (std::size_t i = 0; i < baseline.size(); ++i) {
      std::printf("%s%.4f", i ? ", " : "", baseline[i]);
    }
    std::printf("]");
  }
  std::printf("}\n");
  std::fflush(stdout);
}

// The limit a transfer can reach: --pes N threads each copying S bytes between their own
// buffers at the same time (N = 1: one local memcpy). With N = the cores the PEs share, the
// per-call time says how much memory bandwidth the cores have together, which need not be N
// times one core's (all_gather's bound, see run.py).
void RunMemcpy(const Options& options) {
  const std::uint64_t largest = *std::max_element(options.sizes.begin(), options.sizes.end());
  const int threads = options.pes;
  std::vector<std::vector<unsigned char>> sources(threads), destinations(threads);
  for (int t = 0; t < threads; ++t) {
    sources[t].assign(largest + 64, 1);
    destinations[t].assign(largest + 64, 2);
  }
  for (std::uint64_t bytes : options.sizes) {
    // One repetition: every thread copies `iters` times; the slowest thread's mean per copy.
    auto repetition = [&](std::uint64_t iters) {
      std::vector<double> micros(threads);
      std::vector<std::thread> workers;
      for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&, t] {
          micros[t] = MicrosPerIteration(
              [&] {
                std::memcpy(destinations[t].data(), sources[t].data(), bytes);
                asm volatile("" ::: "memory");  // keep every copy
              },
              iters);
        });
      }
      for (std::thread& worker : workers) worker.join();
      return *std::max_element(micros.begin(), micros.end());
    };
    repetition(3);
    std::uint64_t iters = 1;
    while (iters < (1u << 20) && repetition(iters) * iters < options.min_time_us) iters *= 2;
    std::vector<double> samples;
    for (int rep = 0; rep < options.reps; ++rep) samples.push_back(repetition(iters));
    Report(options, bytes, iters, samples);
  }
}

// The iteration count PE 0 picked, shared through PE 0's symmetric word and a barrier.
std::uint64_t ShareIterations(shmem::Runtime& runtime, const shmem::Allocation& word, int rank,
                              std::uint64_t mine) {
  const shmem::SymmetricView view{word.id, word.data, 8};
  Ok(Barrier(runtime));
  if (rank == 0) *static_cast<std::uint64_t*>(word.data) = mine;
  Ok(Barrier(runtime));
  std::uint64_t shared = 0;
  Ok(runtime.Get(&shared, view, 0, {}));
  Ok(Barrier(runtime));
  return shared;
}

int RunRuntimePe(const Options& options, const std::string& name, int rank) {
  using namespace std::chrono_literals;
  std::unique_ptr<shmem::UnixSocketBootstrap> bootstrap;
  Ok(shmem::UnixSocketBootstrap::Create(name, rank, options.pes, 60s, &bootstrap));
  shmem::Runtime& runtime = shmem::Runtime::Process();
  shmem::InitOptions init;
  init.bootstrap = std::move(bootstrap);
  Ok(runtime.Init(std::move(init)));
  const int size = options.pes;
  const std::uint64_t largest = *std::max_element(options.sizes.begin(), options.sizes.end());
  const bool gather = options.test == "allgather";
  shmem::Allocation buffer, flag, word;
  Ok(runtime.Allocate(gather ? largest * size : largest, 4096, &buffer));
  Ok(runtime.Allocate(8, 64, &flag));
  Ok(runtime.Allocate(8, 64, &word));
  std::memset(buffer.data, 0, buffer.bytes);
  *static_cast<std::int64_t*>(flag.data) = 0;
  // No peer may signal the flag before every PE zeroed its own copy (docs/api.md, "Signals").
  Ok(Barrier(runtime));
  std::vector<unsigned char> local(largest + 64, static_cast<unsigned char>(rank + 1));
  const shmem::SymmetricView flag_view{flag.id, flag.data, 8};
  std::int64_t round = 0;  // ping-pong epochs only grow

  for (std::uint64_t bytes : options.sizes) {
    const shmem::SymmetricView view{buffer.id, buffer.data, gather ? bytes * size : bytes};
    std::function<void()> body;
    bool timed_here = rank == 0;
    if (options.test == "put") {
      body = [&] { if (rank == 0) Ok(runtime.Put(view, local.data(), 1 % size, {})); };
    } else if (options.test == "get") {
      body = [&] { if (rank == 0) Ok(runtime.Get(local.data(), view, 1 % size, {})); };
    } else if (options.test == "pingpong") {
      body = [&] {
        ++round;
        if (rank == 0) {
          Ok(runtime.Put(view, local.data(), 1 % size, {}));
          Ok(runtime.Signal(flag_view, shmem::SignalWidth::k64, round, 1 % size,
                            shmem::SignalOp::kSet, {}));
          Ok(runtime.WaitSignal(flag_view, shmem::SignalWidth::k64, round,
                                shmem::Comparison::kGe, {}));
        } else if (rank == 1) {
          Ok(runtime.WaitSignal(flag_view, shmem::SignalWidth::k64, round,
                                shmem::Comparison::kGe, {}));
          Ok(runtime.Put(view, local.data(), 0, {}));
          Ok(runtime.Signal(flag_view, shmem::SignalWidth::k64, round, 0,
                            shmem::SignalOp::kSet, {}));
        }
      };
    } else if (options.test == "pingpong_fused") {
      body = [&] {
        ++round;
        if (rank == 0) {
          Ok(runtime.PutSignal(view, local.data(), flag_view, shmem::SignalWidth::k64, round,
                               1 % size, shmem::SignalOp::kSet, {}));
          Ok(runtime.WaitSignal(flag_view, shmem::SignalWidth::k64, round,
                                shmem::Comparison::kGe, {}));
        } else if (rank == 1) {
          Ok(runtime.WaitSignal(flag_view, shmem::SignalWidth::k64, round,
                                shmem::Comparison::kGe, {}));
          Ok(runtime.PutSignal(view, local.data(), flag_view, shmem::SignalWidth::k64, round, 0,
                               shmem::SignalOp::kSet, {}));
        }
      };
    } else if (options.test == "barrier") {
      body = [&] { Ok(Barrier(runtime)); };
    } else {
      const shmem::data_plane::Collective* all_gather = shmem::ops::FindCollective("all_gather");
      body = [&, all_gather] {
        Ok(runtime.RunCollective(*all_gather, {view, local.data(), bytes}, {}));
      };
    }
    // Warm-up on every PE (the collective patterns need all of them).
    for (int i = 0; i < 3; ++i) body();
    std::uint64_t iters = 0;
    if (options.test == "put" || options.test == "get") {
      iters = rank == 0 ? PickIterations(body, options.min_time_us) : 1;
    } else {
      // Collective patterns: PE 0 picks from a warm-up estimate that every PE runs in step.
      const double one = MicrosPerIteration(body, 4);
      iters = static_cast<std::uint64_t>(std::clamp(options.min_time_us / std::max(one, 0.01),
                                                    4.0, double(1u << 20)));
    }
    iters = ShareIterations(runtime, word, rank, iters);
    const bool one_sided = options.test == "put" || options.test == "get";
    std::vector<double> samples, baseline;
    std::vector<unsigned char> copy_target(one_sided && rank == 0 ? bytes + 64 : 0, 3);
    auto local_copy = [&] {
      std::memcpy(copy_target.data(), local.data(), bytes);
      asm volatile("" ::: "memory");
    };
    for (int rep = 0; rep < options.reps; ++rep) {
      Ok(Barrier(runtime));
      const double micros = MicrosPerIteration(body, iters);
      samples.push_back(options.test.rfind("pingpong", 0) == 0 ? micros / 2 : micros);
      if (one_sided && rank == 0) baseline.push_back(MicrosPerIteration(local_copy, iters));
    }
    Ok(Barrier(runtime));
    if (timed_here) Report(options, bytes, iters, samples, baseline);
  }
  for (const shmem::Allocation* a : {&word, &flag, &buffer}) {
    Ok(runtime.Free(shmem::SymmetricView{a->id, a->data, a->bytes}));
  }
  Ok(runtime.Shutdown());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = Parse(argc, argv);
  if (options.test == "memcpy") {
    RunMemcpy(options);
    return 0;
  }
  if (options.test.rfind("pingpong", 0) == 0 && options.pes < 2) {
    Usage("pingpong needs --pes 2 or more");
  }
  const std::string name = shmem::UnixSocketBootstrap::UniqueName();
  std::vector<pid_t> children;
  std::fflush(stdout);
  for (int rank = 0; rank < options.pes; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::_exit(RunRuntimePe(options, name, rank));
    }
    children.push_back(pid);
  }
  int failed = 0;
  for (pid_t child : children) {
    int status = 0;
    ::waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failed;
  }
  if (failed > 0) {
    std::fprintf(stderr, "shmem_bench: %d PE(s) failed\n", failed);
    return 1;
  }
  return 0;
}
