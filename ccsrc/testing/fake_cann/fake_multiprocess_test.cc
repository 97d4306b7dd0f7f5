// The CANN adapter over the fake with PEs as forked processes: the root's unique id travels
// through a pipe, every PE maps the job's heaps, allocations land at the same offset, a put and
// a signal reach the next PE of a ring, and nothing stays in /dev/shm.
#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "backends/cann/vendor_calls.h"
#include "testing/fake_cann/fake_library.h"

namespace hyper_parallel::shmem::cann {
namespace {

constexpr std::size_t kPayload = 4096;

bool WriteAll(int fd, const void* data, std::size_t bytes) {
  const auto* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = write(fd, p, bytes);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

bool ReadAll(int fd, void* data, std::size_t bytes) {
  auto* p = static_cast<char*>(data);
  while (bytes > 0) {
    const ssize_t n = read(fd, p, bytes);
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<std::size_t>(n);
  }
  return true;
}

#define PE_CHECK(condition, what)                                                        \
  do {                                                                                   \
    if (!(condition)) {                                                                  \
      std::fprintf(stderr, "PE %d: %s:%d: %s\n", rank, __FILE__, __LINE__, (what));      \
      return 1;                                                                          \
    }                                                                                    \
  } while (false)
#define PE_OK(expr)                                          \
  do {                                                       \
    const Status pe_status_ = (expr);                        \
    PE_CHECK(pe_status_.ok(), pe_status_.ToString().c_str()); \
  } while (false)

// One PE's life. `uid_in` (non-root) or `uid_out` (root: one per peer) carry the unique id;
// `report` gets the allocation offsets and, from the root, the segment name.
int RunPe(int rank, int n_pes, int uid_in, const std::vector<int>& uid_out, int report) {
  fake::FakeCann fake(fake::kV15);
  std::shared_ptr<const VendorLibrary> library;
  PE_OK(fake.Load(&library));
  CannVendor vendor(library);
  PE_OK(vendor.SetDevice(rank));
  InitParams params;
  params.my_pe = rank;
  params.n_pes = n_pes;
  params.heap_bytes = 2u << 20;
  params.timeout_seconds = 20;
  if (rank == 0) {
    PE_OK(vendor.GetUniqueId(&params.unique_id));
    for (int fd : uid_out) PE_CHECK(WriteAll(fd, params.unique_id.data(), 136), "send uid");
    const std::string segment = fake.UidSegment(params.unique_id.data());
    PE_CHECK(WriteAll(report, segment.c_str(), segment.size() + 1), "report segment");
  } else {
    PE_CHECK(ReadAll(uid_in, params.unique_id.data(), 136), "receive uid");
  }
  PE_OK(vendor.Init(params));
  int my_pe = -1;
  int count = -1;
  PE_OK(vendor.MyPe(&my_pe));
  PE_OK(vendor.NPes(&count));
  PE_CHECK(my_pe == rank && count == n_pes, "my_pe / n_pes");

  void* data = nullptr;
  void* signals = nullptr;
  PE_OK(vendor.Malloc(kPayload, &data));
  PE_OK(vendor.Align(256, 64, &signals));
  auto* word = static_cast<std::int32_t*>(signals);
  aclrtStream stream = nullptr;
  PE_OK(vendor.CreateStream(&stream));
  // Every PE zeroes its words, then a barrier: no signal can arrive before the zeroing.
  std::memset(signals, 0, 64);
  PE_OK(vendor.BarrierAllOnStream(stream));

  const int next = (rank + 1) % n_pes;
  const int previous = (rank + n_pes - 1) % n_pes;
  std::vector<unsigned char> payload(kPayload);
  for (std::size_t i = 0; i < kPayload; ++i) {
    payload[i] = static_cast<unsigned char>(rank * 31 + i);
  }
  PE_OK(vendor.PutOnStream(data, payload.data(), kPayload, next, stream));
  PE_OK(vendor.SignalOpOnStream(word, 1, ACLSHMEM_SIGNAL_ADD, next, stream));
  // Everyone adds to PE 0's second word as well: an atomic counter across processes.
  PE_OK(vendor.SignalOpOnStream(word + 1, rank + 1, ACLSHMEM_SIGNAL_ADD, 0, stream));
  PE_OK(vendor.SignalWaitUntilOnStream(word, ACLSHMEM_CMP_GE, 1, stream));
  PE_OK(vendor.BarrierAllOnStream(stream));
  PE_OK(vendor.SynchronizeStream(stream));

  const auto* received = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < kPayload; ++i) {
    PE_CHECK(received[i] == static_cast<unsigned char>(previous * 31 + i), "payload byte");
  }
  PE_CHECK(word[0] == 1, "one signal from the previous PE");
  if (rank == 0) PE_CHECK(word[1] == n_pes * (n_pes + 1) / 2, "counter on PE 0");
  void* peer = nullptr;
  PE_OK(vendor.Ptr(data, next, &peer));
  PE_CHECK(std::memcmp(peer, payload.data(), kPayload) == 0, "read the peer's heap via ptr");

  // The offsets this PE's allocations got, as the fake recorded them.
  const std::string log = fake.Calls();
  std::string offsets = fake::Line(log, "result aclshmem_malloc") + ";" +
                        fake::Line(log, "result aclshmem_align");
  PE_CHECK(WriteAll(report, offsets.c_str(), offsets.size() + 1), "report offsets");
  PE_CHECK(fake::Line(log, "attr_reread").find("attr_intact=1 uid_intact=1") != std::string::npos,
           "attributes intact at the first allocation");

  PE_OK(vendor.Free(data));
  PE_OK(vendor.DestroyStream(stream));
  PE_OK(vendor.Finalize());
  return 0;
}

struct Child {
  pid_t pid = -1;
  int report = -1;
  std::string text;
  int status = 0;
};

std::vector<std::string> SplitNul(const std::string& text) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t end = text.find('\0', start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return parts;
}

bool InDevShm(const std::string& segment) {
  const std::string path = "/dev/shm" + segment;
  return access(path.c_str(), F_OK) == 0;
}

void RunJob(int n_pes) {
  std::vector<int> uid_read(n_pes, -1);
  std::vector<int> uid_write;
  for (int rank = 1; rank < n_pes; ++rank) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    uid_read[rank] = fds[0];
    uid_write.push_back(fds[1]);
  }
  std::vector<Child> children(n_pes);
  for (int rank = 0; rank < n_pes; ++rank) {
    int fds[2];
    ASSERT_EQ(pipe(fds), 0);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      close(fds[0]);
      const int code = RunPe(rank, n_pes, uid_read[rank],
                             rank == 0 ? uid_write : std::vector<int>{}, fds[1]);
      std::fflush(stderr);
      _exit(code);
    }
    close(fds[1]);
    children[rank].pid = pid;
    children[rank].report = fds[0];
  }
  for (int fd : uid_read) {
    if (fd >= 0) close(fd);
  }
  for (int fd : uid_write) close(fd);

