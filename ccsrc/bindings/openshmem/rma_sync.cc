// The OpenSHMEM C library's point-to-point synchronization (docs/openshmem.md, "What is
// there"): shmem_<T>_wait_until and shmem_<T>_test with their _all, _any, _some and _vector
// forms, and the deprecated shmem_<T>_wait; every wait is a WaitUntil (library.h).
#include "bindings/openshmem/rma.h"

namespace hyper_parallel::shmem::openshmem {

void CheckComparison(std::string_view call, int cmp) {
  if (cmp < SHMEM_CMP_EQ || cmp > SHMEM_CMP_LE) {
    FailArgument(call, "cmp", "one of SHMEM_CMP_EQ, _NE, _GT, _GE, _LT, _LE", std::to_string(cmp));
  }
}

namespace {

// The element i's target: the one value, or values[i] for the _vector forms.
template <class T>
struct Targets {
  T value{};
  const T* values = nullptr;
  T operator[](std::size_t i) const { return values ? values[i] : value; }
};

template <class T>
bool Selected(const int* status, std::size_t i) { return status == nullptr || status[i] == 0; }

// Where each thread's next _any search starts: one past the index it found last, so that
// repeated calls find every satisfied element in turn (fairness), not always the first.
thread_local std::size_t any_start = 0;

template <class T>
std::size_t TestAny(T* ivars, std::size_t n, const int* status, int cmp, Targets<T> t) {
  for (std::size_t k = 0; k < n; ++k) {
    const std::size_t i = (any_start + k) % n;
    if (Selected<T>(status, i) && Compare(Load(&ivars[i]), cmp, t[i])) {
      any_start = i + 1;
      return i;
    }
  }
  return SIZE_MAX;
}

template <class T>
bool TestAll(T* ivars, std::size_t n, const int* status, int cmp, Targets<T> t) {
  for (std::size_t i = 0; i < n; ++i) {
    if (Selected<T>(status, i) && !Compare(Load(&ivars[i]), cmp, t[i])) return false;
  }
  return true;
}

template <class T>
std::size_t TestSome(T* ivars, std::size_t n, std::size_t* indices, const int* status, int cmp,
                     Targets<T> t) {
  std::size_t found = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (Selected<T>(status, i) && Compare(Load(&ivars[i]), cmp, t[i])) indices[found++] = i;
  }
  return found;
}

template <class T>
bool AnySelected(const int* status, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    if (Selected<T>(status, i)) return true;
  }
  return false;
}

template <class T>
std::size_t WaitAny(std::string_view call, T* ivars, std::size_t n, const int* status, int cmp,
                    Targets<T> t) {
  Ready(call);
  CheckComparison(call, cmp);
  CheckIvar(call, ivars, n);
  if (!AnySelected<T>(status, n)) return SIZE_MAX;
  std::size_t found = SIZE_MAX;
  WaitUntil(call, [&] { return (found = TestAny(ivars, n, status, cmp, t)) != SIZE_MAX; });
  return found;
}

template <class T>
void WaitAll(std::string_view call, T* ivars, std::size_t n, const int* status, int cmp,
             Targets<T> t) {
  Ready(call);
  CheckComparison(call, cmp);
  CheckIvar(call, ivars, n);
  WaitUntil(call, [&] { return TestAll(ivars, n, status, cmp, t); });
}

template <class T>
std::size_t WaitSome(std::string_view call, T* ivars, std::size_t n, std::size_t* indices,
                     const int* status, int cmp, Targets<T> t) {
  Ready(call);
  CheckComparison(call, cmp);
  CheckIvar(call, ivars, n);
  if (!AnySelected<T>(status, n)) return 0;
  std::size_t found = 0;
  WaitUntil(call, [&] { return (found = TestSome(ivars, n, indices, status, cmp, t)) > 0; });
  return found;
}

}  // namespace
}  // namespace hyper_parallel::shmem::openshmem

using namespace hyper_parallel::shmem;
using namespace hyper_parallel::shmem::openshmem;

