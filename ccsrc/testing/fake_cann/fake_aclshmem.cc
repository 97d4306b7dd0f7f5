// A fake CANN SHMEM + ACL runtime library, for the CANN adapter's tests.
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
//   - a stream executes each operation synchronously when it is enqueued; a failure (bad
//     address, a wait or barrier that timed out) is recorded on the stream and returned by its
//     next aclrtSynchronizeStream, the way device faults surface on a real stream;
//   - signal ops are 32-bit atomics on the target PE's word (the ABI types the word int32_t);
//     signal_wait_until spins then sleeps, bounded by the control-operation timeout;
//     barrier_all is a sense-reversing counter in the segment, bounded the same way.
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
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <string>
#include <thread>
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

struct State {
  std::mutex mutex;
  std::vector<std::string> log;
  std::string log_snapshot;
  std::vector<Injection> injections;
  std::map<void*, int> stream_errors;
  std::vector<void*> streams;
  std::uintptr_t next_stream = 0x5000;
  std::string soc = "Ascend910B3";
  bool soc_null = false;
  int device = -1;
  Job job;
  std::string uid_name;
};

// Destroyed at dlclose, so an unloaded fake leaves nothing behind.
State& S() {
  static State state;
  return state;
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

// Records a call (caller holds the mutex); returns true with *code when a failure is injected.
bool Record(const std::string& entry, int* code) {
  State& s = S();
  const std::string name = entry.substr(0, entry.find(' '));
  for (auto it = s.injections.begin(); it != s.injections.end(); ++it) {
    if (it->name == name && --it->remaining == 0) {
      *code = it->code;
      s.log.push_back(entry + " injected=" + std::to_string(it->code));
      s.injections.erase(it);
      return true;
    }
  }
  s.log.push_back(entry);
  return false;
}

void Note(const std::string& entry) { S().log.push_back(entry); }

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

// Sense-reversing barrier over the segment header; false on timeout.
bool ControlBarrier(const Job& job) {
  SharedHeader* h = job.header;
  const std::uint32_t generation = h->barrier_generation.load(std::memory_order_acquire);
  if (h->barrier_count.fetch_add(1, std::memory_order_acq_rel) + 1 == job.n_pes) {
    h->barrier_count.store(0, std::memory_order_relaxed);
    h->barrier_generation.fetch_add(1, std::memory_order_acq_rel);
    return true;
  }
  return WaitFor(
      [&] { return h->barrier_generation.load(std::memory_order_acquire) != generation; },
      job.control_timeout);
}

void Unmap(Job& job) {
  if (job.mapping != nullptr) munmap(job.mapping, job.mapping_bytes);
  job = Job();
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
  if (s.device < 0) {
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
  s.job = std::move(job);
  return ACLSHMEM_SUCCESS;
}

int Finalize(const std::string& entry) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record(entry, &code)) return code;
  if (!s.job.initialized) return ACLSHMEM_NOT_INITED;
  Job& job = s.job;
  lock.unlock();
  const bool ok = ControlBarrier(job);
  lock.lock();
  Unmap(s.job);
  if (!ok) {
    Note("timeout finalize");
    return ACLSHMEM_TIMEOUT_ERROR;
  }
  return ACLSHMEM_SUCCESS;
}

// Records a void on-stream call; an injected failure marks the stream. True: go on.
bool RecordOnStream(const std::string& entry, void* stream) {
  int code = 0;
  if (Record(entry, &code)) {
    StreamFail(stream, code);
    return false;
  }
  if (!S().job.initialized) {
    StreamFail(stream, kFakeAclStreamError);
    return false;
  }
  return true;
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
  std::lock_guard<std::mutex> lock(s.mutex);
  s.log.clear();
  s.injections.clear();
  s.stream_errors.clear();
  s.streams.clear();
  s.soc = "Ascend910B3";
  s.soc_null = false;
  s.device = -1;
  Unmap(s.job);
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
  s.device = device;
}

HPS_FAKE_EXPORT const char* hps_fake_generation() { return HPS_FAKE_GENERATION; }

HPS_FAKE_EXPORT const char* hps_fake_uid_segment(const void* uid_bytes) {
  const auto* uid = static_cast<const aclshmemx_uniqueid_t*>(uid_bytes);
  if (uid == nullptr || std::memcmp(uid->internal, kUidMagic, sizeof kUidMagic) != 0) {
    return nullptr;
  }
  return uid->internal + sizeof kUidMagic;
}

// ---- ACL runtime ---------------------------------------------------------------------------

HPS_FAKE_EXPORT aclError aclrtSetDevice(std::int32_t device_id) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record(Format("aclrtSetDevice device=%d", device_id), &code)) return code;
  s.device = device_id;
  return 0;
}

HPS_FAKE_EXPORT aclError aclrtGetDevice(std::int32_t* device_id) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record(Format("aclrtGetDevice device=%d", s.device), &code)) return code;
  if (s.device < 0) return kFakeAclNoDevice;
  *device_id = s.device;
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
  // Opaque tokens: never dereferenced, like a real aclrtStream on the host.
  s.next_stream += 0x10;
  *stream = reinterpret_cast<void*>(s.next_stream);
  s.streams.push_back(*stream);
  Note("result aclrtCreateStream stream=" + P(*stream));
  return 0;
}

HPS_FAKE_EXPORT aclError aclrtDestroyStream(aclrtStream stream) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclrtDestroyStream stream=" + P(stream), &code)) return code;
  for (auto it = s.streams.begin(); it != s.streams.end(); ++it) {
    if (*it == stream) {
      s.streams.erase(it);
      s.stream_errors.erase(stream);
      return 0;
    }
  }
  return kFakeAclBadStream;
}

