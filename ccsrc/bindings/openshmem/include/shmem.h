/* Hyper-Parallel SHMEM's OpenSHMEM 1.5 C API (docs/openshmem.md): the specification's routines
 * over the process's one Runtime, the older names programs still call, C11 generic selections
 * and C++ overloads. Clean under -Wall -Wextra -Wundef -Werror in C and C++. */
#ifndef HPS_OPENSHMEM_SHMEM_H
#define HPS_OPENSHMEM_SHMEM_H

#include <stddef.h>
#include <stdint.h>

#include "shmem_types.h"

/* ---- constants ---------------------------------------------------------------------------- */
#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION
#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION
#define SHMEM_MAX_NAME_LEN 256
#define _SHMEM_MAX_NAME_LEN SHMEM_MAX_NAME_LEN
#define SHMEM_VENDOR_STRING "Hyper-Parallel SHMEM"
#define _SHMEM_VENDOR_STRING SHMEM_VENDOR_STRING

#define SHMEM_THREAD_SINGLE 0
#define SHMEM_THREAD_FUNNELED 1
#define SHMEM_THREAD_SERIALIZED 2
#define SHMEM_THREAD_MULTIPLE 3

#define SHMEM_CMP_EQ 0
#define SHMEM_CMP_NE 1
#define SHMEM_CMP_GT 2
#define SHMEM_CMP_GE 3
#define SHMEM_CMP_LT 4
#define SHMEM_CMP_LE 5
#define _SHMEM_CMP_EQ SHMEM_CMP_EQ
#define _SHMEM_CMP_NE SHMEM_CMP_NE
#define _SHMEM_CMP_GT SHMEM_CMP_GT
#define _SHMEM_CMP_GE SHMEM_CMP_GE
#define _SHMEM_CMP_LT SHMEM_CMP_LT
#define _SHMEM_CMP_LE SHMEM_CMP_LE

#define SHMEM_SIGNAL_SET 0
#define SHMEM_SIGNAL_ADD 1

/* pSync and pWrk: the library keeps its own synchronization state, so these arrays are only
 * checked for being symmetric; the sizes are those programs allocate. */
#define SHMEM_SYNC_VALUE 0L
#define SHMEM_SYNC_SIZE 8
#define SHMEM_BARRIER_SYNC_SIZE 8
#define SHMEM_BCAST_SYNC_SIZE 8
#define SHMEM_COLLECT_SYNC_SIZE 8
#define SHMEM_REDUCE_SYNC_SIZE 8
#define SHMEM_ALLTOALL_SYNC_SIZE 8
#define SHMEM_ALLTOALLS_SYNC_SIZE 8
#define SHMEM_REDUCE_MIN_WRKDATA_SIZE 8
#define _SHMEM_SYNC_VALUE SHMEM_SYNC_VALUE
#define _SHMEM_BARRIER_SYNC_SIZE SHMEM_BARRIER_SYNC_SIZE
#define _SHMEM_BCAST_SYNC_SIZE SHMEM_BCAST_SYNC_SIZE
#define _SHMEM_COLLECT_SYNC_SIZE SHMEM_COLLECT_SYNC_SIZE
#define _SHMEM_REDUCE_SYNC_SIZE SHMEM_REDUCE_SYNC_SIZE
#define _SHMEM_ALLTOALL_SYNC_SIZE SHMEM_ALLTOALL_SYNC_SIZE
#define _SHMEM_REDUCE_MIN_WRKDATA_SIZE SHMEM_REDUCE_MIN_WRKDATA_SIZE

#define SHMEM_CTX_SERIALIZED (1L << 0)
#define SHMEM_CTX_PRIVATE (1L << 1)
#define SHMEM_CTX_NOSTORE (1L << 2)
#define SHMEM_TEAM_NUM_CONTEXTS (1L << 0)
#define SHMEM_MALLOC_ATOMICS_REMOTE (1L << 0)
#define SHMEM_MALLOC_SIGNAL_REMOTE (1L << 1)

/* ---- handles ------------------------------------------------------------------------------ */
typedef struct hps_shmem_team_opaque* shmem_team_t;
typedef struct hps_shmem_ctx_opaque* shmem_ctx_t;
typedef struct {
  int num_contexts;
} shmem_team_config_t;

