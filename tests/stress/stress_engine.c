/* SPDX-License-Identifier: MIT */
/*
 * Concurrency stress of the engine's hot paths (src/core/engine.h): 8 threads run 1M mixed
 * operations each, reporting allocations and frees through memprof__on_alloc() /
 * memprof__on_free() at rate 1 (every allocation sampled), with fake block addresses that
 * are reused after free, and with blocks handed to other threads to free (cross-thread
 * frees), while a reader takes snapshots and statistics. The table is small, so the Bloom
 * filter in front of the free path saturates and is rebuilt many times while frees run. At
 * the end every sample must have been found by its free (a Bloom false negative or a lost
 * heap-map entry would leave it live), the live estimate must be exactly zero, and the
 * per-stack counters must add up.
 */
#include <sys/mman.h>

#include "core/engine.h"
#include "core/snapshot.h"
#include "memprof/memprof.h"
#include "stress.h"
#include "test.h"

enum {
    THREADS = 8,
    OPS = 1000000,    /* per thread */
    MAX_LIVE = 1000,  /* own live blocks per thread */
    FREE_LIST = 4096, /* freed addresses a thread may reuse */
};

static struct stress_queue handoff[THREADS];
static pthread_barrier_t producers_done;
static _Atomic int stop_reader;
static char *space; /* fake addresses: THREADS * OPS * 16 bytes, never touched */

struct worker {
    unsigned id;
    pthread_t thread;
    uint64_t rng, next_fresh;
    uint64_t live[MAX_LIVE]; /* address << 16 | (size - 64) */
    size_t nlive;
    uint64_t free_list[FREE_LIST];
    size_t nfree;
    uint64_t allocs, alloc_bytes;
};

static uint64_t block(uint64_t addr, uint64_t size)
{
    return addr << 16 | (size - 64);
}

static void do_free(struct worker *w, uint64_t b)
{
    uint64_t addr = b >> 16;
    memprof__on_free((void *)(uintptr_t)addr);
    if (w->nfree < FREE_LIST)
        w->free_list[w->nfree++] = addr; /* the allocator may hand it out again */
}

static void do_alloc(struct worker *w)
{
    uint64_t addr;
    if (w->nfree > 0 && test_rand_below(&w->rng, 2) == 0) {
        size_t i = test_rand_below(&w->rng, w->nfree);
        addr = w->free_list[i];
        w->free_list[i] = w->free_list[--w->nfree];
    } else {
        addr = (uint64_t)(uintptr_t)(space + ((uint64_t)w->id * OPS + w->next_fresh++) * 16);
    }
    uint64_t size = 64 + test_rand_below(&w->rng, 4033);
    memprof__on_alloc((void *)(uintptr_t)addr, size);
    w->allocs++;
    w->alloc_bytes += size;
    w->live[w->nlive++] = block(addr, size);
}

static uint64_t take_live(struct worker *w)
{
    size_t i = test_rand_below(&w->rng, w->nlive);
    uint64_t b = w->live[i];
    w->live[i] = w->live[--w->nlive];
    return b;
}

static void *work(void *arg)
{
    struct worker *w = arg;
    uint64_t b;
    for (int op = 0; op < OPS; op++) {
        unsigned r = (unsigned)test_rand_below(&w->rng, 100);
        if (r < 45) {
            if (w->nlive < MAX_LIVE)
                do_alloc(w);
            else
                do_free(w, take_live(w));
        } else if (r < 75) {
            if (w->nlive > 0)
                do_free(w, take_live(w));
        } else if (r < 90) {
            if (w->nlive > 0) {
                b = take_live(w);
                unsigned to = (w->id + 1 + (unsigned)test_rand_below(&w->rng, THREADS - 1)) %
                              THREADS;
                if (!stress_queue_push(&handoff[to], b))
                    do_free(w, b);
            }
        } else {
            if (stress_queue_pop(&handoff[w->id], &b))
                do_free(w, b);
        }
    }
    pthread_barrier_wait(&producers_done);
    while (stress_queue_pop(&handoff[w->id], &b))
        do_free(w, b);
    while (w->nlive > 0)
        do_free(w, take_live(w));
    return NULL;
}

struct reader {
    uint64_t snapshots, samples, bad_samples, failures;
};

