/* SPDX-License-Identifier: MIT */
/*
 * A program that links libmemprof and runs under the LD_PRELOAD plugin, so the plugin's
 * hooks and the program's API calls share one engine. Each mode (argv[1]) checks one
 * behaviour through the public API, from inside the profiled process:
 *
 *   estimate-small-blocks   2000 x 50,000 B at rate 64 KiB: estimate within +-10 % of
 *                           100,000,000 B while live, and under 5 % of it after freeing.
 *   estimate-large-blocks   20 x 16 MiB at the default rate (argv[2]): within +-3 %, and
 *                           every sample records exactly 16 MiB (no 24-bit clamp).
 *   huge-block-exact-size   one untouched block of 4 GiB + 12,345 B: its sample records the
 *                           exact size and the estimate is within 1 % (skipped if the
 *                           system refuses the allocation).
 *   threads-cross-thread-free  4 threads allocate 500 x 50,000 B each at rate 64 KiB: the
 *                           estimate is within +-10 % of 100,000,000 B; after the main thread
 *                           frees every block, it is under 5 % of that.
 *   thread-churn-counts     at rate 1, 1000 short-lived threads allocate 20 blocks each and
 *                           free half: every allocation and free is counted after its thread
 *                           has exited, and the main thread's frees of the rest empty the
 *                           live set.
 *   free-after-stop         after memprof_stop(), freeing sampled blocks still removes their
 *                           samples (live samples and the estimate drop back).
 *   shutdown-keeps-program-working  after memprof_shutdown(), blocks sampled before it are
 *                           freed and new ones allocated without harm; snapshot, init and start
 *                           return -ESHUTDOWN, and the exit-time hook copes.
 *   no-samples-after-stop   after memprof_stop(), new allocations are not sampled.
 *                           (These three run with MEMPROF_START=0 and the program's own
 *                           memprof_init(65536) and memprof_start(): stop and shutdown act on
 *                           a profile the program owns.)
 *   joined-stop-and-shutdown  the plugin's own profile (MEMPROF_START=1, as under `memprof
 *                           run`): the program's init, start and stop return MEMPROF_JOINED,
 *                           sampling goes on after its stop and its shutdown, and snapshots
 *                           still work.
 *   program-init            MEMPROF_START=0: the plugin leaves the engine uninitialised and
 *                           idle; the program's memprof_init(65536) returns 0 and sets the
 *                           rate, nothing is sampled before memprof_start(), which returns 0
 *                           and starts sampling.
 *   report-rate             prints the engine's sampling rate and state (the runner checks
 *                           that a bad MEMPROF_RATE falls back to the default).
 *   exit-profile-written-early  with MEMPROF_OUTPUT naming a collapsed (.folded) file: a
 *                           forked child holding 2000 x 50,000 B calls
 *                           memprof_write_exit_profile() (0, then -EALREADY), frees every
 *                           block and exits; its profile (OUTPUT.<pid>), read by the parent
 *                           after the child's exit, still holds 100,000,000 B +-10 %: written
 *                           at the call, not again at exit.
 *   exit-profile-needs-an-output  without MEMPROF_OUTPUT the plugin writes no exit-time
 *                           profile: memprof_write_exit_profile() returns -ENOTSUP.
 *   tables-at-first-sample  at a rate of 256 MiB (nothing sampled before main): the engine is
 *                           active with its sizes reported and nothing mapped
 *                           (profiler_bytes 0); blocks of 64 MiB until one is sampled; then
 *                           its tables are mapped and the sample is live.
 *   snapshot-before-any-sample  same rate: a snapshot taken before any sample succeeds, with
 *                           no sample and an estimate of 0 B (the reader maps the tables).
 *   no-heap-before-main     glibc's heap is untouched when main() starts: the plugin's start
 *                           allocates nothing from it (a process that never allocates pays
 *                           no set-up of glibc's allocator).
 *   libc-entries-written-at-first-lookup  at a rate of 256 MiB (nothing sampled before main):
 *                           libc's dynamic-symbol entry for free is unwritten when main()
 *                           starts (its page is still the file's); the program's first dlsym()
 *                           writes it before the lookup, which through libc's handle then
 *                           finds the plugin's free.
 *   libc-entries-written-at-first-sample  same rate: blocks of 64 MiB until one is sampled;
 *                           libc's entry for free names the plugin's by then.
 *   one-engine              the program's API calls go to the plugin's copy of the library,
 *                           a dlopen("libmemprof.so.1") returns the plugin (its soname), and
 *                           no file libmemprof.so.1 is mapped: one engine in the process.
 *
 * Every mode first checks that malloc really is the plugin's (dladdr on the malloc the
 * program calls), so a test cannot pass by running without the profiler.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memprof/memprof.h>
#include <memprof/runtime.h>

#include "itest.h"

#define MAX_BLOCKS 2000

static void *blocks[MAX_BLOCKS];

void itest_allocate_blocks(size_t n, size_t size);
void itest_free_blocks(size_t n);

/* The allocating function the profiles name: n blocks of exactly `size` bytes. */
__attribute__((noinline)) void itest_allocate_blocks(size_t n, size_t size)
{
    for (size_t i = 0; i < n; i++) {
        blocks[i] = malloc(size);
        CHECK(blocks[i] != NULL, "malloc(%zu) failed", size);
        itest_touch(blocks[i], (unsigned char)i);
    }
}

