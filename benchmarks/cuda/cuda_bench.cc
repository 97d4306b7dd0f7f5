// hps_cuda_bench: the Runtime on the CUDA backend measured natively, with N PEs as forked
// processes sharing GPU 0 (scripts/gpu_check.sh runs it on a GPU machine).
//
//   hps_cuda_bench [--fake] [--pes N] [--put-sizes S1,S2,...] [--gather-sizes S1,...]
//                  [--reps R] [--max-iters K] [--pingpong-iters K]
//
// Every figure is the median (with min and max) of R repetitions [10] after a warm-up. A
// repetition enqueues a batch of operations, synchronises, and divides the host clock's time by
// the batch: a put or memcpy batch moves about 256 MiB in 4 to K operations [--max-iters 200],
// an all_gather batch at most 20 calls, a ping-pong repetition K exchanges [--pingpong-iters
// 50]. N PEs [2].
// PE 0 prints one JSON line per measurement on stdout:
//   {"bench": "cuda_bench", "layer": "real", "pes": 2, "name": "put", "size": 1048576,
//    "value": 812.5, "unit": "GB/s", "ratio": 0.98, "median_us": 1.29, "min_us": 1.27,
//    "max_us": 1.35, "iters": 200, "reps": 10}
// Measurements (sizes in bytes; defaults in brackets):
//   memcpy_d2d       the baseline: CudaApi::MemcpyAsync between two of PE 0's device buffers, on
//                    PE 0's stream S (every size of put and all_gather); ratio null
//   put              Runtime::Put of `size` bytes from PE 0's device buffer to PE 1's heap, on
//                    the same stream S [64 KiB, 1 MiB, 16 MiB, 64 MiB]; ratio: against
//                    memcpy_d2d of the same size
//   pingpong         8-byte put + 64-bit signal (PutSignal) from PE 0 to PE 1, which waits for it
//                    and answers alike; microseconds per half round trip. Every call on the
//                    default stream, complete when it returns
//   pingpong_stream  the same exchange with every call of a repetition enqueued on S up front:
//                    the GPU runs it without the host
//   all_gather       the all_gather collective of `size` bytes per PE from device memory (its
//                    puts one batch of the multi-block copy kernel), every PE, on the default
//                    stream
//                    [1 MiB, 16 MiB]: bus bandwidth size * (N - 1) / time; ratio: against
//                    memcpy_d2d of `size`
// The received data are checked once after each measurement. PEs a measurement does not
// involve wait on a host barrier in shared memory, never on the GPU: a polling kernel of another
// process would take time slices from the one measured. PEs in different processes on one GPU
// (without MPS) are time-sliced, which the ping-pong latencies show.
//
// With --fake the PEs run over the fake CUDA layer (testing/fake_cuda/), so the logic runs on
// any machine; its numbers mean nothing. Without --fake and without a usable device it exits 77
// with a one-line reason. Exit 1: a PE failed (its output goes to stderr); 2: bad usage.
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/multiprocess/cuda_layers.h"