#define SHMEM_TEAM_INVALID ((shmem_team_t)0)
#define SHMEM_TEAM_WORLD ((shmem_team_t)(uintptr_t)1)
#define SHMEM_TEAM_SHARED ((shmem_team_t)(uintptr_t)2)
#define SHMEM_CTX_INVALID ((shmem_ctx_t)0)
#define SHMEM_CTX_DEFAULT ((shmem_ctx_t)(uintptr_t)1)

#ifdef __cplusplus
extern "C" {
#endif

/* ---- setup, exit and queries -------------------------------------------------------------- */
void shmem_init(void);
int shmem_init_thread(int requested, int* provided);
void shmem_query_thread(int* provided);
void shmem_finalize(void);
void shmem_global_exit(int status);
int shmem_my_pe(void);
int shmem_n_pes(void);
int shmem_pe_accessible(int pe);
int shmem_addr_accessible(const void* addr, int pe);
void* shmem_ptr(const void* dest, int pe);
void* shmem_team_ptr(shmem_team_t team, const void* dest, int pe);
void shmem_info_get_version(int* major, int* minor);
void shmem_info_get_name(char* name);
/* pre-1.2 names */
void start_pes(int npes);
int _my_pe(void);
int _num_pes(void);

/* ---- memory ------------------------------------------------------------------------------- */
void* shmem_malloc(size_t size);
void* shmem_calloc(size_t count, size_t size);
void* shmem_realloc(void* ptr, size_t size);
void* shmem_align(size_t alignment, size_t size);
void* shmem_malloc_with_hints(size_t size, long hints);
void shmem_free(void* ptr);
void* shmalloc(size_t size);
void* shmemalign(size_t alignment, size_t size);
void* shrealloc(void* ptr, size_t size);
void shfree(void* ptr);

/* ---- contexts and teams ------------------------------------------------------------------- */
int shmem_ctx_create(long options, shmem_ctx_t* ctx);
void shmem_ctx_destroy(shmem_ctx_t ctx);
int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t* ctx);
int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t* team);
int shmem_team_my_pe(shmem_team_t team);
int shmem_team_n_pes(shmem_team_t team);
int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t* config);
int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team);
int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size,
                             const shmem_team_config_t* config, long config_mask,
                             shmem_team_t* new_team);
int shmem_team_split_2d(shmem_team_t parent_team, int xrange,
                        const shmem_team_config_t* xaxis_config, long xaxis_mask,
                        shmem_team_t* xaxis_team, const shmem_team_config_t* yaxis_config,
                        long yaxis_mask, shmem_team_t* yaxis_team);
void shmem_team_destroy(shmem_team_t team);

/* ---- RMA ---------------------------------------------------------------------------------- */
#define HPS_SHMEM_DECLARE_RMA(T, N)                                                            \
  void shmem_##N##_put(T* dest, const T* source, size_t nelems, int pe);                      \
  void shmem_ctx_##N##_put(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems, int pe); \
  void shmem_##N##_get(T* dest, const T* source, size_t nelems, int pe);                      \
  void shmem_ctx_##N##_get(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems, int pe); \
  void shmem_##N##_put_nbi(T* dest, const T* source, size_t nelems, int pe);                  \
  void shmem_ctx_##N##_put_nbi(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems,      \
                               int pe);                                                        \
  void shmem_##N##_get_nbi(T* dest, const T* source, size_t nelems, int pe);                  \
  void shmem_ctx_##N##_get_nbi(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems,      \
                               int pe);                                                        \
  void shmem_##N##_p(T* dest, T value, int pe);                                               \
  void shmem_ctx_##N##_p(shmem_ctx_t ctx, T* dest, T value, int pe);                          \
  T shmem_##N##_g(const T* source, int pe);                                                   \
  T shmem_ctx_##N##_g(shmem_ctx_t ctx, const T* source, int pe);                              \
  void shmem_##N##_iput(T* dest, const T* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, \
                        int pe);                                                               \
  void shmem_ctx_##N##_iput(shmem_ctx_t ctx, T* dest, const T* source, ptrdiff_t dst,         \
                            ptrdiff_t sst, size_t nelems, int pe);                             \
  void shmem_##N##_iget(T* dest, const T* source, ptrdiff_t dst, ptrdiff_t sst, size_t nelems, \
                        int pe);                                                               \
  void shmem_ctx_##N##_iget(shmem_ctx_t ctx, T* dest, const T* source, ptrdiff_t dst,         \
                            ptrdiff_t sst, size_t nelems, int pe);                             \
  void shmem_##N##_put_signal(T* dest, const T* source, size_t nelems, uint64_t* sig_addr,    \
                              uint64_t signal, int sig_op, int pe);                            \
  void shmem_ctx_##N##_put_signal(shmem_ctx_t ctx, T* dest, const T* source, size_t nelems,   \
                                  uint64_t* sig_addr, uint64_t signal, int sig_op, int pe);   \
  void shmem_##N##_put_signal_nbi(T* dest, const T* source, size_t nelems, uint64_t* sig_addr, \
                                  uint64_t signal, int sig_op, int pe);                        \
  void shmem_ctx_##N##_put_signal_nbi(shmem_ctx_t ctx, T* dest, const T* source,              \
                                      size_t nelems, uint64_t* sig_addr, uint64_t signal,     \
                                      int sig_op, int pe);