__attribute__((noinline)) void itest_free_blocks(size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(blocks[i]);
        blocks[i] = NULL;
    }
}

static memprof_stats stats(void)
{
    memprof_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    int rc = memprof_get_stats(&s);
    CHECK(rc == 0, "memprof_get_stats: %s", memprof_strerror(rc));
    return s;
}

/* Estimated live bytes and live samples of a fresh snapshot. */
static uint64_t estimate(size_t *samples)
{
    memprof_snapshot *snap = NULL;
    int rc = memprof_get_snapshot(&snap);
    CHECK(rc == 0 && snap, "memprof_get_snapshot: %s", memprof_strerror(rc));
    uint64_t bytes = memprof_snapshot_estimated_bytes(snap);
    if (samples)
        *samples = memprof_snapshot_live_samples(snap);
    memprof_free_snapshot(snap);
    return bytes;
}

/* How many live samples of a fresh snapshot have exactly `bytes` bytes, and how many have
 * a size in [lo, hi] other than that (a clamped or truncated size). */
static size_t samples_of_size(uint64_t bytes, uint64_t lo, uint64_t hi, size_t *wrong)
{
    memprof_snapshot *snap = NULL;
    int rc = memprof_get_snapshot(&snap);
    CHECK(rc == 0 && snap, "memprof_get_snapshot: %s", memprof_strerror(rc));
    size_t exact = 0, n = memprof_snapshot_live_samples(snap);
    *wrong = 0;
    for (size_t i = 0; i < n; i++) {
        memprof_sample_info si;
        memset(&si, 0, sizeof si);
        si.size = sizeof si;
        rc = memprof_snapshot_sample(snap, i, &si);
        CHECK(rc == 0, "memprof_snapshot_sample(%zu): %s", i, memprof_strerror(rc));
        if (si.bytes == bytes)
            exact++;
        else if (si.bytes >= lo && si.bytes <= hi) {
            if (*wrong == 0)
                printf("sample of %" PRIu64 " B where %" PRIu64 " B were allocated\n", si.bytes,
                       bytes);
            ++*wrong;
        }
    }
    memprof_free_snapshot(snap);
    return exact;
}

/* The malloc this program calls must be the plugin's. */
static void require_preload(void)
{
    void *(*volatile m)(size_t) = malloc;
    Dl_info info;
    CHECK(dladdr((void *)m, &info) && info.dli_fname, "dladdr(malloc) failed");
    CHECK(strstr(info.dli_fname, "libmemprof-preload") != NULL,
          "malloc comes from %s, not from the preload plugin: is LD_PRELOAD set?", info.dli_fname);
}

static void require_state(uint32_t state)
{
    memprof_stats s = stats();
    CHECK(s.state == state, "engine state is %" PRIu32 ", expected %" PRIu32, s.state, state);
}

/* Under MEMPROF_START=0: the program's own engine, initialised and started by it. */
static void own_engine(void)
{
    require_state(MEMPROF_STATE_UNINITIALIZED);
    int rc = memprof_init(65536);
    CHECK(rc == 0, "memprof_init(65536) = %d (%s)", rc, memprof_strerror(rc));
    rc = memprof_start();
    CHECK(rc == 0, "memprof_start() = %d (%s)", rc, memprof_strerror(rc));
    require_state(MEMPROF_STATE_ACTIVE);
}

