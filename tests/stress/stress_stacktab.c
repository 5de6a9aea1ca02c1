/* SPDX-License-Identifier: MIT */
/*
 * Concurrency stress of the lock-free stack table (src/core/stacktab.h). 8 threads intern
 * the same 50,000 stacks (over 1M interns each): in rounds, every thread interns a batch of
 * new stacks in its own order (so several threads race to create each one) and then looks
 * up many old ones. Every distinct stack must end up with exactly one id, all threads must
 * get that same id every time, ids of different stacks must differ, every record must hold
 * its stack, and the published count must be the distinct stacks plus the overflow stack.
 * A second case fills a small table from all threads at once: stacks that got an id keep
 * one id everywhere, the rest are counted as overflows, and nothing is published twice.
 */
#include <string.h>

#include "core/stacktab.h"
#include "stress.h"
#include "test.h"

enum { THREADS = 8, MAXD = 24 };

/* The frames of stack d: depth 1..24, the leaf encodes d (so stacks are distinct), the rest
 * is shared between many stacks (like real call paths). */
static unsigned stack_frames(uint64_t d, uintptr_t *frames)
{
    unsigned depth = 1 + (unsigned)(d % MAXD);
    frames[0] = (uintptr_t)(0x7f1200000000ull + d * 16);
    for (unsigned i = 1; i < depth; i++)
        frames[i] = (uintptr_t)(0x401000 + ((d >> 3) % 64) * 0x100 + i * 8);
    return depth;
}

static bool record_holds(struct memprof_stacktab *st, uint32_t id, uint64_t d)
{
    uintptr_t frames[MAXD];
    unsigned depth = stack_frames(d, frames);
    struct memprof_stack *s = memprof__st_get(st, id);
    return s && s->depth == depth &&
           memcmp(memprof__st_frames(st, s), frames, depth * sizeof *frames) == 0;
}

/* ---- many threads, one universe of stacks ---------------------------------------------------- */

enum { D = 50000, BATCH = 500, LOOKUPS = 10000 }; /* 100 rounds x 10500 = 1.05M interns */
#define UNKNOWN UINT32_MAX

static struct memprof_stacktab table;
static pthread_barrier_t round_barrier;

struct interner {
    unsigned id;
    pthread_t thread;
    uint32_t *ids; /* stack -> id this thread got, UNKNOWN before */
    uint64_t interns, mismatches, overflows;
};

static void intern_and_check(struct interner *w, uint64_t d)
{
    uintptr_t frames[MAXD];
    unsigned depth = stack_frames(d, frames);
    uint32_t id = memprof__st_intern(&table, frames, depth, false);
    w->interns++;
    if (id == MEMPROF_STACK_OVERFLOW_ID)
        w->overflows++;
    else if (w->ids[d] == UNKNOWN)
        w->ids[d] = id;
    else if (w->ids[d] != id && w->mismatches++ < 5)
        fprintf(stderr, "thread %u: stack %" PRIu64 " got id %u, earlier %u\n", w->id, d, id,
                w->ids[d]);
}

static void *intern_rounds(void *arg)
{
    struct interner *w = arg;
    /* Per-thread order within a batch: i -> (i * step + offset) mod BATCH, a permutation
     * since step is coprime with 500. */
    static const unsigned steps[THREADS] = {1, 3, 7, 9, 11, 13, 17, 19};
    unsigned step = steps[w->id], offset = w->id * 61;
    uint64_t rng = 555 + w->id;
    for (uint64_t r = 0; r < D / BATCH; r++) {
        pthread_barrier_wait(&round_barrier); /* all start the new batch together */
        for (unsigned i = 0; i < BATCH; i++)
            intern_and_check(w, r * BATCH + (i * step + offset) % BATCH);
        for (unsigned i = 0; i < LOOKUPS; i++)
            intern_and_check(w, test_rand_below(&rng, (r + 1) * BATCH));
    }
    return NULL;
}

