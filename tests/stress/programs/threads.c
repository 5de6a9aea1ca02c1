/* SPDX-License-Identifier: MIT */
/*
 * Threads under the profiler. argv: BACKEND [SCALE] (prog.h; SCALE multiplies the work, 1
 * by default, larger in the 'long' suite). Phases, one behaviour each:
 *
 *   churn       SCALE x 400 short threads, 8 alive at a time, half of them detached: each
 *               allocates 32 blocks, frees 28 and hands 4 over; threads of a later wave free
 *               the blocks of an earlier wave, whose threads have all exited (their
 *               thread-local profiler state is gone), and the main thread frees the rest.
 *               Meanwhile, when profiled, one more thread takes snapshots (walking every
 *               site's frames), statistics and symbols in a loop.
 *   concurrent  16 threads start together and allocate, check and free SCALE x 15000 blocks
 *               each, swapping blocks through a shared array so that every thread frees
 *               blocks the others allocated while they are still sampling.
 *
 * Afterwards, when profiled: every block is freed, so the live samples are back to what
 * they were before (a few glibc-internal blocks of new threads aside), no site whose leaf
 * is this program's allocating function holds a live sample, the counters add up (samples
 * taken = still live + freed + dropped, over the run) and, at rate 1, every one of the
 * program's allocations was sampled. Blocks carry a tag that is checked before each free.
 */
#include "prog.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <unistd.h>

enum { WAVE = 8, PER_THREAD = 32, HANDED = 4, CONCURRENT = 16, RING = 64, SHARED = 256 };

struct block {
    uint64_t tag;
    size_t size;
};

static atomic_ulong allocations; /* made by this program, all >= 64 bytes */

void *hardening_thread_alloc(size_t size, uint64_t tag);

__attribute__((noinline)) void *hardening_thread_alloc(size_t size, uint64_t tag)
{
    struct block *b = malloc(size);
    CHECK(b != NULL, "malloc(%zu) failed", size);
    b->tag = tag;
    b->size = size;
    memset(b + 1, (int)(tag & 0xff), size - sizeof *b);
    atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
    return b;
}

static void check_free(struct block *b)
{
    if (!b)
        return;
    const unsigned char *bytes = (const unsigned char *)(b + 1);
    unsigned char v = (unsigned char)(b->tag & 0xff);
    CHECK(bytes[0] == v && bytes[b->size - sizeof *b - 1] == v,
          "block %p (tag %" PRIx64 ", %zu B) was overwritten", (void *)b, b->tag, b->size);
    free(b);
}