static void check_within(const char *what, uint64_t got, double truth, double tolerance)
{
    double rel = ((double)got - truth) / truth;
    printf("%s: estimate %" PRIu64 " B, truth %.0f B, error %+.2f %% (allowed +-%.0f %%)\n", what,
           got, truth, rel * 100.0, tolerance * 100.0);
    CHECK(rel <= tolerance && rel >= -tolerance, "%s: estimate off by %+.2f %%", what, rel * 100.0);
}

static int estimate_small_blocks(void)
{
    require_state(MEMPROF_STATE_ACTIVE);
    CHECK(stats().sampling_rate == 65536, "run with MEMPROF_RATE=65536");
    itest_allocate_blocks(2000, 50000);
    size_t samples;
    uint64_t live = estimate(&samples);
    printf("%zu live samples\n", samples);
    check_within("2000 x 50000 B live", live, 1e8, 0.10);
    itest_free_blocks(2000);
    uint64_t after = estimate(&samples);
    printf("after free: estimate %" PRIu64 " B from %zu live samples\n", after, samples);
    CHECK(after < 5000000, "after freeing, %" PRIu64 " B are still estimated live", after);
    return 0;
}

static int estimate_large_blocks(uint64_t default_rate)
{
    require_state(MEMPROF_STATE_ACTIVE);
    CHECK(stats().sampling_rate == default_rate, "sampling rate %" PRIu64 ", expected %" PRIu64,
          stats().sampling_rate, default_rate);
    const size_t size = (size_t)16 << 20; /* exactly 16 MiB */
    itest_allocate_blocks(20, size);
    size_t samples;
    uint64_t live = estimate(&samples);
    printf("%zu live samples\n", samples);
    check_within("20 x 16 MiB live", live, 20.0 * (double)size, 0.03);
    /* p(16 MiB) = 1 - exp(-32) at 512 KiB: all 20 are sampled, with their exact size. */
    size_t wrong, exact = samples_of_size(size, size / 2, size * 2, &wrong);
    printf("%zu samples of exactly 16 MiB, %zu of another size near it\n", exact, wrong);
    CHECK(wrong == 0, "%zu samples record a wrong size (clamped or rounded)", wrong);
    CHECK(exact >= 19, "only %zu of the 20 blocks of 16 MiB are sampled", exact);
    itest_free_blocks(20);
    return 0;
}

/* One block of 4 GiB + 12,345 B (above 2^32, so 32-bit sizes would wrap), not touched. */
static int huge_block_exact_size(void)
{
    require_state(MEMPROF_STATE_ACTIVE);
    const uint64_t size = ((uint64_t)4 << 30) + 12345;
    if (size > SIZE_MAX) {
        printf("size_t is too small for this test\n");
        return ITEST_SKIP;
    }
    void *p = malloc((size_t)size);
    if (!p) {
        printf("cannot allocate %" PRIu64 " B here (overcommit limits): skipped\n", size);
        return ITEST_SKIP;
    }
    size_t wrong, exact = samples_of_size(size, 1 << 20, UINT64_MAX, &wrong);
    uint64_t live = estimate(NULL);
    free(p);
    printf("%zu samples of exactly %" PRIu64 " B, %zu of another large size\n", exact, size, wrong);
    CHECK(exact == 1 && wrong == 0, "the block's sample does not record its exact size");
    check_within("one block of 4 GiB + 12345 B", live, (double)size, 0.01);
    return 0;
}

static void *allocate_slice(void *arg)
{
    size_t t = (size_t)(uintptr_t)arg;
    for (size_t i = t * 500; i < (t + 1) * 500; i++) {
        blocks[i] = malloc(50000);
        CHECK(blocks[i] != NULL, "malloc(50000) failed");
        itest_touch(blocks[i], (unsigned char)i);
    }
    return NULL;
}

static int threads_cross_thread_free(void)
{
    require_state(MEMPROF_STATE_ACTIVE);
    CHECK(stats().sampling_rate == 65536, "run with MEMPROF_RATE=65536");
    memprof_stats s0 = stats();
    pthread_t tids[4];
    for (size_t t = 0; t < 4; t++)
        CHECK(pthread_create(&tids[t], NULL, allocate_slice, (void *)(uintptr_t)t) == 0,
              "pthread_create failed");
    for (size_t t = 0; t < 4; t++)
        pthread_join(tids[t], NULL);
    check_within("4 threads x 500 x 50000 B live", estimate(NULL), 1e8, 0.10);
    itest_free_blocks(2000); /* every block freed by another thread than its allocator */
    memprof_stats s1 = stats();
    printf("live samples: %" PRIu64 " before, %" PRIu64 " after the main thread freed all\n",
           s0.live_samples, s1.live_samples);
    uint64_t after = estimate(NULL);
    CHECK(after < 5000000, "after cross-thread frees, %" PRIu64 " B are still estimated live",
          after);
    return 0;
}