namespace hyper_parallel::shmem::testing {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kExitNoDevice = 77;
constexpr int kExitUsage = 2;
// The CUDA backend keeps a wait's report until the stream it ran on is synchronised by the
// backend (Free or Shutdown): 1024 per PE. The stream ping-pong stays well below.
constexpr int kMaxStreamWaits = 900;
constexpr int kPingPongWarmup = 10;
// A put or memcpy batch moves about this much, within [kMinIters, --max-iters] operations.
constexpr std::uint64_t kBatchBytes = 256ull << 20;
constexpr int kMinIters = 4;
constexpr int kMaxGatherIters = 20;
constexpr std::chrono::seconds kHostBarrierTimeout{120};

struct Options {
  bool fake = false;
  int pes = 2;
  std::vector<std::uint64_t> put_sizes = {64ull << 10, 1ull << 20, 16ull << 20, 64ull << 20};
  std::vector<std::uint64_t> gather_sizes = {1ull << 20, 16ull << 20};
  int reps = 10;
  int max_iters = 200;
  int pingpong_iters = 50;
};

[[noreturn]] void Usage(const std::string& problem) {
  std::fprintf(stderr,
               "hps_cuda_bench: %s\nusage: hps_cuda_bench [--fake] [--pes N] "
               "[--put-sizes S1,S2,...] [--gather-sizes S1,...] [--reps R] [--max-iters K] "
               "[--pingpong-iters K]\n",
               problem.c_str());
  std::exit(kExitUsage);
}

std::uint64_t ParseCount(const std::string& text, const std::string& what) {
  if (text.empty() || text.size() > 15 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    Usage(what + " must be a non-negative integer, but got \"" + text + "\"");
  }
  return std::stoull(text);
}

std::vector<std::uint64_t> ParseSizes(const std::string& text, const std::string& what) {
  std::vector<std::uint64_t> sizes;
  std::stringstream list(text);
  std::string item;
  while (std::getline(list, item, ',')) {
    sizes.push_back(ParseCount(item, what));
    if (sizes.back() == 0) Usage(what + " must be positive, but got 0");
  }
  if (sizes.empty()) Usage(what + " must list at least one size");
  return sizes;
}

std::uint64_t Largest(const std::vector<std::uint64_t>& sizes) {
  return *std::max_element(sizes.begin(), sizes.end());
}

Options Parse(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--fake") {
      options.fake = true;
      continue;
    }
    if (i + 1 >= argc) Usage("missing value after " + arg);
    const std::string value = argv[++i];
    if (arg == "--pes") {
      options.pes = static_cast<int>(ParseCount(value, arg));
    } else if (arg == "--put-sizes") {
      options.put_sizes = ParseSizes(value, arg);
    } else if (arg == "--gather-sizes") {
      options.gather_sizes = ParseSizes(value, arg);
    } else if (arg == "--reps") {
      options.reps = static_cast<int>(ParseCount(value, arg));
    } else if (arg == "--max-iters") {
      options.max_iters = static_cast<int>(ParseCount(value, arg));
    } else if (arg == "--pingpong-iters") {
      options.pingpong_iters = static_cast<int>(ParseCount(value, arg));
    } else {
      Usage("unknown argument " + arg);
    }
  }
  if (options.pes < 2 || options.pes > 64) Usage("--pes must be in [2, 64]");
  if (options.reps < 1 || options.max_iters < 1 || options.pingpong_iters < 1) {
    Usage("--reps, --max-iters and --pingpong-iters must be positive");
  }
  if (kPingPongWarmup + options.reps * options.pingpong_iters > kMaxStreamWaits) {
    Usage("--reps * --pingpong-iters must be at most " +
          std::to_string(kMaxStreamWaits - kPingPongWarmup) +
          " (the CUDA backend's pending stream waits)");
  }
  return options;
}

// A barrier of the PE processes, in shared memory mapped before the fork: an arrival count and
// a generation, lock-free atomics (so they work across processes). Waiters sleep on the host.
class HostBarrier {
 public:
  static HostBarrier* Create(int parties) {
    void* memory = mmap(nullptr, sizeof(HostBarrier), PROT_READ | PROT_WRITE,
                        MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) return nullptr;
    return new (memory) HostBarrier(parties);
  }

  /// Makes every wait, now and later, fail: a PE failed.
  void Abort() { aborted_.store(1, std::memory_order_release); }

