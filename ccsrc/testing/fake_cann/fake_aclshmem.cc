// A fake CANN SHMEM + ACL runtime library, for the CANN adapter's tests and a fake NPU device.
//
// Exports the aclshmem/aclshmemx and aclrt C symbols the adapter resolves, with the vendor's ABI
// (declared by hand in backends/cann/vendor_abi.h), records every call, can fail any call on
// demand (fake_control.h), and models the symmetric heap for PEs that are separate processes:
//
//   - get_uniqueid writes a random POSIX shared-memory name into the 136-byte id; every PE of
//     the job maps that one segment: a control header, then one heap of local_mem_size per PE.
//     init_attr waits (bounded by shm_init_timeout) until every PE mapped it, then unlinks the
//     name, so nothing is left in /dev/shm even if a PE dies later;
//   - malloc/align/free are collective like the real ones (a control barrier and a check that
//     every PE asked for the same size) and use a deterministic first-fit allocator, so every
//     PE gets the same offset; aclshmem_ptr(ptr, pe) is pe's heap base plus ptr's offset;
//   - streams come in two modes. Synchronous (the default): each on-stream operation runs when
//     it is enqueued. Asynchronous (hps_fake_set_async_streams(1) or
//     HPS_FAKE_ACL_ASYNC_STREAMS=1; streams created afterwards): the call is recorded and its
//     arguments checked at enqueue, and the work (memmove, atomic, wait, callback) is queued
//     and run in order on the stream's own worker thread, reading its source when it runs, as
//     a device does. Streams are not ordered with each other except through events. Either
//     way a failure (bad address, a wait or barrier that timed out, an injected failure) is
//     recorded on the stream and returned by its next aclrtSynchronizeStream, the way device
//     faults surface on a real stream; in asynchronous mode an enqueue-time failure takes
//     effect in stream order, and the operations that reach the worker after a failure are
//     skipped (logged "skipped ...") until a synchronize reports it, as a faulted device
//     stream stops executing. Unknown non-null streams always run at enqueue; the null
//     (default) stream gets a worker lazily in asynchronous mode;
//   - signal ops are 32-bit atomics on the target PE's word (the ABI types the word int32_t);
//     signal_wait_until spins then sleeps, bounded by the control-operation timeout;
//     barrier_all is a sense-reversing counter in the segment, bounded the same way;
//   - ACL "device memory" is host memory, so CPU code can compute on it: aclrtMalloc blocks
//     and the job's heaps (any PE's part). aclrtMemcpy(Async)/aclrtMemsetAsync fault when
//     the device side of their kind is neither; aclrtFree fills the block with 0xA5 and keeps
//     it in a bounded quarantine, so a use after free reads poison rather than another block;
//   - each thread has its own current device (aclrtSetDevice); a thread that never set one
//     sees the first device set in the process, as ACL's default context does.
//
// Locking: one mutex (State::mutex) guards all state. Nothing blocks while holding it: workers
// execute with it released, and every wait (signal waits, barriers, synchronisation) waits
// outside it or on a condition variable that releases it. Finalize drains the streams and
// waits for running heap accesses before unmapping; reset and unloading stop and join every
// worker. A forked child inherits no workers: fork before creating asynchronous streams. A
// callback that synchronizes its own stream waits until the synchronize times out.
//
// Generations (compile definitions, one .so per variant): HPS_FAKE_ON_STREAM (v1.0+ on-stream
// ops), HPS_FAKE_QUIET (v1.5 quiet), HPS_FAKE_FINALIZE_X (aclshmemx_finalize),
// HPS_FAKE_FINALIZE_INSTANCE_ARG (v1.5.0.rc1's aclshmem_finalize(uint64_t)), HPS_FAKE_ATTR_120
// (reads instance_id), HPS_FAKE_SHMEM_GEN (spells init shmem_init_attr), HPS_FAKE_MALLOC.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backends/cann/vendor_abi.h"
#include "testing/fake_cann/fake_control.h"

#define HPS_FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

using namespace hyper_parallel::shmem::cann;
using namespace hyper_parallel::shmem::cann::fake;

constexpr char kUidMagic[8] = {'H', 'P', 'S', 'F', 'A', 'K', 'E', '1'};
constexpr int kMaxFakePes = 64;
constexpr std::size_t kHeaderBytes = 4096;
constexpr std::size_t kDefaultAlignment = 64;
constexpr std::uint32_t kNoJobTimeoutSeconds = 60;
constexpr std::size_t kAclAlignment = 512;                 // what aclrtMalloc blocks align to
constexpr std::size_t kQuarantineBytes = 64ull << 20;      // freed blocks kept poisoned
constexpr std::size_t kSmallPage = 4096;
constexpr int kDefaultDeviceCount = 8;
// Lives at the start of the shared segment; zero-filled by ftruncate.
struct SharedHeader {
  std::atomic<std::uint64_t> n_pes;
  std::atomic<std::uint64_t> local_mem_size;
  std::atomic<int> arrived;
  std::atomic<int> barrier_count;
  std::atomic<std::uint32_t> barrier_generation;
  std::atomic<std::uint64_t> sizes[kMaxFakePes];
};
static_assert(sizeof(SharedHeader) <= kHeaderBytes);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);

struct Job {
  bool initialized = false;
  int my_pe = 0;
  int n_pes = 0;
  std::uint64_t local_mem_size = 0;
  std::uint32_t control_timeout = 0;
  void* mapping = nullptr;
  std::size_t mapping_bytes = 0;
  SharedHeader* header = nullptr;
  aclshmemx_init_attr_t* attr = nullptr;  // the caller's, as the real library keeps it
  aclshmemx_init_attr_t attr_copy{};
  aclshmemx_uniqueid_t uid_copy{};
  bool reread_done = false;
  std::map<std::uint64_t, std::uint64_t> allocations;  // offset -> bytes
  std::uint64_t epoch = 0;  // which init this is: queued heap work checks it is still mapped
  int device = -1;          // the initialising thread's device: the heap's "device"

  std::byte* Heap(int pe) const {
    return static_cast<std::byte*>(mapping) + kHeaderBytes +
           static_cast<std::uint64_t>(pe) * local_mem_size;
  }
};

struct Injection {
  std::string name;
  int remaining;
  int code;
};

// An operation queued on an asynchronous stream. `code` nonzero: it failed at enqueue (an
// injected failure, an argument checked there) and fails the stream when it is reached.
// `run` executes without the mutex and returns 0 or an aclError; `abort` turns true when the
// stream is being torn down, so that waits end early.
using Exec = std::function<int(const std::atomic<bool>* abort)>;
struct Op {
  std::string name;
  int code = 0;
  Exec run;
};

struct Stream {
  void* handle = nullptr;
  int device = -1;
  bool async = false;
  std::deque<Op> queue;
  bool running = false;
  bool stop = false;                // drain, then the worker exits
  std::atomic<bool> abort{false};   // drop the queue and end waits early (reset, unload)
  std::uint64_t enqueued = 0;
  std::uint64_t completed = 0;
  std::condition_variable work;     // on State::mutex: the worker waits for operations
  std::thread worker;               // async only; moved out and joined by whoever stops it

  int Pending() const { return static_cast<int>(queue.size()) + (running ? 1 : 0); }
};

// A recorded event is complete once its stream completed `sequence` operations (the ones
// enqueued before the record). Never recorded, or recorded on a synchronous stream: complete.
struct Event {
  std::shared_ptr<Stream> stream;
  std::uint64_t sequence = 0;
};

struct Block {
  std::size_t size = 0;
  int device = -1;
  int policy = 0;
};

struct State {
  State();
  ~State();