static int shutdown_keeps_program_working(void)
{
    own_engine();
    itest_allocate_blocks(2000, 50000);
    CHECK(stats().live_samples > 0, "nothing sampled at rate %" PRIu64, stats().sampling_rate);
    memprof_shutdown();
    require_state(MEMPROF_STATE_SHUTDOWN);
    memprof_snapshot *snap = NULL;
    int rc = memprof_get_snapshot(&snap);
    CHECK(rc == -ESHUTDOWN && snap == NULL, "memprof_get_snapshot after shutdown = %d", rc);
    /* Blocks sampled before shutdown are freed after it; the hooks keep forwarding. */
    itest_free_blocks(2000);
    itest_allocate_blocks(2000, 50000);
    itest_free_blocks(2000);
    rc = memprof_init(65536);
    CHECK(rc == -ESHUTDOWN, "memprof_init after shutdown = %d, expected -ESHUTDOWN", rc);
    rc = memprof_start();
    CHECK(rc == -ESHUTDOWN, "memprof_start after shutdown = %d, expected -ESHUTDOWN", rc);
    memprof_shutdown(); /* harmless twice */
    require_state(MEMPROF_STATE_SHUTDOWN);
    printf("the program kept allocating and freeing after memprof_shutdown()\n");
    return 0;
}

#define CHURN_THREADS 1000
#define CHURN_BLOCKS  20

static void *churn_blocks[CHURN_THREADS][CHURN_BLOCKS];

static void *short_lived(void *arg)
{
    void **mine = arg;
    for (int i = 0; i < CHURN_BLOCKS; i++) {
        void *p = malloc(1000);
        CHECK(p != NULL, "malloc failed");
        if (i % 2) {
            free(p); /* half freed by their own thread ... */
            p = NULL;
        }
        mine[i] = p; /* ... half left for the main thread */
    }
    return NULL;
}

static int thread_churn_counts(void)
{
    require_state(MEMPROF_STATE_ACTIVE);
    CHECK(stats().sampling_rate == 1, "run with MEMPROF_RATE=1");
    memprof_stats s0 = stats();
    for (int t = 0; t < CHURN_THREADS; t += 8) {
        pthread_t tids[8];
        for (int k = 0; k < 8 && t + k < CHURN_THREADS; k++)
            CHECK(pthread_create(&tids[k], NULL, short_lived, churn_blocks[t + k]) == 0,
                  "pthread_create failed");
        for (int k = 0; k < 8 && t + k < CHURN_THREADS; k++)
            pthread_join(tids[k], NULL);
    }
    memprof_stats s1 = stats();
    for (int t = 0; t < CHURN_THREADS; t++)
        for (int i = 0; i < CHURN_BLOCKS; i++)
            free(churn_blocks[t][i]);
    memprof_stats s2 = stats();
    const uint64_t allocs = (uint64_t)CHURN_THREADS * CHURN_BLOCKS;
    printf("after %d threads: +%" PRIu64 " samples, +%" PRIu64 " live, +%" PRIu64
           " freed; after the main thread's frees: %" PRIu64 " live (%" PRIu64 " at start)\n",
           CHURN_THREADS, s1.total_samples - s0.total_samples, s1.live_samples - s0.live_samples,
           s1.freed_samples - s0.freed_samples, s2.live_samples, s0.live_samples);
    /* Thread creation allocates too (stacks are mmap'ed, but TLS/DTV may not be): at
     * least our own allocations must be counted, and none lost when a thread exits. */
    CHECK(s1.total_samples - s0.total_samples >= allocs,
          "%" PRIu64 " samples for %" PRIu64 " sampled allocations: counts of exited threads "
          "were lost",
          s1.total_samples - s0.total_samples, allocs);
    CHECK(s1.freed_samples - s0.freed_samples >= allocs / 2, "frees of exited threads lost");
    CHECK(s1.live_samples - s0.live_samples >= allocs / 2, "live samples of exited threads lost");
    CHECK(s2.live_samples <= s0.live_samples + 16,
          "%" PRIu64 " samples still live after every block was freed",
          s2.live_samples - s0.live_samples);
    return 0;
}

