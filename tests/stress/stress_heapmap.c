/* SPDX-License-Identifier: MIT */
/*
 * Concurrency stress of the lock-free heap map (src/core/heapmap.h): 8 threads run 1.25M
 * mixed operations each on one map - inserts (reserve + finalize), removes of their own
 * keys, removes of keys other threads handed them through queues (cross-thread frees),
 * removes of keys never inserted and double removes, and "death during birth" races in
 * which another thread removes a key between its reserve and its finalize - while a reader
 * thread iterates the map and checks that every entry it sees is internally consistent. At
 * the end no entry is lost, duplicated or phantom: iteration yields exactly the expected
 * live set with the right values, the live counter matches, every remove of a live key
 * found it exactly once, and every death during birth is seen by both sides and counted.
 */
#include <sched.h>

#include "core/heapmap.h"
#include "stress.h"
#include "test.h"

enum {
    THREADS = 8,
    OPS = 1250000,     /* per thread */
    MAX_MINE = 2000,   /* own live keys per thread */
    SEQ_BITS = 28,
};
#define PHANTOM_OWNER 15u /* no thread has this id: its keys are never inserted */

/* Key = owner and sequence number, 16-byte aligned like a heap address. */
static uint64_t make_key(unsigned owner, uint64_t seq)
{
    return 0x100000000000ull + ((((uint64_t)owner << SEQ_BITS) | seq) << 4);
}
static unsigned key_owner(uint64_t key)
{
    return (unsigned)(((key - 0x100000000000ull) >> 4) >> SEQ_BITS);
}
static uint64_t key_seq(uint64_t key)
{
    return ((key - 0x100000000000ull) >> 4) & (((uint64_t)1 << SEQ_BITS) - 1);
}
/* The values stored for a key are functions of it, so any reader can check them. */
static uint64_t size_of(uint64_t key)
{
    uint64_t x = key;
    return (test_rand(&x) & 0xFFFFF) + 1;
}
static uint64_t ts_of(uint64_t key)
{
    return key ^ 0x5555555555555555ull;
}
static uint32_t stack_of(uint64_t key)
{
    return key_owner(key) + 1;
}
static bool entry_ok(const struct memprof_hm_entry *e)
{
    return e->key >= 0x100000000000ull && key_owner(e->key) < THREADS &&
           e->size == size_of(e->key) && e->ts == ts_of(e->key) && e->stack_id == stack_of(e->key);
}

static struct memprof_heapmap hm;
static struct stress_queue handoff[THREADS]; /* finalised keys to free */
static struct stress_queue racing[THREADS];  /* reserved, maybe not yet finalised */
static pthread_barrier_t producers_done;
static _Atomic int stop_reader;

struct worker {
    unsigned id;
    pthread_t thread;
    uint64_t rng, next_seq;
    uint64_t *mine;
    size_t nmine;
    /* outcomes */
    uint64_t finalized, found, killed, finalize_failed, drops, errors;
};

static void error(struct worker *w, const char *what, uint64_t key, int got)
{
    if (w->errors++ < 5)
        fprintf(stderr, "thread %u: %s (key %#" PRIx64 ", result %d)\n", w->id, what, key, got);
}

/* Removes a key that must be live; checks the entry. */
static void remove_live(struct worker *w, uint64_t key)
{
    struct memprof_hm_entry e;
    int r = memprof__hm_remove(&hm, key, &e);
    if (r != MEMPROF_HM_FOUND)
        error(w, "live key not found", key, r);
    else if (e.key != key || !entry_ok(&e))
        error(w, "wrong entry removed", key, r);
    else
        w->found++;
}

static void insert_own(struct worker *w)
{
    uint64_t key = make_key(w->id, w->next_seq++);
    struct memprof_hm_slot *s = memprof__hm_reserve(&hm, key);
    if (!s) {
        w->drops++;
        return;
    }
    if (!memprof__hm_finalize(&hm, s, stack_of(key), size_of(key), ts_of(key))) {
        error(w, "finalize of an unshared key failed", key, 0);
        return;
    }
    w->finalized++;
    w->mine[w->nmine++] = key;
}

static uint64_t take_own(struct worker *w)
{
    size_t i = test_rand_below(&w->rng, w->nmine);
    uint64_t key = w->mine[i];
    w->mine[i] = w->mine[--w->nmine];
    return key;
}