  std::mutex mutex;
  std::vector<std::string> log;
  std::string log_snapshot;
  std::vector<Injection> injections;
  std::map<void*, int> stream_errors;
  std::map<void*, std::shared_ptr<Stream>> streams;
  std::map<void*, Event> events;
  std::uintptr_t next_stream = 0x5000;
  std::uintptr_t next_event = 0x9000;
  std::string soc = "Ascend910B3";
  bool soc_null = false;
  // Current device: per thread (ThreadDevice, valid while its epoch matches device_epoch),
  // else the first one set in the process, as ACL's default context.
  std::uint64_t device_epoch = 1;
  int default_device = -1;
  int device_count = kDefaultDeviceCount;
  bool async_default = false;       // HPS_FAKE_ACL_ASYNC_STREAMS
  bool async_streams = false;       // streams created now get a worker
  int workers = 0;
  std::condition_variable progress; // on `mutex`: an operation finished, a heap user left
  std::map<std::uintptr_t, Block> blocks;                      // aclrtMalloc: start -> block
  std::deque<std::pair<void*, std::size_t>> quarantine;        // freed, poisoned, held back
  std::size_t quarantine_bytes = 0;
  Job job;
  std::uint64_t next_epoch = 0;
  std::atomic<std::uint64_t> live_epoch{0};  // job.epoch while mapped; read by waits unlocked
  int heap_users = 0;               // queued work touching the heap right now
  std::string uid_name;
};

// Destroyed at dlclose, so an unloaded fake leaves nothing behind.
State& S() {
  static State state;
  return state;
}

// Trivial, so no thread-exit destructor pins the library (the reload tests dlclose it).
struct ThreadDevice {
  std::uint64_t epoch;
  int device;
};
thread_local ThreadDevice t_device{0, -1};

// The calling thread's device (caller holds the mutex).
int CurrentDevice() {
  const State& s = S();
  if (t_device.epoch == s.device_epoch && t_device.device >= 0) return t_device.device;
  return s.default_device;
}

void SetThreadDevice(int device) {
  State& s = S();
  t_device = ThreadDevice{s.device_epoch, device};
  if (s.default_device < 0 && device >= 0) s.default_device = device;
}

std::string Format(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Format(const char* format, ...) {
  char buffer[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  return buffer;
}

// The call log keeps the latest entries only: a fake NPU device runs thousands of ACL calls a
// second, and a test reads a short log right after the calls it checks.
constexpr std::size_t kMaxLogEntries = 1 << 16;

void Append(std::string entry) {
  std::vector<std::string>& log = S().log;
  if (log.size() >= kMaxLogEntries) log.erase(log.begin(), log.begin() + kMaxLogEntries / 2);
  log.push_back(std::move(entry));
}

// Records a call (caller holds the mutex); returns true with *code when a failure is injected.
bool Record(const std::string& entry, int* code) {
  State& s = S();
  const std::string name = entry.substr(0, entry.find(' '));
  for (auto it = s.injections.begin(); it != s.injections.end(); ++it) {
    if (it->name == name && --it->remaining == 0) {
      *code = it->code;
      Append(entry + " injected=" + std::to_string(it->code));
      s.injections.erase(it);
      return true;
    }
  }
  Append(entry);
  return false;
}

void Note(const std::string& entry) { Append(entry); }

using Clock = std::chrono::steady_clock;

// Spins briefly, then sleeps, until `done` or `seconds` pass.
template <typename Predicate>
bool WaitFor(Predicate done, std::uint32_t seconds) {
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  for (int spins = 0; !done(); ++spins) {
    if (spins < 1000) continue;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
  return true;
}
// Sense-reversing barrier over a segment header; false on timeout or once `abandon()` holds.
template <typename Abandon>
bool BarrierWords(SharedHeader* h, int n_pes, std::uint32_t timeout, Abandon abandon) {
  const std::uint32_t generation = h->barrier_generation.load(std::memory_order_acquire);
  if (h->barrier_count.fetch_add(1, std::memory_order_acq_rel) + 1 == n_pes) {
    h->barrier_count.store(0, std::memory_order_relaxed);
    h->barrier_generation.fetch_add(1, std::memory_order_acq_rel);
    return true;
  }
  const bool done = WaitFor(
      [&] {
        return h->barrier_generation.load(std::memory_order_acquire) != generation || abandon();
      },
      timeout);
  return done && h->barrier_generation.load(std::memory_order_acquire) != generation;
}

bool ControlBarrier(const Job& job) {
  return BarrierWords(job.header, job.n_pes, job.control_timeout, [] { return false; });
}

void Unmap(Job& job) {
  if (job.mapping != nullptr) munmap(job.mapping, job.mapping_bytes);
  job = Job();
}

// Stops queued heap work from starting, waits for the running one (a wait sees live_epoch
// change and ends), then unmaps. Caller holds `lock`.
void Teardown(State& s, std::unique_lock<std::mutex>& lock) {
  s.live_epoch.store(0, std::memory_order_release);
  s.progress.wait_for(lock, std::chrono::seconds(kNoJobTimeoutSeconds),
                      [&] { return s.heap_users == 0; });
  Unmap(s.job);
}

// The local heap offset of `ptr`, or false when it lies outside the local heap.
bool LocalOffset(const Job& job, const void* ptr, std::size_t bytes, std::uint64_t* offset) {
  const auto* p = static_cast<const std::byte*>(ptr);
  const std::byte* base = job.Heap(job.my_pe);
  if (p < base || p > base + job.local_mem_size) return false;
  const auto off = static_cast<std::uint64_t>(p - base);
  if (bytes > job.local_mem_size - off) return false;
  *offset = off;
  return true;
}

void* PeerAddress(const Job& job, const void* symmetric, std::size_t bytes, int pe) {
  std::uint64_t offset = 0;
  if (!job.initialized || pe < 0 || pe >= job.n_pes) return nullptr;
  if (!LocalOffset(job, symmetric, bytes, &offset)) return nullptr;
  return job.Heap(pe) + offset;
}

void StreamFail(void* stream, int code) {
  State& s = S();
  if (s.stream_errors.find(stream) == s.stream_errors.end()) s.stream_errors[stream] = code;
}

std::string P(const void* ptr) { return Format("%p", ptr); }

// Note from code that runs without the mutex (stream work).
void NoteLocked(const std::string& entry) {
  std::lock_guard<std::mutex> lock(S().mutex);
  Note(entry);
}

// Where `ptr` lives, for the ACL memory calls (caller holds the mutex).
struct Location {
  bool device = false;
  int id = 0;
  std::size_t page = kSmallPage;
};

// Device memory: inside a live aclrtMalloc block, or inside the job's heaps (any PE's part,
// all of which are this PE's device's memory). [ptr, ptr + bytes) must fit; bytes 0 means the
// pointer itself must lie inside.
bool Locate(const void* ptr, std::size_t bytes, Location* where) {
  const State& s = S();
  const auto p = reinterpret_cast<std::uintptr_t>(ptr);
  auto fits = [&](std::uintptr_t start, std::size_t size) {
    return p >= start && p - start < size && bytes <= size - (p - start);
  };
  auto it = s.blocks.upper_bound(p);
  if (it != s.blocks.begin()) {
    --it;
    if (fits(it->first, it->second.size)) {
      const bool huge = (it->second.policy & 0xFF) % 3 != ACL_MEM_MALLOC_NORMAL_ONLY &&
                        it->second.size > (1u << 20);
      *where = Location{true, it->second.device, huge ? kAclshmemPageSize : kSmallPage};
      return true;
    }
  }
  const Job& job = s.job;
  if (job.initialized) {
    const auto start = reinterpret_cast<std::uintptr_t>(job.Heap(0));
    if (fits(start, job.local_mem_size * static_cast<std::uint64_t>(job.n_pes))) {
      *where = Location{true, job.device, kAclshmemPageSize};
      return true;
    }
  }
  *where = Location{};
  return false;
}

bool IsDevice(const void* ptr, std::size_t bytes) {
  Location where;
  return Locate(ptr, bytes, &where);
}

// Holds the job's heap mapped while queued work touches it: false when the job it was
// enqueued for is gone (finalized, reset).
class HeapUse {
 public:
  explicit HeapUse(std::uint64_t epoch) {
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mutex);
    ok_ = epoch != 0 && s.live_epoch.load(std::memory_order_relaxed) == epoch;
    if (ok_) ++s.heap_users;
  }
  ~HeapUse() {
    if (!ok_) return;
    State& s = S();
    std::lock_guard<std::mutex> lock(s.mutex);
    --s.heap_users;
    s.progress.notify_all();
  }
  HeapUse(const HeapUse&) = delete;
  HeapUse& operator=(const HeapUse&) = delete;
  bool ok() const { return ok_; }

 private:
  bool ok_ = false;
};

// A wait in queued work gives up when its stream is torn down or its job is gone.
bool Abandoned(const std::atomic<bool>* abort, std::uint64_t epoch) {
  return (abort != nullptr && abort->load(std::memory_order_relaxed)) ||
         S().live_epoch.load(std::memory_order_relaxed) != epoch;
}

bool DeviceSideDst(int kind) {
  return kind == ACL_MEMCPY_HOST_TO_DEVICE || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
}
bool DeviceSideSrc(int kind) {
  return kind == ACL_MEMCPY_DEVICE_TO_HOST || kind == ACL_MEMCPY_DEVICE_TO_DEVICE;
}

// Checks the device sides at execution (a block freed after enqueue faults), then runs `body`
// without the mutex, counted as a heap user so a finalize cannot unmap under it. Freed blocks
// sit in the quarantine, so a concurrent aclrtFree cannot release memory under `body` either.
int DeviceAccess(const std::string& what, const void* dst, bool dst_device, const void* src,
                 bool src_device, std::size_t bytes, const std::function<void()>& body) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  if ((dst_device && !IsDevice(dst, bytes)) || (src_device && !IsDevice(src, bytes))) {
    Note("fault " + what);
    return kFakeAclStreamError;
  }
  ++s.heap_users;
  lock.unlock();
  body();
  lock.lock();
  --s.heap_users;
  s.progress.notify_all();
  return 0;
}

void ReleaseBlocks(State& s) {
  for (const auto& [start, block] : s.blocks) std::free(reinterpret_cast<void*>(start));
  s.blocks.clear();
  for (const auto& [ptr, bytes] : s.quarantine) std::free(ptr);
  s.quarantine.clear();
  s.quarantine_bytes = 0;
}

// ---- Streams --------------------------------------------------------------------------------

// An asynchronous stream's worker: runs the queue in order, with the mutex released while an
// operation executes. After a failure the stream skips what reaches it until a synchronize
// reports (and clears) the failure.
void WorkerLoop(Stream* st) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  for (;;) {
    st->work.wait(lock, [&] { return st->stop || !st->queue.empty(); });
    if (st->abort.load(std::memory_order_relaxed) && !st->queue.empty()) {
      st->completed += st->queue.size();  // dropped; waits on this stream end
      st->queue.clear();
      s.progress.notify_all();
    }
    if (st->queue.empty()) {
      if (st->stop) return;
      continue;
    }
    Op op = std::move(st->queue.front());
    st->queue.pop_front();
    st->running = true;
    int code = op.code;
    if (s.stream_errors.find(st->handle) != s.stream_errors.end()) {
      Note("skipped " + op.name);
      code = 0;
    } else if (code == 0 && op.run) {
      lock.unlock();
      code = op.run(&st->abort);
      lock.lock();
    }
    if (code != 0) StreamFail(st->handle, code);
    st->running = false;
    ++st->completed;
    s.progress.notify_all();
  }
}

