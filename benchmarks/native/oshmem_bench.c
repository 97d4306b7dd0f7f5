/*
 * oshmem_bench.c - reference micro-benchmark for Open MPI's OSHMEM.
 *
 * Measures the same communication patterns as the Hyper-Parallel SHMEM
 * benchmarks (put, get, put + signal, ping-pong, barrier, fcollect, fetching
 * atomics, non-blocking puts) using only the OpenSHMEM 1.4 API, so an
 * orchestrator can compare the two runtimes.
 * For every requested size all PEs first run an untimed warm-up, then PE 0
 * calibrates an iteration count by doubling a trial batch until the shorter
 * of two runs lasts at least --min-time-us; the count is broadcast so every
 * PE runs identical loops.  Each of the --reps repetitions is a barrier
 * followed by a timed batch (CLOCK_MONOTONIC) and yields the mean
 * microseconds per iteration (per half round trip for ping-pong).  Put, get,
 * ping-pong and fcollect data is checked once after the measurements, the
 * atomics' word once after and every fetched value as it comes.  fetch_add
 * and compare_swap work on one 64-bit word whatever --sizes says: one record
 * of 8 bytes per listed size.  PE 0
 * writes one JSON line per size to stdout, then a "done" line before
 * shmem_finalize(), because Open MPI 4.1.4 may crash inside shmem_finalize
 * (ompi issue 11604).
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <shmem.h>

#define EXIT_USAGE 2
#define MAX_ITERS (1L << 20)
#define WARMUP_ITERS 3
#define MAX_SIZES 256
#define MAX_BYTES ((size_t)1 << 30)
#define MAX_REPS 1000000L
#define MAX_MIN_TIME_US 1e9
#define FILL_BYTE 0xFF

enum test_kind {
    TEST_PUT, TEST_GET, TEST_PINGPONG, TEST_BARRIER, TEST_FCOLLECT, TEST_PUT_SIGNAL,
    TEST_FETCH_ADD, TEST_COMPARE_SWAP, TEST_PUT_NBI, TEST_PUT_SIGNAL_QUIET
};

static const char *const test_names[] = {
    "put", "get", "pingpong", "barrier", "fcollect", "put_signal",
    "fetch_add", "compare_swap", "put_nbi", "put_signal_quiet"
};

struct options {
    enum test_kind test;
    size_t sizes[MAX_SIZES];
    int nsizes;
    long reps;
    double min_time_us;
};

/* Everything a batch needs; symmetric pointers are identical on all PEs. */
struct bench {
    int me;
    int npes;
    enum test_kind test;
    size_t bytes;
    unsigned char *sym_dst;
    unsigned char *sym_src;
    unsigned char *local;
    long *flag;
    long *word;
    long seq;
    long *coll_psync[2];
    int coll_turn;
    long *bcast_psync;
    long *bcast_val;
};

/* ---------------------------------------------------------------- parsing */

static void usage(const char *msg)
{
    fprintf(stderr, "oshmem_bench: %s\n", msg);
    fprintf(stderr,
            "usage: oshmem_bench --test put|get|put_signal|pingpong|barrier|fcollect|"
            "fetch_add|compare_swap|put_nbi|put_signal_quiet "
            "--sizes S1,S2,... --reps R --min-time-us T\n");
    exit(EXIT_USAGE);
}

static int parse_test(const char *s, enum test_kind *out)
{
    for (size_t i = 0; i < sizeof test_names / sizeof test_names[0]; i++) {
        if (strcmp(s, test_names[i]) == 0) {
            *out = (enum test_kind)i;
            return 0;
        }
    }
    return -1;
}

/* strtoull accepts a leading '-' and wraps it, so demand a digit first. */
static int parse_size(const char *s, const char **end, size_t *out)
{
    char *e;
    unsigned long long v;

    if (*s < '0' || *s > '9')
        return -1;
    errno = 0;
    v = strtoull(s, &e, 10);
    if (errno != 0 || v > MAX_BYTES)
        return -1;
    *end = e;
    *out = (size_t)v;
    return 0;
}

static int parse_size_list(const char *s, struct options *o)
{
    const char *p = s;

    o->nsizes = 0;
    for (;;) {
        if (o->nsizes == MAX_SIZES || parse_size(p, &p, &o->sizes[o->nsizes]))
            return -1;
        o->nsizes++;
        if (*p == '\0')
            return 0;
        if (*p != ',')
            return -1;
        p++;
    }
}