  Status Wait(int rank) {
    if (aborted_.load(std::memory_order_acquire) != 0) return Aborted(rank);
    const int generation = generation_.load(std::memory_order_acquire);
    if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == parties_) {
      arrived_.store(0, std::memory_order_relaxed);  // before the release below
      generation_.fetch_add(1, std::memory_order_release);
      return Status::Ok();
    }
    const Clock::time_point deadline = Clock::now() + kHostBarrierTimeout;
    while (generation_.load(std::memory_order_acquire) == generation) {
      if (aborted_.load(std::memory_order_acquire) != 0) return Aborted(rank);
      if (Clock::now() > deadline) {
        return Status::Assertion(ErrorCode::kTimeout, "the benchmark's host barrier timed out",
                                 {{"pe", std::to_string(rank)}});
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    return Status::Ok();
  }

 private:
  explicit HostBarrier(int parties) : parties_(parties) {}
  static Status Aborted(int rank) {
    return Status::Assertion(ErrorCode::kInvalidState, "another PE of the benchmark failed",
                             {{"pe", std::to_string(rank)}});
  }

  static_assert(std::atomic<int>::is_always_lock_free, "shared across processes");
  const int parties_;
  std::atomic<int> arrived_{0};
  std::atomic<int> generation_{0};
  std::atomic<int> aborted_{0};
};

struct Timing {
  double median_us = 0, min_us = 0, max_us = 0;
};

// Median, min and max of per-operation times.
Timing Summarise(std::vector<double> samples_us) {
  std::sort(samples_us.begin(), samples_us.end());
  const std::size_t n = samples_us.size();
  const double median =
      n % 2 == 1 ? samples_us[n / 2] : (samples_us[n / 2 - 1] + samples_us[n / 2]) / 2;
  return Timing{median, samples_us.front(), samples_us.back()};
}

double MicrosecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

// Bytes per microsecond is MB/s; GB/s is a thousandth of that.
double GigabytesPerSecond(double bytes, double microseconds) { return bytes / microseconds / 1e3; }

// JSON has no infinity or NaN: those are null (and fail the ctest's check).
std::string Number(double value) {
  if (!std::isfinite(value)) return "null";
  char text[64];
  std::snprintf(text, sizeof text, "%.6g", value);
  return text;
}

// One measurement's JSON line on stdout (PE 0 only); a ratio < 0 is null.
void Report(const Options& options, const std::string& name, std::uint64_t size, double value,
            const std::string& unit, double ratio, const Timing& timing, int iters) {
  std::printf(
      "{\"bench\": \"cuda_bench\", \"layer\": \"%s\", \"pes\": %d, \"name\": \"%s\", "
      "\"size\": %llu, \"value\": %s, \"unit\": \"%s\", \"ratio\": %s, \"median_us\": %s, "
      "\"min_us\": %s, \"max_us\": %s, \"iters\": %d, \"reps\": %d}\n",
      options.fake ? "fake" : "real", options.pes, name.c_str(),
      static_cast<unsigned long long>(size), Number(value).c_str(), unit.c_str(),
      ratio < 0 ? "null" : Number(ratio).c_str(), Number(timing.median_us).c_str(),
      Number(timing.min_us).c_str(), Number(timing.max_us).c_str(), iters, options.reps);
  std::fflush(stdout);
}

std::uint8_t PutPattern(std::uint64_t i) { return static_cast<std::uint8_t>(i * 7 + 3); }
std::uint8_t GatherPattern(int pe, std::uint64_t i) {
  return static_cast<std::uint8_t>(pe * 31 + i * 13);
}

Status Mismatch(const std::string& what, std::uint64_t at) {
  return Status::Assertion(ErrorCode::kInvalidState, "the benchmark read back wrong data",
                           {{"what", what}, {"byte", std::to_string(at)}});
}

// One PE's whole run: the Runtime over the chosen layer, then every measurement in turn.
class PeBench {
 public:
  PeBench(const Options& options, PeContext& ctx, HostBarrier& barrier)
      : options_(options), ctx_(ctx), barrier_(barrier) {}

  Status Run() {
    const CudaLayer layer = options_.fake ? CudaLayer::kFake : CudaLayer::kReal;
    HPS_RETURN_IF_ERROR(ctx_.InitRuntime(std::chrono::seconds(60), CudaBackendOn(layer, &api_)));
    if (Status status = Measure(); !status.ok()) {
      barrier_.Abort();  // the others stop at their next barrier instead of waiting it out
      return status;     // no collective teardown with PEs that may be elsewhere
    }
    return Close();
  }

 private:
  int rank() const { return ctx_.rank; }

  Status Allocate(std::uint64_t bytes, Allocation* out) {
    HPS_RETURN_IF_ERROR(Rt().Allocate(bytes, 256, out));
    heap_.push_back(*out);
    return Status::Ok();
  }

  Status DeviceBuffer(std::uint64_t bytes, void** out) {
    HPS_RETURN_IF_ERROR(api_->Malloc(bytes, out));
    device_.push_back(*out);
    return Status::Ok();
  }

  // Copies `host` into device memory on S, synchronised.
  Status Upload(void* device, const std::vector<std::uint8_t>& host) {
    HPS_RETURN_IF_ERROR(api_->MemcpyAsync(device, host.data(), host.size(), stream_));
    return api_->StreamSynchronize(stream_);
  }

  int Iters(std::uint64_t size) const {
    const std::uint64_t fit = kBatchBytes / size;
    return static_cast<int>(std::clamp<std::uint64_t>(fit, kMinIters, options_.max_iters));
  }