// A new stream in the current mode, on the calling thread's device (caller holds the mutex).
std::shared_ptr<Stream> NewStream(void* handle) {
  State& s = S();
  auto st = std::make_shared<Stream>();
  st->handle = handle;
  st->device = CurrentDevice();
  st->async = s.async_streams;
  if (st->async) {
    // The worker only touches *st under the mutex, which the caller holds until st is listed.
    st->worker = std::thread(WorkerLoop, st.get());
    ++s.workers;
  }
  s.streams[handle] = st;
  return st;
}

// The stream's worker state when it is asynchronous, else null (synchronous, or unknown and
// not null). The null stream gets a worker at first use in asynchronous mode.
std::shared_ptr<Stream> AsyncStream(void* handle) {
  State& s = S();
  auto it = s.streams.find(handle);
  if (it == s.streams.end()) {
    if (handle != nullptr || !s.async_streams) return nullptr;
    return NewStream(nullptr);
  }
  return it->second->async ? it->second : nullptr;
}

// Queues work on an asynchronous stream, or runs it now (synchronous or unknown stream, the
// mutex released meanwhile). `code` nonzero: the call failed at enqueue; the stream fails with
// it in stream order.
void Submit(std::unique_lock<std::mutex>& lock, void* stream, const std::string& name, int code,
            Exec run) {
  if (std::shared_ptr<Stream> st = AsyncStream(stream)) {
    st->queue.push_back(Op{name, code, std::move(run)});
    ++st->enqueued;
    st->work.notify_one();
    return;
  }
  if (code == 0 && run) {
    lock.unlock();
    code = run(nullptr);
    lock.lock();
  }
  if (code != 0) StreamFail(stream, code);
}

// Joins a stream's worker after it drained (or, with abort, dropped) its queue. Caller holds
// `lock`; it is released while joining.
void JoinWorkers(State& s, std::unique_lock<std::mutex>& lock,
                 const std::vector<std::shared_ptr<Stream>>& streams, bool abort) {
  std::vector<std::thread> threads;
  for (const auto& st : streams) {
    st->stop = true;
    if (abort) st->abort.store(true, std::memory_order_relaxed);
    st->work.notify_all();
    if (st->worker.joinable()) threads.push_back(std::move(st->worker));
  }
  s.progress.notify_all();  // event waits on an aborted stream
  lock.unlock();
  for (std::thread& t : threads) t.join();
  lock.lock();
  s.workers -= static_cast<int>(threads.size());
}

// Stops every stream (reset, unload): queued work is dropped, waits end early.
void StopAllStreams(State& s, std::unique_lock<std::mutex>& lock) {
  std::vector<std::shared_ptr<Stream>> all;
  for (const auto& [handle, st] : s.streams) all.push_back(st);
  s.streams.clear();
  JoinWorkers(s, lock, all, /*abort=*/true);
}

// How long synchronisation waits: the control timeout plus a second, so that queued work
// that timed out at the control timeout surfaces as its own error, not as the synchronize's.
std::uint32_t SyncTimeout() {
  const Job& job = S().job;
  return job.initialized ? job.control_timeout + 1 : kNoJobTimeoutSeconds;
}

// Waits until every asynchronous stream ran its queue; false on timeout. Caller holds `lock`.
bool DrainAll(std::unique_lock<std::mutex>& lock, std::uint32_t seconds) {
  State& s = S();
  return s.progress.wait_for(lock, std::chrono::seconds(seconds), [&] {
    for (const auto& [handle, st] : s.streams) {
      if (st->Pending() != 0) return false;
    }
    return true;
  });
}

bool EventComplete(const Event& event) {
  return event.stream == nullptr || event.stream->completed >= event.sequence ||
         event.stream->abort.load(std::memory_order_relaxed);
}

State::State() {
  const char* async = std::getenv("HPS_FAKE_ACL_ASYNC_STREAMS");
  async_default = async != nullptr && std::strcmp(async, "1") == 0;
  async_streams = async_default;
  if (const char* count = std::getenv("HPS_FAKE_NPU_DEVICES")) {
    const int n = std::atoi(count);
    if (n > 0) device_count = n;
  }
}