static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *e;
    long v;

    errno = 0;
    v = strtol(s, &e, 10);
    if (errno != 0 || e == s || *e != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static int parse_double(const char *s, double lo, double hi, double *out)
{
    char *e;
    double v;

    errno = 0;
    v = strtod(s, &e);
    if (errno != 0 || e == s || *e != '\0' || !isfinite(v) || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

static void apply_option(struct options *o, const char *key, const char *val,
                         unsigned *seen)
{
    if (strcmp(key, "--test") == 0) {
        if (parse_test(val, &o->test))
            usage("unknown --test value");
        *seen |= 1u;
    } else if (strcmp(key, "--sizes") == 0) {
        if (parse_size_list(val, o))
            usage("--sizes must be a comma list of byte counts <= 2^30");
        *seen |= 2u;
    } else if (strcmp(key, "--reps") == 0) {
        if (parse_long(val, 1, MAX_REPS, &o->reps))
            usage("--reps must be an integer in [1, 1000000]");
        *seen |= 4u;
    } else if (strcmp(key, "--min-time-us") == 0) {
        if (parse_double(val, 0.0, MAX_MIN_TIME_US, &o->min_time_us))
            usage("--min-time-us must be a number in [0, 1e9]");
        *seen |= 8u;
    } else {
        usage("unknown option");
    }
}

static void parse_args(int argc, char **argv, struct options *o)
{
    unsigned seen = 0;

    memset(o, 0, sizeof *o);
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 >= argc)
            usage("option is missing its value");
        apply_option(o, argv[i], argv[i + 1], &seen);
    }
    /* Barrier has no payload, so it always runs one entry of 0 bytes. */
    if (o->test == TEST_BARRIER && (seen & 1u)) {
        o->sizes[0] = 0;
        o->nsizes = 1;
        seen |= 2u;
    }
    if (seen != 15u)
        usage("--test, --sizes, --reps and --min-time-us are all required");
}

/* ---------------------------------------------------------------- helpers */

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static void fail(int me, const char *msg)
{
    fprintf(stderr, "oshmem_bench: PE %d: %s\n", me, msg);
    fflush(stderr);
    shmem_global_exit(1);
    exit(1);
}

static void *sym_alloc(int me, size_t bytes)
{
    void *p = shmem_malloc(bytes);

    if (p == NULL)
        fail(me, "shmem_malloc failed; raise SHMEM_SYMMETRIC_SIZE");
    return p;
}

/* A cache line of its own, so polling a neighbour cannot slow its atomics. */
static long *line_alloc(int me)
{
    long *p = shmem_align(64, 64);

    if (p == NULL)
        fail(me, "shmem_align failed; raise SHMEM_SYMMETRIC_SIZE");
    return p;
}

static long *sync_alloc(int me, size_t count)
{
    long *p = sym_alloc(me, count * sizeof(long));

    for (size_t i = 0; i < count; i++)
        p[i] = SHMEM_SYNC_VALUE;
    return p;
}

/* Values stay below 251 so they never collide with FILL_BYTE. */
static unsigned char pattern(int pe, size_t i)
{
    return (unsigned char)(((size_t)pe * 37u + i * 13u) % 251u);
}

static void fill_pattern(unsigned char *buf, size_t n, int pe)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = pattern(pe, i);
}

/* Checks a handful of spread-out bytes, enough to catch a missing or
 * misplaced transfer without slowing down large sizes. */
static void check_pattern(const struct bench *b, const unsigned char *buf,
                          size_t n, int pe, const char *what)
{
    const size_t probes[] = { 0, n / 3, n / 2, n - 1 };
    char msg[160];

    if (n == 0)
        return;
    for (size_t k = 0; k < sizeof probes / sizeof probes[0]; k++) {
        size_t i = probes[k];
        if (buf[i] != pattern(pe, i)) {
            snprintf(msg, sizeof msg,
                     "%s verification failed at byte %zu: got %u, expected %u",
                     what, i, buf[i], pattern(pe, i));
            fail(b->me, msg);
        }
    }
}

/* fcollect64 moves 8-byte words: round down, but move at least one word.
 * The atomics always work on one long. */
static size_t effective_bytes(enum test_kind t, size_t bytes)
{
    if (t == TEST_FETCH_ADD || t == TEST_COMPARE_SWAP)
        return sizeof(long);
    if (t != TEST_FCOLLECT)
        return bytes;
    bytes -= bytes % 8;
    return bytes < 8 ? 8 : bytes;
}

/* Returns v as seen by PE 0 on every PE.  The barriers keep bcast_psync
 * and bcast_val free for the next call. */
