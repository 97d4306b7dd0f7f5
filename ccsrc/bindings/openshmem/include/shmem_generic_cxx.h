/* The type-generic names of the OpenSHMEM 1.5 C API in C++ (docs/openshmem.md): one inline
 * overload per distinct C type, calling the typed routine. Included by shmem_generic.h. */
#ifndef HPS_OPENSHMEM_SHMEM_GENERIC_CXX_H
#define HPS_OPENSHMEM_SHMEM_GENERIC_CXX_H

inline int shmem_sync(shmem_team_t team) { return shmem_team_sync(team); }

#define HPS_CXX_RMA(T, N)                                                                        \
  inline void shmem_put(T* d, const T* s, size_t n, int pe) { shmem_##N##_put(d, s, n, pe); }     \
  inline void shmem_put(shmem_ctx_t c, T* d, const T* s, size_t n, int pe) {                      \
    shmem_ctx_##N##_put(c, d, s, n, pe);                                                          \
  }                                                                                               \
  inline void shmem_get(T* d, const T* s, size_t n, int pe) { shmem_##N##_get(d, s, n, pe); }     \
  inline void shmem_get(shmem_ctx_t c, T* d, const T* s, size_t n, int pe) {                      \
    shmem_ctx_##N##_get(c, d, s, n, pe);                                                          \
  }                                                                                               \
  inline void shmem_put_nbi(T* d, const T* s, size_t n, int pe) {                                 \
    shmem_##N##_put_nbi(d, s, n, pe);                                                             \
  }                                                                                               \
  inline void shmem_put_nbi(shmem_ctx_t c, T* d, const T* s, size_t n, int pe) {                  \
    shmem_ctx_##N##_put_nbi(c, d, s, n, pe);                                                      \
  }                                                                                               \
  inline void shmem_get_nbi(T* d, const T* s, size_t n, int pe) {                                 \
    shmem_##N##_get_nbi(d, s, n, pe);                                                             \
  }                                                                                               \
  inline void shmem_get_nbi(shmem_ctx_t c, T* d, const T* s, size_t n, int pe) {                  \
    shmem_ctx_##N##_get_nbi(c, d, s, n, pe);                                                      \
  }                                                                                               \
  inline void shmem_p(T* d, T v, int pe) { shmem_##N##_p(d, v, pe); }                            \
  inline void shmem_p(shmem_ctx_t c, T* d, T v, int pe) { shmem_ctx_##N##_p(c, d, v, pe); }       \
  inline T shmem_g(const T* s, int pe) { return shmem_##N##_g(s, pe); }                           \
  inline T shmem_g(shmem_ctx_t c, const T* s, int pe) { return shmem_ctx_##N##_g(c, s, pe); }     \
  inline void shmem_iput(T* d, const T* s, ptrdiff_t dst, ptrdiff_t sst, size_t n, int pe) {      \
    shmem_##N##_iput(d, s, dst, sst, n, pe);                                                      \
  }                                                                                               \
  inline void shmem_iput(shmem_ctx_t c, T* d, const T* s, ptrdiff_t dst, ptrdiff_t sst, size_t n, \
                         int pe) {                                                                \
    shmem_ctx_##N##_iput(c, d, s, dst, sst, n, pe);                                               \
  }                                                                                               \
  inline void shmem_iget(T* d, const T* s, ptrdiff_t dst, ptrdiff_t sst, size_t n, int pe) {      \
    shmem_##N##_iget(d, s, dst, sst, n, pe);                                                      \
  }                                                                                               \
  inline void shmem_iget(shmem_ctx_t c, T* d, const T* s, ptrdiff_t dst, ptrdiff_t sst, size_t n, \
                         int pe) {                                                                \
    shmem_ctx_##N##_iget(c, d, s, dst, sst, n, pe);                                               \
  }                                                                                               \
  inline void shmem_put_signal(T* d, const T* s, size_t n, uint64_t* sig, uint64_t v, int op,     \
                               int pe) {                                                          \
    shmem_##N##_put_signal(d, s, n, sig, v, op, pe);                                              \
  }                                                                                               \
  inline void shmem_put_signal_nbi(T* d, const T* s, size_t n, uint64_t* sig, uint64_t v,         \
                                   int op, int pe) {                                              \
    shmem_##N##_put_signal_nbi(d, s, n, sig, v, op, pe);                                          \
  }                                                                                               \
  inline int shmem_broadcast(shmem_team_t t, T* d, const T* s, size_t n, int root) {              \
    return shmem_##N##_broadcast(t, d, s, n, root);                                               \
  }                                                                                               \
  inline int shmem_collect(shmem_team_t t, T* d, const T* s, size_t n) {                          \
    return shmem_##N##_collect(t, d, s, n);                                                       \
  }                                                                                               \
  inline int shmem_fcollect(shmem_team_t t, T* d, const T* s, size_t n) {                         \
    return shmem_##N##_fcollect(t, d, s, n);                                                      \
  }                                                                                               \
  inline int shmem_alltoall(shmem_team_t t, T* d, const T* s, size_t n) {                         \
    return shmem_##N##_alltoall(t, d, s, n);                                                      \
  }                                                                                               \
  inline int shmem_alltoalls(shmem_team_t t, T* d, const T* s, ptrdiff_t dst, ptrdiff_t sst,      \
                             size_t n) {                                                          \
    return shmem_##N##_alltoalls(t, d, s, dst, sst, n);                                           \
  }
HPS_SHMEM_RMA_BASE_TYPES(HPS_CXX_RMA)
#undef HPS_CXX_RMA

#define HPS_CXX_AMO_EXTENDED(T, N)                                                               \
  inline T shmem_atomic_fetch(const T* s, int pe) { return shmem_##N##_atomic_fetch(s, pe); }     \
  inline T shmem_atomic_fetch(shmem_ctx_t c, const T* s, int pe) {                                \
    return shmem_ctx_##N##_atomic_fetch(c, s, pe);                                                \
  }                                                                                               \
  inline void shmem_atomic_set(T* d, T v, int pe) { shmem_##N##_atomic_set(d, v, pe); }           \
  inline void shmem_atomic_set(shmem_ctx_t c, T* d, T v, int pe) {                                \
    shmem_ctx_##N##_atomic_set(c, d, v, pe);                                                      \
  }                                                                                               \
  inline T shmem_atomic_swap(T* d, T v, int pe) { return shmem_##N##_atomic_swap(d, v, pe); }     \
  inline T shmem_atomic_swap(shmem_ctx_t c, T* d, T v, int pe) {                                  \
    return shmem_ctx_##N##_atomic_swap(c, d, v, pe);                                              \
  }                                                                                               \
  inline void shmem_atomic_fetch_nbi(T* f, const T* s, int pe) {                                  \
    shmem_##N##_atomic_fetch_nbi(f, s, pe);                                                       \
  }                                                                                               \
  inline void shmem_atomic_swap_nbi(T* f, T* d, T v, int pe) {                                    \
    shmem_##N##_atomic_swap_nbi(f, d, v, pe);                                                     \
  }
HPS_SHMEM_AMO_EXTENDED_BASE_TYPES(HPS_CXX_AMO_EXTENDED)
#undef HPS_CXX_AMO_EXTENDED

#define HPS_CXX_AMO_STANDARD(T, N)                                                               \
  inline T shmem_atomic_compare_swap(T* d, T cond, T v, int pe) {                                 \
    return shmem_##N##_atomic_compare_swap(d, cond, v, pe);                                       \
  }                                                                                               \
  inline T shmem_atomic_compare_swap(shmem_ctx_t c, T* d, T cond, T v, int pe) {                  \
    return shmem_ctx_##N##_atomic_compare_swap(c, d, cond, v, pe);                                \
  }                                                                                               \
  inline T shmem_atomic_fetch_inc(T* d, int pe) { return shmem_##N##_atomic_fetch_inc(d, pe); }  \
  inline T shmem_atomic_fetch_inc(shmem_ctx_t c, T* d, int pe) {                                  \
    return shmem_ctx_##N##_atomic_fetch_inc(c, d, pe);                                            \
  }                                                                                               \
  inline void shmem_atomic_inc(T* d, int pe) { shmem_##N##_atomic_inc(d, pe); }                   \
  inline void shmem_atomic_inc(shmem_ctx_t c, T* d, int pe) { shmem_ctx_##N##_atomic_inc(c, d, pe); } \
  inline T shmem_atomic_fetch_add(T* d, T v, int pe) {                                            \
    return shmem_##N##_atomic_fetch_add(d, v, pe);                                                \
  }                                                                                               \
  inline T shmem_atomic_fetch_add(shmem_ctx_t c, T* d, T v, int pe) {                             \
    return shmem_ctx_##N##_atomic_fetch_add(c, d, v, pe);                                         \
  }                                                                                               \
  inline void shmem_atomic_add(T* d, T v, int pe) { shmem_##N##_atomic_add(d, v, pe); }           \
  inline void shmem_atomic_add(shmem_ctx_t c, T* d, T v, int pe) {                                \
    shmem_ctx_##N##_atomic_add(c, d, v, pe);                                                      \
  }                                                                                               \
  inline void shmem_atomic_compare_swap_nbi(T* f, T* d, T cond, T v, int pe) {                    \
    shmem_##N##_atomic_compare_swap_nbi(f, d, cond, v, pe);                                       \
  }                                                                                               \
  inline void shmem_atomic_fetch_inc_nbi(T* f, T* d, int pe) {                                    \
    shmem_##N##_atomic_fetch_inc_nbi(f, d, pe);                                                   \
  }                                                                                               \
  inline void shmem_atomic_fetch_add_nbi(T* f, T* d, T v, int pe) {                               \
    shmem_##N##_atomic_fetch_add_nbi(f, d, v, pe);                                                \
  }
HPS_SHMEM_AMO_STANDARD_BASE_TYPES(HPS_CXX_AMO_STANDARD)
#undef HPS_CXX_AMO_STANDARD

#define HPS_CXX_AMO_BITWISE_OP(T, N, OP)                                                         \
  inline T shmem_atomic_fetch_##OP(T* d, T v, int pe) {                                           \
    return shmem_##N##_atomic_fetch_##OP(d, v, pe);                                               \
  }                                                                                               \
  inline T shmem_atomic_fetch_##OP(shmem_ctx_t c, T* d, T v, int pe) {                            \
    return shmem_ctx_##N##_atomic_fetch_##OP(c, d, v, pe);                                        \
  }                                                                                               \
  inline void shmem_atomic_##OP(T* d, T v, int pe) { shmem_##N##_atomic_##OP(d, v, pe); }         \
  inline void shmem_atomic_##OP(shmem_ctx_t c, T* d, T v, int pe) {                               \
    shmem_ctx_##N##_atomic_##OP(c, d, v, pe);                                                     \
  }                                                                                               \
  inline void shmem_atomic_fetch_##OP##_nbi(T* f, T* d, T v, int pe) {                            \
    shmem_##N##_atomic_fetch_##OP##_nbi(f, d, v, pe);                                             \
  }
#define HPS_CXX_AMO_BITWISE(T, N)                                                                \
  HPS_CXX_AMO_BITWISE_OP(T, N, and) HPS_CXX_AMO_BITWISE_OP(T, N, or)                              \
  HPS_CXX_AMO_BITWISE_OP(T, N, xor)
HPS_SHMEM_AMO_BITWISE_BASE_TYPES(HPS_CXX_AMO_BITWISE)
#undef HPS_CXX_AMO_BITWISE
#undef HPS_CXX_AMO_BITWISE_OP

#define HPS_CXX_SYNC(T, N)                                                                       \
  inline void shmem_wait_until(T* v, int cmp, T value) { shmem_##N##_wait_until(v, cmp, value); } \
  inline int shmem_test(T* v, int cmp, T value) { return shmem_##N##_test(v, cmp, value); }       \
  inline size_t shmem_wait_until_all(T* v, size_t n, const int* st, int cmp, T value) {           \
    return shmem_##N##_wait_until_all(v, n, st, cmp, value);                                      \
  }                                                                                               \
  inline size_t shmem_wait_until_any(T* v, size_t n, const int* st, int cmp, T value) {           \
    return shmem_##N##_wait_until_any(v, n, st, cmp, value);                                      \
  }                                                                                               \
  inline size_t shmem_wait_until_some(T* v, size_t n, size_t* idx, const int* st, int cmp,        \
                                      T value) {                                                  \
    return shmem_##N##_wait_until_some(v, n, idx, st, cmp, value);                                \
  }                                                                                               \
  inline int shmem_test_all(T* v, size_t n, const int* st, int cmp, T value) {                    \
    return shmem_##N##_test_all(v, n, st, cmp, value);                                            \
  }                                                                                               \
  inline size_t shmem_test_any(T* v, size_t n, const int* st, int cmp, T value) {                 \
    return shmem_##N##_test_any(v, n, st, cmp, value);                                            \
  }                                                                                               \
  inline size_t shmem_test_some(T* v, size_t n, size_t* idx, const int* st, int cmp, T value) {   \
    return shmem_##N##_test_some(v, n, idx, st, cmp, value);                                      \
  }
HPS_SHMEM_SYNC_BASE_TYPES(HPS_CXX_SYNC)
#undef HPS_CXX_SYNC

#define HPS_CXX_OLD_AMO(T, N)                                                                    \
  inline T shmem_fadd(T* d, T v, int pe) { return shmem_##N##_fadd(d, v, pe); }                   \
  inline T shmem_finc(T* d, int pe) { return shmem_##N##_finc(d, pe); }                           \
  inline void shmem_add(T* d, T v, int pe) { shmem_##N##_add(d, v, pe); }                         \
  inline void shmem_inc(T* d, int pe) { shmem_##N##_inc(d, pe); }                                 \
  inline T shmem_cswap(T* d, T cond, T v, int pe) { return shmem_##N##_cswap(d, cond, v, pe); }
HPS_SHMEM_AMO_STANDARD_BASE_TYPES(HPS_CXX_OLD_AMO)
#undef HPS_CXX_OLD_AMO
#define HPS_CXX_OLD_AMO_EXTENDED(T, N)                                                           \
  inline T shmem_swap(T* d, T v, int pe) { return shmem_##N##_swap(d, v, pe); }                   \
  inline T shmem_fetch(const T* s, int pe) { return shmem_##N##_fetch(s, pe); }                   \
  inline void shmem_set(T* d, T v, int pe) { shmem_##N##_set(d, v, pe); }
HPS_SHMEM_AMO_EXTENDED_BASE_TYPES(HPS_CXX_OLD_AMO_EXTENDED)
#undef HPS_CXX_OLD_AMO_EXTENDED
#define HPS_CXX_OLD_WAIT(T, N) \
  inline void shmem_wait(T* v, T value) { shmem_##N##_wait(v, value); }
HPS_SHMEM_OLD_WAIT_TYPES(HPS_CXX_OLD_WAIT)
#undef HPS_CXX_OLD_WAIT

#define HPS_CXX_REDUCE(T, N, OP)                                                                 \
  inline int shmem_##OP##_reduce(shmem_team_t t, T* d, const T* s, size_t n) {                    \
    return shmem_##N##_##OP##_reduce(t, d, s, n);                                                 \
  }
#define HPS_CXX_REDUCE_ORDERED(T, N)                                                             \
  HPS_CXX_REDUCE(T, N, min) HPS_CXX_REDUCE(T, N, max) HPS_CXX_REDUCE(T, N, sum)                   \
  HPS_CXX_REDUCE(T, N, prod)
#define HPS_CXX_REDUCE_BITWISE(T, N)                                                             \
  HPS_CXX_REDUCE(T, N, and) HPS_CXX_REDUCE(T, N, or) HPS_CXX_REDUCE(T, N, xor)
HPS_SHMEM_RMA_BASE_TYPES(HPS_CXX_REDUCE_ORDERED)
HPS_CXX_REDUCE_BITWISE(unsigned char, uchar)
HPS_CXX_REDUCE_BITWISE(unsigned short, ushort)
HPS_CXX_REDUCE_BITWISE(unsigned int, uint)
HPS_CXX_REDUCE_BITWISE(unsigned long, ulong)
HPS_CXX_REDUCE_BITWISE(unsigned long long, ulonglong)
HPS_CXX_REDUCE_BITWISE(signed char, int8)
HPS_CXX_REDUCE_BITWISE(short, int16)
HPS_CXX_REDUCE_BITWISE(int, int32)
HPS_CXX_REDUCE_BITWISE(long, int64)
#undef HPS_CXX_REDUCE_BITWISE
#undef HPS_CXX_REDUCE_ORDERED
#undef HPS_CXX_REDUCE

#endif /* HPS_OPENSHMEM_SHMEM_GENERIC_CXX_H */