// At dlclose: no worker may outlive the code it runs.
State::~State() {
  std::unique_lock<std::mutex> lock(mutex);
  StopAllStreams(*this, lock);
  Unmap(job);
  ReleaseBlocks(*this);
}

// First-fit, deterministic: the same call sequence gives the same offsets on every PE.
bool Allocate(Job& job, std::size_t alignment, std::size_t bytes, std::uint64_t* offset) {
  std::uint64_t cursor = 0;
  for (const auto& [start, size] : job.allocations) {
    const std::uint64_t aligned = (cursor + alignment - 1) / alignment * alignment;
    if (aligned + bytes <= start) {
      *offset = aligned;
      return true;
    }
    cursor = start + size;
  }
  const std::uint64_t aligned = (cursor + alignment - 1) / alignment * alignment;
  if (aligned + bytes > job.local_mem_size) return false;
  *offset = aligned;
  return true;
}

// The real library re-reads the attributes (and the uid behind comm_args) at the first
// allocation: check they are still what init saw.
void RereadAttributes(Job& job) {
  if (job.reread_done) return;
  job.reread_done = true;
  const aclshmemx_init_attr_t& now = *job.attr;
  const bool attr_intact = std::memcmp(&now, &job.attr_copy, sizeof now) == 0;
  const bool uid_intact = now.comm_args == job.attr_copy.comm_args &&
                          std::memcmp(now.comm_args, &job.uid_copy, sizeof job.uid_copy) == 0;
  Note(Format("attr_reread attr_intact=%d uid_intact=%d my_pe=%d n_pes=%d local_mem_size=%llu",
              attr_intact, uid_intact, now.my_pe, now.n_pes,
              static_cast<unsigned long long>(now.local_mem_size)));
}

// Collective allocation: same size everywhere, then the same first-fit offset.
void* CollectiveAllocate(const char* name, std::size_t alignment, std::size_t bytes) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  int code = 0;
  const std::string entry = Format("%s alignment=%zu size=%zu", name, alignment, bytes);
  if (Record(entry, &code)) return nullptr;
  Job& job = s.job;
  if (!job.initialized || bytes == 0) return nullptr;
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) return nullptr;
  RereadAttributes(job);
  job.header->sizes[job.my_pe].store(bytes, std::memory_order_release);
  lock.unlock();
  bool ok = ControlBarrier(job);
  bool same = true;
  for (int pe = 0; ok && pe < job.n_pes; ++pe) {
    same = same && job.header->sizes[pe].load(std::memory_order_acquire) == bytes;
  }
  ok = ok && ControlBarrier(job);
  lock.lock();
  if (!ok) {
    Note(Format("timeout %s", name));
    return nullptr;
  }
  if (!same) {
    Note(Format("size_mismatch %s", name));
    return nullptr;
  }
  std::uint64_t offset = 0;
  if (!Allocate(job, alignment, bytes, &offset)) {
    Note(Format("out_of_heap %s", name));
    return nullptr;
  }
  job.allocations[offset] = bytes;
  Note(Format("result %s offset=%llu", name, static_cast<unsigned long long>(offset)));
  return job.Heap(job.my_pe) + offset;
}

[[maybe_unused]] int InitAttr(const char* name, unsigned int flags, aclshmemx_init_attr_t* attr) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  int code = 0;
  std::string entry = Format("%s flags=%u attr=%p", name, flags, static_cast<void*>(attr));
  if (attr != nullptr) {
    const aclshmem_init_optional_attr_t& o = attr->option_attr;
    entry += Format(
        " my_pe=%d n_pes=%d ip_port=\"%.64s\" local_mem_size=%llu version=%d engine=%d "
        "shm_init_timeout=%u shm_create_timeout=%u control_timeout=%u sockFd=%d comm_args=%p",
        attr->my_pe, attr->n_pes, attr->ip_port,
        static_cast<unsigned long long>(attr->local_mem_size), o.version, o.data_op_engine_type,
        o.shm_init_timeout, o.shm_create_timeout, o.control_operation_timeout, o.sockFd,
        attr->comm_args);
#ifdef HPS_FAKE_ATTR_120
    entry += Format(" instance_id=%llu", static_cast<unsigned long long>(attr->instance_id));
#endif
  }
  if (Record(entry, &code)) return code;
  auto invalid = [&](const char* why) {
    Note(Format("invalid_param %s", why));
    return ACLSHMEM_INVALID_PARAM;
  };
  if (s.job.initialized) return invalid("already initialized");
  if (attr == nullptr) return invalid("attributes null");
  if ((flags & ACLSHMEMX_INIT_WITH_UNIQUEID) == 0) return invalid("only UNIQUEID bootstrap");
  if (attr->n_pes < 1 || attr->n_pes > kAclshmemMaxPes) return invalid("n_pes");
  if (attr->my_pe < 0 || attr->my_pe >= attr->n_pes) return invalid("my_pe");
  if (attr->local_mem_size == 0 || attr->local_mem_size > kAclshmemMaxLocalSize) {
    return invalid("local_mem_size");
  }
  const aclshmem_init_optional_attr_t& o = attr->option_attr;
  if (o.shm_init_timeout == 0 || o.control_operation_timeout == 0) return invalid("timeouts");
  if (o.data_op_engine_type <= 0 || (o.data_op_engine_type & ~0xF) != 0) return invalid("engine");
#ifdef HPS_FAKE_ATTR_120
  if (attr->instance_id != 0 && std::getenv("SHMEM_INSTANCE_PORT_RANGE") == nullptr) {
    return invalid("instance_id without SHMEM_INSTANCE_PORT_RANGE");
  }
#endif
  const auto* uid = static_cast<const aclshmemx_uniqueid_t*>(attr->comm_args);
  if (uid == nullptr) return invalid("comm_args null");
  if (uid->version != kUniqueIdVersion ||
      std::memcmp(uid->internal, kUidMagic, sizeof kUidMagic) != 0) {
    return invalid("unique id");
  }
  if (CurrentDevice() < 0) {
    Note("init_error no device set (aclrtSetDevice first)");
    return ACLSHMEM_INNER_ERROR;
  }
  if (attr->n_pes > kMaxFakePes) return ACLSHMEM_NOT_SUPPORTED;

  const std::string segment(uid->internal + sizeof kUidMagic);
  Job job;
  job.my_pe = attr->my_pe;
  job.n_pes = attr->n_pes;
  job.local_mem_size = attr->local_mem_size;
  job.control_timeout = o.control_operation_timeout;
  job.device = CurrentDevice();
  job.mapping_bytes = kHeaderBytes + job.local_mem_size * static_cast<std::uint64_t>(job.n_pes);
  const int fd = shm_open(segment.c_str(), O_CREAT | O_RDWR, 0600);
  if (fd < 0) return ACLSHMEM_SMEM_ERROR;
  struct stat info {};
  if (fstat(fd, &info) != 0 ||
      (static_cast<std::size_t>(info.st_size) != job.mapping_bytes &&
       ftruncate(fd, static_cast<off_t>(job.mapping_bytes)) != 0)) {
    close(fd);
    shm_unlink(segment.c_str());
    return ACLSHMEM_SMEM_ERROR;
  }
  job.mapping = mmap(nullptr, job.mapping_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (job.mapping == MAP_FAILED) {
    shm_unlink(segment.c_str());
    return ACLSHMEM_SMEM_ERROR;
  }
  job.header = static_cast<SharedHeader*>(job.mapping);
  std::uint64_t expected = 0;
  job.header->n_pes.compare_exchange_strong(expected, static_cast<std::uint64_t>(job.n_pes));
  expected = 0;
  job.header->local_mem_size.compare_exchange_strong(expected, job.local_mem_size);
  if (job.header->n_pes.load() != static_cast<std::uint64_t>(job.n_pes) ||
      job.header->local_mem_size.load() != job.local_mem_size) {
    Note("init_error PEs disagree on n_pes or local_mem_size");
    munmap(job.mapping, job.mapping_bytes);
    return ACLSHMEM_INVALID_PARAM;
  }
  job.header->arrived.fetch_add(1, std::memory_order_acq_rel);
  SharedHeader* header = job.header;
  const int n_pes = job.n_pes;
  lock.unlock();
  const bool everyone = WaitFor(
      [&] { return header->arrived.load(std::memory_order_acquire) >= n_pes; },
      o.shm_init_timeout);
  // Every PE mapped the segment (or the job failed): the name is no longer needed.
  shm_unlink(segment.c_str());
  lock.lock();
  if (!everyone) {
    Note("timeout init waiting for peers");
    munmap(job.mapping, job.mapping_bytes);
    return ACLSHMEM_TIMEOUT_ERROR;
  }
  job.attr = attr;
  job.attr_copy = *attr;
  job.uid_copy = *uid;
  job.initialized = true;
  job.epoch = ++s.next_epoch;
  s.job = std::move(job);
  s.live_epoch.store(s.job.epoch, std::memory_order_release);
  return ACLSHMEM_SUCCESS;
}