extern "C" {

#define HPS_DEFINE_SYNC(T, N)                                                                      \
  void shmem_##N##_wait_until(T* ivar, int cmp, T cmp_value) {                                    \
    WaitOne("shmem_" #N "_wait_until", ivar, cmp, cmp_value);                                     \
  }                                                                                                \
  size_t shmem_##N##_wait_until_all(T* ivars, size_t nelems, const int* status, int cmp,          \
                                    T cmp_value) {                                                 \
    WaitAll("shmem_" #N "_wait_until_all", ivars, nelems, status, cmp, Targets<T>{cmp_value});    \
    return 0;                                                                                      \
  }                                                                                                \
  size_t shmem_##N##_wait_until_any(T* ivars, size_t nelems, const int* status, int cmp,          \
                                    T cmp_value) {                                                 \
    return WaitAny("shmem_" #N "_wait_until_any", ivars, nelems, status, cmp,                     \
                   Targets<T>{cmp_value});                                                         \
  }                                                                                                \
  size_t shmem_##N##_wait_until_some(T* ivars, size_t nelems, size_t* indices,                    \
                                     const int* status, int cmp, T cmp_value) {                    \
    return WaitSome("shmem_" #N "_wait_until_some", ivars, nelems, indices, status, cmp,          \
                    Targets<T>{cmp_value});                                                        \
  }                                                                                                \
  void shmem_##N##_wait_until_all_vector(T* ivars, size_t nelems, const int* status, int cmp,     \
                                         T* cmp_values) {                                          \
    WaitAll("shmem_" #N "_wait_until_all_vector", ivars, nelems, status, cmp,                     \
            Targets<T>{Zero<T>(), cmp_values});                                                          \
  }                                                                                                \
  size_t shmem_##N##_wait_until_any_vector(T* ivars, size_t nelems, const int* status, int cmp,   \
                                           T* cmp_values) {                                        \
    return WaitAny("shmem_" #N "_wait_until_any_vector", ivars, nelems, status, cmp,              \
                   Targets<T>{Zero<T>(), cmp_values});                                                   \
  }                                                                                                \
  size_t shmem_##N##_wait_until_some_vector(T* ivars, size_t nelems, size_t* indices,             \
                                            const int* status, int cmp, T* cmp_values) {           \
    return WaitSome("shmem_" #N "_wait_until_some_vector", ivars, nelems, indices, status, cmp,   \
                    Targets<T>{Zero<T>(), cmp_values});                                                  \
  }                                                                                                \
  int shmem_##N##_test(T* ivar, int cmp, T cmp_value) {                                           \
    Ready("shmem_" #N "_test");                                                                   \
    CheckComparison("shmem_" #N "_test", cmp);                                                    \
    CheckIvar("shmem_" #N "_test", ivar, 1);                                                      \
    return Compare(Load(ivar), cmp, cmp_value) ? 1 : 0;                                           \
  }                                                                                                \
  int shmem_##N##_test_all(T* ivars, size_t nelems, const int* status, int cmp, T cmp_value) {    \
    CheckComparison("shmem_" #N "_test_all", cmp);                                                \
    return TestAll(ivars, nelems, status, cmp, Targets<T>{cmp_value}) ? 1 : 0;                    \
  }                                                                                                \
  size_t shmem_##N##_test_any(T* ivars, size_t nelems, const int* status, int cmp,                \
                              T cmp_value) {                                                       \
    CheckComparison("shmem_" #N "_test_any", cmp);                                                \
    return TestAny(ivars, nelems, status, cmp, Targets<T>{cmp_value});                            \
  }                                                                                                \
  size_t shmem_##N##_test_some(T* ivars, size_t nelems, size_t* indices, const int* status,       \
                               int cmp, T cmp_value) {                                             \
    CheckComparison("shmem_" #N "_test_some", cmp);                                               \
    return TestSome(ivars, nelems, indices, status, cmp, Targets<T>{cmp_value});                  \
  }                                                                                                \
  int shmem_##N##_test_all_vector(T* ivars, size_t nelems, const int* status, int cmp,            \
                                  T* cmp_values) {                                                 \
    CheckComparison("shmem_" #N "_test_all_vector", cmp);                                         \
    return TestAll(ivars, nelems, status, cmp, Targets<T>{Zero<T>(), cmp_values}) ? 1 : 0;              \
  }                                                                                                \
  size_t shmem_##N##_test_any_vector(T* ivars, size_t nelems, const int* status, int cmp,         \
                                     T* cmp_values) {                                              \
    CheckComparison("shmem_" #N "_test_any_vector", cmp);                                         \
    return TestAny(ivars, nelems, status, cmp, Targets<T>{Zero<T>(), cmp_values});                      \
  }                                                                                                \
  size_t shmem_##N##_test_some_vector(T* ivars, size_t nelems, size_t* indices,                   \
                                      const int* status, int cmp, T* cmp_values) {                 \
    CheckComparison("shmem_" #N "_test_some_vector", cmp);                                        \
    return TestSome(ivars, nelems, indices, status, cmp, Targets<T>{Zero<T>(), cmp_values});            \
  }
HPS_SHMEM_SYNC_TYPES(HPS_DEFINE_SYNC)
#define HPS_DEFINE_OLD_WAIT(T, N) \
  void shmem_##N##_wait(T* ivar, T cmp_value) { WaitOne("shmem_" #N "_wait", ivar, SHMEM_CMP_NE, cmp_value); }
HPS_SHMEM_OLD_WAIT_TYPES(HPS_DEFINE_OLD_WAIT)

}  // extern "C"
