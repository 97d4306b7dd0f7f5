/* The OpenSHMEM C API's semantics across PEs (docs/openshmem.md): RMA, atomics, waits, locks,
 * collectives, teams and memory, on heap blocks and on static and global variables. Run with
 * hps-oshrun -np N (N >= 2); prints PASS, or FAIL with the check and ends the job (exit 1). */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(cond)                                                                   \
  do {                                                                              \
    if (!(cond)) {                                                                  \
      fprintf(stderr, "FAIL PE %d: %s:%d: %s\n", shmem_my_pe(), __FILE__, __LINE__, \
              #cond);                                                               \
      shmem_global_exit(1);                                                         \
    }                                                                               \
  } while (0)

long global_counter = 0;             /* .bss */
int global_array[64] = {1, 2, 3};    /* .data */
static double static_value = 0.5;    /* a static .data object */
static long psync[SHMEM_REDUCE_SYNC_SIZE];
static double pwrk[SHMEM_REDUCE_MIN_WRKDATA_SIZE];
static long lock_word = 0;
static uint64_t signal_word = 0;
static int shared_total = 0;

static void rma_on_globals(int me, int n) {
  const int right = (me + 1) % n, left = (me + n - 1) % n;
  CHECK(global_array[0] == 1 && global_array[2] == 3); /* contents kept by the remap */
  int mine[4] = {me * 10, me * 10 + 1, me * 10 + 2, me * 10 + 3};
  shmem_barrier_all();
  shmem_int_put(&global_array[8], mine, 4, right);
  shmem_double_p(&static_value, (double)me + 0.25, right);
  shmem_barrier_all();
  for (int i = 0; i < 4; ++i) CHECK(global_array[8 + i] == left * 10 + i);
  CHECK(static_value == (double)left + 0.25);
  int got[4];
  shmem_int_get(got, &global_array[8], 4, right);
  for (int i = 0; i < 4; ++i) CHECK(got[i] == me * 10 + i);
  CHECK(shmem_double_g(&static_value, left) == (double)((left + n - 1) % n) + 0.25);
  /* strided: every other int */
  int strided[4] = {7, 8, 9, 10};
  shmem_barrier_all();
  shmem_int_iput(&global_array[20], strided, 2, 1, 4, right);
  shmem_barrier_all();
  CHECK(global_array[20] == 7 && global_array[22] == 8 && global_array[26] == 10);
  int back[2];
  shmem_int_iget(back, &global_array[20], 1, 4, 2, left);
  CHECK(back[0] == 7 && back[1] == 9);
  /* generic selection */
  shmem_barrier_all();
  shmem_put(&global_array[40], mine, 1, right);
  shmem_barrier_all();
  CHECK(global_array[40] == left * 10);
}

static void atomics(int me, int n) {
  shmem_barrier_all();
  shmem_long_atomic_add(&global_counter, me + 1, 0);
  (void)shmem_long_finc(&global_counter, 0);
  shmem_barrier_all();
  if (me == 0) CHECK(global_counter == (long)n * (n + 1) / 2 + n);
  shmem_barrier_all();
  long old = shmem_long_atomic_compare_swap(&global_counter, -5, 99, 0);
  CHECK(old != -5);
  if (me == 0) CHECK(shmem_long_atomic_swap(&global_counter, 3, 0) == (long)n * (n + 1) / 2 + n);
  shmem_barrier_all();
  CHECK(shmem_long_atomic_fetch(&global_counter, 0) == 3);
  shmem_barrier_all();
  unsigned int *bits = shmem_calloc(1, sizeof(unsigned int));
  CHECK(bits != NULL);
  if (me != 0) CHECK(*bits == 0); /* PE 0 may already see the others' bits */
  shmem_uint_atomic_or(bits, 1u << me, 0);
  shmem_barrier_all();
  if (me == 0) CHECK(*bits == (1u << n) - 1);
  CHECK(shmem_atomic_fetch_xor(bits, 0u, 0) == (1u << n) - 1);
  shmem_barrier_all();
  double d = shmem_double_atomic_swap(&static_value, 1.5, me);
  CHECK(shmem_atomic_fetch(&static_value, me) == 1.5);
  (void)d;
  shmem_free(bits);
}

static void waits_and_signals(int me, int n) {
  const int right = (me + 1) % n;
  shmem_barrier_all();
  shmem_int_p(&global_array[50], 42, right);
  shmem_int_wait_until(&global_array[50], SHMEM_CMP_EQ, 42);
  int value = 5;
  shmem_int_put_signal(&global_array[51], &value, 1, &signal_word, 1, SHMEM_SIGNAL_ADD, right);
  CHECK(shmem_signal_wait_until(&signal_word, SHMEM_CMP_GE, 1) >= 1);
  CHECK(global_array[51] == 5);
  CHECK(shmem_int_test(&global_array[50], SHMEM_CMP_EQ, 42) == 1);
  shmem_barrier_all();
  global_array[52] = 0;
  global_array[53] = 0;
  shmem_barrier_all();
  shmem_int_p(&global_array[53], 1, right);
  size_t which = shmem_int_wait_until_any(&global_array[52], 2, NULL, SHMEM_CMP_EQ, 1);
  CHECK(which == 1);
  shmem_barrier_all();
}

static void locks(int me, int n) {
  (void)me;
  for (int round = 0; round < 5; ++round) {
    shmem_set_lock(&lock_word);
    int total = shmem_int_g(&shared_total, 0);
    shmem_int_p(&shared_total, total + 1, 0);
    shmem_clear_lock(&lock_word);
  }
  shmem_barrier_all();
  CHECK(shmem_int_g(&shared_total, 0) == 5 * n);
}

static void collectives(int me, int n) {
  for (int i = 0; i < SHMEM_REDUCE_SYNC_SIZE; ++i) psync[i] = SHMEM_SYNC_VALUE;
  long *src = shmem_malloc(4 * n * sizeof(long));
  long *dst = shmem_malloc(4 * n * sizeof(long));
  CHECK(src != NULL && dst != NULL);
  for (int i = 0; i < 4 * n; ++i) src[i] = me * 100 + i;
  memset(dst, 0, 4 * n * sizeof(long));
  shmem_barrier_all();
  /* broadcast64: root 1's four words everywhere but on the root (1.4 semantics) */
  shmem_broadcast64(dst, src, 4, 1, 0, 0, n, psync);
  if (me != 1) for (int i = 0; i < 4; ++i) CHECK(dst[i] == 100 + i);
  if (me == 1) CHECK(dst[0] == 0);
  shmem_barrier_all();
  shmem_fcollect64(dst, src, 2, 0, 0, n, psync);
  for (int p = 0; p < n; ++p) CHECK(dst[2 * p] == p * 100 && dst[2 * p + 1] == p * 100 + 1);
  shmem_barrier_all();
  /* collect: PE p gives p + 1 words */
  shmem_collect64(dst, src, (size_t)me + 1, 0, 0, n, psync);
  int at = 0;
  for (int p = 0; p < n; ++p) for (int i = 0; i <= p; ++i) CHECK(dst[at++] == p * 100 + i);
  shmem_barrier_all();
  CHECK(shmem_long_alltoall(SHMEM_TEAM_WORLD, dst, src, 2) == 0);
  for (int p = 0; p < n; ++p) CHECK(dst[2 * p] == p * 100 + 2 * me);
  /* reductions, old and new */
  static double total, smallest;
  static long double wide_in, wide_out;
  total = (double)me;
  shmem_double_sum_to_all(&smallest, &total, 1, 0, 0, n, pwrk, psync);
  CHECK(smallest == (double)n * (n - 1) / 2);
  shmem_barrier_all();
  shmem_double_min_to_all(&total, &total, 1, 0, 0, n, pwrk, psync);
  CHECK(total == 0.0);
  wide_in = (long double)me + 1;
  shmem_barrier_all();
  CHECK(shmem_longdouble_prod_reduce(SHMEM_TEAM_WORLD, &wide_out, &wide_in, 1) == 0);
  long double factorial = 1;
  for (int p = 1; p <= n; ++p) factorial *= p;
  CHECK(wide_out == factorial);
  src[0] = 1L << me;
  shmem_barrier_all();
  CHECK(shmem_int64_or_reduce(SHMEM_TEAM_WORLD, (int64_t *)dst, (int64_t *)src, 1) == 0);
  CHECK(dst[0] == (1L << n) - 1);
  shmem_barrier_all();
  shmem_free(dst);
  shmem_free(src);
}

static void teams(int me, int n) {
  shmem_team_t evens = SHMEM_TEAM_INVALID;
  CHECK(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (n + 1) / 2, NULL, 0, &evens) == 0);
  if (me % 2 == 0) {
    CHECK(evens != SHMEM_TEAM_INVALID);
    CHECK(shmem_team_my_pe(evens) == me / 2 && shmem_team_n_pes(evens) == (n + 1) / 2);
    CHECK(shmem_team_translate_pe(evens, shmem_team_n_pes(evens) - 1, SHMEM_TEAM_WORLD) ==
          2 * (shmem_team_n_pes(evens) - 1));
    static int value, sum;
    value = me;
    CHECK(shmem_int_sum_reduce(evens, &sum, &value, 1) == 0);
    int expect = 0;
    for (int p = 0; p < n; p += 2) expect += p;
    CHECK(sum == expect);
    shmem_ctx_t ctx;
    CHECK(shmem_team_create_ctx(evens, 0, &ctx) == 0);
    /* a context of the team numbers PEs in the team */
    shmem_ctx_int_p(ctx, &global_array[60], me, 0);
    shmem_ctx_quiet(ctx);
    shmem_ctx_destroy(ctx);
    CHECK(shmem_team_sync(evens) == 0);
    if (me == 0) CHECK(global_array[60] % 2 == 0);
    shmem_team_destroy(evens);
  } else {
    CHECK(evens == SHMEM_TEAM_INVALID);
  }
  shmem_barrier_all();
}