int Finalize(const std::string& entry) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record(entry, &code)) return code;
  if (!s.job.initialized) return ACLSHMEM_NOT_INITED;
  // Queued stream work may still touch the heap: let it run first (bounded).
  if (!DrainAll(lock, SyncTimeout())) Note("timeout finalize draining streams");
  Job& job = s.job;
  lock.unlock();
  const bool ok = ControlBarrier(job);
  lock.lock();
  Teardown(s, lock);
  if (!ok) {
    Note("timeout finalize");
    return ACLSHMEM_TIMEOUT_ERROR;
  }
  return ACLSHMEM_SUCCESS;
}

// Records an on-stream call: 0 to go on, else the code its stream fails with (an injected
// failure, no job).
int RecordOnStream(const std::string& entry) {
  int code = 0;
  if (Record(entry, &code)) return code;
  if (!S().job.initialized) return kFakeAclStreamError;
  return 0;
}


[[maybe_unused]] bool Compare(std::int32_t observed, int cmp, std::int32_t value) {
  switch (cmp) {
    case ACLSHMEM_CMP_EQ: return observed == value;
    case ACLSHMEM_CMP_NE: return observed != value;
    case ACLSHMEM_CMP_GT: return observed > value;
    case ACLSHMEM_CMP_GE: return observed >= value;
    case ACLSHMEM_CMP_LT: return observed < value;
    case ACLSHMEM_CMP_LE: return observed <= value;
    default: return false;
  }
}

}  // namespace

// ---- Control API ---------------------------------------------------------------------------

HPS_FAKE_EXPORT const char* hps_fake_calls() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.log_snapshot.clear();
  for (const std::string& line : s.log) s.log_snapshot.append(line).append("\n");
  return s.log_snapshot.c_str();
}

HPS_FAKE_EXPORT void hps_fake_reset() {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  StopAllStreams(s, lock);  // first: dying workers may still log
  s.log.clear();
  s.injections.clear();
  s.stream_errors.clear();
  s.events.clear();
  s.soc = "Ascend910B3";
  s.soc_null = false;
  ++s.device_epoch;  // every thread's device is forgotten
  s.default_device = -1;
  s.async_streams = s.async_default;
  Teardown(s, lock);
  ReleaseBlocks(s);
}

HPS_FAKE_EXPORT void hps_fake_fail_at(const char* name, int nth, int code) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.injections.push_back(Injection{name, nth < 1 ? 1 : nth, code});
}

HPS_FAKE_EXPORT void hps_fake_set_soc(const char* name) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.soc_null = name == nullptr;
  s.soc = name != nullptr ? name : "";
}

HPS_FAKE_EXPORT void hps_fake_set_device(int device) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  SetThreadDevice(device);
}

HPS_FAKE_EXPORT const char* hps_fake_generation() { return HPS_FAKE_GENERATION; }

HPS_FAKE_EXPORT const char* hps_fake_uid_segment(const void* uid_bytes) {
  const auto* uid = static_cast<const aclshmemx_uniqueid_t*>(uid_bytes);
  if (uid == nullptr || std::memcmp(uid->internal, kUidMagic, sizeof kUidMagic) != 0) {
    return nullptr;
  }
  return uid->internal + sizeof kUidMagic;
}

HPS_FAKE_EXPORT void hps_fake_set_async_streams(int on) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.async_streams = on != 0;
}

HPS_FAKE_EXPORT int hps_fake_async_streams() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.async_streams ? 1 : 0;
}

HPS_FAKE_EXPORT int hps_fake_pending(void* stream) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.streams.find(stream);
  if (it == s.streams.end()) return stream == nullptr ? 0 : -1;
  return it->second->Pending();
}

HPS_FAKE_EXPORT int hps_fake_stream_device(void* stream) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  auto it = s.streams.find(stream);
  return it == s.streams.end() ? -1 : it->second->device;
}

HPS_FAKE_EXPORT int hps_fake_workers() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.workers;
}

// ---- ACL runtime: devices and streams ------------------------------------------------------

HPS_FAKE_EXPORT aclError aclrtSetDevice(std::int32_t device_id) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record(Format("aclrtSetDevice device=%d", device_id), &code)) return code;
  if (device_id < 0 || device_id >= s.device_count) return kFakeAclInvalidDevice;
  SetThreadDevice(device_id);
  return 0;
}

HPS_FAKE_EXPORT aclError aclrtGetDevice(std::int32_t* device_id) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  const int device = CurrentDevice();
  int code = 0;
  if (Record(Format("aclrtGetDevice device=%d", device), &code)) return code;
  if (device < 0) return kFakeAclNoDevice;
  if (device_id == nullptr) return kFakeAclInvalidParam;
  *device_id = device;
  return 0;
}

HPS_FAKE_EXPORT aclError aclrtGetDeviceCount(std::uint32_t* count) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclrtGetDeviceCount", &code)) return code;
  if (count == nullptr) return kFakeAclInvalidParam;
  *count = static_cast<std::uint32_t>(s.device_count);
  return 0;
}

HPS_FAKE_EXPORT const char* aclrtGetSocName() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record(Format("aclrtGetSocName soc=%s", s.soc_null ? "null" : s.soc.c_str()), &code)) {
    return nullptr;
  }
  return s.soc_null ? nullptr : s.soc.c_str();
}

HPS_FAKE_EXPORT aclError aclrtCreateStream(aclrtStream* stream) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclrtCreateStream", &code)) return code;
  if (stream == nullptr) return kFakeAclInvalidParam;
  // Opaque tokens: never dereferenced, like a real aclrtStream on the host.
  s.next_stream += 0x10;
  *stream = reinterpret_cast<void*>(s.next_stream);
  NewStream(*stream);
  Note("result aclrtCreateStream stream=" + P(*stream));
  return 0;
}

HPS_FAKE_EXPORT aclError aclrtDestroyStream(aclrtStream stream) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclrtDestroyStream stream=" + P(stream), &code)) return code;
  auto it = s.streams.find(stream);
  if (stream == nullptr || it == s.streams.end()) return kFakeAclBadStream;
  const std::shared_ptr<Stream> st = it->second;
  s.streams.erase(it);
  JoinWorkers(s, lock, {st}, /*abort=*/false);  // the worker drains its queue, then exits
  s.stream_errors.erase(stream);
  return 0;
}