HPS_FAKE_EXPORT aclError aclrtSynchronizeStream(aclrtStream stream) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  int code = 0;
  if (Record("aclrtSynchronizeStream stream=" + P(stream), &code)) return code;
  auto error = s.stream_errors.find(stream);
  if (error != s.stream_errors.end()) {
    const int failed = error->second;
    s.stream_errors.erase(error);
    return failed;
  }
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

// ---- aclshmem: on-stream data path (executed at enqueue) -----------------------------------

#ifdef HPS_FAKE_ON_STREAM
HPS_FAKE_EXPORT void aclshmemx_putmem_on_stream(void* dst, void* src, std::size_t bytes,
                                                std::int32_t pe, aclrtStream stream) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!RecordOnStream(Format("aclshmemx_putmem_on_stream dst=%p src=%p bytes=%zu pe=%d stream=%p",
                             dst, src, bytes, pe, stream),
                      stream)) {
    return;
  }
  void* target = PeerAddress(s.job, dst, bytes, pe);
  if (target == nullptr || src == nullptr) return StreamFail(stream, kFakeAclStreamError);
  std::memmove(target, src, bytes);
}

HPS_FAKE_EXPORT void aclshmemx_signal_op_on_stream(std::int32_t* sig_addr, std::int32_t signal,
                                                   int sig_op, int pe, aclrtStream stream) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!RecordOnStream(Format("aclshmemx_signal_op_on_stream sig_addr=%p signal=%d sig_op=%d "
                             "pe=%d stream=%p",
                             static_cast<void*>(sig_addr), signal, sig_op, pe, stream),
                      stream)) {
    return;
  }
  void* target = PeerAddress(s.job, sig_addr, sizeof(std::int32_t), pe);
  if (target == nullptr || reinterpret_cast<std::uintptr_t>(target) % alignof(std::int32_t) != 0 ||
      (sig_op != ACLSHMEM_SIGNAL_SET && sig_op != ACLSHMEM_SIGNAL_ADD)) {
    return StreamFail(stream, kFakeAclStreamError);
  }
  std::atomic_ref<std::int32_t> word(*static_cast<std::int32_t*>(target));
  if (sig_op == ACLSHMEM_SIGNAL_SET) {
    word.store(signal, std::memory_order_release);
  } else {
    word.fetch_add(signal, std::memory_order_acq_rel);
  }
}

HPS_FAKE_EXPORT void aclshmemx_signal_wait_until_on_stream(std::int32_t* sig_addr, int cmp,
                                                           std::int32_t cmp_val,
                                                           aclrtStream stream) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  if (!RecordOnStream(Format("aclshmemx_signal_wait_until_on_stream sig_addr=%p cmp=%d "
                             "cmp_val=%d stream=%p",
                             static_cast<void*>(sig_addr), cmp, cmp_val, stream),
                      stream)) {
    return;
  }
  // Local words only (the vendor's wait works on the local device alone).
  void* local = PeerAddress(s.job, sig_addr, sizeof(std::int32_t), s.job.my_pe);
  if (local == nullptr || reinterpret_cast<std::uintptr_t>(local) % alignof(std::int32_t) != 0 ||
      cmp < ACLSHMEM_CMP_EQ || cmp > ACLSHMEM_CMP_LE) {
    return StreamFail(stream, kFakeAclStreamError);
  }
  const std::uint32_t timeout = s.job.control_timeout;
  lock.unlock();
  std::atomic_ref<std::int32_t> word(*static_cast<std::int32_t*>(local));
  const bool satisfied =
      WaitFor([&] { return Compare(word.load(std::memory_order_acquire), cmp, cmp_val); },
              timeout);
  lock.lock();
  if (!satisfied) {
    Note(Format("timeout aclshmemx_signal_wait_until_on_stream stream=%p", stream));
    StreamFail(stream, kFakeAclStreamTimeout);
  }
}
#endif

HPS_FAKE_EXPORT void aclshmemx_getmem_on_stream(void* dst, void* src, std::size_t bytes,
                                                std::int32_t pe, aclrtStream stream) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!RecordOnStream(Format("aclshmemx_getmem_on_stream dst=%p src=%p bytes=%zu pe=%d stream=%p",
                             dst, src, bytes, pe, stream),
                      stream)) {
    return;
  }
  void* source = PeerAddress(s.job, src, bytes, pe);
  if (source == nullptr || dst == nullptr) return StreamFail(stream, kFakeAclStreamError);
  std::memmove(dst, source, bytes);
}

#ifdef HPS_FAKE_QUIET
HPS_FAKE_EXPORT void aclshmemx_quiet_on_stream(aclrtStream stream) {
  State& s = S();
  std::lock_guard<std::mutex> lock(s.mutex);
  // Every operation already ran at enqueue: nothing is outstanding.
  RecordOnStream("aclshmemx_quiet_on_stream stream=" + P(stream), stream);
}
#endif

HPS_FAKE_EXPORT void aclshmemx_barrier_all_on_stream(aclrtStream stream) {
  State& s = S();
  std::unique_lock<std::mutex> lock(s.mutex);
  if (!RecordOnStream("aclshmemx_barrier_all_on_stream stream=" + P(stream), stream)) return;
  Job& job = s.job;
  lock.unlock();
  const bool ok = ControlBarrier(job);
  lock.lock();
  if (!ok) {
    Note("timeout aclshmemx_barrier_all_on_stream stream=" + P(stream));
    StreamFail(stream, kFakeAclStreamTimeout);
  }
}