static void test_every_stack_gets_one_id_across_threads(void)
{
    CHECK_EQ(memprof__st_init(&table, 65536), 0);
    CHECK_EQ(pthread_barrier_init(&round_barrier, NULL, THREADS), 0);
    static struct interner w[THREADS];
    for (unsigned t = 0; t < THREADS; t++) {
        w[t] = (struct interner){.id = t, .ids = malloc(D * sizeof(uint32_t))};
        CHECK(w[t].ids != NULL);
        memset(w[t].ids, 0xFF, D * sizeof(uint32_t));
    }
    for (unsigned t = 0; t < THREADS; t++)
        CHECK_EQ(pthread_create(&w[t].thread, NULL, intern_rounds, &w[t]), 0);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(w[t].thread, NULL);

    uint64_t interns = 0, mismatches = 0, overflows = 0;
    for (unsigned t = 0; t < THREADS; t++) {
        interns += w[t].interns;
        mismatches += w[t].mismatches;
        overflows += w[t].overflows;
    }
    uint64_t nids = memprof__st_nids(&table);
    printf("  %d threads: %" PRIu64 " interns of %d stacks; %" PRIu64 " ids handed out, %" PRIu64
           " published (%" PRIu64 " abandoned after lost races)\n",
           THREADS, interns, D, nids, (uint64_t)table.published, nids - table.published);
    EXPECT_EQ_U(mismatches, 0);
    EXPECT_EQ_U(overflows, 0);
    EXPECT_EQ_U(table.overflows, 0);
    EXPECT(interns >= (uint64_t)THREADS * 1000000);

    /* All threads agree; ids are distinct and hold their stacks. */
    uint8_t *owner_seen = calloc(nids, 1);
    CHECK(owner_seen != NULL);
    uint64_t disagree = 0, unknown = 0, shared_id = 0, wrong_record = 0;
    for (uint64_t d = 0; d < D; d++) {
        uint32_t id = w[0].ids[d];
        if (id == UNKNOWN || id >= nids) {
            unknown++;
            continue;
        }
        for (unsigned t = 1; t < THREADS; t++)
            disagree += w[t].ids[d] != id;
        shared_id += owner_seen[id]++ != 0;
        wrong_record += !record_holds(&table, id, d);
    }
    EXPECT_EQ_U(unknown, 0);
    EXPECT_EQ_U(disagree, 0);
    EXPECT_EQ_U(shared_id, 0);
    EXPECT_EQ_U(wrong_record, 0);
    /* Published = distinct stacks + the overflow stack; abandoned ids are never visible. */
    EXPECT_EQ_U(table.published, D + 1);
    uint64_t visible = 0;
    for (uint64_t id = 0; id < nids; id++)
        visible += memprof__st_get(&table, (uint32_t)id) != NULL;
    EXPECT_EQ_U(visible, D + 1);
    free(owner_seen);
    for (unsigned t = 0; t < THREADS; t++)
        free(w[t].ids);
    pthread_barrier_destroy(&round_barrier);
    memprof__st_destroy(&table);
}

/* ---- many threads filling a small table ------------------------------------------------------- */

enum { SMALL_MAX = 2048, SMALL_D = 4000 };

static void *intern_everything(void *arg)
{
    struct interner *w = arg;
    uint64_t rng = 77 + w->id;
    for (int pass = 0; pass < 2; pass++)
        for (uint64_t i = 0; i < SMALL_D; i++) {
            /* Threads walk the stacks from different starting points. */
            uint64_t d = (i + w->id * (SMALL_D / THREADS) + test_rand_below(&rng, 8)) % SMALL_D;
            intern_and_check(w, d);
        }
    return NULL;
}

static void test_full_table_under_contention_overflows_cleanly(void)
{
    CHECK_EQ(memprof__st_init(&table, SMALL_MAX), 0);
    static struct interner w[THREADS];
    for (unsigned t = 0; t < THREADS; t++) {
        w[t] = (struct interner){.id = t, .ids = malloc(SMALL_D * sizeof(uint32_t))};
        CHECK(w[t].ids != NULL);
        memset(w[t].ids, 0xFF, SMALL_D * sizeof(uint32_t));
    }
    for (unsigned t = 0; t < THREADS; t++)
        CHECK_EQ(pthread_create(&w[t].thread, NULL, intern_everything, &w[t]), 0);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(w[t].thread, NULL);

    uint64_t mismatches = 0, overflows = 0;
    for (unsigned t = 0; t < THREADS; t++) {
        mismatches += w[t].mismatches;
        overflows += w[t].overflows;
    }
    EXPECT_EQ_U(mismatches, 0);
    EXPECT_EQ_U(table.overflows, overflows);
    EXPECT(overflows > 0);
    /* Stacks that got an id got the same one in every thread; no id serves two stacks. */
    static uint32_t id_of[SMALL_D];
    static uint8_t used[SMALL_MAX];
    uint64_t disagree = 0, shared_id = 0, wrong_record = 0, with_id = 0;
    for (uint64_t d = 0; d < SMALL_D; d++) {
        id_of[d] = UNKNOWN;
        for (unsigned t = 0; t < THREADS; t++) {
            uint32_t id = w[t].ids[d];
            if (id == UNKNOWN)
                continue;
            if (id_of[d] == UNKNOWN)
                id_of[d] = id;
            else
                disagree += id != id_of[d];
        }
        if (id_of[d] == UNKNOWN)
            continue;
        with_id++;
        if (id_of[d] >= SMALL_MAX) {
            wrong_record++;
            continue;
        }
        shared_id += used[id_of[d]]++ != 0;
        wrong_record += !record_holds(&table, id_of[d], d);
    }
    printf("  %" PRIu64 " of %d stacks got an id in a table of %d; %" PRIu64
           " interns overflowed; %" PRIu64 " published\n",
           with_id, SMALL_D, SMALL_MAX, overflows, (uint64_t)table.published);
    EXPECT_EQ_U(disagree, 0);
    EXPECT_EQ_U(shared_id, 0);
    EXPECT_EQ_U(wrong_record, 0);
    EXPECT_EQ_U(table.published, with_id + 1);
    EXPECT(table.published <= SMALL_MAX);
    EXPECT(memprof__st_nids(&table) <= SMALL_MAX);
    for (unsigned t = 0; t < THREADS; t++)
        free(w[t].ids);
    memprof__st_destroy(&table);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_every_stack_gets_one_id_across_threads),
        TEST_CASE(test_full_table_under_contention_overflows_cleanly),
    };
    return TEST_MAIN(cases, false);
}