HPS_SHMEM_RMA_TYPES(HPS_SHMEM_DECLARE_RMA)

#define HPS_SHMEM_DECLARE_SIZED(BITS, T)                                                       \
  void shmem_put##BITS(void* dest, const void* source, size_t nelems, int pe);                 \
  void shmem_ctx_put##BITS(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems,     \
                           int pe);                                                            \
  void shmem_get##BITS(void* dest, const void* source, size_t nelems, int pe);                 \
  void shmem_ctx_get##BITS(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems,     \
                           int pe);                                                            \
  void shmem_put##BITS##_nbi(void* dest, const void* source, size_t nelems, int pe);           \
  void shmem_ctx_put##BITS##_nbi(shmem_ctx_t ctx, void* dest, const void* source,              \
                                 size_t nelems, int pe);                                       \
  void shmem_get##BITS##_nbi(void* dest, const void* source, size_t nelems, int pe);           \
  void shmem_ctx_get##BITS##_nbi(shmem_ctx_t ctx, void* dest, const void* source,              \
                                 size_t nelems, int pe);                                       \
  void shmem_iput##BITS(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst,          \
                        size_t nelems, int pe);                                                \
  void shmem_ctx_iput##BITS(shmem_ctx_t ctx, void* dest, const void* source, ptrdiff_t dst,    \
                            ptrdiff_t sst, size_t nelems, int pe);                             \
  void shmem_iget##BITS(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst,          \
                        size_t nelems, int pe);                                                \
  void shmem_ctx_iget##BITS(shmem_ctx_t ctx, void* dest, const void* source, ptrdiff_t dst,    \
                            ptrdiff_t sst, size_t nelems, int pe);
HPS_SHMEM_SIZES(HPS_SHMEM_DECLARE_SIZED)
HPS_SHMEM_DECLARE_SIZED(128, void)

void shmem_putmem(void* dest, const void* source, size_t nelems, int pe);
void shmem_ctx_putmem(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, int pe);
void shmem_getmem(void* dest, const void* source, size_t nelems, int pe);
void shmem_ctx_getmem(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, int pe);
void shmem_putmem_nbi(void* dest, const void* source, size_t nelems, int pe);
void shmem_ctx_putmem_nbi(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, int pe);
void shmem_getmem_nbi(void* dest, const void* source, size_t nelems, int pe);
void shmem_ctx_getmem_nbi(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems, int pe);
void shmem_putmem_signal(void* dest, const void* source, size_t nelems, uint64_t* sig_addr,
                         uint64_t signal, int sig_op, int pe);
void shmem_ctx_putmem_signal(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems,
                             uint64_t* sig_addr, uint64_t signal, int sig_op, int pe);
void shmem_putmem_signal_nbi(void* dest, const void* source, size_t nelems, uint64_t* sig_addr,
                             uint64_t signal, int sig_op, int pe);
void shmem_ctx_putmem_signal_nbi(shmem_ctx_t ctx, void* dest, const void* source, size_t nelems,
                                 uint64_t* sig_addr, uint64_t signal, int sig_op, int pe);
uint64_t shmem_signal_fetch(const uint64_t* sig_addr);
uint64_t shmem_signal_wait_until(uint64_t* sig_addr, int cmp, uint64_t cmp_value);

