// shmem_bench: the runtime measured from C++, without Python, so it can stand beside OSHMEM.
//
//   shmem_bench --test put|get|pingpong|pingpong_fused|barrier|allgather|memcpy|tcp_pingpong|
//                      put_barrier|fetch_add|compare_swap|put_nbi|put_signal_quiet
//               --pes N --sizes S1,S2,... --reps R --min-time-us T
//               [--bootstrap tcp:ADDRESS:PORT --rank R] [--gap-us G]
//
// The program forks N PEs on the host backend (memcpy runs in this one process: the limit a
// transfer can reach). With --bootstrap and --rank it is one PE of N instead, started by the
// caller on each host (docs/benchmarks.md, "Across hosts"): rank 0 listens at ADDRESS:PORT.
// For every size it warms up, lets PE 0 pick an iteration count so one repetition lasts at
// least T microseconds, shares it with every PE, and records R repetitions of the mean time per
// iteration. memcpy runs --pes threads in this process. PE 0 prints one JSON line per size:
//   {"impl": "hps_native", "test": ..., "pes": N, "bytes": S, "iters": k, "samples_us": [...]}
// Patterns mirror the OSHMEM peer (oshmem_bench.c): put/get from PE 0 to PE 1 on the default
// stream (complete when the call returns), put + signal -> wait_signal ping-pong reported as a
// half round trip (pingpong_fused: the same with the one-call PutSignal), barrier, and
// all_gather with S bytes per PE.
//
// The ping-pongs also time every round trip of the timed repetitions, and each message
// carries its send time (CLOCK_MONOTONIC, which PEs of one kernel share: namespace hosts), so
// they add per-PE statistics (median, mean, p90, p99 in us) of
//   half_rtt_us  a round trip / 2 (PE 0; the median is ucx_perftest's "typical" latency),
//   send_us      the sending call (put + signal, or put_signal): the runtime and UCX's send,
//   one_way_us   from the peer's send to this PE's wait returning: the wire, the target's
//                progress and its wake-up,
// in one more line per PE: {"impl": "hps_native", "test": ..., "rank": r, "bytes": S, ...}.
// --gap-us G: PE 0 pauses G us before each round trip (not timed), so PE 1's wait has gone to
// sleep when the message comes: PE 1's one_way_us then includes its wake-up.
// put_barrier: every PE puts S bytes to the next PE, computes for G us (--gap-us, a busy loop:
// a kernel between its puts and the collective that follows them, as MegaMoE's dispatch), then
// enters a barrier, which first flushes the put; PE 0 adds statistics of its every barrier's
// own time (median, mean, p90, p99) in one more line, {"impl": ..., "barrier_us": ...}.
// fetch_add, compare_swap: PE 0's fetching atomic on a 64-bit word of PE 1, per call (every
// compare-and-swap succeeds); put_nbi: PE 0's put_nbi of S bytes to PE 1, per call, the one
// quiet that ends each repetition included (1 / the message rate); put_signal_quiet: PE 0's
// put_signal of S bytes to PE 1 then a quiet, per pair (completed at the target), as OSHMEM's
// put, fence, add, quiet (docs/benchmarks.md, "Atomics and non-blocking puts").
// tcp_pingpong: the wire's own floor, 8 B over one TCP connection between PE 0 and PE 1 (no
// runtime; busy-polling recv, then blocking recv, as ucx_perftest's poll and sleep modes): one
// line each, test "tcp_pingpong" and "tcp_pingpong_block", with half_rtt_us.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
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
#include "runtime/socket_bootstrap.h"

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
  std::string bootstrap;  // --bootstrap: one PE of a job started on several hosts
  int rank = -1;          // --rank
  // --gap-us: PE 0's pause before each ping-pong round trip; put_barrier: every PE's compute
  std::uint64_t gap_us = 0;
};