static unsigned other_thread(struct worker *w)
{
    return (w->id + 1 + (unsigned)test_rand_below(&w->rng, THREADS - 1)) % THREADS;
}

/* Reserve, let another thread race to remove the key, then finalise. */
static void birth_race(struct worker *w)
{
    uint64_t key = make_key(w->id, w->next_seq++);
    struct memprof_hm_slot *s = memprof__hm_reserve(&hm, key);
    if (!s) {
        w->drops++;
        return;
    }
    bool shared = stress_queue_push(&racing[other_thread(w)], key);
    unsigned spin = (unsigned)test_rand_below(&w->rng, 400);
    for (volatile unsigned i = 0; i < spin; i++)
        ;
    if (test_rand_below(&w->rng, 16) == 0)
        sched_yield();
    if (memprof__hm_finalize(&hm, s, stack_of(key), size_of(key), ts_of(key))) {
        w->finalized++;
        if (!shared)
            w->mine[w->nmine++] = key; /* nobody else knows it: ours to free */
    } else {
        w->finalize_failed++;
        if (!shared)
            error(w, "finalize failed with no remover", key, 0);
    }
}

static void remove_racing(struct worker *w, uint64_t key)
{
    struct memprof_hm_entry e;
    int r = memprof__hm_remove(&hm, key, &e);
    if (r == MEMPROF_HM_FOUND && e.key == key && entry_ok(&e))
        w->found++;
    else if (r == MEMPROF_HM_KILLED)
        w->killed++;
    else
        error(w, "racing key neither found nor killed", key, r);
}

static void *work(void *arg)
{
    struct worker *w = arg;
    uint64_t key;
    for (int op = 0; op < OPS; op++) {
        unsigned r = (unsigned)test_rand_below(&w->rng, 100);
        if (r < 40) {
            if (w->nmine < MAX_MINE - 1)
                insert_own(w);
            else
                remove_live(w, take_own(w));
        } else if (r < 62) {
            if (w->nmine == 0)
                continue;
            key = take_own(w);
            remove_live(w, key);
            /* A double free finds nothing. */
            if ((r & 7) == 0 && memprof__hm_remove(&hm, key, NULL) != MEMPROF_HM_NOT_FOUND)
                error(w, "double remove found something", key, 1);
        } else if (r < 77) {
            if (w->nmine == 0)
                continue;
            key = take_own(w);
            if (!stress_queue_push(&handoff[other_thread(w)], key))
                remove_live(w, key);
        } else if (r < 88) {
            if (stress_queue_pop(&handoff[w->id], &key))
                remove_live(w, key);
        } else if (r < 92) {
            if (stress_queue_pop(&racing[w->id], &key))
                remove_racing(w, key);
        } else if (r < 96) {
            key = make_key(PHANTOM_OWNER, test_rand_below(&w->rng, (uint64_t)1 << SEQ_BITS));
            int res = memprof__hm_remove(&hm, key, NULL);
            if (res != MEMPROF_HM_NOT_FOUND)
                error(w, "phantom key found", key, res);
        } else {
            if (w->nmine < MAX_MINE - 1)
                birth_race(w);
            else
                remove_live(w, take_own(w));
        }
    }
    /* Nobody hands out keys any more: free what was handed to us. */
    pthread_barrier_wait(&producers_done);
    while (stress_queue_pop(&handoff[w->id], &key))
        remove_live(w, key);
    while (stress_queue_pop(&racing[w->id], &key))
        remove_racing(w, key);
    return NULL;
}

struct reader {
    uint64_t passes, entries, inconsistent;
};

static void read_entry(void *ctx, const struct memprof_hm_entry *e)
{
    struct reader *r = ctx;
    r->entries++;
    r->inconsistent += !entry_ok(e);
}

static void *read_loop(void *arg)
{
    struct reader *r = arg;
    /* A pass every millisecond or so: often enough to overlap every kind of update, without
     * taking a whole core from the writers. */
    const struct timespec pause = {0, 1000000};
    while (!atomic_load(&stop_reader)) {
        memprof__hm_for_each(&hm, read_entry, r);
        r->passes++;
        nanosleep(&pause, NULL);
    }
    return NULL;
}

/* The final check: which keys iteration reports. */
struct final_visit {
    struct stress_bitmap *expected, *seen;
    uint64_t visited, unexpected, duplicated, wrong;
};