/* ---- atomics ------------------------------------------------------------------------------ */
#define HPS_SHMEM_DECLARE_AMO_EXTENDED(T, N)                                                  \
  T shmem_##N##_atomic_fetch(const T* source, int pe);                                       \
  T shmem_ctx_##N##_atomic_fetch(shmem_ctx_t ctx, const T* source, int pe);                  \
  void shmem_##N##_atomic_set(T* dest, T value, int pe);                                     \
  void shmem_ctx_##N##_atomic_set(shmem_ctx_t ctx, T* dest, T value, int pe);                \
  T shmem_##N##_atomic_swap(T* dest, T value, int pe);                                       \
  T shmem_ctx_##N##_atomic_swap(shmem_ctx_t ctx, T* dest, T value, int pe);                  \
  void shmem_##N##_atomic_fetch_nbi(T* fetch, const T* source, int pe);                      \
  void shmem_ctx_##N##_atomic_fetch_nbi(shmem_ctx_t ctx, T* fetch, const T* source, int pe); \
  void shmem_##N##_atomic_swap_nbi(T* fetch, T* dest, T value, int pe);                      \
  void shmem_ctx_##N##_atomic_swap_nbi(shmem_ctx_t ctx, T* fetch, T* dest, T value, int pe);
HPS_SHMEM_AMO_EXTENDED_TYPES(HPS_SHMEM_DECLARE_AMO_EXTENDED)

#define HPS_SHMEM_DECLARE_AMO_STANDARD(T, N)                                                  \
  T shmem_##N##_atomic_compare_swap(T* dest, T cond, T value, int pe);                       \
  T shmem_ctx_##N##_atomic_compare_swap(shmem_ctx_t ctx, T* dest, T cond, T value, int pe);  \
  T shmem_##N##_atomic_fetch_inc(T* dest, int pe);                                           \
  T shmem_ctx_##N##_atomic_fetch_inc(shmem_ctx_t ctx, T* dest, int pe);                      \
  void shmem_##N##_atomic_inc(T* dest, int pe);                                              \
  void shmem_ctx_##N##_atomic_inc(shmem_ctx_t ctx, T* dest, int pe);                         \
  T shmem_##N##_atomic_fetch_add(T* dest, T value, int pe);                                  \
  T shmem_ctx_##N##_atomic_fetch_add(shmem_ctx_t ctx, T* dest, T value, int pe);             \
  void shmem_##N##_atomic_add(T* dest, T value, int pe);                                     \
  void shmem_ctx_##N##_atomic_add(shmem_ctx_t ctx, T* dest, T value, int pe);                \
  void shmem_##N##_atomic_compare_swap_nbi(T* fetch, T* dest, T cond, T value, int pe);      \
  void shmem_ctx_##N##_atomic_compare_swap_nbi(shmem_ctx_t ctx, T* fetch, T* dest, T cond,   \
                                               T value, int pe);                             \
  void shmem_##N##_atomic_fetch_inc_nbi(T* fetch, T* dest, int pe);                          \
  void shmem_ctx_##N##_atomic_fetch_inc_nbi(shmem_ctx_t ctx, T* fetch, T* dest, int pe);     \
  void shmem_##N##_atomic_fetch_add_nbi(T* fetch, T* dest, T value, int pe);                 \
  void shmem_ctx_##N##_atomic_fetch_add_nbi(shmem_ctx_t ctx, T* fetch, T* dest, T value,     \
                                            int pe);
HPS_SHMEM_AMO_STANDARD_TYPES(HPS_SHMEM_DECLARE_AMO_STANDARD)

#define HPS_SHMEM_DECLARE_AMO_BITWISE_OP(T, N, OP)                                            \
  T shmem_##N##_atomic_fetch_##OP(T* dest, T value, int pe);                                 \
  T shmem_ctx_##N##_atomic_fetch_##OP(shmem_ctx_t ctx, T* dest, T value, int pe);            \
  void shmem_##N##_atomic_##OP(T* dest, T value, int pe);                                    \
  void shmem_ctx_##N##_atomic_##OP(shmem_ctx_t ctx, T* dest, T value, int pe);               \
  void shmem_##N##_atomic_fetch_##OP##_nbi(T* fetch, T* dest, T value, int pe);              \
  void shmem_ctx_##N##_atomic_fetch_##OP##_nbi(shmem_ctx_t ctx, T* fetch, T* dest, T value,  \
                                               int pe);