static void *read_loop(void *arg)
{
    struct reader *r = arg;
    const struct timespec pause = {0, 2000000};
    while (!atomic_load(&stop_reader)) {
        memprof_snapshot *snap = NULL;
        if (memprof_get_snapshot(&snap) != 0) {
            r->failures++;
        } else {
            r->snapshots++;
            for (size_t i = 0; i < snap->nsamples; i++) {
                const struct memprof_snap_sample *s = &snap->samples[i];
                r->samples++;
                r->bad_samples += s->size < 64 || s->size > 4096 ||
                                  !memprof__st_get(&memprof__engine.st, s->stack_id);
            }
            memprof_free_snapshot(snap);
        }
        memprof_stats st = {.size = sizeof st};
        r->failures += memprof_get_stats(&st) != 0 || st.state != MEMPROF_STATE_ACTIVE;
        nanosleep(&pause, NULL);
    }
    return NULL;
}

static void test_concurrent_allocs_and_frees_leave_nothing_behind(void)
{
    memprof_config c;
    memprof_config_init(&c);
    c.sampling_rate = 1;
    c.heap_map_capacity = 65536; /* a 128 Ki-bit Bloom filter: saturated many times */
    c.seed = 99;
    CHECK_EQ(memprof_init_config(&c), 0);
    memprof__backend_register();
    CHECK_EQ(memprof_start(), 0);
    space = mmap(NULL, (size_t)THREADS * OPS * 16, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(space != MAP_FAILED);
    CHECK_EQ(pthread_barrier_init(&producers_done, NULL, THREADS), 0);
    static struct worker w[THREADS];
    for (unsigned t = 0; t < THREADS; t++) {
        stress_queue_init(&handoff[t]);
        w[t].id = t;
        w[t].rng = 31 + t;
    }
    struct reader rd = {0};
    pthread_t reader;
    CHECK_EQ(pthread_create(&reader, NULL, read_loop, &rd), 0);
    for (unsigned t = 0; t < THREADS; t++)
        CHECK_EQ(pthread_create(&w[t].thread, NULL, work, &w[t]), 0);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(w[t].thread, NULL);
    atomic_store(&stop_reader, 1);
    pthread_join(reader, NULL);

    uint64_t allocs = 0, alloc_bytes = 0;
    for (unsigned t = 0; t < THREADS; t++) {
        allocs += w[t].allocs;
        alloc_bytes += w[t].alloc_bytes;
    }
    memprof_stats s = {.size = sizeof s};
    CHECK_EQ(memprof_get_stats(&s), 0);
    printf("  %" PRIu64 " allocations sampled, %" PRIu64 " Bloom rebuilds, %" PRIu64
           " dropped (heap map full), %" PRIu64 " tombstones reused; reader: %" PRIu64
           " snapshots of %" PRIu64 " samples\n",
           s.total_samples, s.bloom_rebuilds, s.heap_map_full_drops, s.tombstones_reused,
           rd.snapshots, rd.samples);
    /* Rate 1 samples every block of 64 bytes or more. */
    EXPECT_EQ_U(s.total_samples, allocs);
    EXPECT_EQ_U(s.reentrant_skips, 0);
    EXPECT_EQ_U(s.death_during_birth, 0);
    EXPECT(s.bloom_rebuilds >= 5);
    /* Nothing lost: every sample that entered the map was removed by its free. */
    EXPECT_EQ_U(s.live_samples, 0);
    EXPECT_EQ_U(s.freed_samples + s.heap_map_full_drops, s.total_samples);
    EXPECT_EQ_U(s.estimated_live_bytes, 0);
    EXPECT_EQ_U(rd.failures, 0);
    EXPECT_EQ_U(rd.bad_samples, 0);
    EXPECT(rd.snapshots > 0);
    /* Per-stack counters add up. */
    uint64_t live_samples = 0, live_bytes = 0, alloc_samples = 0, stack_bytes = 0;
    uint64_t nids = memprof__st_nids(&memprof__engine.st);
    for (uint64_t id = 0; id < nids; id++) {
        struct memprof_stack *st = memprof__st_get(&memprof__engine.st, (uint32_t)id);
        if (!st)
            continue;
        live_samples += st->live_samples;
        live_bytes += st->live_bytes;
        alloc_samples += st->alloc_samples;
        stack_bytes += st->alloc_bytes;
    }
    EXPECT_EQ_U(live_samples, 0);
    EXPECT_EQ_U(live_bytes, 0);
    EXPECT_EQ_U(alloc_samples, allocs);
    EXPECT_EQ_U(stack_bytes, alloc_bytes);
    pthread_barrier_destroy(&producers_done);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_concurrent_allocs_and_frees_leave_nothing_behind),
    };
    return TEST_MAIN(cases, false);
}