HPS_FAKE_EXPORT aclError aclrtSynchronizeStream(aclrtStream stream) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclrtSynchronizeStream stream=" + P(stream), &code)) return code;
  auto it = s.streams.find(stream);
  if (it != s.streams.end() && it->second->async) {
    const std::shared_ptr<Stream> st = it->second;
    if (!s.progress.wait_for(lock, std::chrono::seconds(SyncTimeout()),
                             [&] { return st->Pending() == 0; })) {
      Note("timeout aclrtSynchronizeStream stream=" + P(stream));
      return kFakeAclStreamTimeout;
    }
  }
  auto error = s.stream_errors.find(stream);
  if (error != s.stream_errors.end()) {
    const int failed = error->second;
    s.stream_errors.erase(error);
    return failed;
  }
  return 0;
}

// Drains every asynchronous stream (of every device: the fake does not split them) and
// returns the first failure recorded on any stream, leaving it for that stream's synchronize.
HPS_FAKE_EXPORT aclError aclrtSynchronizeDevice() {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclrtSynchronizeDevice", &code)) return code;
  if (!DrainAll(lock, SyncTimeout())) {
    Note("timeout aclrtSynchronizeDevice");
    return kFakeAclStreamTimeout;
  }
  return s.stream_errors.empty() ? 0 : s.stream_errors.begin()->second;
}

// ---- ACL runtime: memory -------------------------------------------------------------------

// "Device memory" is host memory from aligned_alloc, so CPU code can compute on it.
HPS_FAKE_EXPORT aclError aclrtMalloc(void** dev_ptr, std::size_t size, int policy) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record(Format("aclrtMalloc size=%zu policy=%d", size, policy), &code)) return code;
  if (dev_ptr == nullptr || size == 0) return kFakeAclInvalidParam;
  const int device = CurrentDevice();
  if (device < 0) return kFakeAclNoDevice;
  const std::size_t rounded = (size + kAclAlignment - 1) / kAclAlignment * kAclAlignment;
  if (rounded < size) return kFakeAclInvalidParam;
  void* block = std::aligned_alloc(kAclAlignment, rounded);
  constexpr int kMemoryAllocation = 207001;  // ACL_ERROR_RT_MEMORY_ALLOCATION
  if (block == nullptr) return kMemoryAllocation;
  s.blocks[reinterpret_cast<std::uintptr_t>(block)] = Block{size, device, policy};
  *dev_ptr = block;
  Note("result aclrtMalloc ptr=" + P(block));
  return 0;
}

// Poisons the block, then holds it back (bounded) instead of releasing it: a use after free
// reads 0xA5 bytes, never another allocation's data, and a sanitizer sees no real use after
// free. Queued work that reaches a freed block faults (it is no longer device memory).
HPS_FAKE_EXPORT aclError aclrtFree(void* dev_ptr) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclrtFree ptr=" + P(dev_ptr), &code)) return code;
  auto it = s.blocks.find(reinterpret_cast<std::uintptr_t>(dev_ptr));
  if (it == s.blocks.end()) return kFakeAclBadAddress;
  const std::size_t size = it->second.size;
  s.blocks.erase(it);
  std::memset(dev_ptr, kFakeAclPoison, size);
  s.quarantine.emplace_back(dev_ptr, size);
  s.quarantine_bytes += size;
  // Never release while queued work runs: it checked its block before this free.
  while (s.quarantine_bytes > kQuarantineBytes && s.quarantine.size() > 1 && s.heap_users == 0) {
    std::free(s.quarantine.front().first);
    s.quarantine_bytes -= s.quarantine.front().second;
    s.quarantine.pop_front();
  }
  return 0;
}

HPS_FAKE_EXPORT aclError aclrtMemcpy(void* dst, std::size_t dest_max, const void* src,
                                     std::size_t count, int kind) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  int code = 0;
  const std::string entry = Format("aclrtMemcpy dst=%p destMax=%zu src=%p count=%zu kind=%d",
                                   dst, dest_max, src, count, kind);
  if (Record(entry, &code)) return code;
  if (dst == nullptr || src == nullptr || count > dest_max || kind < ACL_MEMCPY_HOST_TO_HOST ||
      kind > ACL_MEMCPY_DEVICE_TO_DEVICE) {
    return kFakeAclInvalidParam;
  }
  lock.unlock();
  code = DeviceAccess(entry, dst, DeviceSideDst(kind), src, DeviceSideSrc(kind), count,
                      [&] { std::memmove(dst, src, count); });
  return code == 0 ? 0 : kFakeAclBadAddress;
}

// Argument errors return at once; a device side that is not device memory faults the stream
// (checked at enqueue, and again when the copy runs).
HPS_FAKE_EXPORT aclError aclrtMemcpyAsync(void* dst, std::size_t dest_max, const void* src,
                                          std::size_t count, int kind, aclrtStream stream) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  int code = 0;
  const std::string entry =
      Format("aclrtMemcpyAsync dst=%p destMax=%zu src=%p count=%zu kind=%d stream=%p", dst,
             dest_max, src, count, kind, stream);
  if (Record(entry, &code)) return code;
  if (dst == nullptr || src == nullptr || count > dest_max || kind < ACL_MEMCPY_HOST_TO_HOST ||
      kind > ACL_MEMCPY_DEVICE_TO_DEVICE) {
    return kFakeAclInvalidParam;
  }
  const bool dst_device = DeviceSideDst(kind);
  const bool src_device = DeviceSideSrc(kind);
  if ((dst_device && !IsDevice(dst, count)) || (src_device && !IsDevice(src, count))) {
    Note("fault " + entry);
    code = kFakeAclStreamError;
  }
  Submit(lock, stream, entry, code, [=](const std::atomic<bool>*) {
    return DeviceAccess(entry, dst, dst_device, src, src_device, count,
                        [&] { std::memmove(dst, src, count); });
  });
  return 0;
}

HPS_FAKE_EXPORT aclError aclrtMemsetAsync(void* dev_ptr, std::size_t max_count, std::int32_t value,
                                          std::size_t count, aclrtStream stream) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  int code = 0;
  const std::string entry = Format("aclrtMemsetAsync devPtr=%p maxCount=%zu value=%d count=%zu "
                                   "stream=%p",
                                   dev_ptr, max_count, value, count, stream);
  if (Record(entry, &code)) return code;
  if (dev_ptr == nullptr || count > max_count) return kFakeAclInvalidParam;
  if (!IsDevice(dev_ptr, count)) {
    Note("fault " + entry);
    code = kFakeAclStreamError;
  }
  Submit(lock, stream, entry, code, [=](const std::atomic<bool>*) {
    return DeviceAccess(entry, dev_ptr, true, nullptr, false, count,
                        [&] { std::memset(dev_ptr, value, count); });
  });
  return 0;
}

// Device for aclrtMalloc blocks (the device they were allocated on) and for the job's heaps
// (this PE's device), host for anything else. Newer CANN reports memory ACL never allocated as
// ACL_MEM_LOCATION_TYPE_UNREGISTERED (2); the fake answers HOST (0) for it.
HPS_FAKE_EXPORT aclError aclrtPointerGetAttributes(const void* ptr,
                                                   aclrtPtrAttributes* attributes) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclrtPointerGetAttributes ptr=" + P(ptr), &code)) return code;
  if (ptr == nullptr || attributes == nullptr) return kFakeAclInvalidParam;
  Location where;
  Locate(ptr, 0, &where);
  *attributes = aclrtPtrAttributes{};
  attributes->location.type = where.device ? ACL_MEM_LOCATION_TYPE_DEVICE
                                           : ACL_MEM_LOCATION_TYPE_HOST;
  attributes->location.id = where.device ? static_cast<std::uint32_t>(where.id) : 0;
  attributes->pageSize = static_cast<std::uint32_t>(where.page);
  return 0;
}

// ---- ACL runtime: events and callbacks -----------------------------------------------------

HPS_FAKE_EXPORT aclError aclrtCreateEvent(aclrtEvent* event) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclrtCreateEvent", &code)) return code;
  if (event == nullptr) return kFakeAclInvalidParam;
  s.next_event += 0x10;
  *event = reinterpret_cast<void*>(s.next_event);  // an opaque token, like a stream
  s.events[*event] = Event{};
  Note("result aclrtCreateEvent event=" + P(*event));
  return 0;
}

