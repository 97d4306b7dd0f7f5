// The OpenSHMEM C library's environment (docs/openshmem.md, "Configuration"): the variables the
// Runtime reads, SHMEM_SYMMETRIC_SIZE among them, and how this PE finds the others.
#include <cerrno>
#include <cstdlib>

#include "bindings/openshmem/library_state.h"

namespace hyper_parallel::shmem::openshmem {

namespace {

// Bytes from SHMEM_SYMMETRIC_SIZE ("64M", "1G", "1048576"; K, M, G, T powers of 1024).
std::optional<std::string> SymmetricSizeBytes(const char* text) {
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text, &end);
  if (errno != 0 || end == text || value <= 0) return std::nullopt;
  double scale = 1;
  switch (*end) {
    case 'k': case 'K': scale = 1024.0; ++end; break;
    case 'm': case 'M': scale = 1024.0 * 1024; ++end; break;
    case 'g': case 'G': scale = 1024.0 * 1024 * 1024; ++end; break;
    case 't': case 'T': scale = 1024.0 * 1024 * 1024 * 1024; ++end; break;
    default: break;
  }
  if (*end == 'b' || *end == 'B') ++end;
  if (*end != '\0') return std::nullopt;
  return std::to_string(static_cast<std::uint64_t>(value * scale));
}

// The C API's heap when neither variable sets it: 1 GiB, as programs written for OpenSHMEM
// expect room (OSU's message-rate tests allocate 200 MiB and hold as much in static data). Pages
// no PE touches cost nothing.
constexpr std::uint64_t kDefaultHeapBytes = std::uint64_t{1} << 30;

}  // namespace

// The process environment, where SHMEM_SYMMETRIC_SIZE stands for the heap size unless
// HYPER_PARALLEL_SHMEM_HEAP_SIZE is set.
std::optional<std::string> Environment(std::string_view name) {
  const std::string key(name);
  if (const char* value = std::getenv(key.c_str())) return std::string(value);
  if (name == kEnvHeapSize) {
    if (const char* size = std::getenv("SHMEM_SYMMETRIC_SIZE")) {
      if (auto bytes = SymmetricSizeBytes(size)) return bytes;
      FailArgument("shmem_init", "SHMEM_SYMMETRIC_SIZE", "a size such as 512M or 1G", size);
    }
    return std::to_string(kDefaultHeapBytes);
  }
  return std::nullopt;
}

// How this PE finds the others: the launcher's variables (hps-oshrun), else those of a torchrun
// job (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: rank 0 listens on MASTER_PORT + 1), else a
// job of one PE.
Status MakeBootstrap(std::chrono::milliseconds timeout, std::unique_ptr<SocketBootstrap>* out) {
  if (std::getenv(std::string(kEnvBootstrapName).c_str()) != nullptr) {
    return SocketBootstrap::FromEnvironment(&Environment, timeout, out);
  }
  const char* rank = std::getenv("RANK");
  const char* size = std::getenv("WORLD_SIZE");
  const char* address = std::getenv("MASTER_ADDR");
  const char* port = std::getenv("MASTER_PORT");
  if (rank && size && address && port) {
    const std::string name =
        "tcp:" + std::string(address) + ":" + std::to_string(std::atoi(port) + 1);
    return SocketBootstrap::Create(name, std::atoi(rank), std::atoi(size), timeout, out);
  }
  return SocketBootstrap::Create(SocketBootstrap::UniqueName(), 0, 1, timeout, out);
}

}  // namespace hyper_parallel::shmem::openshmem