[[noreturn]] void Usage(const std::string& problem) {
  std::fprintf(stderr,
               "shmem_bench: %s\nusage: shmem_bench --test put|get|pingpong|pingpong_fused|"
               "barrier|allgather|memcpy|tcp_pingpong|put_barrier|fetch_add|compare_swap|put_nbi|"
               "put_signal_quiet --pes N --sizes S1,S2,... --reps R "
               "--min-time-us T [--bootstrap tcp:ADDRESS:PORT --rank R] [--gap-us G]\n",
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
    } else if (arg == "--bootstrap") {
      options.bootstrap = value;
    } else if (arg == "--gap-us") {
      options.gap_us = ParseCount(value, "--gap-us");
    } else if (arg == "--rank") {
      options.rank = static_cast<int>(ParseCount(value, "--rank"));
    } else if (arg == "--sizes") {
      std::stringstream list(value);
      std::string item;
      while (std::getline(list, item, ',')) options.sizes.push_back(ParseCount(item, "a size"));
    } else {
      Usage("unknown argument " + arg);
    }
  }
  static const std::vector<std::string> kTests = {"put",       "get",    "pingpong",
                                                  "pingpong_fused", "barrier", "allgather",
                                                  "memcpy",    "tcp_pingpong", "put_barrier",
                                                  "fetch_add", "compare_swap", "put_nbi",
                                                  "put_signal_quiet"};
  if (std::find(kTests.begin(), kTests.end(), options.test) == kTests.end()) {
    Usage("--test must be one of the listed patterns, but got \"" + options.test + "\"");
  }
  if (options.pes < 1 || options.pes > 64) Usage("--pes must be in [1, 64]");
  if (options.reps < 1) Usage("--reps must be at least 1");
  if (options.sizes.empty()) Usage("--sizes must list at least one size");
  if (options.bootstrap.empty() != (options.rank < 0)) {
    Usage("--bootstrap and --rank go together");
  }
  if (options.rank >= options.pes) Usage("--rank must be below --pes");
  if (options.gap_us > 1000000) Usage("--gap-us must be at most 1000000");
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

// Median, mean and tails of per-call times (us), as one JSON object.
std::string Stats(std::vector<double> values) {
  if (values.empty()) return "null";
  std::sort(values.begin(), values.end());
  auto at = [&](double q) {
    return values[std::min(values.size() - 1, static_cast<std::size_t>(q * values.size()))];
  };
  double sum = 0;
  for (double value : values) sum += value;
  char text[256];
  std::snprintf(text, sizeof text,
                "{\"median\": %.4f, \"mean\": %.4f, \"p90\": %.4f, \"p99\": %.4f, "
                "\"count\": %zu}",
                at(0.5), sum / static_cast<double>(values.size()), at(0.9), at(0.99),
                values.size());
  return text;
}

double Micros(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::micro>(to - from).count();
}