  // Collect reports until every pipe closes; kill the job past its deadline.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int open = n_pes;
  while (open > 0) {
    std::vector<pollfd> fds;
    for (const Child& child : children) {
      if (child.report >= 0) fds.push_back({child.report, POLLIN, 0});
    }
    const int ready = poll(fds.data(), fds.size(), 200);
    if (std::chrono::steady_clock::now() > deadline) {
      for (const Child& child : children) kill(child.pid, SIGKILL);
      ADD_FAILURE() << "the job did not finish within its deadline";
      break;
    }
    if (ready <= 0) continue;
    for (Child& child : children) {
      if (child.report < 0) continue;
      for (const pollfd& p : fds) {
        if (p.fd != child.report || p.revents == 0) continue;
        char buffer[512];
        const ssize_t n = read(child.report, buffer, sizeof buffer);
        if (n > 0) {
          child.text.append(buffer, static_cast<std::size_t>(n));
        } else {
          close(child.report);
          child.report = -1;
          --open;
        }
      }
    }
  }
  for (int rank = 0; rank < n_pes; ++rank) {
    Child& child = children[rank];
    if (child.report >= 0) close(child.report);
    ASSERT_EQ(waitpid(child.pid, &child.status, 0), child.pid);
    EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0)
        << "PE " << rank << " failed (see its stderr above), status " << child.status;
  }

  // The root reported the segment first, then every PE its offsets.
  const std::vector<std::string> root = SplitNul(children[0].text);
  ASSERT_EQ(root.size(), 2u) << children[0].text;
  const std::string segment = root[0];
  EXPECT_TRUE(segment.starts_with("/hps_fake_cann_")) << segment;
  EXPECT_FALSE(InDevShm(segment)) << "shared-memory residue: " << segment;
  EXPECT_EQ(root[1], "result aclshmem_malloc offset=0;result aclshmem_align offset=4096");
  for (int rank = 1; rank < n_pes; ++rank) {
    const std::vector<std::string> parts = SplitNul(children[rank].text);
    ASSERT_EQ(parts.size(), 1u) << "PE " << rank;
    EXPECT_EQ(parts[0], root[1]) << "PE " << rank << " got other offsets";
  }
}

TEST(CannFakeMultiprocess, TwoPesPutSignalWaitBarrier) { RunJob(2); }

TEST(CannFakeMultiprocess, ThreePesPutSignalWaitBarrier) { RunJob(3); }

}  // namespace
}  // namespace hyper_parallel::shmem::cann