static int free_after_stop(void)
{
    own_engine();
    memprof_stats s0 = stats();
    itest_allocate_blocks(2000, 50000);
    memprof_stats s1 = stats();
    uint64_t ours = s1.live_samples - s0.live_samples;
    CHECK(ours >= 500, "only %" PRIu64 " of 2000 blocks sampled at rate %" PRIu64, ours,
          s1.sampling_rate);
    int rc = memprof_stop();
    CHECK(rc == 0, "memprof_stop: %s", memprof_strerror(rc));
    require_state(MEMPROF_STATE_STOPPED);
    itest_free_blocks(2000);
    memprof_stats s2 = stats();
    printf("live samples: %" PRIu64 " before, %" PRIu64 " with blocks, %" PRIu64
           " after stop+free; freed samples +%" PRIu64 "\n",
           s0.live_samples, s1.live_samples, s2.live_samples, s2.freed_samples - s1.freed_samples);
    CHECK(s2.live_samples <= s0.live_samples,
          "%" PRIu64 " samples still live after freeing every sampled block",
          s2.live_samples - s0.live_samples);
    CHECK(s2.freed_samples - s1.freed_samples >= ours, "frees after stop were not counted");
    uint64_t after = estimate(NULL);
    CHECK(after < 5000000, "after stop+free, %" PRIu64 " B are still estimated live", after);
    return 0;
}

static int no_samples_after_stop(void)
{
    own_engine();
    int rc = memprof_stop();
    CHECK(rc == 0, "memprof_stop: %s", memprof_strerror(rc));
    memprof_stats s0 = stats();
    itest_allocate_blocks(2000, 50000);
    memprof_stats s1 = stats();
    printf("total samples %" PRIu64 " before, %" PRIu64 " after 2000 allocations\n",
           s0.total_samples, s1.total_samples);
    CHECK(s1.total_samples == s0.total_samples, "%" PRIu64 " allocations sampled while stopped",
          s1.total_samples - s0.total_samples);
    itest_free_blocks(2000);
    return 0;
}

static int joined_stop_and_shutdown(void)
{
    require_state(MEMPROF_STATE_ACTIVE);
    uint64_t rate = stats().sampling_rate;
    int rc = memprof_init(4096);
    CHECK(rc == MEMPROF_JOINED, "memprof_init under the plugin = %d, expected MEMPROF_JOINED", rc);
    CHECK(stats().sampling_rate == rate, "joining changed the rate");
    rc = memprof_start();
    CHECK(rc == MEMPROF_JOINED, "memprof_start = %d, expected MEMPROF_JOINED", rc);
    rc = memprof_stop();
    CHECK(rc == MEMPROF_JOINED, "memprof_stop = %d, expected MEMPROF_JOINED", rc);
    require_state(MEMPROF_STATE_ACTIVE);
    memprof_stats s0 = stats();
    itest_allocate_blocks(2000, 50000);
    memprof_stats s1 = stats();
    printf("after the program's stop: %" PRIu64 " new samples of 2000 allocations\n",
           s1.total_samples - s0.total_samples);
    CHECK(s1.total_samples - s0.total_samples >= 500, "sampling stopped with the program's stop");
    memprof_shutdown();
    require_state(MEMPROF_STATE_ACTIVE);
    CHECK(estimate(NULL) > 50000000, "the blocks are not in the profile after shutdown");
    itest_free_blocks(2000);
    return 0;
}

