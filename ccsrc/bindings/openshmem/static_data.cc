// The executable's static data made symmetric (static_data.h): found through the program
// headers, copied into a heap allocation and mapped over by that allocation's pages.
#include "bindings/openshmem/static_data.h"

#include <link.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "bindings/openshmem/library.h"

namespace hyper_parallel::shmem::openshmem {
namespace {

// The executable's writable PT_LOAD segment past its RELRO part, page-aligned: .data and .bss.
struct Segment {
  std::uintptr_t lo = 0;
  std::uintptr_t hi = 0;
};
int FindWritableSegment(struct dl_phdr_info* info, std::size_t, void* data) {
  auto* segment = static_cast<Segment*>(data);
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  std::uintptr_t relro_end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& h = info->dlpi_phdr[i];
    if (h.p_type == PT_GNU_RELRO) relro_end = info->dlpi_addr + h.p_vaddr + h.p_memsz;
  }
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& h = info->dlpi_phdr[i];
    if (h.p_type != PT_LOAD || (h.p_flags & PF_W) == 0) continue;
    std::uintptr_t lo = info->dlpi_addr + h.p_vaddr;
    const std::uintptr_t hi = lo + h.p_memsz;
    if (relro_end > lo && relro_end < hi) lo = relro_end;
    segment->lo = lo / page * page;
    segment->hi = (hi + page - 1) / page * page;
    break;
  }
  return 1;  // the first object is the executable
}

// mremap(2) itself, not libc's entry: UCX's memory hooks replace that entry when the network
// transport loads, and UCX 1.13's replacement drops the fifth argument (the new address), so
// MREMAP_FIXED would map the pages at address 0 instead of over the static data.
void* Remap(void* from, std::uint64_t old_bytes, std::uint64_t bytes, std::uintptr_t to) {
  const long result = ::syscall(SYS_mremap, from, old_bytes, bytes, MREMAP_MAYMOVE | MREMAP_FIXED,
                                reinterpret_cast<void*>(to));
  if (result == -1 || static_cast<std::uintptr_t>(result) != to) return MAP_FAILED;
  return reinterpret_cast<void*>(result);
}

// Copies whole pages of the static data word by word, without the sanitizers' checks: those
// pages hold the redzones AddressSanitizer puts between globals, which no program reads but a
// copy of the segment must. Returns whether the `bytes` at `from` were all zero (then, with
// `skip_zero`, nothing was written).
#if defined(__clang__) || defined(__GNUC__)
__attribute__((no_sanitize("address", "undefined", "thread")))
#endif
bool CopyPages(std::uintptr_t to, std::uintptr_t from, std::uint64_t bytes, bool skip_zero) {
  const auto* source = reinterpret_cast<const volatile std::uint64_t*>(from);
  auto* target = reinterpret_cast<volatile std::uint64_t*>(to);
  const std::uint64_t words = bytes / 8;
  if (skip_zero) {
    bool zero = true;
    for (std::uint64_t i = 0; i < words && zero; ++i) zero = source[i] == 0;
    if (zero) return true;
  }
  for (std::uint64_t i = 0; i < words; ++i) target[i] = source[i];
  return false;
}

}  // namespace

std::optional<StaticData> MapStaticData(Runtime& runtime) {
  Segment segment;
  ::dl_iterate_phdr(&FindWritableSegment, &segment);
  if (segment.hi <= segment.lo) return std::nullopt;
  const std::uint64_t bytes = segment.hi - segment.lo;
  Allocation allocation;
  if (Status s = runtime.Allocate(bytes, static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE)),
                                  &allocation, "OpenSHMEM static data");
      !s.ok()) {
    Fail("shmem_init", s);
  }
  // The lifecycle's first allocation lies in a heap created zero-filled: copy only the pages
  // that hold something, so a large .bss costs no memory until the program touches it.
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  for (std::uint64_t at = 0; at < bytes; at += page) {
    CopyPages(reinterpret_cast<std::uintptr_t>(allocation.data) + at, segment.lo + at, page, true);
  }
  // old_size 0 on a shared mapping: a second mapping of the same pages, here placed over the
  // private data pages (MREMAP_FIXED replaces them).
  void* moved = Remap(allocation.data, 0, bytes, segment.lo);
  if (moved == MAP_FAILED) {
    Fail("shmem_init", Status::Assertion(ErrorCode::kBackendError,
                                         "could not map the static data onto the heap",
                                         {{"errno", std::strerror(errno)}}));
  }
  return StaticData{segment.lo, segment.hi, allocation};
}

void UnmapStaticData(Runtime& runtime, const StaticData& data) {
  const std::uint64_t bytes = data.hi - data.lo;
  void* copy = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (copy == MAP_FAILED) {
    Fail("shmem_finalize", Status::Assertion(ErrorCode::kBackendError, "out of memory", {}));
  }
  CopyPages(reinterpret_cast<std::uintptr_t>(copy), data.lo, bytes, false);
  if (Remap(copy, bytes, bytes, data.lo) == MAP_FAILED) {
    Fail("shmem_finalize", Status::Assertion(ErrorCode::kBackendError,
                                             "could not give the static data its own pages back",
                                             {{"errno", std::strerror(errno)}}));
  }
  const SymmetricView whole{data.allocation.id, data.allocation.data, data.allocation.bytes};
  if (Status s = runtime.Free(whole, "OpenSHMEM static data"); !s.ok()) Fail("shmem_finalize", s);
}

}  // namespace hyper_parallel::shmem::openshmem
