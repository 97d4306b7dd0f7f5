// The OpenSHMEM C library's memory entry points (docs/openshmem.md): shmem_malloc and its
// kin over the Runtime's collective allocation (library.h: Allocate, Release).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "bindings/openshmem/include/shmem.h"
#include "bindings/openshmem/library.h"

using namespace hyper_parallel::shmem::openshmem;

extern "C" {

void* shmem_malloc(size_t size) {
  if (size == 0) return nullptr;
  return Allocate("shmem_malloc", size, 64);
}
void* shmem_malloc_with_hints(size_t size, long hints) {
  (void)hints;  // one kind of memory: every hint is met by it
  if (size == 0) return nullptr;
  return Allocate("shmem_malloc_with_hints", size, 64);
}
void* shmem_calloc(size_t count, size_t size) {
  if (count == 0 || size == 0) return nullptr;
  if (size > SIZE_MAX / count) {
    FailArgument("shmem_calloc", "count * size", "a size that fits size_t",
                 std::to_string(count) + " * " + std::to_string(size));
  }
  void* p = Allocate("shmem_calloc", count * size, 64);
  if (p != nullptr) {
    std::memset(p, 0, count * size);
    shmem_barrier_all();  // no PE writes into a peer's block before it is zeroed
  }
  return p;
}
void* shmem_align(size_t alignment, size_t size) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    FailArgument("shmem_align", "alignment", "a power of two", std::to_string(alignment));
  }
  if (size == 0) return nullptr;
  return Allocate("shmem_align", size, std::max<std::uint64_t>(alignment, 64));
}
void shmem_free(void* ptr) {
  if (ptr == nullptr) return;
  Quiet("shmem_free");
  Release("shmem_free", ptr);
}
void* shmem_realloc(void* ptr, size_t size) {
  if (ptr == nullptr) return shmem_malloc(size);
  if (size == 0) {
    shmem_free(ptr);
    return nullptr;
  }
  const std::uint64_t old_bytes = BytesToEnd(ptr);
  Quiet("shmem_realloc");
  void* fresh = Allocate("shmem_realloc", size, 64);
  if (fresh == nullptr) return nullptr;
  std::memcpy(fresh, ptr, std::min<std::uint64_t>(old_bytes, size));
  Release("shmem_realloc", ptr);
  return fresh;
}
void* shmalloc(size_t size) { return shmem_malloc(size); }
void* shmemalign(size_t alignment, size_t size) { return shmem_align(alignment, size); }
void* shrealloc(void* ptr, size_t size) { return shmem_realloc(ptr, size); }
void shfree(void* ptr) { shmem_free(ptr); }

}  // extern "C"
