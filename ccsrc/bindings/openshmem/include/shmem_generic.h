/* The type-generic names of the OpenSHMEM 1.5 C API (docs/openshmem.md): C11 _Generic
 * selections in C, overloads in C++. A routine that takes an optional context first selects
 * its context form by its number of arguments. Included by shmem.h. */
#ifndef HPS_OPENSHMEM_SHMEM_GENERIC_H
#define HPS_OPENSHMEM_SHMEM_GENERIC_H

#if !defined(__cplusplus) && defined(__STDC_VERSION__) && (__STDC_VERSION__ >= 201112L)

/* The routine for the type of *(X) (lvalue conversion drops qualifiers, so a const source
 * selects as its type). P and S are the name's prefix and suffix around the type's name. */
#define HPS_G_RMA(X, P, S)                                                                   \
  _Generic(*(X), float: P##float##S, double: P##double##S, long double: P##longdouble##S,   \
           char: P##char##S, signed char: P##schar##S, short: P##short##S, int: P##int##S,  \
           long: P##long##S, long long: P##longlong##S, unsigned char: P##uchar##S,         \
           unsigned short: P##ushort##S, unsigned int: P##uint##S,                          \
           unsigned long: P##ulong##S, unsigned long long: P##ulonglong##S)
#define HPS_G_AMO_STANDARD(X, P, S)                                                          \
  _Generic(*(X), int: P##int##S, long: P##long##S, long long: P##longlong##S,              \
           unsigned int: P##uint##S, unsigned long: P##ulong##S,                            \
           unsigned long long: P##ulonglong##S)
#define HPS_G_AMO_EXTENDED(X, P, S)                                                          \
  _Generic(*(X), float: P##float##S, double: P##double##S, int: P##int##S,                 \
           long: P##long##S, long long: P##longlong##S, unsigned int: P##uint##S,           \
           unsigned long: P##ulong##S, unsigned long long: P##ulonglong##S)
#define HPS_G_AMO_BITWISE(X, P, S)                                                           \
  _Generic(*(X), unsigned int: P##uint##S, unsigned long: P##ulong##S,                      \
           unsigned long long: P##ulonglong##S, int: P##int32##S, long: P##int64##S)
#define HPS_G_SYNC(X, P, S)                                                                  \
  _Generic(*(X), short: P##short##S, int: P##int##S, long: P##long##S,                      \
           long long: P##longlong##S, unsigned short: P##ushort##S,                         \
           unsigned int: P##uint##S, unsigned long: P##ulong##S,                            \
           unsigned long long: P##ulonglong##S)
#define HPS_G_REDUCE_ORDERED(X, P, S)                                                        \
  _Generic(*(X), char: P##char##S, signed char: P##schar##S, short: P##short##S,            \
           int: P##int##S, long: P##long##S, long long: P##longlong##S,                     \
           unsigned char: P##uchar##S, unsigned short: P##ushort##S,                        \
           unsigned int: P##uint##S, unsigned long: P##ulong##S,                            \
           unsigned long long: P##ulonglong##S, float: P##float##S, double: P##double##S,   \
           long double: P##longdouble##S)
#define HPS_G_REDUCE_ARITHMETIC(X, P, S)                                                     \
  _Generic(*(X), char: P##char##S, signed char: P##schar##S, short: P##short##S,            \
           int: P##int##S, long: P##long##S, long long: P##longlong##S,                     \
           unsigned char: P##uchar##S, unsigned short: P##ushort##S,                        \
           unsigned int: P##uint##S, unsigned long: P##ulong##S,                            \
           unsigned long long: P##ulonglong##S, float: P##float##S, double: P##double##S,   \
           long double: P##longdouble##S, float _Complex: P##complexf##S,                   \
           double _Complex: P##complexd##S)
#define HPS_G_REDUCE_BITWISE(X, P, S)                                                        \
  _Generic(*(X), unsigned char: P##uchar##S, unsigned short: P##ushort##S,                  \
           unsigned int: P##uint##S, unsigned long: P##ulong##S,                            \
           unsigned long long: P##ulonglong##S, signed char: P##int8##S,                    \
           short: P##int16##S, int: P##int32##S, long: P##int64##S)
#define HPS_G_OLD_AMO(X, P, S) HPS_G_AMO_STANDARD(X, P, S)
#define HPS_G_OLD_AMO_EXTENDED(X, P, S) HPS_G_AMO_EXTENDED(X, P, S)
#define HPS_G_OLD_WAIT(X, P, S)                                                              \
  _Generic(*(X), short: P##short##S, int: P##int##S, long: P##long##S, long long: P##longlong##S)

/* Argument counting: the context form has one argument more. */
#define HPS_G_PICK3(a1, a2, a3, NAME, ...) NAME
#define HPS_G_PICK4(a1, a2, a3, a4, NAME, ...) NAME
#define HPS_G_PICK5(a1, a2, a3, a4, a5, NAME, ...) NAME
#define HPS_G_PICK6(a1, a2, a3, a4, a5, a6, NAME, ...) NAME
#define HPS_G_PICK7(a1, a2, a3, a4, a5, a6, a7, NAME, ...) NAME
#define HPS_G_PICK8(a1, a2, a3, a4, a5, a6, a7, a8, NAME, ...) NAME

/* A routine of table TABLE with a context form: select on the first argument after ctx. */
#define HPS_G_PLAIN(TABLE, S, first, ...) TABLE(first, shmem_, S)(first, __VA_ARGS__)
#define HPS_G_CTX(TABLE, S, ctx, first, ...) TABLE(first, shmem_ctx_, S)(ctx, first, __VA_ARGS__)

#define HPS_G_RMA_PLAIN_put(...) HPS_G_PLAIN(HPS_G_RMA, _put, __VA_ARGS__)
#define HPS_G_RMA_CTX_put(...) HPS_G_CTX(HPS_G_RMA, _put, __VA_ARGS__)
#define shmem_put(...) HPS_G_PICK5(__VA_ARGS__, HPS_G_RMA_CTX_put, HPS_G_RMA_PLAIN_put, 0)(__VA_ARGS__)
#define HPS_G_RMA_PLAIN_get(...) HPS_G_PLAIN(HPS_G_RMA, _get, __VA_ARGS__)
#define HPS_G_RMA_CTX_get(...) HPS_G_CTX(HPS_G_RMA, _get, __VA_ARGS__)
#define shmem_get(...) HPS_G_PICK5(__VA_ARGS__, HPS_G_RMA_CTX_get, HPS_G_RMA_PLAIN_get, 0)(__VA_ARGS__)
#define HPS_G_RMA_PLAIN_put_nbi(...) HPS_G_PLAIN(HPS_G_RMA, _put_nbi, __VA_ARGS__)
#define HPS_G_RMA_CTX_put_nbi(...) HPS_G_CTX(HPS_G_RMA, _put_nbi, __VA_ARGS__)
#define shmem_put_nbi(...) \
  HPS_G_PICK5(__VA_ARGS__, HPS_G_RMA_CTX_put_nbi, HPS_G_RMA_PLAIN_put_nbi, 0)(__VA_ARGS__)
#define HPS_G_RMA_PLAIN_get_nbi(...) HPS_G_PLAIN(HPS_G_RMA, _get_nbi, __VA_ARGS__)
#define HPS_G_RMA_CTX_get_nbi(...) HPS_G_CTX(HPS_G_RMA, _get_nbi, __VA_ARGS__)
#define shmem_get_nbi(...) \
  HPS_G_PICK5(__VA_ARGS__, HPS_G_RMA_CTX_get_nbi, HPS_G_RMA_PLAIN_get_nbi, 0)(__VA_ARGS__)
#define HPS_G_RMA_PLAIN_p(...) HPS_G_PLAIN(HPS_G_RMA, _p, __VA_ARGS__)
#define HPS_G_RMA_CTX_p(...) HPS_G_CTX(HPS_G_RMA, _p, __VA_ARGS__)
#define shmem_p(...) HPS_G_PICK4(__VA_ARGS__, HPS_G_RMA_CTX_p, HPS_G_RMA_PLAIN_p, 0)(__VA_ARGS__)
#define HPS_G_RMA_PLAIN_g(...) HPS_G_PLAIN(HPS_G_RMA, _g, __VA_ARGS__)
#define HPS_G_RMA_CTX_g(...) HPS_G_CTX(HPS_G_RMA, _g, __VA_ARGS__)
#define shmem_g(...) HPS_G_PICK3(__VA_ARGS__, HPS_G_RMA_CTX_g, HPS_G_RMA_PLAIN_g, 0)(__VA_ARGS__)
#define HPS_G_RMA_PLAIN_iput(...) HPS_G_PLAIN(HPS_G_RMA, _iput, __VA_ARGS__)
#define HPS_G_RMA_CTX_iput(...) HPS_G_CTX(HPS_G_RMA, _iput, __VA_ARGS__)
#define shmem_iput(...) HPS_G_PICK7(__VA_ARGS__, HPS_G_RMA_CTX_iput, HPS_G_RMA_PLAIN_iput, 0)(__VA_ARGS__)
#define HPS_G_RMA_PLAIN_iget(...) HPS_G_PLAIN(HPS_G_RMA, _iget, __VA_ARGS__)
#define HPS_G_RMA_CTX_iget(...) HPS_G_CTX(HPS_G_RMA, _iget, __VA_ARGS__)
#define shmem_iget(...) HPS_G_PICK7(__VA_ARGS__, HPS_G_RMA_CTX_iget, HPS_G_RMA_PLAIN_iget, 0)(__VA_ARGS__)
#define HPS_G_RMA_PLAIN_put_signal(...) HPS_G_PLAIN(HPS_G_RMA, _put_signal, __VA_ARGS__)
#define HPS_G_RMA_CTX_put_signal(...) HPS_G_CTX(HPS_G_RMA, _put_signal, __VA_ARGS__)
#define shmem_put_signal(...) \
  HPS_G_PICK8(__VA_ARGS__, HPS_G_RMA_CTX_put_signal, HPS_G_RMA_PLAIN_put_signal, 0)(__VA_ARGS__)
#define HPS_G_RMA_PLAIN_put_signal_nbi(...) HPS_G_PLAIN(HPS_G_RMA, _put_signal_nbi, __VA_ARGS__)
#define HPS_G_RMA_CTX_put_signal_nbi(...) HPS_G_CTX(HPS_G_RMA, _put_signal_nbi, __VA_ARGS__)
#define shmem_put_signal_nbi(...)                                                             \
  HPS_G_PICK8(__VA_ARGS__, HPS_G_RMA_CTX_put_signal_nbi, HPS_G_RMA_PLAIN_put_signal_nbi, 0)( \
      __VA_ARGS__)

/* Atomics. */
#define shmem_atomic_fetch(...) \
  HPS_G_PICK3(__VA_ARGS__, HPS_G_CTX_atomic_fetch, HPS_G_PLAIN_atomic_fetch, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_fetch(...) HPS_G_PLAIN(HPS_G_AMO_EXTENDED, _atomic_fetch, __VA_ARGS__)
#define HPS_G_CTX_atomic_fetch(...) HPS_G_CTX(HPS_G_AMO_EXTENDED, _atomic_fetch, __VA_ARGS__)
#define shmem_atomic_set(...) \
  HPS_G_PICK4(__VA_ARGS__, HPS_G_CTX_atomic_set, HPS_G_PLAIN_atomic_set, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_set(...) HPS_G_PLAIN(HPS_G_AMO_EXTENDED, _atomic_set, __VA_ARGS__)
#define HPS_G_CTX_atomic_set(...) HPS_G_CTX(HPS_G_AMO_EXTENDED, _atomic_set, __VA_ARGS__)
#define shmem_atomic_swap(...) \
  HPS_G_PICK4(__VA_ARGS__, HPS_G_CTX_atomic_swap, HPS_G_PLAIN_atomic_swap, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_swap(...) HPS_G_PLAIN(HPS_G_AMO_EXTENDED, _atomic_swap, __VA_ARGS__)
#define HPS_G_CTX_atomic_swap(...) HPS_G_CTX(HPS_G_AMO_EXTENDED, _atomic_swap, __VA_ARGS__)
#define shmem_atomic_fetch_nbi(...) \
  HPS_G_PICK4(__VA_ARGS__, HPS_G_CTX_atomic_fetch_nbi, HPS_G_PLAIN_atomic_fetch_nbi, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_fetch_nbi(...) HPS_G_PLAIN(HPS_G_AMO_EXTENDED, _atomic_fetch_nbi, __VA_ARGS__)
#define HPS_G_CTX_atomic_fetch_nbi(...) HPS_G_CTX(HPS_G_AMO_EXTENDED, _atomic_fetch_nbi, __VA_ARGS__)
#define shmem_atomic_swap_nbi(...) \
  HPS_G_PICK5(__VA_ARGS__, HPS_G_CTX_atomic_swap_nbi, HPS_G_PLAIN_atomic_swap_nbi, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_swap_nbi(...) HPS_G_PLAIN(HPS_G_AMO_EXTENDED, _atomic_swap_nbi, __VA_ARGS__)
#define HPS_G_CTX_atomic_swap_nbi(...) HPS_G_CTX(HPS_G_AMO_EXTENDED, _atomic_swap_nbi, __VA_ARGS__)
#define shmem_atomic_compare_swap(...)                                                         \
  HPS_G_PICK5(__VA_ARGS__, HPS_G_CTX_atomic_compare_swap, HPS_G_PLAIN_atomic_compare_swap, 0)( \
      __VA_ARGS__)
#define HPS_G_PLAIN_atomic_compare_swap(...) HPS_G_PLAIN(HPS_G_AMO_STANDARD, _atomic_compare_swap, __VA_ARGS__)
#define HPS_G_CTX_atomic_compare_swap(...) HPS_G_CTX(HPS_G_AMO_STANDARD, _atomic_compare_swap, __VA_ARGS__)
#define shmem_atomic_fetch_inc(...) \
  HPS_G_PICK3(__VA_ARGS__, HPS_G_CTX_atomic_fetch_inc, HPS_G_PLAIN_atomic_fetch_inc, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_fetch_inc(...) HPS_G_PLAIN(HPS_G_AMO_STANDARD, _atomic_fetch_inc, __VA_ARGS__)
#define HPS_G_CTX_atomic_fetch_inc(...) HPS_G_CTX(HPS_G_AMO_STANDARD, _atomic_fetch_inc, __VA_ARGS__)
#define shmem_atomic_inc(...) \
  HPS_G_PICK3(__VA_ARGS__, HPS_G_CTX_atomic_inc, HPS_G_PLAIN_atomic_inc, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_inc(...) HPS_G_PLAIN(HPS_G_AMO_STANDARD, _atomic_inc, __VA_ARGS__)
#define HPS_G_CTX_atomic_inc(...) HPS_G_CTX(HPS_G_AMO_STANDARD, _atomic_inc, __VA_ARGS__)
#define shmem_atomic_fetch_add(...) \
  HPS_G_PICK4(__VA_ARGS__, HPS_G_CTX_atomic_fetch_add, HPS_G_PLAIN_atomic_fetch_add, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_fetch_add(...) HPS_G_PLAIN(HPS_G_AMO_STANDARD, _atomic_fetch_add, __VA_ARGS__)
#define HPS_G_CTX_atomic_fetch_add(...) HPS_G_CTX(HPS_G_AMO_STANDARD, _atomic_fetch_add, __VA_ARGS__)
#define shmem_atomic_add(...) \
  HPS_G_PICK4(__VA_ARGS__, HPS_G_CTX_atomic_add, HPS_G_PLAIN_atomic_add, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_add(...) HPS_G_PLAIN(HPS_G_AMO_STANDARD, _atomic_add, __VA_ARGS__)
#define HPS_G_CTX_atomic_add(...) HPS_G_CTX(HPS_G_AMO_STANDARD, _atomic_add, __VA_ARGS__)
#define shmem_atomic_compare_swap_nbi(...)                                             \
  HPS_G_PICK6(__VA_ARGS__, HPS_G_CTX_atomic_compare_swap_nbi,                          \
              HPS_G_PLAIN_atomic_compare_swap_nbi, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_compare_swap_nbi(...) HPS_G_PLAIN(HPS_G_AMO_STANDARD, _atomic_compare_swap_nbi, __VA_ARGS__)
#define HPS_G_CTX_atomic_compare_swap_nbi(...) HPS_G_CTX(HPS_G_AMO_STANDARD, _atomic_compare_swap_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_inc_nbi(...)                                                 \
  HPS_G_PICK4(__VA_ARGS__, HPS_G_CTX_atomic_fetch_inc_nbi, HPS_G_PLAIN_atomic_fetch_inc_nbi, \
              0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_fetch_inc_nbi(...) HPS_G_PLAIN(HPS_G_AMO_STANDARD, _atomic_fetch_inc_nbi, __VA_ARGS__)
#define HPS_G_CTX_atomic_fetch_inc_nbi(...) HPS_G_CTX(HPS_G_AMO_STANDARD, _atomic_fetch_inc_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_add_nbi(...)                                                 \
  HPS_G_PICK5(__VA_ARGS__, HPS_G_CTX_atomic_fetch_add_nbi, HPS_G_PLAIN_atomic_fetch_add_nbi, \
              0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_fetch_add_nbi(...) HPS_G_PLAIN(HPS_G_AMO_STANDARD, _atomic_fetch_add_nbi, __VA_ARGS__)
#define HPS_G_CTX_atomic_fetch_add_nbi(...) HPS_G_CTX(HPS_G_AMO_STANDARD, _atomic_fetch_add_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_and(...) \
  HPS_G_PICK4(__VA_ARGS__, HPS_G_CTX_atomic_fetch_and, HPS_G_PLAIN_atomic_fetch_and, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_fetch_and(...) HPS_G_PLAIN(HPS_G_AMO_BITWISE, _atomic_fetch_and, __VA_ARGS__)
#define HPS_G_CTX_atomic_fetch_and(...) HPS_G_CTX(HPS_G_AMO_BITWISE, _atomic_fetch_and, __VA_ARGS__)
#define shmem_atomic_and(...) \
  HPS_G_PICK4(__VA_ARGS__, HPS_G_CTX_atomic_and, HPS_G_PLAIN_atomic_and, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_and(...) HPS_G_PLAIN(HPS_G_AMO_BITWISE, _atomic_and, __VA_ARGS__)
#define HPS_G_CTX_atomic_and(...) HPS_G_CTX(HPS_G_AMO_BITWISE, _atomic_and, __VA_ARGS__)
#define shmem_atomic_fetch_and_nbi(...) \
  HPS_G_PICK5(__VA_ARGS__, HPS_G_CTX_atomic_fetch_and_nbi, HPS_G_PLAIN_atomic_fetch_and_nbi, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_fetch_and_nbi(...) HPS_G_PLAIN(HPS_G_AMO_BITWISE, _atomic_fetch_and_nbi, __VA_ARGS__)
#define HPS_G_CTX_atomic_fetch_and_nbi(...) HPS_G_CTX(HPS_G_AMO_BITWISE, _atomic_fetch_and_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_or(...) \
  HPS_G_PICK4(__VA_ARGS__, HPS_G_CTX_atomic_fetch_or, HPS_G_PLAIN_atomic_fetch_or, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_fetch_or(...) HPS_G_PLAIN(HPS_G_AMO_BITWISE, _atomic_fetch_or, __VA_ARGS__)
#define HPS_G_CTX_atomic_fetch_or(...) HPS_G_CTX(HPS_G_AMO_BITWISE, _atomic_fetch_or, __VA_ARGS__)
#define shmem_atomic_or(...) \
  HPS_G_PICK4(__VA_ARGS__, HPS_G_CTX_atomic_or, HPS_G_PLAIN_atomic_or, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_or(...) HPS_G_PLAIN(HPS_G_AMO_BITWISE, _atomic_or, __VA_ARGS__)
#define HPS_G_CTX_atomic_or(...) HPS_G_CTX(HPS_G_AMO_BITWISE, _atomic_or, __VA_ARGS__)
#define shmem_atomic_fetch_or_nbi(...) \
  HPS_G_PICK5(__VA_ARGS__, HPS_G_CTX_atomic_fetch_or_nbi, HPS_G_PLAIN_atomic_fetch_or_nbi, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_fetch_or_nbi(...) HPS_G_PLAIN(HPS_G_AMO_BITWISE, _atomic_fetch_or_nbi, __VA_ARGS__)
#define HPS_G_CTX_atomic_fetch_or_nbi(...) HPS_G_CTX(HPS_G_AMO_BITWISE, _atomic_fetch_or_nbi, __VA_ARGS__)
#define shmem_atomic_fetch_xor(...) \
  HPS_G_PICK4(__VA_ARGS__, HPS_G_CTX_atomic_fetch_xor, HPS_G_PLAIN_atomic_fetch_xor, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_fetch_xor(...) HPS_G_PLAIN(HPS_G_AMO_BITWISE, _atomic_fetch_xor, __VA_ARGS__)
#define HPS_G_CTX_atomic_fetch_xor(...) HPS_G_CTX(HPS_G_AMO_BITWISE, _atomic_fetch_xor, __VA_ARGS__)
#define shmem_atomic_xor(...) \
  HPS_G_PICK4(__VA_ARGS__, HPS_G_CTX_atomic_xor, HPS_G_PLAIN_atomic_xor, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_xor(...) HPS_G_PLAIN(HPS_G_AMO_BITWISE, _atomic_xor, __VA_ARGS__)
#define HPS_G_CTX_atomic_xor(...) HPS_G_CTX(HPS_G_AMO_BITWISE, _atomic_xor, __VA_ARGS__)
#define shmem_atomic_fetch_xor_nbi(...) \
  HPS_G_PICK5(__VA_ARGS__, HPS_G_CTX_atomic_fetch_xor_nbi, HPS_G_PLAIN_atomic_fetch_xor_nbi, 0)(__VA_ARGS__)
#define HPS_G_PLAIN_atomic_fetch_xor_nbi(...) HPS_G_PLAIN(HPS_G_AMO_BITWISE, _atomic_fetch_xor_nbi, __VA_ARGS__)
#define HPS_G_CTX_atomic_fetch_xor_nbi(...) HPS_G_CTX(HPS_G_AMO_BITWISE, _atomic_fetch_xor_nbi, __VA_ARGS__)

/* Point-to-point synchronization (no context forms). */
#define shmem_wait_until(ivar, ...) HPS_G_SYNC(ivar, shmem_, _wait_until)(ivar, __VA_ARGS__)
#define shmem_wait_until_all(ivars, ...) HPS_G_SYNC(ivars, shmem_, _wait_until_all)(ivars, __VA_ARGS__)
#define shmem_wait_until_any(ivars, ...) HPS_G_SYNC(ivars, shmem_, _wait_until_any)(ivars, __VA_ARGS__)
#define shmem_wait_until_some(ivars, ...) HPS_G_SYNC(ivars, shmem_, _wait_until_some)(ivars, __VA_ARGS__)
#define shmem_wait_until_all_vector(ivars, ...) \
  HPS_G_SYNC(ivars, shmem_, _wait_until_all_vector)(ivars, __VA_ARGS__)
#define shmem_wait_until_any_vector(ivars, ...) \
  HPS_G_SYNC(ivars, shmem_, _wait_until_any_vector)(ivars, __VA_ARGS__)
#define shmem_wait_until_some_vector(ivars, ...) \
  HPS_G_SYNC(ivars, shmem_, _wait_until_some_vector)(ivars, __VA_ARGS__)
#define shmem_test(ivar, ...) HPS_G_SYNC(ivar, shmem_, _test)(ivar, __VA_ARGS__)
#define shmem_test_all(ivars, ...) HPS_G_SYNC(ivars, shmem_, _test_all)(ivars, __VA_ARGS__)
#define shmem_test_any(ivars, ...) HPS_G_SYNC(ivars, shmem_, _test_any)(ivars, __VA_ARGS__)
#define shmem_test_some(ivars, ...) HPS_G_SYNC(ivars, shmem_, _test_some)(ivars, __VA_ARGS__)
#define shmem_test_all_vector(ivars, ...) HPS_G_SYNC(ivars, shmem_, _test_all_vector)(ivars, __VA_ARGS__)
#define shmem_test_any_vector(ivars, ...) HPS_G_SYNC(ivars, shmem_, _test_any_vector)(ivars, __VA_ARGS__)
#define shmem_test_some_vector(ivars, ...) HPS_G_SYNC(ivars, shmem_, _test_some_vector)(ivars, __VA_ARGS__)
#define shmem_wait(ivar, value) HPS_G_OLD_WAIT(ivar, shmem_, _wait)(ivar, value)

/* Team collectives: select on dest, the second argument. */
#define shmem_broadcast(team, dest, ...) HPS_G_RMA(dest, shmem_, _broadcast)(team, dest, __VA_ARGS__)
#define shmem_collect(team, dest, ...) HPS_G_RMA(dest, shmem_, _collect)(team, dest, __VA_ARGS__)
#define shmem_fcollect(team, dest, ...) HPS_G_RMA(dest, shmem_, _fcollect)(team, dest, __VA_ARGS__)
#define shmem_alltoall(team, dest, ...) HPS_G_RMA(dest, shmem_, _alltoall)(team, dest, __VA_ARGS__)
#define shmem_alltoalls(team, dest, ...) HPS_G_RMA(dest, shmem_, _alltoalls)(team, dest, __VA_ARGS__)
#define shmem_and_reduce(team, dest, ...) HPS_G_REDUCE_BITWISE(dest, shmem_, _and_reduce)(team, dest, __VA_ARGS__)
#define shmem_or_reduce(team, dest, ...) HPS_G_REDUCE_BITWISE(dest, shmem_, _or_reduce)(team, dest, __VA_ARGS__)
#define shmem_xor_reduce(team, dest, ...) HPS_G_REDUCE_BITWISE(dest, shmem_, _xor_reduce)(team, dest, __VA_ARGS__)
#define shmem_min_reduce(team, dest, ...) HPS_G_REDUCE_ORDERED(dest, shmem_, _min_reduce)(team, dest, __VA_ARGS__)
#define shmem_max_reduce(team, dest, ...) HPS_G_REDUCE_ORDERED(dest, shmem_, _max_reduce)(team, dest, __VA_ARGS__)
#define shmem_sum_reduce(team, dest, ...) HPS_G_REDUCE_ARITHMETIC(dest, shmem_, _sum_reduce)(team, dest, __VA_ARGS__)
#define shmem_prod_reduce(team, dest, ...) HPS_G_REDUCE_ARITHMETIC(dest, shmem_, _prod_reduce)(team, dest, __VA_ARGS__)

/* The deprecated generic atomics. */
#define shmem_fadd(dest, ...) HPS_G_OLD_AMO(dest, shmem_, _fadd)(dest, __VA_ARGS__)
#define shmem_finc(dest, ...) HPS_G_OLD_AMO(dest, shmem_, _finc)(dest, __VA_ARGS__)
#define shmem_add(dest, ...) HPS_G_OLD_AMO(dest, shmem_, _add)(dest, __VA_ARGS__)
#define shmem_inc(dest, ...) HPS_G_OLD_AMO(dest, shmem_, _inc)(dest, __VA_ARGS__)
#define shmem_cswap(dest, ...) HPS_G_OLD_AMO(dest, shmem_, _cswap)(dest, __VA_ARGS__)
#define shmem_swap(dest, ...) HPS_G_OLD_AMO_EXTENDED(dest, shmem_, _swap)(dest, __VA_ARGS__)
#define shmem_fetch(source, ...) HPS_G_OLD_AMO_EXTENDED(source, shmem_, _fetch)(source, __VA_ARGS__)
#define shmem_set(dest, ...) HPS_G_OLD_AMO_EXTENDED(dest, shmem_, _set)(dest, __VA_ARGS__)

#elif defined(__cplusplus)

/* C++: one overload per distinct C type, calling the typed routine. */
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

#endif /* C11 or C++ */

#endif /* HPS_OPENSHMEM_SHMEM_GENERIC_H */