static void final_entry(void *ctx, const struct memprof_hm_entry *e)
{
    struct final_visit *v = ctx;
    v->visited++;
    unsigned t = key_owner(e->key);
    if (t >= THREADS || !stress_bitmap_get(&v->expected[t], key_seq(e->key))) {
        v->unexpected++;
        return;
    }
    if (stress_bitmap_set(&v->seen[t], key_seq(e->key)))
        v->duplicated++;
    v->wrong += !entry_ok(e);
}

static void test_concurrent_mixed_operations_lose_nothing(void)
{
    CHECK_EQ(memprof__hm_init(&hm, (uint64_t)1 << 17), 0);
    static struct worker w[THREADS];
    CHECK_EQ(pthread_barrier_init(&producers_done, NULL, THREADS), 0);
    for (unsigned t = 0; t < THREADS; t++) {
        stress_queue_init(&handoff[t]);
        stress_queue_init(&racing[t]);
        w[t] = (struct worker){.id = t, .rng = 1000 + t, .mine = calloc(MAX_MINE, 8)};
        CHECK(w[t].mine != NULL);
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

    uint64_t finalized = 0, found = 0, killed = 0, finalize_failed = 0, drops = 0, errors = 0;
    uint64_t expected_live = 0;
    static struct stress_bitmap expected[THREADS], seen[THREADS];
    for (unsigned t = 0; t < THREADS; t++) {
        finalized += w[t].finalized;
        found += w[t].found;
        killed += w[t].killed;
        finalize_failed += w[t].finalize_failed;
        drops += w[t].drops;
        errors += w[t].errors;
        CHECK(stress_bitmap_init(&expected[t], w[t].next_seq + 1));
        CHECK(stress_bitmap_init(&seen[t], w[t].next_seq + 1));
        for (size_t i = 0; i < w[t].nmine; i++)
            stress_bitmap_set(&expected[t], key_seq(w[t].mine[i]));
        expected_live += w[t].nmine;
    }
    printf("  %d threads x %d ops: %" PRIu64 " finalised, %" PRIu64 " deaths during birth, %" PRIu64
           " dropped as full, %" PRIu64 " still live; reader: %" PRIu64 " passes, %" PRIu64
           " entries\n",
           THREADS, OPS, finalized, killed, drops, expected_live, rd.passes, rd.entries);
    EXPECT_EQ_U(errors, 0);
    EXPECT_EQ_U(rd.inconsistent, 0);
    EXPECT(rd.passes > 0);
    /* Deaths during birth: seen by the remover and by the finaliser, and counted. */
    EXPECT_EQ_U(killed, finalize_failed);
    EXPECT_EQ_U(hm.death_during_birth, killed);
    EXPECT_EQ_U(hm.full_drops, drops);

    /* Iteration yields exactly the expected live set. */
    struct final_visit v = {.expected = expected, .seen = seen};
    size_t n = memprof__hm_for_each(&hm, final_entry, &v);
    EXPECT_EQ_U(n, v.visited);
    EXPECT_EQ_U(v.visited, expected_live);
    EXPECT_EQ_U(v.unexpected, 0);
    EXPECT_EQ_U(v.duplicated, 0);
    EXPECT_EQ_U(v.wrong, 0);
    EXPECT_EQ_U(hm.live, expected_live);

    /* Every live key is removed exactly once; then the map is empty. */
    struct worker final = {.id = 99};
    for (unsigned t = 0; t < THREADS; t++)
        for (size_t i = 0; i < w[t].nmine; i++)
            remove_live(&final, w[t].mine[i]);
    EXPECT_EQ_U(final.errors, 0);
    EXPECT_EQ_U(finalized, found + final.found);
    EXPECT_EQ_U(hm.live, 0);
    v = (struct final_visit){.expected = expected, .seen = seen};
    EXPECT_EQ_U(memprof__hm_for_each(&hm, final_entry, &v), 0);

    for (unsigned t = 0; t < THREADS; t++) {
        free(w[t].mine);
        free(expected[t].words);
        free(seen[t].words);
    }
    pthread_barrier_destroy(&producers_done);
    memprof__hm_destroy(&hm);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_concurrent_mixed_operations_lose_nothing),
    };
    return TEST_MAIN(cases, false);
}