  Status Measure() {
    HPS_RETURN_IF_ERROR(api_->StreamCreate(&stream_));
    const std::uint64_t max_put = Largest(options_.put_sizes);
    const std::uint64_t max_gather = Largest(options_.gather_sizes);
    // Collective allocations, the same on every PE.
    HPS_RETURN_IF_ERROR(Allocate(max_put, &put_target_));
    HPS_RETURN_IF_ERROR(Allocate(max_gather * ctx_.size, &gathered_));
    HPS_RETURN_IF_ERROR(Allocate(8, &ping_data_));
    HPS_RETURN_IF_ERROR(Allocate(8, &ping_flag_));
    const std::int64_t zero = 0;  // before the first barrier, so before any peer signals it
    HPS_RETURN_IF_ERROR(Rt().Put(View(ping_flag_), &zero, rank(), {}));
    HPS_RETURN_IF_ERROR(PutsAndBaselines(max_put, max_gather));
    HPS_RETURN_IF_ERROR(PingPong(/*on_stream=*/false));
    HPS_RETURN_IF_ERROR(PingPong(/*on_stream=*/true));
    return AllGathers(max_gather);
  }

  // memcpy_d2d for every size, then put; PE 0 measures while the others wait on the host.
  Status PutsAndBaselines(std::uint64_t max_put, std::uint64_t max_gather) {
    std::vector<std::uint64_t> sizes = options_.put_sizes;
    sizes.insert(sizes.end(), options_.gather_sizes.begin(), options_.gather_sizes.end());
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    if (rank() == 0) {
      const std::uint64_t largest = std::max(max_put, max_gather);
      HPS_RETURN_IF_ERROR(DeviceBuffer(largest, &source_));
      HPS_RETURN_IF_ERROR(DeviceBuffer(largest, &copy_target_));
      std::vector<std::uint8_t> pattern(largest);
      for (std::uint64_t i = 0; i < largest; ++i) pattern[i] = PutPattern(i);
      HPS_RETURN_IF_ERROR(Upload(source_, pattern));
      for (const std::uint64_t size : sizes) {
        const int iters = Iters(size);
        const auto copy = [&] { return api_->MemcpyAsync(copy_target_, source_, size, stream_); };
        Timing timing;
        HPS_RETURN_IF_ERROR(TimeOnStream(iters, copy, &timing));
        memcpy_gbps_[size] = GigabytesPerSecond(size, timing.median_us);
        Report(options_, "memcpy_d2d", size, memcpy_gbps_[size], "GB/s", -1, timing, iters);
      }
    }
    for (const std::uint64_t size : options_.put_sizes) {
      if (rank() == 0) {
        const int iters = Iters(size);
        const auto put = [&] {
          return Rt().Put(Sub(put_target_, 0, size), source_, 1, StreamRef{stream_});
        };
        Timing timing;
        HPS_RETURN_IF_ERROR(TimeOnStream(iters, put, &timing));
        const double gbps = GigabytesPerSecond(size, timing.median_us);
        Report(options_, "put", size, gbps, "GB/s", gbps / memcpy_gbps_[size], timing, iters);
      }
      HPS_RETURN_IF_ERROR(barrier_.Wait(rank()));
      if (rank() == 1) {
        std::vector<std::uint8_t> landed(size);
        HPS_RETURN_IF_ERROR(Rt().Get(landed.data(), Sub(put_target_, 0, size), 1, {}));
        for (std::uint64_t i = 0; i < size; ++i) {
          if (landed[i] != PutPattern(i)) return Mismatch("put of " + std::to_string(size), i);
        }
      }
      HPS_RETURN_IF_ERROR(barrier_.Wait(rank()));
    }
    return Status::Ok();
  }

  // Enqueues `iters` operations on S and synchronises, once to warm up and then per rep.
  template <class Operation>
  Status TimeOnStream(int iters, const Operation& operation, Timing* timing) {
    std::vector<double> samples;
    for (int rep = -1; rep < options_.reps; ++rep) {
      const Clock::time_point start = Clock::now();
      for (int i = 0; i < (rep < 0 ? 2 : iters); ++i) HPS_RETURN_IF_ERROR(operation());
      HPS_RETURN_IF_ERROR(api_->StreamSynchronize(stream_));
      if (rep >= 0) samples.push_back(MicrosecondsSince(start) / iters);
    }
    *timing = Summarise(std::move(samples));
    return Status::Ok();
  }