// The wire's floor between PE 0 and PE 1: one TCP connection, 8 B each way. Rank 0 listens on
// an ephemeral port of every address and shares it through the bootstrap; rank 1 connects to
// the bootstrap's address (127.0.0.1 for a Unix-socket bootstrap).
int RunTcpPingPong(const Options& options, const std::string& name, int rank) {
  std::unique_ptr<shmem::SocketBootstrap> bootstrap;
  Ok(shmem::SocketBootstrap::Create(name, rank, options.pes, std::chrono::seconds(60),
                                    &bootstrap));
  const auto timeout = std::chrono::milliseconds(60000);
  int fd = -1;
  std::vector<std::string> ports;
  if (rank == 0) {
    const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t length = sizeof address;
    if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&address), length) != 0 ||
        ::listen(listener, 1) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
      std::perror("shmem_bench: tcp_pingpong listener");
      return 1;
    }
    Ok(bootstrap->AllGather(std::to_string(ntohs(address.sin_port)), timeout, &ports));
    fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    ::close(listener);
  } else {
    Ok(bootstrap->AllGather("", timeout, &ports));
    std::string host = "127.0.0.1";
    if (name.rfind("tcp:", 0) == 0) host = name.substr(4, name.rfind(':') - 4);
    if (rank == 1) {
      sockaddr_in address{};
      address.sin_family = AF_INET;
      address.sin_port = htons(static_cast<std::uint16_t>(std::stoi(ports[0])));
      ::inet_pton(AF_INET, host.c_str(), &address.sin_addr);
      fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
        std::perror("shmem_bench: tcp_pingpong connect");
        return 1;
      }
    }
  }
  if (rank > 1) {
    Ok(bootstrap->Barrier(timeout));
    return 0;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  std::uint64_t word = 0;
  auto receive = [&](bool poll) {
    std::size_t got = 0;
    while (got < sizeof word) {
      const ssize_t n = ::recv(fd, reinterpret_cast<char*>(&word) + got, sizeof word - got,
                               poll ? MSG_DONTWAIT : 0);
      if (n > 0) got += static_cast<std::size_t>(n);
      if (n == 0) {
        Die(shmem::Status::Assertion(shmem::ErrorCode::kBackendError,
                                     "tcp_pingpong: the peer closed its connection", {}));
      }
    }
  };
  auto send = [&] {
    if (::send(fd, &word, sizeof word, MSG_NOSIGNAL) != sizeof word) {
      Die(shmem::Status::Assertion(shmem::ErrorCode::kBackendError, "tcp_pingpong: send failed",
                                   {}));
    }
  };
  constexpr std::uint64_t kWarmUp = 1000, kIters = 20000;
  for (bool poll : {true, false}) {
    std::vector<double> half;
    half.reserve(kIters);
    for (std::uint64_t i = 0; i < kWarmUp + kIters; ++i) {
      const auto start = Clock::now();
      if (rank == 0) {
        send();
        receive(poll);
        if (i >= kWarmUp) half.push_back(Micros(start, Clock::now()) / 2);
      } else {
        receive(poll);
        send();
      }
    }
    if (rank == 0) {
      std::printf("{\"impl\": \"tcp\", \"test\": \"%s\", \"pes\": %d, \"bytes\": 8, "
                  "\"iters\": %llu, \"half_rtt_us\": %s}\n",
                  poll ? "tcp_pingpong" : "tcp_pingpong_block", options.pes,
                  static_cast<unsigned long long>(kIters), Stats(half).c_str());
      std::fflush(stdout);
    }
  }
  ::close(fd);
  Ok(bootstrap->Barrier(timeout));
  return 0;
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
  std::unique_ptr<shmem::SocketBootstrap> bootstrap;
  Ok(shmem::SocketBootstrap::Create(name, rank, options.pes, 60s, &bootstrap));
  shmem::Runtime& runtime = shmem::Runtime::Process();
  shmem::InitOptions init;
  init.bootstrap = std::move(bootstrap);
  init.collectives = shmem::ops::Collectives();
  Ok(runtime.Init(std::move(init)));
  const int size = options.pes;
  const std::uint64_t largest = *std::max_element(options.sizes.begin(), options.sizes.end());
  const bool gather = options.test == "allgather";
  shmem::Allocation buffer, flag, word, counter;
  Ok(runtime.Allocate(gather ? largest * size : largest, 4096, &buffer));
  Ok(runtime.Allocate(8, 64, &flag));
  Ok(runtime.Allocate(8, 64, &word));
  Ok(runtime.Allocate(8, 64, &counter));
  *static_cast<std::int64_t*>(counter.data) = 0;
  const shmem::SymmetricView counter_view{counter.id, counter.data, 8};
  std::uint64_t swapped = 0;  // compare_swap: what PE 1's word holds now
  std::memset(buffer.data, 0, buffer.bytes);
  *static_cast<std::int64_t*>(flag.data) = 0;
  // No peer may signal the flag before every PE zeroed its own copy (docs/api.md, "Signals").
  Ok(Barrier(runtime));
  std::vector<unsigned char> local(largest + 64, static_cast<unsigned char>(rank + 1));
  const shmem::SymmetricView flag_view{flag.id, flag.data, 8};
  std::int64_t round = 0;  // ping-pong epochs only grow
  // The ping-pongs' per-call record (timed repetitions only; see the file comment).
  bool tracing = false;
  std::vector<double> half_rtt, send_us, one_way;
  Clock::time_point sent_at;
  auto stamp = [&](std::uint64_t bytes) {  // this message's send time travels in its data
    sent_at = Clock::now();
    if (bytes >= sizeof(std::int64_t)) {
      const std::int64_t ns = sent_at.time_since_epoch().count();
      std::memcpy(local.data(), &ns, sizeof ns);
    }
  };
  auto sent = [&] {
    if (tracing) send_us.push_back(Micros(sent_at, Clock::now()));
  };
  auto arrived = [&](std::uint64_t bytes) {  // after the wait: the peer's send time is here
    const auto now = Clock::now();
    if (!tracing || bytes < sizeof(std::int64_t)) return now;
    std::int64_t ns = 0;
    std::memcpy(&ns, buffer.data, sizeof ns);
    one_way.push_back(Micros(Clock::time_point(Clock::duration(ns)), now));
    return now;
  };

  for (std::uint64_t bytes : options.sizes) {
    const shmem::SymmetricView view{buffer.id, buffer.data, gather ? bytes * size : bytes};
    std::function<void()> body;
    std::function<void()> after;  // put_nbi: ends each timed batch (the quiet)
    bool timed_here = rank == 0;
    if (options.test == "fetch_add" || options.test == "compare_swap") {
      const bool add = options.test == "fetch_add";
      body = [&, add] {
        if (rank != 0) return;
        std::uint64_t old = 0;
        Ok(runtime.Atomic(counter_view, 8, add ? shmem::AtomicOp::kAdd
                                               : shmem::AtomicOp::kCompareSwap,
                          add ? 1 : swapped + 1, swapped, 1 % size, &old, {}));
        if (add) return;
        if (old != swapped) {  // only PE 0 writes the word: every swap must succeed
          Die(shmem::Status::Assertion(shmem::ErrorCode::kBackendError,
                                       "compare_swap: the word moved under the benchmark", {}));
        }
        ++swapped;
      };
    } else if (options.test == "put_nbi") {
      body = [&] { if (rank == 0) Ok(runtime.PutNbi(view, local.data(), 1 % size, {})); };
      after = [&] { if (rank == 0) Ok(runtime.Quiet({})); };
    } else if (options.test == "put_signal_quiet") {
      body = [&] {
        if (rank != 0) return;
        Ok(runtime.PutSignal(view, local.data(), flag_view, shmem::SignalWidth::k64, 1, 1 % size,
                             shmem::SignalOp::kAdd, {}));
        Ok(runtime.Quiet({}));
      };
    } else if (options.test == "put") {
      body = [&] { if (rank == 0) Ok(runtime.Put(view, local.data(), 1 % size, {})); };
    } else if (options.test == "get") {
      body = [&] { if (rank == 0) Ok(runtime.Get(local.data(), view, 1 % size, {})); };
    } else if (options.test == "pingpong" || options.test == "pingpong_fused") {
      const bool fused = options.test == "pingpong_fused";
      auto send = [&, fused](int to) {
        stamp(bytes);
        if (fused) {
          Ok(runtime.PutSignal(view, local.data(), flag_view, shmem::SignalWidth::k64, round, to,
                               shmem::SignalOp::kSet, {}));
        } else {
          Ok(runtime.Put(view, local.data(), to, {}));
          Ok(runtime.Signal(flag_view, shmem::SignalWidth::k64, round, to,
                            shmem::SignalOp::kSet, {}));
        }
        sent();
      };
      auto wait = [&] {
        Ok(runtime.WaitSignal(flag_view, shmem::SignalWidth::k64, round,
                              shmem::Comparison::kGe, {}));
        return arrived(bytes);
      };
      body = [&, send, wait] {
        ++round;
        if (rank == 0) {
          if (options.gap_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(options.gap_us));
          send(1 % size);
          const auto start = sent_at;
          const auto end = wait();
          if (tracing) half_rtt.push_back(Micros(start, end) / 2);
        } else if (rank == 1) {
          wait();
          send(0);
        }
      };
    } else if (options.test == "barrier") {
      body = [&] { Ok(Barrier(runtime)); };
    } else if (options.test == "put_barrier") {
      body = [&] {
        Ok(runtime.Put(view, local.data(), (rank + 1) % size, {}));
        const auto computed = std::chrono::steady_clock::now() +
                              std::chrono::microseconds(options.gap_us);
        while (std::chrono::steady_clock::now() < computed) {
        }
        const auto start = Clock::now();
        Ok(Barrier(runtime));
        if (tracing) half_rtt.push_back(Micros(start, Clock::now()));
      };
    } else {
      const shmem::data_plane::Collective* all_gather = shmem::ops::FindCollective("all_gather");
      body = [&, all_gather] {
        Ok(runtime.RunCollective(*all_gather, {view, local.data(), bytes}, {}));
      };
    }
    // Warm-up on every PE (the collective patterns need all of them).
    for (int i = 0; i < 3; ++i) body();
    std::uint64_t iters = 0;
    const bool one_sided = options.test == "put" || options.test == "get" ||
                           options.test == "fetch_add" || options.test == "compare_swap" ||
                           options.test == "put_nbi" || options.test == "put_signal_quiet";
    if (one_sided) {
      iters = rank == 0 ? PickIterations(body, options.min_time_us) : 1;
      if (after) after();
    } else {
      // Collective patterns: PE 0 picks from a warm-up estimate that every PE runs in step.
      const double one = MicrosPerIteration(body, 4);
      iters = static_cast<std::uint64_t>(std::clamp(options.min_time_us / std::max(one, 0.01),
                                                    4.0, double(1u << 20)));
    }
    iters = ShareIterations(runtime, word, rank, iters);
    std::vector<double> samples, baseline;
    std::vector<unsigned char> copy_target(one_sided && rank == 0 ? bytes + 64 : 0, 3);
    auto local_copy = [&] {
      std::memcpy(copy_target.data(), local.data(), bytes);
      asm volatile("" ::: "memory");
    };
    const bool pingpong = options.test.rfind("pingpong", 0) == 0;
    const bool put_barrier = options.test == "put_barrier";
    half_rtt.clear();
    send_us.clear();
    one_way.clear();
    for (int rep = 0; rep < options.reps; ++rep) {
      Ok(Barrier(runtime));
      tracing = pingpong || put_barrier;
      const auto started = Clock::now();
      double micros = MicrosPerIteration(body, iters);
      if (after) {
        after();
        micros = Micros(started, Clock::now()) / static_cast<double>(iters);
      }
      tracing = false;
      samples.push_back(pingpong ? micros / 2 : micros);
      if ((options.test == "put" || options.test == "get") && rank == 0) {
        baseline.push_back(MicrosPerIteration(local_copy, iters));
      }
    }
    Ok(Barrier(runtime));
    if (timed_here) Report(options, bytes, iters, samples, baseline);
    if (put_barrier && rank == 0) {
      std::printf("{\"impl\": \"hps_native\", \"test\": \"put_barrier\", \"bytes\": %llu, "
                  "\"gap_us\": %llu, \"barrier_us\": %s}\n",
                  static_cast<unsigned long long>(bytes),
                  static_cast<unsigned long long>(options.gap_us), Stats(half_rtt).c_str());
      std::fflush(stdout);
    }
    if (pingpong && rank < 2) {
      std::printf("{\"impl\": \"hps_native\", \"test\": \"%s\", \"rank\": %d, \"bytes\": "
                  "%llu, \"half_rtt_us\": %s, \"send_us\": %s, \"one_way_us\": %s}\n",
                  options.test.c_str(), rank, static_cast<unsigned long long>(bytes),
                  Stats(half_rtt).c_str(), Stats(send_us).c_str(), Stats(one_way).c_str());
      std::fflush(stdout);
    }
  }
  for (const shmem::Allocation* a : {&counter, &word, &flag, &buffer}) {
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
  if (options.test.find("pingpong") != std::string::npos && options.pes < 2) {
    Usage("pingpong needs --pes 2 or more");
  }
  auto run_pe = [&options](const std::string& name, int rank) {
    return options.test == "tcp_pingpong" ? RunTcpPingPong(options, name, rank)
                                          : RunRuntimePe(options, name, rank);
  };
  if (options.rank >= 0) return run_pe(options.bootstrap, options.rank);
  const std::string name = shmem::SocketBootstrap::UniqueName();
  std::vector<pid_t> children;
  std::fflush(stdout);
  for (int rank = 0; rank < options.pes; ++rank) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::_exit(run_pe(name, rank));
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
