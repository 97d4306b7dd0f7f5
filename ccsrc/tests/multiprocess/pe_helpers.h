// Small helpers for PE bodies of the multi-process tests.
#pragma once

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "runtime/runtime.h"
#include "testing/collectives.h"
#include "testing/multiprocess.h"

namespace hyper_parallel::shmem::testing {

inline Runtime& Rt() { return Runtime::Process(); }

/// `size` PEs with the given timeout (seconds, as the variable's text; empty: the default) and
/// heap, killed at `deadline`.
inline PeLaunch LaunchPes(int size, const std::string& timeout_sec, std::uint64_t heap_bytes,
                          std::chrono::seconds deadline = std::chrono::seconds(120)) {
  PeLaunch launch{size, deadline, {{"HYPER_PARALLEL_SHMEM_HEAP_SIZE", std::to_string(heap_bytes)}}};
  if (!timeout_sec.empty()) launch.env["HYPER_PARALLEL_SHMEM_TIMEOUT_SEC"] = timeout_sec;
  return launch;
}

inline SymmetricView View(const Allocation& a) { return SymmetricView{a.id, a.data, a.bytes}; }

inline SymmetricView Sub(const Allocation& a, std::uint64_t offset, std::uint64_t bytes) {
  return SymmetricView{a.id, static_cast<std::byte*>(a.data) + offset, bytes};
}

template <class T>
T* As(const Allocation& a) {
  return static_cast<T*>(a.data);
}

/// Sets every byte of `a` to `byte` with the Runtime's own put to this PE, so that it works
/// whether the heap is host memory or device memory this process cannot address.
inline void Fill(PeContext& ctx, const Allocation& a, unsigned char byte) {
  const std::vector<unsigned char> bytes(a.bytes, byte);
  CHECK_PE_OK(ctx, Rt().Put(View(a), bytes.data(), ctx.rank, {}));
}

/// `a`'s contents as `T`s (as many as fit), read with the Runtime's own get from this PE: on
/// any heap, device memory included.
template <class T>
std::vector<T> ReadBack(PeContext& ctx, const Allocation& a) {
  std::vector<T> values(a.bytes / sizeof(T));
  CHECK_PE_OK(ctx, Rt().Get(values.data(), Sub(a, 0, values.size() * sizeof(T)), ctx.rank, {}));
  return values;
}

/// Allocates or records a failure; returns an empty Allocation on failure.
inline Allocation MustAllocate(PeContext& ctx, std::uint64_t bytes,
                               std::uint64_t alignment = 64) {
  Allocation allocation;
  CHECK_PE_OK(ctx, Rt().Allocate(bytes, alignment, &allocation));
  return allocation;
}

/// Frees every live allocation and shuts the Runtime down.
inline void FreeAllAndShutdown(PeContext& ctx) {
  for (const AllocationRecord& record : Rt().Snapshot().live) {
    auto* base = static_cast<std::byte*>(const_cast<void*>(Rt().Snapshot().heap_base));
    CHECK_PE_OK(ctx, Rt().Free(SymmetricView{record.id, base + record.offset, record.bytes}));
  }
  CHECK_PE_OK(ctx, Rt().Shutdown());
}

inline bool Contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace hyper_parallel::shmem::testing
