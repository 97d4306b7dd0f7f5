#include "runtime/socket_bootstrap.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

namespace hyper_parallel::shmem {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint64_t kMaxMessageBytes = 64ull << 20;
constexpr std::uint32_t kHelloMagic = 0x48505342;  // "HPSB"

Status SystemError(std::string_view fact, int error, std::initializer_list<Field> extra = {}) {
  Status status = Status::Assertion(ErrorCode::kBackendError, fact, extra);
  std::string message = status.message();
  message.append(message.find(": ") == std::string::npos ? ": " : ", ");
  message.append("errno=").append(std::strerror(error));
  return Status::Assertion(ErrorCode::kBackendError, message);
}

int RemainingMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<long long>(left.count(), 1 << 30));
}

Status TimedOut(std::string_view what, int peer, std::chrono::milliseconds timeout) {
  return Status::Assertion(ErrorCode::kTimeout, "bootstrap timed out",
                           {{"waiting_for", std::string(what)},
                            {"peer_rank", std::to_string(peer)},
                            {"timeout_ms", std::to_string(timeout.count())}});
}

// Waits until `fd` is ready for `events` or the deadline passes.
Status WaitFd(int fd, short events, Clock::time_point deadline, std::string_view what, int peer,
              std::chrono::milliseconds timeout) {
  for (;;) {
    pollfd entry{fd, events, 0};
    const int ready = ::poll(&entry, 1, RemainingMs(deadline));
    if (ready > 0) return Status::Ok();
    if (ready == 0) return TimedOut(what, peer, timeout);
    if (errno != EINTR) return SystemError("bootstrap poll failed", errno);
  }
}

Status SendAll(int fd, const void* data, std::size_t bytes, Clock::time_point deadline, int peer,
               std::chrono::milliseconds timeout) {
  const char* cursor = static_cast<const char*>(data);
  while (bytes > 0) {
    HPS_RETURN_IF_ERROR(WaitFd(fd, POLLOUT, deadline, "send", peer, timeout));
    const ssize_t sent = ::send(fd, cursor, bytes, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return SystemError("bootstrap send failed", errno, {{"peer_rank", std::to_string(peer)}});
    }
    cursor += sent;
    bytes -= static_cast<std::size_t>(sent);
  }
  return Status::Ok();
}

Status RecvAll(int fd, void* data, std::size_t bytes, Clock::time_point deadline, int peer,
               std::chrono::milliseconds timeout) {
  char* cursor = static_cast<char*>(data);
  while (bytes > 0) {
    HPS_RETURN_IF_ERROR(WaitFd(fd, POLLIN, deadline, "receive", peer, timeout));
    const ssize_t got = ::recv(fd, cursor, bytes, MSG_DONTWAIT);
    if (got == 0) {
      return Status::Assertion(ErrorCode::kBackendError,
                               "bootstrap peer closed its connection",
                               {{"peer_rank", std::to_string(peer)}});
    }
    if (got < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return SystemError("bootstrap receive failed", errno, {{"peer_rank", std::to_string(peer)}});
    }
    cursor += got;
    bytes -= static_cast<std::size_t>(got);
  }
  return Status::Ok();
}

Status SendMessage(int fd, std::string_view bytes, Clock::time_point deadline, int peer,
                   std::chrono::milliseconds timeout) {
  const std::uint64_t length = bytes.size();
  HPS_RETURN_IF_ERROR(SendAll(fd, &length, sizeof length, deadline, peer, timeout));
  return SendAll(fd, bytes.data(), bytes.size(), deadline, peer, timeout);
}

Status RecvMessage(int fd, std::string* bytes, Clock::time_point deadline, int peer,
                   std::chrono::milliseconds timeout) {
  std::uint64_t length = 0;
  HPS_RETURN_IF_ERROR(RecvAll(fd, &length, sizeof length, deadline, peer, timeout));
  if (length > kMaxMessageBytes) {
    return Status::Contract(ErrorCode::kBackendError, "bootstrap message length",
                            "at most " + std::to_string(kMaxMessageBytes) + " bytes",
                            std::to_string(length));
  }
  bytes->resize(length);
  return RecvAll(fd, bytes->data(), length, deadline, peer, timeout);
}

constexpr std::string_view kTcpPrefix = "tcp:";

// Where rank 0 listens: an abstract-namespace Unix address (sun_path[0] == '\0', no file is
// created) or, for "tcp:<address>:<port>", an IPv4 one.
struct Endpoint {
  sockaddr_storage address{};
  socklen_t length = 0;
  int family() const { return address.ss_family; }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&address); }
};