static uint64_t xorshift(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* ---- churn ----------------------------------------------------------------------------- */

static struct block **handed; /* HANDED per thread */
static int churn_threads;
static atomic_int detached_done;

static void *churn_thread(void *arg)
{
    int t = (int)(intptr_t)arg;
    uint64_t seed = (uint64_t)t * 0x9e3779b97f4a7c15u + 7;
    struct block *mine[PER_THREAD];
    for (int i = 0; i < PER_THREAD; i++)
        mine[i] = hardening_thread_alloc(64 + xorshift(&seed) % 4000, seed);
    for (int i = HANDED; i < PER_THREAD; i++)
        check_free(mine[i]);
    for (int i = 0; i < HANDED; i++)
        handed[t * HANDED + i] = mine[i];
    /* Two waves back, every thread has exited (joined, or counted done when detached). */
    if (t >= 2 * WAVE && t % 2 == 0) {
        int old = t - 2 * WAVE;
        for (int i = 0; i < HANDED; i++) {
            check_free(handed[old * HANDED + i]);
            handed[old * HANDED + i] = NULL;
        }
    }
    if (t % 2)
        atomic_fetch_add(&detached_done, 1);
    return NULL;
}

static atomic_int churn_done;
static atomic_int snapshots;

static void *snapshotter(void *arg)
{
    (void)arg;
    while (!atomic_load(&churn_done)) {
        memprof_snapshot *s = NULL;
        int rc = memprof_get_snapshot(&s);
        CHECK(rc == 0, "memprof_get_snapshot: %s", memprof_strerror(rc));
        for (size_t i = 0; i < memprof_snapshot_site_count(s); i++) {
            memprof_site_info si = {.size = sizeof si};
            CHECK(memprof_snapshot_site(s, i, &si) == 0, "memprof_snapshot_site");
            int depth = memprof_snapshot_stack_depth(s, si.stack_id);
            for (int d = 0; d < depth; d++) {
                memprof_frame f = {.size = sizeof f};
                CHECK(memprof_snapshot_frame(s, si.stack_id, (uint32_t)d, &f) == 0,
                      "memprof_snapshot_frame");
            }
        }
        memprof_free_snapshot(s);
        prog_stats();
        if (atomic_fetch_add(&snapshots, 1) % 8 == 0)
            CHECK(memprof_resolve_symbols() >= 0, "memprof_resolve_symbols");
    }
    return NULL;
}

static void churn(int scale)
{
    pthread_t snap;
    if (prog_profiled())
        CHECK(pthread_create(&snap, NULL, snapshotter, NULL) == 0, "pthread_create");
    churn_threads = 400 * scale;
    handed = calloc((size_t)churn_threads * HANDED, sizeof *handed);
    CHECK(handed != NULL, "calloc failed");
    int detached = 0;
    for (int w = 0; w < churn_threads; w += WAVE) {
        pthread_t tids[WAVE];
        for (int i = 0; i < WAVE; i++) {
            CHECK(pthread_create(&tids[i], NULL, churn_thread, (void *)(intptr_t)(w + i)) == 0,
                  "pthread_create");
            if ((w + i) % 2) {
                CHECK(pthread_detach(tids[i]) == 0, "pthread_detach");
                detached++;
            }
        }
        for (int i = 0; i < WAVE; i++)
            if ((w + i) % 2 == 0)
                CHECK(pthread_join(tids[i], NULL) == 0, "pthread_join");
        /* The detached ones of this wave are done before the next wave starts: so two
         * waves back, all threads have finished with their blocks. */
        while (atomic_load(&detached_done) < detached)
            sched_yield();
    }
    atomic_store(&churn_done, 1);
    if (prog_profiled())
        CHECK(pthread_join(snap, NULL) == 0, "pthread_join");
    for (int i = 0; i < churn_threads * HANDED; i++)
        check_free(handed[i]);
    free(handed);
}

/* ---- concurrent ------------------------------------------------------------------------ */

static _Atomic(struct block *) shared[SHARED];
static pthread_barrier_t go;
static int concurrent_iters;

static void *concurrent_thread(void *arg)
{
    uint64_t seed = (uint64_t)(uintptr_t)arg * 0x2545f4914f6cdd1du + 1;
    struct block *ring[RING] = {0};
    pthread_barrier_wait(&go);
    for (int i = 0; i < concurrent_iters; i++) {
        uint64_t r = xorshift(&seed);
        unsigned k = (unsigned)(r % RING);
        check_free(ring[k]);
        /* Mostly small blocks, some above the mmap threshold. */
        size_t size = (r >> 20) % 64 == 0 ? 200000 + (r >> 32) % 100000 : 64 + (r >> 32) % 2000;
        ring[k] = hardening_thread_alloc(size, r);
        if ((r >> 8) % 4 == 0) {
            /* Swap a block with the shared array: the one taken out was (mostly) allocated
             * by another thread, which is still running and sampling. */
            struct block *out = atomic_exchange(&shared[(r >> 40) % SHARED], ring[k]);
            ring[k] = NULL;
            check_free(out);
        }
    }
    for (int k = 0; k < RING; k++)
        check_free(ring[k]);
    return NULL;
}

static void concurrent(int scale)
{
    concurrent_iters = 15000 * scale;
    pthread_t tids[CONCURRENT];
    CHECK(pthread_barrier_init(&go, NULL, CONCURRENT) == 0, "pthread_barrier_init");
    for (int i = 0; i < CONCURRENT; i++)
        CHECK(pthread_create(&tids[i], NULL, concurrent_thread, (void *)(intptr_t)(i + 1)) == 0,
              "pthread_create");
    for (int i = 0; i < CONCURRENT; i++)
        CHECK(pthread_join(tids[i], NULL) == 0, "pthread_join");
    for (int i = 0; i < SHARED; i++)
        check_free(atomic_exchange(&shared[i], NULL));
    pthread_barrier_destroy(&go);
}

/* ---- checks ---------------------------------------------------------------------------- */

/* Live samples whose leaf frame is hardening_thread_alloc. */
static uint64_t live_in_program(void)
{
    memprof_snapshot *s = NULL;
    CHECK(memprof_get_snapshot(&s) == 0, "memprof_get_snapshot");
    uint64_t live = 0;
    int named = 0;
    for (size_t i = 0; i < memprof_snapshot_site_count(s); i++) {
        memprof_site_info si = {.size = sizeof si};
        memprof_frame f = {.size = sizeof f};
        CHECK(memprof_snapshot_site(s, i, &si) == 0, "memprof_snapshot_site");
        if (memprof_snapshot_frame(s, si.stack_id, 0, &f) == 0 && f.function &&
            !strcmp(f.function, "hardening_thread_alloc")) {
            named++;
            live += si.live_samples;
        }
    }
    memprof_free_snapshot(s);
    /* A site exists (freed samples keep their stacks' totals) unless nothing was sampled. */
    CHECK(named > 0 || prog_rate() != 1, "no site names hardening_thread_alloc at rate 1");
    return live;
}

int main(int argc, char **argv)
{
    CHECK(argc >= 2, "usage: %s plain|preload|got [SCALE]", argv[0]);
    prog_setup(argv[1]);
    int scale = argc > 2 ? atoi(argv[2]) : 1;
    CHECK(scale >= 1, "bad scale");
    memprof_stats s0 = {0};
    if (prog_profiled())
        s0 = prog_stats();

    churn(scale);
    concurrent(scale);

    if (!prog_profiled()) {
        printf("%lu allocations in threads, all freed (plain)\n", atomic_load(&allocations));
        return 0;
    }
    memprof_stats s1 = prog_stats();
    uint64_t left = live_in_program();
    uint64_t taken = s1.total_samples - s0.total_samples;
    uint64_t freed = s1.freed_samples - s0.freed_samples;
    uint64_t dropped = s1.heap_map_full_drops - s0.heap_map_full_drops;
    int64_t live = (int64_t)(s1.live_samples - s0.live_samples);
    printf("%lu allocations; %" PRIu64 " samples taken, %" PRIu64 " freed, %" PRIu64
           " dropped, live %" PRIu64 " -> %" PRIu64 " (%" PRIu64 " of them from this program), "
           "death during birth %" PRIu64 ", reentrant skips %" PRIu64 ", %d snapshots\n",
           atomic_load(&allocations), taken, freed, dropped, s0.live_samples, s1.live_samples, left,
           s1.death_during_birth - s0.death_during_birth, s1.reentrant_skips - s0.reentrant_skips,
           atomic_load(&snapshots));
    CHECK(left == 0, "%" PRIu64 " samples of freed blocks are still live", left);
    /* glibc keeps a few blocks per new thread (e.g. dynamic TLS): allow a handful. */
    CHECK(live <= 8, "the live samples grew by %" PRId64 " though every block was freed", live);
    CHECK(s1.live_samples == 0 || s1.estimated_live_bytes > 0, "live samples without bytes");
    CHECK((int64_t)taken == (int64_t)freed + live + (int64_t)dropped,
          "samples taken (%" PRIu64 ") != freed (%" PRIu64 ") + live change (%" PRId64
          ") + dropped (%" PRIu64 ")",
          taken, freed, live, dropped);
    if (prog_rate() == 1)
        CHECK(taken >= atomic_load(&allocations),
              "rate 1: %" PRIu64 " samples for %lu allocations of >= 64 B", taken,
              atomic_load(&allocations));
    return 0;
}