static void memory(int me, int n) {
  /* more than the heap: null on every PE, and the job goes on */
  void *huge = shmem_malloc((size_t)1 << 40);
  CHECK(huge == NULL);
  char *p = shmem_malloc(16);
  CHECK(p != NULL);
  snprintf(p, 16, "pe %d", me);
  shmem_barrier_all();
  /* a PE of this host: its object through this process's mapping; another host's: NULL */
  const char *peer = shmem_ptr(p, (me + 1) % n);
  char expected[16];
  snprintf(expected, sizeof expected, "pe %d", (me + 1) % n);
  if (peer != NULL) CHECK(strcmp(peer, expected) == 0);
  if (getenv("HYPER_PARALLEL_SHMEM_REMOTE_PEERS") == NULL &&
      shmem_team_n_pes(SHMEM_TEAM_SHARED) == n) {
    CHECK(peer != NULL); /* one host, peers mapped */
  }
  shmem_barrier_all();
  p = shmem_realloc(p, 4096);
  CHECK(p != NULL && strncmp(p, "pe ", 3) == 0);
  void *aligned = shmem_align(4096, 100);
  CHECK(aligned != NULL && ((uintptr_t)aligned % 4096) == 0);
  CHECK(shmem_addr_accessible(p, 0) == 1);
  CHECK(shmem_addr_accessible(&me, 0) == 0);
  CHECK(shmem_pe_accessible(n) == 0 && shmem_pe_accessible(0) == 1);
  CHECK(shmem_ptr(p, me) == p);
  shmem_free(aligned);
  shmem_free(p);
}

int main(void) {
  shmem_init();
  const int me = shmem_my_pe(), n = shmem_n_pes();
  CHECK(n >= 2);
  int major = 0, minor = 0;
  shmem_info_get_version(&major, &minor);
  CHECK(major == 1 && minor == 5);
  rma_on_globals(me, n);
  atomics(me, n);
  waits_and_signals(me, n);
  locks(me, n);
  collectives(me, n);
  teams(me, n);
  memory(me, n);
  shmem_finalize();
  /* the globals are the program's own again */
  global_array[0] = 11;
  CHECK(global_array[0] == 11);
  printf("PASS PE %d\n", me);
  return 0;
}