static int program_init(void)
{
    require_state(MEMPROF_STATE_UNINITIALIZED);
    /* Allocations before init must pass through untouched. */
    itest_allocate_blocks(100, 50000);
    itest_free_blocks(100);
    require_state(MEMPROF_STATE_UNINITIALIZED);

    int rc = memprof_init(65536);
    CHECK(rc == 0, "memprof_init(65536) = %d (%s)", rc, memprof_strerror(rc));
    memprof_stats s = stats();
    CHECK(s.state == MEMPROF_STATE_INITIALIZED, "state %" PRIu32 " after init", s.state);
    CHECK(s.sampling_rate == 65536, "sampling rate %" PRIu64 " after memprof_init(65536)",
          s.sampling_rate);

    itest_allocate_blocks(200, 50000);
    CHECK(stats().total_samples == 0, "allocations sampled before memprof_start()");
    itest_free_blocks(200);

    rc = memprof_start();
    CHECK(rc == 0, "memprof_start() = %d (%s)", rc, memprof_strerror(rc));
    require_state(MEMPROF_STATE_ACTIVE);
    itest_allocate_blocks(2000, 50000);
    s = stats();
    CHECK(s.total_samples > 0, "nothing sampled after memprof_start()");
    check_within("2000 x 50000 B live", estimate(NULL), 1e8, 0.10);
    itest_free_blocks(2000);

    rc = memprof_init(4096);
    CHECK(rc == -EALREADY, "second memprof_init() = %d, expected -EALREADY", rc);
    CHECK(stats().sampling_rate == 65536, "a refused memprof_init() changed the rate");
    return 0;
}

static int report_rate(void)
{
    memprof_stats s = stats();
    printf("sampling_rate=%" PRIu64 " state=%" PRIu32 "\n", s.sampling_rate, s.state);
    return 0;
}

/* The live bytes of a collapsed profile: the sum of its lines' counts; -1 if unreadable. */
static double collapsed_total(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    double total = 0;
    char line[16384];
    while (fgets(line, sizeof line, f)) {
        const char *space = strrchr(line, ' ');
        if (space)
            total += strtod(space + 1, NULL);
    }
    fclose(f);
    return total;
}