#define HPS_SHMEM_DECLARE_AMO_BITWISE(T, N)  \
  HPS_SHMEM_DECLARE_AMO_BITWISE_OP(T, N, and) \
  HPS_SHMEM_DECLARE_AMO_BITWISE_OP(T, N, or)  \
  HPS_SHMEM_DECLARE_AMO_BITWISE_OP(T, N, xor)
HPS_SHMEM_AMO_BITWISE_TYPES(HPS_SHMEM_DECLARE_AMO_BITWISE)

/* The deprecated typed atomics. */
#define HPS_SHMEM_DECLARE_OLD_AMO(T, N)                  \
  T shmem_##N##_fadd(T* dest, T value, int pe);          \
  T shmem_##N##_finc(T* dest, int pe);                   \
  void shmem_##N##_add(T* dest, T value, int pe);        \
  void shmem_##N##_inc(T* dest, int pe);                 \
  T shmem_##N##_cswap(T* dest, T cond, T value, int pe);
HPS_SHMEM_OLD_AMO_TYPES(HPS_SHMEM_DECLARE_OLD_AMO)
#define HPS_SHMEM_DECLARE_OLD_AMO_EXTENDED(T, N) \
  T shmem_##N##_swap(T* dest, T value, int pe);  \
  T shmem_##N##_fetch(const T* source, int pe);  \
  void shmem_##N##_set(T* dest, T value, int pe);
HPS_SHMEM_OLD_AMO_EXTENDED_TYPES(HPS_SHMEM_DECLARE_OLD_AMO_EXTENDED)

/* ---- point-to-point synchronization ------------------------------------------------------- */
#define HPS_SHMEM_DECLARE_SYNC(T, N)                                                           \
  void shmem_##N##_wait_until(T* ivar, int cmp, T cmp_value);                                 \
  size_t shmem_##N##_wait_until_all(T* ivars, size_t nelems, const int* status, int cmp,      \
                                    T cmp_value);                                             \
  size_t shmem_##N##_wait_until_any(T* ivars, size_t nelems, const int* status, int cmp,      \
                                    T cmp_value);                                             \
  size_t shmem_##N##_wait_until_some(T* ivars, size_t nelems, size_t* indices,                \
                                     const int* status, int cmp, T cmp_value);                \
  void shmem_##N##_wait_until_all_vector(T* ivars, size_t nelems, const int* status, int cmp, \
                                         T* cmp_values);                                      \
  size_t shmem_##N##_wait_until_any_vector(T* ivars, size_t nelems, const int* status,        \
                                           int cmp, T* cmp_values);                           \
  size_t shmem_##N##_wait_until_some_vector(T* ivars, size_t nelems, size_t* indices,         \
                                            const int* status, int cmp, T* cmp_values);       \
  int shmem_##N##_test(T* ivar, int cmp, T cmp_value);                                        \
  int shmem_##N##_test_all(T* ivars, size_t nelems, const int* status, int cmp, T cmp_value); \
  size_t shmem_##N##_test_any(T* ivars, size_t nelems, const int* status, int cmp,            \
                              T cmp_value);                                                   \
  size_t shmem_##N##_test_some(T* ivars, size_t nelems, size_t* indices, const int* status,   \
                               int cmp, T cmp_value);                                         \
  int shmem_##N##_test_all_vector(T* ivars, size_t nelems, const int* status, int cmp,        \
                                  T* cmp_values);                                             \
  size_t shmem_##N##_test_any_vector(T* ivars, size_t nelems, const int* status, int cmp,     \
                                     T* cmp_values);                                          \
  size_t shmem_##N##_test_some_vector(T* ivars, size_t nelems, size_t* indices,               \
                                      const int* status, int cmp, T* cmp_values);
HPS_SHMEM_SYNC_TYPES(HPS_SHMEM_DECLARE_SYNC)
#define HPS_SHMEM_DECLARE_OLD_WAIT(T, N) void shmem_##N##_wait(T* ivar, T cmp_value);
HPS_SHMEM_OLD_WAIT_TYPES(HPS_SHMEM_DECLARE_OLD_WAIT)

/* ---- memory ordering ---------------------------------------------------------------------- */
void shmem_fence(void);
void shmem_ctx_fence(shmem_ctx_t ctx);
void shmem_quiet(void);
void shmem_ctx_quiet(shmem_ctx_t ctx);

