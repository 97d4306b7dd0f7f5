/* The type tables of the OpenSHMEM 1.5 C API (docs/openshmem.md): one X-macro list per table of
 * the specification, used by shmem.h to declare every typed routine and by the library to
 * define them, so that the two cannot drift apart. Each entry is X(C type, name in routine
 * names). Internal to shmem.h; programs include shmem.h. */
#ifndef HPS_OPENSHMEM_SHMEM_TYPES_H
#define HPS_OPENSHMEM_SHMEM_TYPES_H

/* Standard RMA types (put, get, p, g, iput, iget, their _nbi forms, put_signal, broadcast,
 * collect, fcollect, alltoall, alltoalls). */
#define HPS_SHMEM_RMA_TYPES(X) \
  X(float, float) X(double, double) X(long double, longdouble) X(char, char) \
  X(signed char, schar) X(short, short) X(int, int) X(long, long) X(long long, longlong) \
  X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint) \
  X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8) X(int16_t, int16) \
  X(int32_t, int32) X(int64_t, int64) X(uint8_t, uint8) X(uint16_t, uint16) \
  X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) X(ptrdiff_t, ptrdiff)

/* The distinct C types among them (the sized ones are typedefs of these): the C11 generic
 * selections and the C++ overloads list these. */
#define HPS_SHMEM_RMA_BASE_TYPES(X) \
  X(float, float) X(double, double) X(long double, longdouble) X(char, char) \
  X(signed char, schar) X(short, short) X(int, int) X(long, long) X(long long, longlong) \
  X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint) \
  X(unsigned long, ulong) X(unsigned long long, ulonglong)

/* Standard AMO types (every atomic); extended adds float and double (fetch, set, swap);
 * bitwise (and, or, xor). */
#define HPS_SHMEM_AMO_STANDARD_TYPES(X) \
  X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint) \
  X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int32_t, int32) \
  X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) \
  X(ptrdiff_t, ptrdiff)
#define HPS_SHMEM_AMO_STANDARD_BASE_TYPES(X) \
  X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint) \
  X(unsigned long, ulong) X(unsigned long long, ulonglong)
#define HPS_SHMEM_AMO_EXTENDED_TYPES(X) X(float, float) X(double, double) HPS_SHMEM_AMO_STANDARD_TYPES(X)
#define HPS_SHMEM_AMO_EXTENDED_BASE_TYPES(X) \
  X(float, float) X(double, double) HPS_SHMEM_AMO_STANDARD_BASE_TYPES(X)
#define HPS_SHMEM_AMO_BITWISE_TYPES(X) \
  X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong) \
  X(int32_t, int32) X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64)
/* The bitwise table's distinct C types, with the routine each one selects (int32_t is int and
 * int64_t is long: there is no shmem_int_atomic_and). */
#define HPS_SHMEM_AMO_BITWISE_BASE_TYPES(X) \
  X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong) \
  X(int, int32) X(long, int64)

/* Point-to-point synchronization types (wait_until, test and their forms). */
#define HPS_SHMEM_SYNC_TYPES(X) \
  X(short, short) X(int, int) X(long, long) X(long long, longlong) \
  X(unsigned short, ushort) X(unsigned int, uint) X(unsigned long, ulong) \
  X(unsigned long long, ulonglong) X(int32_t, int32) X(int64_t, int64) \
  X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) X(ptrdiff_t, ptrdiff)
#define HPS_SHMEM_SYNC_BASE_TYPES(X) \
  X(short, short) X(int, int) X(long, long) X(long long, longlong) \
  X(unsigned short, ushort) X(unsigned int, uint) X(unsigned long, ulong) \
  X(unsigned long long, ulonglong)

/* Team reduction types: bitwise (and, or, xor), ordered (min, max) and arithmetic (sum, prod;
 * the complex types in C only, declared by shmem.h). */
#define HPS_SHMEM_REDUCE_BITWISE_TYPES(X) \
  X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint) \
  X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8) \
  X(int16_t, int16) X(int32_t, int32) X(int64_t, int64) X(uint8_t, uint8) \
  X(uint16_t, uint16) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size)
#define HPS_SHMEM_REDUCE_ORDERED_TYPES(X) \
  X(char, char) X(signed char, schar) X(short, short) X(int, int) X(long, long) \
  X(long long, longlong) X(ptrdiff_t, ptrdiff) X(unsigned char, uchar) \
  X(unsigned short, ushort) X(unsigned int, uint) X(unsigned long, ulong) \
  X(unsigned long long, ulonglong) X(int8_t, int8) X(int16_t, int16) X(int32_t, int32) \
  X(int64_t, int64) X(uint8_t, uint8) X(uint16_t, uint16) X(uint32_t, uint32) \
  X(uint64_t, uint64) X(size_t, size) X(float, float) X(double, double) \
  X(long double, longdouble)

/* The deprecated active-set reductions (shmem_<T>_<op>_to_all). */
#define HPS_SHMEM_TO_ALL_BITWISE_TYPES(X) \
  X(short, short) X(int, int) X(long, long) X(long long, longlong)
#define HPS_SHMEM_TO_ALL_ORDERED_TYPES(X) \
  X(short, short) X(int, int) X(long, long) X(long long, longlong) X(float, float) \
  X(double, double) X(long double, longdouble)

/* The deprecated typed atomics (OpenSHMEM 1.3 names: shmem_int_fadd, ...), for the same types
 * as their 1.4 replacements. */
#define HPS_SHMEM_OLD_AMO_TYPES(X) HPS_SHMEM_AMO_STANDARD_TYPES(X)
#define HPS_SHMEM_OLD_AMO_EXTENDED_TYPES(X) HPS_SHMEM_AMO_EXTENDED_TYPES(X)
/* The deprecated shmem_<T>_wait. */
#define HPS_SHMEM_OLD_WAIT_TYPES(X) X(short, short) X(int, int) X(long, long) X(long long, longlong)

/* The sized routines' widths in bits, and the C type that carries one element. */
#define HPS_SHMEM_SIZES(X) X(8, uint8_t) X(16, uint16_t) X(32, uint32_t) X(64, uint64_t)

#endif /* HPS_OPENSHMEM_SHMEM_TYPES_H */