Status ParseEndpoint(std::string_view name, Endpoint* out) {
  if (name.substr(0, kTcpPrefix.size()) != kTcpPrefix) {
    if (name.empty() || name.size() > sizeof(sockaddr_un{}.sun_path) - 2) {
      return Status::Contract(ErrorCode::kInvalidArgument, "bootstrap name",
                              "1 to " + std::to_string(sizeof(sockaddr_un{}.sun_path) - 2) +
                                  " bytes",
                              std::to_string(name.size()) + " bytes");
    }
    auto* address = reinterpret_cast<sockaddr_un*>(&out->address);
    address->sun_family = AF_UNIX;
    std::memcpy(address->sun_path + 1, name.data(), name.size());
    out->length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
    return Status::Ok();
  }
  const std::string_view rest = name.substr(kTcpPrefix.size());
  const std::size_t colon = rest.rfind(':');
  const std::string host(rest.substr(0, colon == std::string_view::npos ? 0 : colon));
  const std::string port(colon == std::string_view::npos ? "" : rest.substr(colon + 1));
  auto* address = reinterpret_cast<sockaddr_in*>(&out->address);
  address->sin_family = AF_INET;
  char* end = nullptr;
  const unsigned long number = port.empty() ? 0 : std::strtoul(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || number == 0 || number > 65535 ||
      ::inet_pton(AF_INET, host.c_str(), &address->sin_addr) != 1) {
    return Status::Contract(ErrorCode::kInvalidArgument, "bootstrap name",
                            "a Unix socket name or tcp:<IPv4 address>:<port>",
                            "\"" + std::string(name) + "\"");
  }
  address->sin_port = htons(static_cast<std::uint16_t>(number));
  out->length = sizeof(sockaddr_in);
  return Status::Ok();
}

struct Hello {
  std::uint32_t magic;
  std::int32_t rank;
  std::int32_t size;
};

}  // namespace

std::string SocketBootstrap::UniqueName() {
  std::random_device device;
  const auto now = std::chrono::steady_clock::now().time_since_epoch().count();
  return "hyper_parallel_shmem." + std::to_string(::getpid()) + "." + std::to_string(now) + "." +
         std::to_string(device());
}

Status SocketBootstrap::Create(std::string_view name, int rank, int size,
                                   std::chrono::milliseconds timeout,
                                   std::unique_ptr<SocketBootstrap>* out) {
  if (size < 1 || size > kMaxPes) {
    return Status::Contract(ErrorCode::kInvalidArgument, "bootstrap world size",
                            "in [1, " + std::to_string(kMaxPes) + "]", std::to_string(size));
  }
  if (rank < 0 || rank >= size) {
    return Status::Contract(ErrorCode::kInvalidArgument, "bootstrap rank",
                            "in [0, " + std::to_string(size) + ")", std::to_string(rank));
  }
  Endpoint endpoint;
  HPS_RETURN_IF_ERROR(ParseEndpoint(name, &endpoint));
  const bool tcp = endpoint.family() == AF_INET;
  std::unique_ptr<SocketBootstrap> boot(new SocketBootstrap(rank, size));
  const auto deadline = Clock::now() + timeout;

  if (size == 1) {
    *out = std::move(boot);
    return Status::Ok();
  }

  if (rank == 0) {
    const int listener =
        ::socket(endpoint.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (listener < 0) return SystemError("bootstrap socket failed", errno);
    struct Closer {
      int fd;
      ~Closer() { ::close(fd); }
    } closer{listener};
    const int one = 1;
    if (tcp) ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(listener, endpoint.get(), endpoint.length) != 0) {
      return SystemError("bootstrap bind failed", errno, {{"name", std::string(name)}});
    }
    if (::listen(listener, size) != 0) return SystemError("bootstrap listen failed", errno);
    boot->peers_.assign(size, -1);
    int accepted = 0;
    while (accepted < size - 1) {
      HPS_RETURN_IF_ERROR(WaitFd(listener, POLLIN, deadline, "connect", -1, timeout));
      const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) {
        if (errno == EAGAIN || errno == EINTR) continue;
        return SystemError("bootstrap accept failed", errno);
      }
      ucred credentials{};
      socklen_t credentials_length = sizeof credentials;
      if (!tcp &&
          (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &credentials_length) != 0 ||
           credentials.uid != ::getuid())) {
        ::close(fd);  // another user's process: never part of this job
        continue;
      }
      if (tcp) ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      Hello hello{};
      Status status = RecvAll(fd, &hello, sizeof hello, deadline, -1, timeout);
      if (!status.ok() || hello.magic != kHelloMagic || hello.size != size || hello.rank <= 0 ||
          hello.rank >= size || boot->peers_[hello.rank] != -1) {
        ::close(fd);
        if (!status.ok()) return status;
        return Status::Assertion(ErrorCode::kInvalidConfig,
                                 "bootstrap peer disagrees on the group",
                                 {{"peer_rank", std::to_string(hello.rank)},
                                  {"peer_size", std::to_string(hello.size)},
                                  {"size", std::to_string(size)}});
      }
      // Admit it: a client returns from Create only once the root accepted it, so a process
      // the root refuses (another user's) fails here instead of later.
      const char welcome = 'K';
      HPS_RETURN_IF_ERROR(SendAll(fd, &welcome, 1, deadline, hello.rank, timeout));
      boot->peers_[hello.rank] = fd;
      ++accepted;
    }
  } else {
    int fd = -1;
    for (int attempt = 0;; ++attempt) {
      fd = ::socket(endpoint.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) return SystemError("bootstrap socket failed", errno);
      if (::connect(fd, endpoint.get(), endpoint.length) == 0) {
        const int one = 1;
        if (tcp) ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        break;
      }
      const int error = errno;
      ::close(fd);
      if (error != ECONNREFUSED && error != ENOENT && error != EAGAIN && error != ENETUNREACH &&
          error != EHOSTUNREACH && error != ETIMEDOUT) {
        return SystemError("bootstrap connect failed", error, {{"name", std::string(name)}});
      }
      if (Clock::now() >= deadline) return TimedOut("rank 0 to listen", 0, timeout);
      // Rank 0 may not listen yet: back off gently so 8 PEs on 2 cores do not spin.
      std::this_thread::sleep_for(std::chrono::milliseconds(attempt < 10 ? 1 : 10));
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    boot->peers_.assign(1, fd);
    // The root closes a connection it refuses at once: the hello may fail to send as well as
    // the welcome to arrive.
    const Hello hello{kHelloMagic, rank, size};
    char welcome = 0;
    Status admitted = SendAll(fd, &hello, sizeof hello, deadline, 0, timeout);
    if (admitted.ok()) admitted = RecvAll(fd, &welcome, 1, deadline, 0, timeout);
    if (!admitted.ok() || welcome != 'K') {
      if (admitted.code() == ErrorCode::kTimeout) return admitted;
      return Status::Assertion(ErrorCode::kBackendError,
                               "bootstrap root refused this process (only processes of the "
                               "root's user may join)",
                               {{"name", std::string(name)}, {"rank", std::to_string(rank)}});
    }
  }
  *out = std::move(boot);
  return Status::Ok();
}