/* ---- collectives -------------------------------------------------------------------------- */
void shmem_barrier_all(void);
void shmem_sync_all(void);
int shmem_team_sync(shmem_team_t team);
void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long* pSync);
void shmem_sync(int PE_start, int logPE_stride, int PE_size, long* pSync);
/* shmem_sync(team) (1.5) and shmem_sync(PE_start, logPE_stride, PE_size, pSync) (deprecated)
 * share the name: in C the number of arguments picks the routine, in C++ an overload. */
#ifndef __cplusplus
#define HPS_SHMEM_SYNC_PICK(a1, a2, a3, a4, NAME, ...) NAME
#define shmem_sync(...) \
  HPS_SHMEM_SYNC_PICK(__VA_ARGS__, shmem_sync, hps_no_such_form, hps_no_such_form, shmem_team_sync, 0)(__VA_ARGS__)
#endif

#define HPS_SHMEM_DECLARE_TEAM_COLLECTIVES(T, N)                                               \
  int shmem_##N##_broadcast(shmem_team_t team, T* dest, const T* source, size_t nelems,       \
                            int PE_root);                                                     \
  int shmem_##N##_collect(shmem_team_t team, T* dest, const T* source, size_t nelems);        \
  int shmem_##N##_fcollect(shmem_team_t team, T* dest, const T* source, size_t nelems);       \
  int shmem_##N##_alltoall(shmem_team_t team, T* dest, const T* source, size_t nelems);       \
  int shmem_##N##_alltoalls(shmem_team_t team, T* dest, const T* source, ptrdiff_t dst,       \
                            ptrdiff_t sst, size_t nelems);
HPS_SHMEM_RMA_TYPES(HPS_SHMEM_DECLARE_TEAM_COLLECTIVES)
int shmem_broadcastmem(shmem_team_t team, void* dest, const void* source, size_t nelems,
                       int PE_root);
int shmem_collectmem(shmem_team_t team, void* dest, const void* source, size_t nelems);
int shmem_fcollectmem(shmem_team_t team, void* dest, const void* source, size_t nelems);
int shmem_alltoallmem(shmem_team_t team, void* dest, const void* source, size_t nelems);
int shmem_alltoallsmem(shmem_team_t team, void* dest, const void* source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t nelems);

/* The deprecated active-set forms. */
#define HPS_SHMEM_DECLARE_ACTIVE_SET(BITS)                                                      \
  void shmem_broadcast##BITS(void* dest, const void* source, size_t nelems, int PE_root,        \
                             int PE_start, int logPE_stride, int PE_size, long* pSync);         \
  void shmem_collect##BITS(void* dest, const void* source, size_t nelems, int PE_start,         \
                           int logPE_stride, int PE_size, long* pSync);                         \
  void shmem_fcollect##BITS(void* dest, const void* source, size_t nelems, int PE_start,        \
                            int logPE_stride, int PE_size, long* pSync);                        \
  void shmem_alltoall##BITS(void* dest, const void* source, size_t nelems, int PE_start,        \
                            int logPE_stride, int PE_size, long* pSync);                        \
  void shmem_alltoalls##BITS(void* dest, const void* source, ptrdiff_t dst, ptrdiff_t sst,      \
                             size_t nelems, int PE_start, int logPE_stride, int PE_size,        \
                             long* pSync);
HPS_SHMEM_DECLARE_ACTIVE_SET(32)
HPS_SHMEM_DECLARE_ACTIVE_SET(64)

/* Team reductions. */
#define HPS_SHMEM_DECLARE_REDUCE(T, N, OP) \
  int shmem_##N##_##OP##_reduce(shmem_team_t team, T* dest, const T* source, size_t nreduce);
#define HPS_SHMEM_DECLARE_REDUCE_BITWISE(T, N) \
  HPS_SHMEM_DECLARE_REDUCE(T, N, and) HPS_SHMEM_DECLARE_REDUCE(T, N, or) \
  HPS_SHMEM_DECLARE_REDUCE(T, N, xor)
#define HPS_SHMEM_DECLARE_REDUCE_ORDERED(T, N) \
  HPS_SHMEM_DECLARE_REDUCE(T, N, min) HPS_SHMEM_DECLARE_REDUCE(T, N, max) \
  HPS_SHMEM_DECLARE_REDUCE(T, N, sum) HPS_SHMEM_DECLARE_REDUCE(T, N, prod)