static int exit_profile_written_early(void)
{
    const char *output = getenv("MEMPROF_OUTPUT");
    CHECK(output && *output, "MEMPROF_OUTPUT is not set");
    pid_t child = fork();
    CHECK(child >= 0, "fork: %s", strerror(errno));
    if (child == 0) {
        itest_allocate_blocks(2000, 50000);
        int rc = memprof_write_exit_profile();
        if (rc != 0) {
            fprintf(stderr, "memprof_write_exit_profile = %d (%s), expected 0\n", rc,
                    memprof_strerror(rc));
            _exit(3);
        }
        rc = memprof_write_exit_profile();
        if (rc != -EALREADY) {
            fprintf(stderr, "second memprof_write_exit_profile = %d, expected -EALREADY\n", rc);
            _exit(4);
        }
        itest_free_blocks(2000);
        exit(0); /* the plugin's exit-time hook runs, and must leave the profile alone */
    }
    int status;
    CHECK(waitpid(child, &status, 0) == child, "waitpid: %s", strerror(errno));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed (status %#x)", status);
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", output, (int)child);
    double total = collapsed_total(path);
    CHECK(total >= 0, "cannot read the child's profile %s", path);
    check_within("live bytes in the child's exit-time profile", (uint64_t)total, 100000000.0, 0.10);
    return 0;
}

static int exit_profile_needs_an_output(void)
{
    require_state(MEMPROF_STATE_ACTIVE);
    int rc = memprof_write_exit_profile();
    CHECK(rc == -ENOTSUP,
          "memprof_write_exit_profile without MEMPROF_OUTPUT = %d, expected "
          "-ENOTSUP",
          rc);
    return 0;
}

/* Whether the object at `addr` is the plugin's file (realpath: a link may name it). */
static int in_plugin(const void *addr)
{
    Dl_info info;
    if (!dladdr(addr, &info) || !info.dli_fname)
        return 0;
    char *path = realpath(info.dli_fname, NULL);
    int yes = path && strstr(path, "libmemprof-preload") != NULL;
    free(path);
    return yes;
}

/* 64 MiB blocks, allocated and freed, until one is sampled (at 256 MiB, a few). */
#define BIG_BLOCK ((size_t)64 << 20)

static int tables_at_first_sample(void)
{
    memprof_stats s = stats();
    CHECK(s.state == MEMPROF_STATE_ACTIVE, "state %" PRIu32 ", expected active", s.state);
    CHECK(s.total_samples == 0, "%" PRIu64 " samples before main", s.total_samples);
    CHECK(s.heap_map_capacity > 0 && s.stack_table_capacity > 0,
          "sizes not reported before the first sample: heap map %" PRIu64 ", stacks %" PRIu64,
          s.heap_map_capacity, s.stack_table_capacity);
    CHECK(s.profiler_bytes == 0, "%" PRIu64 " bytes mapped before the first sample",
          s.profiler_bytes);
    void *block = NULL;
    for (int i = 0; i < 1000 && stats().total_samples == 0; i++) {
        free(block);
        block = malloc(BIG_BLOCK); /* untouched: the kernel maps no page of it */
        CHECK(block != NULL, "malloc(64 MiB) failed");
    }
    s = stats();
    CHECK(s.total_samples == 1 && s.live_samples == 1,
          "%" PRIu64 " samples, %" PRIu64 " live, after the first sampled block", s.total_samples,
          s.live_samples);
    CHECK(s.profiler_bytes > 0, "nothing mapped after the first sample");
    CHECK(s.heap_map_full_drops == 0, "%" PRIu64 " samples dropped", s.heap_map_full_drops);
    free(block);
    CHECK(stats().live_samples == 0, "the sampled block's free was not seen");
    return 0;
}

static int snapshot_before_any_sample(void)
{
    CHECK(stats().total_samples == 0, "a sample before main");
    size_t samples = 1;
    uint64_t bytes = estimate(&samples); /* fails unless memprof_get_snapshot() returns 0 */
    CHECK(samples == 0 && bytes == 0, "%zu samples, %" PRIu64 " B in the first snapshot", samples,
          bytes);
    CHECK(stats().profiler_bytes > 0, "the snapshot did not map the tables");
    return 0;
}

static int one_engine(void)
{
    int (*volatile get_stats)(memprof_stats *) = memprof_get_stats;
    CHECK(in_plugin((const void *)get_stats),
          "the program's memprof_get_stats is not the plugin's");
    void *h = dlopen("libmemprof.so.1", RTLD_NOW);
    CHECK(h != NULL, "dlopen(libmemprof.so.1): %s", dlerror());
    CHECK(dlsym(h, "memprof_get_stats") == (void *)get_stats,
          "dlopen(\"libmemprof.so.1\") found another copy of memprof_get_stats");
    FILE *maps = fopen("/proc/self/maps", "r");
    CHECK(maps != NULL, "/proc/self/maps: %s", strerror(errno));
    char line[4096];
    while (fgets(line, sizeof line, maps))
        CHECK(!strstr(line, "/libmemprof.so.1"), "a second library is mapped: %s", line);
    fclose(maps);
    return 0;
}

/* mallinfo2() sets glibc's allocator up if nothing has, without allocating: its main arena
 * then still has no memory. */
static int no_heap_before_main(void)
{
    struct mallinfo2 mi = mallinfo2();
    CHECK(mi.arena == 0 && mi.hblkhd == 0,
          "glibc's heap holds %zu bytes and %zu mapped before main", mi.arena, mi.hblkhd);
    return 0;
}

/* libc's dynamic-symbol entry for free, found without the dynamic loader's lookup functions
 * (whose first call writes it): libc's symbol table, read from its first entry to its string
 * table (which follows it in every glibc build). Also gives libc's load bias. */
struct libc_entry {
    ElfW(Sym) * sym;
    uintptr_t base;
};

static int find_libc_free(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    if (!strstr(info->dlpi_name, "/libc.so"))
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
            continue;
        ElfW(Sym) *symtab = NULL;
        const char *strtab = NULL;
        for (ElfW(Dyn) *d = (ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
             d->d_tag != DT_NULL; d++) {
            if (d->d_tag == DT_SYMTAB)
                symtab = (ElfW(Sym) *)d->d_un.d_ptr; /* relocated by the loader */
            else if (d->d_tag == DT_STRTAB)
                strtab = (const char *)d->d_un.d_ptr;
        }
        for (ElfW(Sym) *s = symtab; s && strtab && (const char *)s < strtab; s++)
            if (s->st_shndx != SHN_UNDEF && !strcmp(strtab + s->st_name, "free")) {
                struct libc_entry *e = data;
                e->sym = s;
                e->base = info->dlpi_addr;
                return 1;
            }
    }
    return 0;
}

static ElfW(Sym) * libc_free_entry(uintptr_t *base)
{
    struct libc_entry f = {NULL, 0};
    dl_iterate_phdr(find_libc_free, &f);
    CHECK(f.sym != NULL, "libc's dynamic-symbol entry for free not found");
    *base = f.base;
    return f.sym;
}

/* Kilobytes of the mapping holding `addr` that are the process's own copy of the file's
 * pages (smaps' Anonymous), -1 if no mapping holds it. */
static long private_kb_at(const void *addr)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    CHECK(f != NULL, "/proc/self/smaps: %s", strerror(errno));
    char line[512];
    bool in = false;
    long kb = -1;
    while (fgets(line, sizeof line, f)) {
        uintptr_t lo, hi;
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &lo, &hi) == 2 && strchr(line, ' ')) {
            in = (uintptr_t)addr >= lo && (uintptr_t)addr < hi;
            continue;
        }
        if (in && sscanf(line, "Anonymous: %ld kB", &kb) == 1)
            break;
    }
    fclose(f);
    return kb;
}