HPS_FAKE_EXPORT aclError aclrtDestroyEvent(aclrtEvent event) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclrtDestroyEvent event=" + P(event), &code)) return code;
  return s.events.erase(event) == 1 ? 0 : kFakeAclBadAddress;
}

// The event completes once the stream ran what was enqueued on it before this call; on a
// synchronous stream that already happened.
HPS_FAKE_EXPORT aclError aclrtRecordEvent(aclrtEvent event, aclrtStream stream) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclrtRecordEvent event=" + P(event) + " stream=" + P(stream), &code)) return code;
  auto it = s.events.find(event);
  if (it == s.events.end()) return kFakeAclBadAddress;
  std::shared_ptr<Stream> st = AsyncStream(stream);
  it->second = Event{st, st != nullptr ? st->enqueued : 0};
  return 0;
}

// The stream's later work waits (bounded) until the event's last record completed. An event
// never recorded counts as complete (as in CUDA; unverified for ACL).
HPS_FAKE_EXPORT aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent event) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  int code = 0;
  const std::string entry = "aclrtStreamWaitEvent stream=" + P(stream) + " event=" + P(event);
  if (Record(entry, &code)) return code;
  auto it = s.events.find(event);
  if (it == s.events.end()) return kFakeAclBadAddress;
  const Event recorded = it->second;
  const std::uint32_t timeout = SyncTimeout();
  Submit(lock, stream, entry, 0, [recorded, timeout, entry](const std::atomic<bool>* abort) {
    State& state = S();
    std::unique_lock<std::mutex> wait_lock(state.mutex);
    const bool done = state.progress.wait_for(wait_lock, std::chrono::seconds(timeout), [&] {
      return EventComplete(recorded) ||
             (abort != nullptr && abort->load(std::memory_order_relaxed));
    });
    if (done) return 0;
    Note("timeout " + entry);
    return kFakeAclStreamTimeout;
  });
  return 0;
}

HPS_FAKE_EXPORT aclError aclrtSynchronizeEvent(aclrtEvent event) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclrtSynchronizeEvent event=" + P(event), &code)) return code;
  auto it = s.events.find(event);
  if (it == s.events.end()) return kFakeAclBadAddress;
  const Event recorded = it->second;
  if (!s.progress.wait_for(lock, std::chrono::seconds(SyncTimeout()),
                           [&] { return EventComplete(recorded); })) {
    Note("timeout aclrtSynchronizeEvent event=" + P(event));
    return kFakeAclStreamTimeout;
  }
  return 0;
}

// `status`: an aclrtEventRecordedStatus (NOT_READY 0, COMPLETE 1).
HPS_FAKE_EXPORT aclError aclrtQueryEventStatus(aclrtEvent event, int* status) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclrtQueryEventStatus event=" + P(event), &code)) return code;
  if (status == nullptr) return kFakeAclInvalidParam;
  auto it = s.events.find(event);
  if (it == s.events.end()) return kFakeAclBadAddress;
  *status = EventComplete(it->second) ? ACL_EVENT_RECORDED_STATUS_COMPLETE
                                      : ACL_EVENT_RECORDED_STATUS_NOT_READY;
  return 0;
}

// Runs fn(user_data) in stream order on the stream's worker (synchronous stream: now, without
// the mutex, so the callback may call the fake). Real ACL delivers callbacks only to a thread
// registered with aclrtSubscribeReport and processing aclrtProcessReport; the fake needs
// neither, and treats BLOCK and NO_BLOCK alike (the stream's later work waits for fn).
HPS_FAKE_EXPORT aclError aclrtLaunchCallback(aclrtCallback fn, void* user_data, int block_type,
                                             aclrtStream stream) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  int code = 0;
  const std::string entry =
      Format("aclrtLaunchCallback fn=%p userData=%p blockType=%d stream=%p",
             reinterpret_cast<void*>(fn), user_data, block_type, stream);
  if (Record(entry, &code)) return code;
  if (fn == nullptr || (block_type != ACL_CALLBACK_NO_BLOCK && block_type != ACL_CALLBACK_BLOCK)) {
    return kFakeAclInvalidParam;
  }
  Submit(lock, stream, entry, 0, [fn, user_data](const std::atomic<bool>*) {
    fn(user_data);
    return 0;
  });
  return 0;
}


// ---- aclshmem: init, finalize, status ------------------------------------------------------

HPS_FAKE_EXPORT std::int32_t aclshmemx_set_conf_store_tls(bool enable, const char* tls_info,
                                                          std::uint32_t tls_info_len) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record(Format("aclshmemx_set_conf_store_tls enable=%d tls_info=%s tls_info_len=%u",
                    enable, tls_info == nullptr ? "null" : "set", tls_info_len),
             &code)) {
    return code;
  }
  return 0;
}

HPS_FAKE_EXPORT int aclshmemx_get_uniqueid(aclshmemx_uniqueid_t* uid) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclshmemx_get_uniqueid", &code)) return code;
  if (uid == nullptr) return ACLSHMEM_INVALID_PARAM;
  std::memset(uid, 0, sizeof *uid);
  uid->version = kUniqueIdVersion;
  std::random_device random;
  const unsigned long long token =
      (static_cast<unsigned long long>(random()) << 32) ^ random();
  std::memcpy(uid->internal, kUidMagic, sizeof kUidMagic);
  std::snprintf(uid->internal + sizeof kUidMagic, sizeof uid->internal - sizeof kUidMagic,
                "/hps_fake_cann_%d_%016llx", static_cast<int>(getpid()), token);
  return 0;
}

HPS_FAKE_EXPORT int aclshmemx_init_status() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclshmemx_init_status", &code)) return code;
  return s.job.initialized ? ACLSHMEM_STATUS_IS_INITIALIZED : ACLSHMEM_STATUS_NOT_INITIALIZED;
}

#ifdef HPS_FAKE_SHMEM_GEN
HPS_FAKE_EXPORT int shmem_init_attr(unsigned int flags, aclshmemx_init_attr_t* attr) {
  (void)flags;
  (void)attr;
  return ACLSHMEM_NOT_SUPPORTED;  // the old generation's layouts differ; never driven
}
#else
HPS_FAKE_EXPORT int aclshmemx_init_attr(unsigned int flags, aclshmemx_init_attr_t* attr) {
  return InitAttr("aclshmemx_init_attr", flags, attr);
}
#endif

#ifdef HPS_FAKE_FINALIZE_INSTANCE_ARG
HPS_FAKE_EXPORT int aclshmem_finalize(std::uint64_t instance_id) {
  return Finalize(Format("aclshmem_finalize instance_id=%llu",
                         static_cast<unsigned long long>(instance_id)));
}
#else
HPS_FAKE_EXPORT int aclshmem_finalize() { return Finalize("aclshmem_finalize"); }
#endif

#ifdef HPS_FAKE_FINALIZE_X
HPS_FAKE_EXPORT int aclshmemx_finalize(std::uint64_t instance_id) {
  return Finalize(Format("aclshmemx_finalize instance_id=%llu",
                         static_cast<unsigned long long>(instance_id)));
}
#endif

HPS_FAKE_EXPORT int aclshmem_my_pe() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclshmem_my_pe", &code)) return code;
  return s.job.initialized ? s.job.my_pe : -1;
}

HPS_FAKE_EXPORT int aclshmem_n_pes() {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclshmem_n_pes", &code)) return code;
  return s.job.initialized ? s.job.n_pes : -1;
}

// ---- aclshmem: symmetric heap --------------------------------------------------------------

#ifdef HPS_FAKE_MALLOC
HPS_FAKE_EXPORT void* aclshmem_malloc(std::size_t size) {
  return CollectiveAllocate("aclshmem_malloc", kDefaultAlignment, size);
}
#endif