static long agree_long(struct bench *b, long v)
{
    b->bcast_val[0] = v;
    shmem_barrier_all();
    shmem_broadcast64(&b->bcast_val[1], &b->bcast_val[0], 1, 0, 0, 0,
                      b->npes, b->bcast_psync);
    shmem_barrier_all();
    return b->me == 0 ? v : b->bcast_val[1];
}

/* ---------------------------------------------------------------- batches */

/* Each batch returns elapsed microseconds; only the initiator's is used. */

/* PE 0's batch of one-sided calls: n times `call`, then `finish` (the quiet
 * that completes them, where they need one); elapsed microseconds. */
#define PE0_BATCH(name, call, finish)               \
    static double name(struct bench *b, long n)     \
    {                                               \
        double t0;                                  \
                                                    \
        if (b->me != 0)                             \
            return 0.0;                             \
        t0 = now_us();                              \
        for (long i = 0; i < n; i++)                \
            call;                                   \
        finish;                                     \
        return now_us() - t0;                       \
    }

PE0_BATCH(batch_put, shmem_putmem(b->sym_dst, b->local, b->bytes, 1), shmem_quiet())

/* Many messages in flight and one quiet per batch: time per message, the
 * inverse of the message rate. */
PE0_BATCH(batch_put_nbi, shmem_putmem_nbi(b->sym_dst, b->local, b->bytes, 1), shmem_quiet())

PE0_BATCH(batch_get, shmem_getmem(b->local, b->sym_src, b->bytes, 1), (void)0)

/* The start of a batch whose end PE 1 waits for on the flag: the batch's calls
 * added to the sequence, PE 1 waiting in shmem_long_wait_until (which drives
 * its progress) for PE 0's last one.  True on PE 0, which runs the batch. */
static int flagged_batch(struct bench *b, long n)
{
    b->seq += n;
    if (b->me == 1)
        shmem_long_wait_until(b->flag, SHMEM_CMP_GE, b->seq);
    return b->me == 0;
}

/* OpenSHMEM 1.4 has no put-with-signal: the payload, a fence, a remote add on
 * the peer's flag, and a quiet, so every call is complete (both writes
 * visible at the target) before the next starts: time per call.  The target
 * waits for the batch's last add in shmem_long_wait_until, which drives its
 * progress (over tcp a remote atomic lands only while the target does;
 * waiting in a barrier instead cost a scheduler tick per call).
 * put_signal_quiet runs this same batch under the name of the Hyper-Parallel
 * SHMEM test it stands beside (put_signal + quiet there). */
static double batch_put_signal(struct bench *b, long n)
{
    double t0;

    if (!flagged_batch(b, n))
        return 0.0;
    t0 = now_us();
    for (long i = 0; i < n; i++) {
        shmem_putmem(b->sym_dst, b->local, b->bytes, 1);
        shmem_fence();
        shmem_long_atomic_add(b->flag, 1, 1);
        shmem_quiet();
    }
    return now_us() - t0;
}

static void word_mismatch(const struct bench *b, long got, long expected)
{
    char msg[160];

    snprintf(msg, sizeof msg, "%s: the word holds %ld, expected %ld",
             test_names[b->test], got, expected);
    fail(b->me, msg);
}

/* PE 0's fetching atomics on PE 1's word, which only grows: call k (counted
 * over every batch) finds k there and leaves k + 1, so every compare-and-swap
 * succeeds with cond k.  As in put_signal, PE 1 waits in
 * shmem_long_wait_until, which drives its progress, but on the flag, which PE
 * 0 sets once after its clock stops: polling the word itself would contend
 * for its cache line with every atomic over shared memory (twice the time). */
static double batch_atomic(struct bench *b, long n)
{
    long base = b->seq;
    double t0, t;

    if (!flagged_batch(b, n))
        return 0.0;
    t0 = now_us();
    if (b->test == TEST_FETCH_ADD) {
        for (long i = 0; i < n; i++) {
            long old = shmem_long_atomic_fetch_add(b->word, 1, 1);
            if (old != base + i)
                word_mismatch(b, old, base + i);
        }
    } else {
        for (long i = 0; i < n; i++) {
            long cond = base + i;
            long old = shmem_long_atomic_compare_swap(b->word, cond, cond + 1, 1);
            if (old != cond)
                word_mismatch(b, old, cond);
        }
    }
    t = now_us() - t0;
    shmem_long_atomic_set(b->flag, b->seq, 1);
    return t;
}