static int libc_entries_written_at_first_lookup(void)
{
    CHECK(stats().total_samples == 0, "a sample before main");
    uintptr_t base;
    ElfW(Sym) *entry = libc_free_entry(&base);
    long before = private_kb_at(&entry->st_value);
    CHECK(before == 0, "libc's entry for free was written at start (%ld kB of its mapping copied)",
          before);
    void (*global_free)(void *) = (void (*)(void *))dlsym(RTLD_DEFAULT, "free");
    CHECK(private_kb_at(&entry->st_value) > 0,
          "the program's first dlsym() did not write libc's entry for free");
    CHECK(base + entry->st_value == (uintptr_t)global_free,
          "libc's entry for free does not name the plugin's");
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    CHECK(libc != NULL, "dlopen(libc.so.6, RTLD_NOLOAD): %s", dlerror());
    CHECK(dlsym(libc, "free") == (void *)global_free,
          "dlsym on libc's handle does not find the plugin's free");
    dlclose(libc);
    return 0;
}

static int libc_entries_written_at_first_sample(void)
{
    CHECK(stats().total_samples == 0, "a sample before main");
    uintptr_t base;
    ElfW(Sym) *entry = libc_free_entry(&base);
    uintptr_t at_start = base + entry->st_value;
    void *block = NULL;
    for (int i = 0; i < 1000 && stats().total_samples == 0; i++) {
        free(block);
        block = malloc(BIG_BLOCK);
        CHECK(block != NULL, "malloc(64 MiB) failed");
    }
    CHECK(stats().live_samples == 1, "no block sampled");
    uintptr_t now = base + entry->st_value;
    free(block);
    CHECK(now == (uintptr_t)dlsym(RTLD_DEFAULT, "free"),
          "libc's entry for free does not name the plugin's after the first sample");
    CHECK(at_start != now, "libc's entry for free named the plugin's already at start");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODE [DEFAULT_RATE]\n", argv[0]);
        return 2;
    }
    require_preload();
    const char *mode = argv[1];
    if (!strcmp(mode, "estimate-small-blocks"))
        return estimate_small_blocks();
    if (!strcmp(mode, "estimate-large-blocks") && argc > 2)
        return estimate_large_blocks(strtoull(argv[2], NULL, 10));
    if (!strcmp(mode, "huge-block-exact-size"))
        return huge_block_exact_size();
    if (!strcmp(mode, "threads-cross-thread-free"))
        return threads_cross_thread_free();
    if (!strcmp(mode, "shutdown-keeps-program-working"))
        return shutdown_keeps_program_working();
    if (!strcmp(mode, "thread-churn-counts"))
        return thread_churn_counts();
    if (!strcmp(mode, "free-after-stop"))
        return free_after_stop();
    if (!strcmp(mode, "no-samples-after-stop"))
        return no_samples_after_stop();
    if (!strcmp(mode, "joined-stop-and-shutdown"))
        return joined_stop_and_shutdown();
    if (!strcmp(mode, "program-init"))
        return program_init();
    if (!strcmp(mode, "report-rate"))
        return report_rate();
    if (!strcmp(mode, "exit-profile-written-early"))
        return exit_profile_written_early();
    if (!strcmp(mode, "exit-profile-needs-an-output"))
        return exit_profile_needs_an_output();
    if (!strcmp(mode, "one-engine"))
        return one_engine();
    if (!strcmp(mode, "tables-at-first-sample"))
        return tables_at_first_sample();
    if (!strcmp(mode, "snapshot-before-any-sample"))
        return snapshot_before_any_sample();
    if (!strcmp(mode, "no-heap-before-main"))
        return no_heap_before_main();
    if (!strcmp(mode, "libc-entries-written-at-first-lookup"))
        return libc_entries_written_at_first_lookup();
    if (!strcmp(mode, "libc-entries-written-at-first-sample"))
        return libc_entries_written_at_first_sample();
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