Status SocketBootstrap::FromEnvironment(const EnvLookup& env,
                                            std::chrono::milliseconds timeout,
                                            std::unique_ptr<SocketBootstrap>* out) {
  const auto name = env(kEnvBootstrapName);
  const auto rank_text = env(kEnvRank);
  const auto size_text = env(kEnvWorldSize);
  if (!name || !rank_text || !size_text) {
    return Status::Assertion(ErrorCode::kInvalidConfig,
                             "bootstrap environment is incomplete",
                             {{std::string(kEnvBootstrapName), name ? *name : "<unset>"},
                              {std::string(kEnvRank), rank_text ? *rank_text : "<unset>"},
                              {std::string(kEnvWorldSize), size_text ? *size_text : "<unset>"}});
  }
  std::uint64_t size = 0;
  HPS_RETURN_IF_ERROR(ParsePositiveDecimal(kEnvWorldSize, *size_text, kMaxPes, &size));
  std::uint64_t rank = 0;
  if (*rank_text != "0") {
    HPS_RETURN_IF_ERROR(ParsePositiveDecimal(kEnvRank, *rank_text, kMaxPes - 1, &rank));
  }
  return Create(*name, static_cast<int>(rank), static_cast<int>(size), timeout, out);
}

SocketBootstrap::~SocketBootstrap() {
  for (int fd : peers_) {
    if (fd >= 0) ::close(fd);
  }
}

Status SocketBootstrap::AllGather(std::string_view mine, std::chrono::milliseconds timeout,
                                      std::vector<std::string>* all) {
  const auto deadline = Clock::now() + timeout;
  std::vector<std::string> gathered(size_);
  gathered[rank_] = std::string(mine);
  if (size_ > 1) {
    if (rank_ == 0) {
      for (int peer = 1; peer < size_; ++peer) {
        HPS_RETURN_IF_ERROR(RecvMessage(peers_[peer], &gathered[peer], deadline, peer, timeout));
      }
      for (int peer = 1; peer < size_; ++peer) {
        for (int source = 0; source < size_; ++source) {
          HPS_RETURN_IF_ERROR(
              SendMessage(peers_[peer], gathered[source], deadline, peer, timeout));
        }
      }
    } else {
      HPS_RETURN_IF_ERROR(SendMessage(peers_[0], mine, deadline, 0, timeout));
      for (int source = 0; source < size_; ++source) {
        HPS_RETURN_IF_ERROR(RecvMessage(peers_[0], &gathered[source], deadline, 0, timeout));
      }
    }
  }
  *all = std::move(gathered);
  return Status::Ok();
}

Status SocketBootstrap::Barrier(std::chrono::milliseconds timeout) {
  std::vector<std::string> ignored;
  return AllGather({}, timeout, &ignored);
}

}  // namespace hyper_parallel::shmem