HPS_SHMEM_REDUCE_BITWISE_TYPES(HPS_SHMEM_DECLARE_REDUCE_BITWISE)
HPS_SHMEM_REDUCE_ORDERED_TYPES(HPS_SHMEM_DECLARE_REDUCE_ORDERED)

/* The deprecated active-set reductions. */
#define HPS_SHMEM_DECLARE_TO_ALL(T, N, OP)                                                    \
  void shmem_##N##_##OP##_to_all(T* dest, const T* source, int nreduce, int PE_start,        \
                                 int logPE_stride, int PE_size, T* pWrk, long* pSync);
#define HPS_SHMEM_DECLARE_TO_ALL_BITWISE(T, N) \
  HPS_SHMEM_DECLARE_TO_ALL(T, N, and) HPS_SHMEM_DECLARE_TO_ALL(T, N, or) \
  HPS_SHMEM_DECLARE_TO_ALL(T, N, xor)
#define HPS_SHMEM_DECLARE_TO_ALL_ORDERED(T, N) \
  HPS_SHMEM_DECLARE_TO_ALL(T, N, min) HPS_SHMEM_DECLARE_TO_ALL(T, N, max) \
  HPS_SHMEM_DECLARE_TO_ALL(T, N, sum) HPS_SHMEM_DECLARE_TO_ALL(T, N, prod)
HPS_SHMEM_TO_ALL_BITWISE_TYPES(HPS_SHMEM_DECLARE_TO_ALL_BITWISE)
HPS_SHMEM_TO_ALL_ORDERED_TYPES(HPS_SHMEM_DECLARE_TO_ALL_ORDERED)

#if !defined(__cplusplus) || defined(__GNUC__)
/* The complex types: RMA of the 1.2 era, and sum and prod (C, and C++ compilers that take
 * C's _Complex as GCC and clang do). */
void shmem_complexf_put(float _Complex* dest, const float _Complex* source, size_t nelems, int pe);
void shmem_complexf_get(float _Complex* dest, const float _Complex* source, size_t nelems, int pe);
void shmem_complexd_put(double _Complex* dest, const double _Complex* source, size_t nelems,
                        int pe);
void shmem_complexd_get(double _Complex* dest, const double _Complex* source, size_t nelems,
                        int pe);
int shmem_complexf_sum_reduce(shmem_team_t team, float _Complex* dest,
                              const float _Complex* source, size_t nreduce);
int shmem_complexf_prod_reduce(shmem_team_t team, float _Complex* dest,
                               const float _Complex* source, size_t nreduce);
int shmem_complexd_sum_reduce(shmem_team_t team, double _Complex* dest,
                              const double _Complex* source, size_t nreduce);
int shmem_complexd_prod_reduce(shmem_team_t team, double _Complex* dest,
                               const double _Complex* source, size_t nreduce);
void shmem_complexf_sum_to_all(float _Complex* dest, const float _Complex* source, int nreduce,
                               int PE_start, int logPE_stride, int PE_size, float _Complex* pWrk,
                               long* pSync);
void shmem_complexf_prod_to_all(float _Complex* dest, const float _Complex* source, int nreduce,
                                int PE_start, int logPE_stride, int PE_size,
                                float _Complex* pWrk, long* pSync);
void shmem_complexd_sum_to_all(double _Complex* dest, const double _Complex* source, int nreduce,
                               int PE_start, int logPE_stride, int PE_size,
                               double _Complex* pWrk, long* pSync);
void shmem_complexd_prod_to_all(double _Complex* dest, const double _Complex* source,
                                int nreduce, int PE_start, int logPE_stride, int PE_size,
                                double _Complex* pWrk, long* pSync);
#endif

/* ---- locks -------------------------------------------------------------------------------- */
void shmem_set_lock(long* lock);
void shmem_clear_lock(long* lock);
int shmem_test_lock(long* lock);

/* ---- cache management (no-ops: the heap is coherent) --------------------------------------- */
void shmem_clear_cache_inv(void);
void shmem_set_cache_inv(void);
void shmem_clear_cache_line_inv(void* dest);
void shmem_set_cache_line_inv(void* dest);
void shmem_udcflush(void);
void shmem_udcflush_line(void* dest);

#ifdef __cplusplus
} /* extern "C" */
#endif

#include "shmem_generic.h"

#endif /* HPS_OPENSHMEM_SHMEM_H */