/* The fence orders the payload before the flag, so once the peer sees the
 * flag the data has landed.  The flag only grows, so it is never reset. */
static void pingpong_send(struct bench *b, int peer)
{
    shmem_putmem(b->sym_dst, b->local, b->bytes, peer);
    shmem_fence();
    shmem_long_atomic_set(b->flag, b->seq, peer);
}

static double batch_pingpong(struct bench *b, long n)
{
    double t0;

    if (b->me > 1)
        return 0.0;
    t0 = now_us();
    for (long i = 0; i < n; i++) {
        b->seq++;
        if (b->me == 0) {
            pingpong_send(b, 1);
            shmem_long_wait_until(b->flag, SHMEM_CMP_GE, b->seq);
        } else {
            shmem_long_wait_until(b->flag, SHMEM_CMP_GE, b->seq);
            pingpong_send(b, 0);
        }
    }
    return now_us() - t0;
}

static double batch_barrier(struct bench *b, long n)
{
    double t0;

    (void)b;
    t0 = now_us();
    for (long i = 0; i < n; i++)
        shmem_barrier_all();
    return now_us() - t0;
}

/* Alternating two pSync arrays lets consecutive calls run back to back
 * without a barrier in between, as the 1.4 spec permits. */
static double batch_fcollect(struct bench *b, long n)
{
    double t0;

    t0 = now_us();
    for (long i = 0; i < n; i++) {
        shmem_fcollect64(b->sym_dst, b->sym_src, b->bytes / 8, 0, 0, b->npes,
                         b->coll_psync[b->coll_turn]);
        b->coll_turn ^= 1;
    }
    return now_us() - t0;
}

static double run_batch(struct bench *b, long n)
{
    switch (b->test) {
    case TEST_PUT:
        return batch_put(b, n);
    case TEST_GET:
        return batch_get(b, n);
    case TEST_PINGPONG:
        return batch_pingpong(b, n);
    case TEST_BARRIER:
        return batch_barrier(b, n);
    case TEST_FCOLLECT:
        return batch_fcollect(b, n);
    case TEST_PUT_SIGNAL:
    case TEST_PUT_SIGNAL_QUIET:
        return batch_put_signal(b, n);
    case TEST_FETCH_ADD:
    case TEST_COMPARE_SWAP:
        return batch_atomic(b, n);
    case TEST_PUT_NBI:
        return batch_put_nbi(b, n);
    }
    return 0.0;
}

/* ------------------------------------------------------------ measurement */

/* The shorter of two trials, so a single descheduling hiccup on an
 * oversubscribed node cannot end calibration with a tiny count. */
static double trial(struct bench *b, long n)
{
    double t1, t2;

    shmem_barrier_all();
    t1 = run_batch(b, n);
    shmem_barrier_all();
    t2 = run_batch(b, n);
    return t1 < t2 ? t1 : t2;
}

/* Every PE runs the trial batches because ping-pong, barrier and fcollect
 * need partners; PE 0 alone decides when a batch is long enough. */
static long calibrate(struct bench *b, double min_time_us)
{
    long n = 1;

    for (;;) {
        double t = trial(b, n);
        long done;

        done = (b->me == 0 && (t >= min_time_us || n >= MAX_ITERS)) ? n : 0;
        done = agree_long(b, done);
        if (done != 0)
            return done;
        n *= 2;
    }
}

/* Gives each buffer a value the transfer must overwrite, so verification
 * cannot pass on stale data from an earlier size. */
static void prepare_buffers(struct bench *b)
{
    size_t dst_bytes = b->test == TEST_FCOLLECT
                           ? b->bytes * (size_t)b->npes : b->bytes;

    memset(b->sym_dst, FILL_BYTE, dst_bytes);
    fill_pattern(b->sym_src, b->bytes, b->me);
    if (b->test == TEST_GET)
        memset(b->local, FILL_BYTE, b->bytes);
    else
        fill_pattern(b->local, b->bytes, b->me);
    shmem_barrier_all();
}