  // PE 0 and PE 1 exchange `count` 8-byte put + signals; signal values grow across every
  // exchange of the run (monotonic), so no flag is ever reset.
  Status Exchange(int count, bool on_stream) {
    const StreamRef stream = on_stream ? StreamRef{stream_} : StreamRef{};
    const int peer = 1 - rank();
    for (int i = 0; i < count; ++i) {
      const std::int64_t value = ++signal_value_;
      if (rank() == 0) {
        HPS_RETURN_IF_ERROR(Rt().PutSignal(View(ping_data_), payload_, View(ping_flag_),
                                           SignalWidth::k64, value, peer, SignalOp::kSet, stream));
        HPS_RETURN_IF_ERROR(
            Rt().WaitSignal(View(ping_flag_), SignalWidth::k64, value, Comparison::kGe, stream));
      } else {
        HPS_RETURN_IF_ERROR(
            Rt().WaitSignal(View(ping_flag_), SignalWidth::k64, value, Comparison::kGe, stream));
        HPS_RETURN_IF_ERROR(Rt().PutSignal(View(ping_data_), payload_, View(ping_flag_),
                                           SignalWidth::k64, value, peer, SignalOp::kSet, stream));
      }
    }
    return on_stream ? api_->StreamSynchronize(stream_) : Status::Ok();
  }

  Status PingPong(bool on_stream) {
    if (rank() <= 1) {
      if (payload_ == nullptr) {
        HPS_RETURN_IF_ERROR(DeviceBuffer(8, &payload_));
        HPS_RETURN_IF_ERROR(Upload(payload_, std::vector<std::uint8_t>(8, 0x5A)));
      }
    }
    HPS_RETURN_IF_ERROR(barrier_.Wait(rank()));
    if (rank() <= 1) {
      std::vector<double> samples;
      for (int rep = -1; rep < options_.reps; ++rep) {
        const int count = rep < 0 ? kPingPongWarmup : options_.pingpong_iters;
        const Clock::time_point start = Clock::now();
        HPS_RETURN_IF_ERROR(Exchange(count, on_stream));
        if (rep >= 0) samples.push_back(MicrosecondsSince(start) / (2.0 * count));
      }
      std::int64_t flag = 0;
      HPS_RETURN_IF_ERROR(Rt().Get(&flag, View(ping_flag_), rank(), {}));
      if (flag != signal_value_) return Mismatch("ping-pong flag " + std::to_string(flag), 0);
      if (rank() == 0) {
        const Timing timing = Summarise(std::move(samples));
        Report(options_, on_stream ? "pingpong_stream" : "pingpong", 8, timing.median_us, "us",
               -1, timing, options_.pingpong_iters);
      }
    }
    return barrier_.Wait(rank());
  }

  Status AllGathers(std::uint64_t max_gather) {
    void* input = nullptr;
    HPS_RETURN_IF_ERROR(DeviceBuffer(max_gather, &input));
    std::vector<std::uint8_t> pattern(max_gather);
    for (std::uint64_t i = 0; i < max_gather; ++i) pattern[i] = GatherPattern(rank(), i);
    HPS_RETURN_IF_ERROR(Upload(input, pattern));
    for (const std::uint64_t size : options_.gather_sizes) {
      const SymmetricView output = Sub(gathered_, 0, size * ctx_.size);
      // Each call also exchanges descriptors: fewer calls than a put batch.
      const int iters = std::min(Iters(size * ctx_.size), kMaxGatherIters);
      std::vector<double> samples;
      for (int rep = -1; rep < options_.reps; ++rep) {
        HPS_RETURN_IF_ERROR(barrier_.Wait(rank()));
        const Clock::time_point start = Clock::now();
        for (int i = 0; i < (rep < 0 ? 2 : iters); ++i) {
          HPS_RETURN_IF_ERROR(AllGather(Rt(), output, input, size, {}));
        }
        if (rep >= 0) samples.push_back(MicrosecondsSince(start) / iters);
      }
      std::vector<std::uint8_t> gathered(size * ctx_.size);
      HPS_RETURN_IF_ERROR(Rt().Get(gathered.data(), output, rank(), {}));
      for (int pe = 0; pe < ctx_.size; ++pe) {
        for (std::uint64_t i = 0; i < size; ++i) {
          if (gathered[pe * size + i] != GatherPattern(pe, i)) {
            return Mismatch("all_gather of " + std::to_string(size) + " from pe " +
                                std::to_string(pe), i);
          }
        }
      }
      if (rank() == 0) {
        const Timing timing = Summarise(std::move(samples));
        const double gbps = GigabytesPerSecond(static_cast<double>(size) * (ctx_.size - 1),
                                               timing.median_us);
        const auto baseline = memcpy_gbps_.find(size);
        Report(options_, "all_gather", size, gbps, "GB/s",
               baseline == memcpy_gbps_.end() ? -1 : gbps / baseline->second, timing, iters);
      }
    }
    return Status::Ok();
  }