HPS_FAKE_EXPORT void* aclshmem_align(std::size_t alignment, std::size_t size) {
  return CollectiveAllocate("aclshmem_align", alignment, size);
}

HPS_FAKE_EXPORT void aclshmem_free(void* ptr) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclshmem_free ptr=" + P(ptr), &code)) return;
  Job& job = s.job;
  std::uint64_t offset = 0;
  if (!job.initialized || !LocalOffset(job, ptr, 0, &offset) ||
      job.allocations.find(offset) == job.allocations.end()) {
    Note("invalid_free ptr=" + P(ptr));
    return;
  }
  lock.unlock();
  const bool ok = ControlBarrier(job);
  lock.lock();
  if (!ok) Note("timeout aclshmem_free");
  job.allocations.erase(offset);
}

HPS_FAKE_EXPORT void* aclshmem_ptr(void* ptr, int pe) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record(Format("aclshmem_ptr ptr=%p pe=%d", ptr, pe), &code)) return nullptr;
  return PeerAddress(s.job, ptr, 0, pe);
}

// ---- aclshmem: on-stream data path ---------------------------------------------------------
//
// Each call is recorded and its addresses resolved at enqueue; the work runs at enqueue on a
// synchronous stream, in order on the worker of an asynchronous one (Submit).

#ifdef HPS_FAKE_ON_STREAM
HPS_FAKE_EXPORT void aclshmemx_putmem_on_stream(void* dst, void* src, std::size_t bytes,
                                                std::int32_t pe, aclrtStream stream) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  const std::string entry = Format(
      "aclshmemx_putmem_on_stream dst=%p src=%p bytes=%zu pe=%d stream=%p", dst, src, bytes, pe,
      stream);
  int code = RecordOnStream(entry);
  void* target = code == 0 ? PeerAddress(s.job, dst, bytes, pe) : nullptr;
  if (code == 0 && (target == nullptr || src == nullptr)) code = kFakeAclStreamError;
  const std::uint64_t epoch = s.job.epoch;
  Submit(lock, stream, entry, code, [=](const std::atomic<bool>*) {
    HeapUse use(epoch);
    if (!use.ok()) return kFakeAclStreamError;
    std::memmove(target, src, bytes);  // reads the source now, not at enqueue
    return 0;
  });
}

HPS_FAKE_EXPORT void aclshmemx_signal_op_on_stream(std::int32_t* sig_addr, std::int32_t signal,
                                                   int sig_op, int pe, aclrtStream stream) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  const std::string entry = Format("aclshmemx_signal_op_on_stream sig_addr=%p signal=%d "
                                   "sig_op=%d pe=%d stream=%p",
                                   static_cast<void*>(sig_addr), signal, sig_op, pe, stream);
  int code = RecordOnStream(entry);
  void* target = code == 0 ? PeerAddress(s.job, sig_addr, sizeof(std::int32_t), pe) : nullptr;
  if (code == 0 &&
      (target == nullptr || reinterpret_cast<std::uintptr_t>(target) % alignof(std::int32_t) != 0 ||
       (sig_op != ACLSHMEM_SIGNAL_SET && sig_op != ACLSHMEM_SIGNAL_ADD))) {
    code = kFakeAclStreamError;
  }
  const std::uint64_t epoch = s.job.epoch;
  Submit(lock, stream, entry, code, [=](const std::atomic<bool>*) {
    HeapUse use(epoch);
    if (!use.ok()) return kFakeAclStreamError;
    std::atomic_ref<std::int32_t> word(*static_cast<std::int32_t*>(target));
    if (sig_op == ACLSHMEM_SIGNAL_SET) {
      word.store(signal, std::memory_order_release);
    } else {
      word.fetch_add(signal, std::memory_order_acq_rel);
    }
    return 0;
  });
}

HPS_FAKE_EXPORT void aclshmemx_signal_wait_until_on_stream(std::int32_t* sig_addr, int cmp,
                                                           std::int32_t cmp_val,
                                                           aclrtStream stream) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  const std::string entry = Format("aclshmemx_signal_wait_until_on_stream sig_addr=%p cmp=%d "
                                   "cmp_val=%d stream=%p",
                                   static_cast<void*>(sig_addr), cmp, cmp_val, stream);
  int code = RecordOnStream(entry);
  // Local words only (the vendor's wait works on the local device alone).
  void* local =
      code == 0 ? PeerAddress(s.job, sig_addr, sizeof(std::int32_t), s.job.my_pe) : nullptr;
  if (code == 0 &&
      (local == nullptr || reinterpret_cast<std::uintptr_t>(local) % alignof(std::int32_t) != 0 ||
       cmp < ACLSHMEM_CMP_EQ || cmp > ACLSHMEM_CMP_LE)) {
    code = kFakeAclStreamError;
  }
  const std::uint32_t timeout = s.job.control_timeout;
  const std::uint64_t epoch = s.job.epoch;
  Submit(lock, stream, entry, code, [=](const std::atomic<bool>* abort) {
    HeapUse use(epoch);
    if (!use.ok()) return kFakeAclStreamError;
    std::atomic_ref<std::int32_t> word(*static_cast<std::int32_t*>(local));
    auto satisfied = [&] { return Compare(word.load(std::memory_order_acquire), cmp, cmp_val); };
    WaitFor([&] { return satisfied() || Abandoned(abort, epoch); }, timeout);
    if (satisfied()) return 0;
    NoteLocked(Format("timeout aclshmemx_signal_wait_until_on_stream stream=%p", stream));
    return kFakeAclStreamTimeout;
  });
}
#endif

HPS_FAKE_EXPORT void aclshmemx_getmem_on_stream(void* dst, void* src, std::size_t bytes,
                                                std::int32_t pe, aclrtStream stream) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  const std::string entry = Format(
      "aclshmemx_getmem_on_stream dst=%p src=%p bytes=%zu pe=%d stream=%p", dst, src, bytes, pe,
      stream);
  int code = RecordOnStream(entry);
  void* source = code == 0 ? PeerAddress(s.job, src, bytes, pe) : nullptr;
  if (code == 0 && (source == nullptr || dst == nullptr)) code = kFakeAclStreamError;
  const std::uint64_t epoch = s.job.epoch;
  Submit(lock, stream, entry, code, [=](const std::atomic<bool>*) {
    HeapUse use(epoch);
    if (!use.ok()) return kFakeAclStreamError;
    std::memmove(dst, source, bytes);
    return 0;
  });
}

#ifdef HPS_FAKE_QUIET
HPS_FAKE_EXPORT void aclshmemx_quiet_on_stream(aclrtStream stream) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  // A stream runs its work in order: everything before the quiet is done when it is reached.
  const std::string entry = "aclshmemx_quiet_on_stream stream=" + P(stream);
  Submit(lock, stream, entry, RecordOnStream(entry), nullptr);
}
#endif

HPS_FAKE_EXPORT void aclshmemx_barrier_all_on_stream(aclrtStream stream) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  const std::string entry = "aclshmemx_barrier_all_on_stream stream=" + P(stream);
  const int code = RecordOnStream(entry);
  SharedHeader* header = s.job.header;
  const int n_pes = s.job.n_pes;
  const std::uint32_t timeout = s.job.control_timeout;
  const std::uint64_t epoch = s.job.epoch;
  Submit(lock, stream, entry, code, [=](const std::atomic<bool>* abort) {
    HeapUse use(epoch);
    if (!use.ok()) return kFakeAclStreamError;
    if (BarrierWords(header, n_pes, timeout, [&] { return Abandoned(abort, epoch); })) return 0;
    NoteLocked("timeout aclshmemx_barrier_all_on_stream stream=" + P(stream));
    return kFakeAclStreamTimeout;
  });
}