static void verify(struct bench *b)
{
    shmem_barrier_all();
    switch (b->test) {
    case TEST_PUT:
    case TEST_PUT_SIGNAL:
    case TEST_PUT_NBI:
    case TEST_PUT_SIGNAL_QUIET:
        if (b->me == 1)
            check_pattern(b, b->sym_dst, b->bytes, 0, test_names[b->test]);
        break;
    case TEST_FETCH_ADD:
    case TEST_COMPARE_SWAP:
        if (b->me == 1 && *b->word != b->seq)
            word_mismatch(b, *b->word, b->seq);
        break;
    case TEST_GET:
        if (b->me == 0)
            check_pattern(b, b->local, b->bytes, 1, "get");
        break;
    case TEST_PINGPONG:
        if (b->me <= 1)
            check_pattern(b, b->sym_dst, b->bytes, 1 - b->me, "pingpong");
        break;
    case TEST_FCOLLECT:
        for (int pe = 0; pe < b->npes; pe++)
            check_pattern(b, b->sym_dst + (size_t)pe * b->bytes, b->bytes, pe,
                          "fcollect");
        break;
    case TEST_BARRIER:
        break;
    }
    shmem_barrier_all();
}

static void print_result(const struct bench *b, long iters,
                         const double *samples, long reps)
{
    printf("{\"impl\": \"oshmem\", \"test\": \"%s\", \"pes\": %d, "
           "\"bytes\": %zu, \"iters\": %ld, \"samples_us\": [",
           test_names[b->test], b->npes, b->bytes, iters);
    for (long r = 0; r < reps; r++)
        printf("%s%.4f", r ? ", " : "", samples[r]);
    printf("]}\n");
    fflush(stdout);
}

static void measure_size(struct bench *b, const struct options *o,
                         size_t bytes, double *samples)
{
    double scale;
    long iters;

    b->bytes = effective_bytes(b->test, bytes);
    prepare_buffers(b);
    run_batch(b, WARMUP_ITERS);
    iters = calibrate(b, o->min_time_us);
    /* Ping-pong reports half a round trip. */
    scale = b->test == TEST_PINGPONG ? 2.0 * (double)iters : (double)iters;
    for (long r = 0; r < o->reps; r++) {
        shmem_barrier_all();
        samples[r] = run_batch(b, iters) / scale;
    }
    verify(b);
    if (b->me == 0)
        print_result(b, iters, samples, o->reps);
}

/* ------------------------------------------------------------------ setup */

static size_t max_bytes(const struct options *o)
{
    size_t m = 8;

    for (int i = 0; i < o->nsizes; i++) {
        size_t e = effective_bytes(o->test, o->sizes[i]);
        if (e > m)
            m = e;
    }
    return m;
}

static void setup(struct bench *b, const struct options *o)
{
    size_t m = max_bytes(o);
    size_t dst = o->test == TEST_FCOLLECT ? m * (size_t)b->npes : m;
    void *local = NULL;

    b->test = o->test;
    b->sym_dst = sym_alloc(b->me, dst);
    b->sym_src = sym_alloc(b->me, m);
    b->flag = sym_alloc(b->me, sizeof(long));
    b->word = line_alloc(b->me);
    b->bcast_val = sym_alloc(b->me, 2 * sizeof(long));
    b->coll_psync[0] = sync_alloc(b->me, SHMEM_COLLECT_SYNC_SIZE);
    b->coll_psync[1] = sync_alloc(b->me, SHMEM_COLLECT_SYNC_SIZE);
    b->bcast_psync = sync_alloc(b->me, SHMEM_BCAST_SYNC_SIZE);
    if (posix_memalign(&local, 4096, m) != 0)
        fail(b->me, "cannot allocate local buffer");
    b->local = local;
    *b->flag = 0;
    *b->word = 0;
    b->seq = 0;
    b->coll_turn = 0;
    /* No PE may touch a peer's pSync, flag or word before it is initialised. */
    shmem_barrier_all();
}

int main(int argc, char **argv)
{
    struct options opts;
    struct bench b;
    double *samples;

    parse_args(argc, argv, &opts);
    shmem_init();
    memset(&b, 0, sizeof b);
    b.me = shmem_my_pe();
    b.npes = shmem_n_pes();
    if (b.npes < 2) {
        fprintf(stderr, "oshmem_bench: needs at least 2 PEs\n");
        shmem_global_exit(EXIT_USAGE);
        return EXIT_USAGE;
    }
    samples = malloc((size_t)opts.reps * sizeof *samples);
    if (samples == NULL)
        fail(b.me, "cannot allocate sample buffer");
    setup(&b, &opts);
    for (int i = 0; i < opts.nsizes; i++)
        measure_size(&b, &opts, opts.sizes[i], samples);
    shmem_barrier_all();
    if (b.me == 0) {
        printf("{\"impl\": \"oshmem\", \"done\": true}\n");
        fflush(stdout);
    }
    /* Flush everything first: shmem_finalize may crash (ompi issue 11604). */
    fflush(stderr);
    shmem_finalize();
    free(samples);
    free(b.local);
    return 0;
}