  // Frees the heap (which drains S through the backend) before S goes, then shuts down.
  Status Close() {
    Status first;
    const auto keep = [&first](Status status) {
      if (first.ok() && !status.ok()) first = std::move(status);
    };
    if (Rt().state() == RuntimeState::kReady) {
      for (const Allocation& a : heap_) keep(Rt().Free(View(a)));
    }
    if (api_ != nullptr) {
      if (stream_ != nullptr) keep(api_->StreamDestroy(stream_));
      for (void* buffer : device_) keep(api_->Free(buffer));
    }
    keep(Rt().Shutdown());
    return first;
  }

  const Options& options_;
  PeContext& ctx_;
  HostBarrier& barrier_;
  cuda::CudaApi* api_ = nullptr;  // the layer under the backend, alive until Shutdown
  void* stream_ = nullptr;        // S
  std::vector<Allocation> heap_;
  std::vector<void*> device_;     // device buffers outside the heap
  Allocation put_target_, gathered_, ping_data_, ping_flag_;
  void* source_ = nullptr;        // PE 0: the put and memcpy source
  void* copy_target_ = nullptr;   // PE 0: the memcpy destination
  void* payload_ = nullptr;       // PE 0 and 1: the ping-pong's 8 bytes
  std::int64_t signal_value_ = 0;
  std::map<std::uint64_t, double> memcpy_gbps_;  // PE 0: the baseline by size
};

int Main(int argc, char** argv) {
  const Options options = Parse(argc, argv);
  if (!options.fake) {
    const RealCudaProbe& probe = ProbeRealCuda();
    if (probe.unsupported) {
      std::string reason = probe.reason;
      std::replace(reason.begin(), reason.end(), '\n', ' ');
      std::fprintf(stderr, "hps_cuda_bench: no usable CUDA device (use --fake to run over the "
                           "fake CUDA layer): %s\n", reason.c_str());
      return kExitNoDevice;
    }
    if (!probe.usable) {
      std::fprintf(stderr, "hps_cuda_bench: %s\n", probe.reason.c_str());
      return 1;
    }
  }
  HostBarrier* barrier = HostBarrier::Create(options.pes);
  if (barrier == nullptr) {
    std::perror("hps_cuda_bench: mmap of the host barrier");
    return 1;
  }
  const std::uint64_t max_put = Largest(options.put_sizes);
  const std::uint64_t max_gather = Largest(options.gather_sizes);
  // Room for the put target, the all_gather output and the ping-pong words, with slack for
  // the allocator's alignment.
  const std::uint64_t heap = max_put + max_gather * options.pes + (16ull << 20);
  const std::vector<PeOutcome> outcomes =
      RunPes(LaunchPes(options.pes, "30", heap, std::chrono::seconds(600)), [&](PeContext& ctx) {
        const Status status = PeBench(options, ctx, *barrier).Run();
        if (status.ok()) return 0;
        std::fprintf(stderr, "PE %d: %s\n", ctx.rank, status.ToString().c_str());
        return 1;
      });
  const ::testing::AssertionResult passed = AllPesPassed(outcomes);
  if (passed) return 0;
  std::fprintf(stderr, "hps_cuda_bench failed:%s\n", passed.message());
  return 1;
}

}  // namespace
}  // namespace hyper_parallel::shmem::testing

int main(int argc, char** argv) { return hyper_parallel::shmem::testing::Main(argc, argv); }
