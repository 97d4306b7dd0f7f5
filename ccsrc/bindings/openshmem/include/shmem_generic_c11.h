/* The type-generic names of the OpenSHMEM 1.5 C API in C11 (docs/openshmem.md): _Generic
 * selections over the type tables of shmem_types.h. A routine that takes an optional context
 * first selects its context form by its number of arguments. Included by shmem_generic.h. */
#ifndef HPS_OPENSHMEM_SHMEM_GENERIC_C11_H
#define HPS_OPENSHMEM_SHMEM_GENERIC_C11_H

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

#endif /* HPS_OPENSHMEM_SHMEM_GENERIC_C11_H */
