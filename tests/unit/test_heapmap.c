/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the lock-free heap map of live samples (src/core/heapmap.h), single
 * threaded: the reserve/finalize/remove round trip with exact sizes up to 2^41 - 1, unknown
 * keys, "death during birth", tombstone reuse, capacity rounding, full-table drops and
 * recovery, segments opening (and being mapped) as the map fills, a segment that cannot be
 * mapped under a limit, iteration visiting exactly the live entries, and long churn with
 * few live entries (which must never look like a full table). The concurrent behaviour is
 * tested in tests/stress/.
 */
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/heapmap.h"
#include "test.h"

/* Distinct, 16-byte aligned keys that look like heap addresses. */
static uint64_t key_of(uint64_t i)
{
    return 0x7f3a00000000ull + i * 16;
}

static bool insert(struct memprof_heapmap *hm, uint64_t key, uint32_t stack, uint64_t size,
                   uint64_t ts)
{
    struct memprof_hm_slot *s = memprof__hm_reserve(hm, key);
    return s && memprof__hm_finalize(hm, s, stack, size, ts);
}

static void count_entry(void *ctx, const struct memprof_hm_entry *e)
{
    (void)e;
    ++*(size_t *)ctx;
}

/* Live samples as iteration sees them (also checks for_each's return value). */
static size_t count_live(struct memprof_heapmap *hm)
{
    size_t n = 0;
    size_t r = memprof__hm_for_each(hm, count_entry, &n);
    EXPECT_EQ_U(r, n);
    return n;
}

static void test_round_trip_returns_size_stack_and_time(void)
{
    struct memprof_heapmap hm;
    CHECK_EQ(memprof__hm_init(&hm, 4096), 0);
    struct memprof_hm_slot *s = memprof__hm_reserve(&hm, key_of(1));
    CHECK(s != NULL);
    EXPECT_EQ_U(hm.live, 0); /* reserved is not live yet */
    CHECK(memprof__hm_finalize(&hm, s, 7, 123, 456789));
    EXPECT_EQ_U(hm.live, 1);
    struct memprof_hm_entry e = {0};
    EXPECT_EQ(memprof__hm_remove(&hm, key_of(1), &e), MEMPROF_HM_FOUND);
    EXPECT_EQ_U(e.key, key_of(1));
    EXPECT_EQ_U(e.size, 123);
    EXPECT_EQ_U(e.stack_id, 7);
    EXPECT_EQ_U(e.ts, 456789);
    EXPECT_EQ_U(hm.live, 0);
    EXPECT_EQ(memprof__hm_remove(&hm, key_of(1), &e), MEMPROF_HM_NOT_FOUND);
    /* A NULL out is allowed. */
    CHECK(insert(&hm, key_of(2), 1, 1, 1));
    EXPECT_EQ(memprof__hm_remove(&hm, key_of(2), NULL), MEMPROF_HM_FOUND);
    memprof__hm_destroy(&hm);
}

static void test_large_sizes_are_exact(void)
{
    struct memprof_heapmap hm;
    CHECK_EQ(memprof__hm_init(&hm, 4096), 0);
    const uint64_t sizes[] = {0,
                              1,
                              4095,
                              (uint64_t)1 << 24,
                              ((uint64_t)1 << 24) + 1,
                              (uint64_t)64 << 30,
                              (uint64_t)1 << 40,
                              ((uint64_t)1 << 40) + 12345,
                              ((uint64_t)1 << 41) - 1};
    const uint32_t stacks[] = {0, 1, MEMPROF_HM_MAX_STACK - 1};
    uint64_t i = 0;
    for (size_t a = 0; a < sizeof sizes / sizeof sizes[0]; a++)
        for (size_t b = 0; b < 3; b++, i++) {
            CHECK(insert(&hm, key_of(i), stacks[b], sizes[a], UINT64_MAX - i));
            struct memprof_hm_entry e;
            CHECK_EQ(memprof__hm_remove(&hm, key_of(i), &e), MEMPROF_HM_FOUND);
            EXPECT_EQ_U(e.size, sizes[a]);
            EXPECT_EQ_U(e.stack_id, stacks[b]);
            EXPECT_EQ_U(e.ts, UINT64_MAX - i);
        }
    EXPECT_EQ_U(hm.clamped_sizes, 0);
    memprof__hm_destroy(&hm);
}

static void test_sizes_beyond_max_are_clamped_and_counted(void)
{
    struct memprof_heapmap hm;
    CHECK_EQ(memprof__hm_init(&hm, 4096), 0);
    CHECK(insert(&hm, key_of(1), 5, (uint64_t)1 << 41, 0));
    CHECK(insert(&hm, key_of(2), 6, UINT64_MAX, 0));
    EXPECT_EQ_U(hm.clamped_sizes, 2);
    struct memprof_hm_entry e;
    CHECK_EQ(memprof__hm_remove(&hm, key_of(1), &e), MEMPROF_HM_FOUND);
    EXPECT_EQ_U(e.size, MEMPROF_HM_MAX_SIZE);
    EXPECT_EQ_U(e.stack_id, 5); /* the clamp did not spill into the stack id */
    CHECK_EQ(memprof__hm_remove(&hm, key_of(2), &e), MEMPROF_HM_FOUND);
    EXPECT_EQ_U(e.size, MEMPROF_HM_MAX_SIZE);
    EXPECT_EQ_U(e.stack_id, 6);
    memprof__hm_destroy(&hm);
}

static void test_remove_of_unknown_key_is_not_found(void)
{
    struct memprof_heapmap hm;
    CHECK_EQ(memprof__hm_init(&hm, 4096), 0);
    EXPECT_EQ(memprof__hm_remove(&hm, key_of(1), NULL), MEMPROF_HM_NOT_FOUND);
    for (uint64_t i = 0; i < 2000; i++)
        CHECK(insert(&hm, key_of(2 * i), 1, 64, 0));
    for (uint64_t i = 0; i < 2000; i++)
        EXPECT_EQ(memprof__hm_remove(&hm, key_of(2 * i + 1), NULL), MEMPROF_HM_NOT_FOUND);
    EXPECT_EQ_U(hm.live, 2000);
    EXPECT_EQ_U(hm.death_during_birth, 0);
    memprof__hm_destroy(&hm);
}

static void test_death_during_birth(void)
{
    struct memprof_heapmap hm;
    CHECK_EQ(memprof__hm_init(&hm, 4096), 0);
    struct memprof_hm_slot *s = memprof__hm_reserve(&hm, key_of(9));
    CHECK(s != NULL);
    /* The block is freed before its sample is finalised. */
    struct memprof_hm_entry e = {0};
    EXPECT_EQ(memprof__hm_remove(&hm, key_of(9), &e), MEMPROF_HM_KILLED);
    EXPECT_EQ_U(hm.death_during_birth, 1);
    /* A second free of the dying address finds nothing. */
    EXPECT_EQ(memprof__hm_remove(&hm, key_of(9), &e), MEMPROF_HM_NOT_FOUND);
    EXPECT(!memprof__hm_finalize(&hm, s, 3, 100, 1));
    EXPECT_EQ_U(hm.live, 0);
    EXPECT_EQ(memprof__hm_remove(&hm, key_of(9), &e), MEMPROF_HM_NOT_FOUND);
    size_t n = count_live(&hm);
    EXPECT_EQ(n, 0);
    /* The slot is reusable: the address comes back from the allocator. */
    CHECK(insert(&hm, key_of(9), 4, 200, 2));
    EXPECT_EQ_U(hm.tombstones_reused, 1);
    CHECK_EQ(memprof__hm_remove(&hm, key_of(9), &e), MEMPROF_HM_FOUND);
    EXPECT_EQ_U(e.size, 200);
    EXPECT_EQ_U(e.stack_id, 4);
    EXPECT_EQ_U(hm.death_during_birth, 1);
    memprof__hm_destroy(&hm);
}

static void test_tombstone_reuse_is_counted(void)
{
    struct memprof_heapmap hm;
    CHECK_EQ(memprof__hm_init(&hm, 4096), 0);
    CHECK(insert(&hm, key_of(1), 1, 10, 0));
    EXPECT_EQ_U(memprof__hm_used(&hm), 1);
    CHECK_EQ(memprof__hm_remove(&hm, key_of(1), NULL), MEMPROF_HM_FOUND);
    /* The slot is now a tombstone: still used, so probe sequences through it stay intact. */
    EXPECT_EQ_U(memprof__hm_used(&hm), 1);
    EXPECT_EQ_U(hm.tombstones_reused, 0);
    CHECK(insert(&hm, key_of(1), 1, 10, 0)); /* same key: same home slot, the tombstone */
    EXPECT_EQ_U(hm.tombstones_reused, 1);
    EXPECT_EQ_U(memprof__hm_used(&hm), 1);
    memprof__hm_destroy(&hm);
}

static void test_capacity_is_rounded_to_a_power_of_two(void)
{
    const uint64_t want[][2] = {{0, 4096},    {1, 4096},        {4096, 4096},
                                {4097, 8192}, {100000, 131072}, {1 << 20, 1 << 20}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        struct memprof_heapmap hm;
        CHECK_EQ(memprof__hm_init(&hm, want[i][0]), 0);
        EXPECT_EQ_U(hm.capacity, want[i][1]);
        EXPECT(hm.nslots >= 2 * hm.capacity);
        memprof__hm_destroy(&hm);
    }
}

static void test_full_table_drops_and_counts(void)
{
    struct memprof_heapmap hm;
    CHECK_EQ(memprof__hm_init(&hm, 4096), 0);
    for (uint64_t i = 0; i < 4096; i++)
        CHECK(insert(&hm, key_of(i), 1, 64, i));
    EXPECT_EQ_U(hm.live, 4096);
    EXPECT_EQ_U(hm.full_drops, 0);
    for (uint64_t i = 4096; i < 4196; i++)
        EXPECT(memprof__hm_reserve(&hm, key_of(i)) == NULL);
    EXPECT_EQ_U(hm.full_drops, 100);
    EXPECT_EQ_U(hm.live, 4096);
    /* Everything inserted is still there; nothing dropped is. */
    for (uint64_t i = 4096; i < 4196; i++)
        EXPECT_EQ(memprof__hm_remove(&hm, key_of(i), NULL), MEMPROF_HM_NOT_FOUND);
    EXPECT_EQ(count_live(&hm), 4096);
    memprof__hm_destroy(&hm);
}

static void test_full_table_recovers_after_removal(void)
{
    struct memprof_heapmap hm;
    CHECK_EQ(memprof__hm_init(&hm, 4096), 0);
    for (uint64_t i = 0; i < 4096; i++)
        CHECK(insert(&hm, key_of(i), 1, 64, i));
    EXPECT(memprof__hm_reserve(&hm, key_of(5000)) == NULL);
    for (uint64_t i = 0; i < 10; i++)
        CHECK_EQ(memprof__hm_remove(&hm, key_of(i * 7), NULL), MEMPROF_HM_FOUND);
    for (uint64_t i = 0; i < 10; i++)
        EXPECT(insert(&hm, key_of(5000 + i), 2, 32, 0));
    EXPECT_EQ_U(hm.live, 4096);
    EXPECT_EQ_U(hm.full_drops, 1);
    memprof__hm_destroy(&hm);
}

static void test_segments_open_as_the_map_fills(void)
{
    struct memprof_heapmap hm;
    CHECK_EQ(memprof__hm_init(&hm, 65536), 0);
    EXPECT_EQ(hm.active, 0);
    unsigned last = 0;
    for (uint64_t i = 0; i < 60000; i++) {
        CHECK(insert(&hm, key_of(i), 1, 64, 0));
        unsigned a = hm.active;
        EXPECT(a >= last); /* monotonic */
        last = a;
        /* The first segment (4096 slots) takes three quarters before the next opens. */
        if (i + 1 == 3000)
            EXPECT_EQ(a, 0);
    }
    EXPECT(hm.active >= 4);
    EXPECT(hm.active < hm.nsegs);
    EXPECT_EQ_U(memprof__hm_used(&hm), 60000);
    EXPECT_EQ_U(hm.live, 60000);
    uint64_t per_segment = 0;
    for (unsigned k = 0; k <= hm.active; k++) {
        EXPECT(hm.used[k] > 0);
        per_segment += hm.used[k];
    }
    EXPECT_EQ_U(per_segment, 60000);
    for (uint64_t i = 0; i < 60000; i++)
        EXPECT_EQ(memprof__hm_remove(&hm, key_of(i), NULL), MEMPROF_HM_FOUND);
    EXPECT_EQ_U(hm.live, 0);
    memprof__hm_destroy(&hm);
}

static void test_segments_are_mapped_when_they_open(void)
{
    /* A map for 1M samples starts with its first segment (4096 slots, 96 KiB) and maps
     * each further one as it opens: address space and commit charge follow the samples. */
    struct memprof_heapmap hm;
    CHECK_EQ(memprof__hm_init(&hm, (uint64_t)1 << 20), 0);
    size_t slot = sizeof(struct memprof_hm_slot);
    EXPECT_EQ_U(hm.mapped_bytes, 4096 * slot);
    for (unsigned k = 1; k < hm.nsegs; k++)
        EXPECT(hm.segs[k] == NULL);
    for (uint64_t i = 0; i < 13000; i++)
        CHECK(insert(&hm, key_of(i), 1, 64, 0));
    /* Each segment takes three quarters of its slots before the next opens: 13,000 samples
     * open segments 0 to 3 (4096 + 4096 + 8192 + 16384 slots). */
    EXPECT_EQ(hm.active, 3);
    EXPECT_EQ_U(hm.mapped_bytes, (4096 + 4096 + 8192 + 16384) * slot);
    struct memprof_range r[MEMPROF_HM_MAX_SEGS];
    EXPECT_EQ_U(memprof__hm_ranges(&hm, r, MEMPROF_HM_MAX_SEGS), 4);
    memprof__hm_destroy(&hm);
}

static void test_a_segment_that_cannot_be_mapped_leaves_the_map_full_for_now(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    SKIP("a sanitizer's own mappings need address space beyond the limit");
#endif
    /* Under an address-space limit just above what the process has, the next segment
     * cannot be mapped: inserts past the open segments' room are dropped and counted, and
     * those in them go on working. In a child, so the limit stays there. */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct memprof_heapmap hm;
        if (memprof__hm_init(&hm, (uint64_t)1 << 24) != 0)
            _exit(2);
        for (uint64_t i = 0; i < 3000; i++)
            if (!insert(&hm, key_of(i), 1, 64, 0))
                _exit(3);
        struct rlimit lim = {0, 0};
        FILE *f = fopen("/proc/self/statm", "r");
        unsigned long pages = 0;
        if (!f || fscanf(f, "%lu", &pages) != 1)
            _exit(4);
        fclose(f);
        lim.rlim_cur = lim.rlim_max = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (1 << 20);
        if (setrlimit(RLIMIT_AS, &lim) != 0)
            _exit(5);
        uint64_t stored = 3000;
        for (uint64_t i = 3000; i < 200000; i++)
            stored += insert(&hm, key_of(i), 1, 64, 0);
        /* Segments of up to 1 MiB still fit (4096 to 32768 slots), the rest is dropped. */
        if (hm.full_drops == 0 || stored + hm.full_drops != 200000 || hm.live != stored)
            _exit(6);
        for (uint64_t i = 0; i < 3000; i++)
            if (memprof__hm_remove(&hm, key_of(i), NULL) != MEMPROF_HM_FOUND)
                _exit(7);
        _exit(count_live(&hm) == stored - 3000 ? 0 : 8);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    EXPECT(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
}

/* for_each bookkeeping: which keys were visited, and how often. */
struct visit {
    uint8_t *seen; /* indexed by key index */
    uint64_t n;
    uint64_t bad;
};

static void visit_entry(void *ctx, const struct memprof_hm_entry *e)
{
    struct visit *v = ctx;
    uint64_t i = (e->key - key_of(0)) / 16;
    if (e->key < key_of(0) || i >= v->n || e->size != i * 3 + 1 || e->stack_id != (i % 97) + 1 ||
        e->ts != i)
        v->bad++;
    else
        v->seen[i]++;
}

static void visit_key(void *ctx, uint64_t key)
{
    struct visit *v = ctx;
    uint64_t i = (key - key_of(0)) / 16;
    if (key < key_of(0) || i >= v->n)
        v->bad++;
    else
        v->seen[i]++;
}

static void test_for_each_visits_exactly_the_live_entries(void)
{
    enum { N = 20000 };
    struct memprof_heapmap hm;
    CHECK_EQ(memprof__hm_init(&hm, N), 0);
    bool live[N] = {0};
    for (uint64_t i = 0; i < N; i++) {
        CHECK(insert(&hm, key_of(i), (uint32_t)(i % 97) + 1, i * 3 + 1, i));
        live[i] = true;
    }
    uint64_t data = 1;
    for (int r = 0; r < 8000; r++) {
        uint64_t i = test_rand_below(&data, N);
        EXPECT_EQ(memprof__hm_remove(&hm, key_of(i), NULL),
                  live[i] ? MEMPROF_HM_FOUND : MEMPROF_HM_NOT_FOUND);
        live[i] = false;
    }
    /* Re-insert some removed keys (tombstone reuse), and leave one reservation open: it is
     * not a live sample. */
    for (uint64_t i = 0; i < N; i += 5)
        if (!live[i]) {
            CHECK(insert(&hm, key_of(i), (uint32_t)(i % 97) + 1, i * 3 + 1, i));
            live[i] = true;
        }
    uint64_t open = N; /* key index N: outside the expected range */
    CHECK(memprof__hm_reserve(&hm, key_of(open)) != NULL);
    uint64_t nlive = 0;
    for (uint64_t i = 0; i < N; i++)
        nlive += live[i];

    static uint8_t seen[N + 1];
    memset(seen, 0, sizeof seen);
    struct visit v = {.seen = seen, .n = N};
    EXPECT_EQ_U(memprof__hm_for_each(&hm, visit_entry, &v), nlive);
    EXPECT_EQ_U(v.bad, 0);
    uint64_t wrong = 0;
    for (uint64_t i = 0; i < N; i++)
        wrong += seen[i] != (live[i] ? 1 : 0);
    EXPECT_EQ_U(wrong, 0);
    EXPECT_EQ_U(hm.live, nlive);

    /* for_each_key reports claimed keys, the open reservation included. */
    memset(seen, 0, sizeof seen);
    v = (struct visit){.seen = seen, .n = N + 1};
    memprof__hm_for_each_key(&hm, visit_key, &v);
    EXPECT_EQ_U(v.bad, 0);
    wrong = 0;
    for (uint64_t i = 0; i < N; i++)
        wrong += seen[i] != (live[i] ? 1 : 0);
    EXPECT_EQ_U(wrong, 0);
    EXPECT_EQ(seen[open], 1);
    memprof__hm_destroy(&hm);
}

/* A long-running program frees and allocates forever; with few samples live at any time
 * the map must keep accepting samples. Tombstones accumulate (a slot never goes back to
 * EMPTY), so this checks that they are reused well enough that the map never reports itself
 * full while far below capacity. */
/* Pages of [p, p + bytes) the process has touched (mincore: mapped in, the zero page
 * included), or -1. */
static long resident_pages(const void *p, size_t bytes)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = (bytes + page - 1) / page;
    unsigned char *vec = calloc(n, 1);
    if (!vec || mincore((void *)p, bytes, vec) != 0) {
        free(vec);
        return -1;
    }
    long r = 0;
    for (size_t i = 0; i < n; i++)
        r += vec[i] & 1;
    free(vec);
    return r;
}

/* The profile of a process that never sampled walks the map at exit: its pages must stay
 * untouched (each would be a page fault for nothing). */
static void test_walking_a_map_nothing_was_inserted_in_touches_none_of_its_pages(void)
{
    struct memprof_heapmap hm;
    CHECK_EQ(memprof__hm_init(&hm, 4096), 0);
    size_t bytes = (size_t)memprof_atomic_load_relaxed(&hm.mapped_bytes); /* segment 0 */
    const void *seg = memprof_atomic_load_acquire(&hm.segs[0]);
    CHECK(seg != NULL);
    EXPECT_EQ(resident_pages(seg, bytes), 0);
    EXPECT_EQ_U(count_live(&hm), 0);
    EXPECT_EQ(resident_pages(seg, bytes), 0);
    /* Once a slot was claimed the walk reads the segment, and finds what is there. */
    CHECK(insert(&hm, key_of(1), 1, 10, 1));
    CHECK_EQ(memprof__hm_remove(&hm, key_of(1), NULL), MEMPROF_HM_FOUND);
    EXPECT_EQ_U(count_live(&hm), 0);
    CHECK(insert(&hm, key_of(2), 1, 10, 1));
    EXPECT_EQ_U(count_live(&hm), 1);
    memprof__hm_destroy(&hm);
}

static void test_churn_with_few_live_entries_never_drops(void)
{
    struct memprof_heapmap hm;
    CHECK_EQ(memprof__hm_init(&hm, 4096), 0);
    enum { WINDOW = 64 };
    uint64_t ring[WINDOW];
    uint64_t drops = 0, inserted = 0;
    for (uint64_t i = 0; i < 200000; i++) {
        if (i >= WINDOW) {
            uint64_t old = ring[i % WINDOW];
            if (old)
                EXPECT_EQ(memprof__hm_remove(&hm, old, NULL), MEMPROF_HM_FOUND);
        }
        uint64_t k = key_of(i);
        if (insert(&hm, k, 1, 64, 0)) {
            ring[i % WINDOW] = k;
            inserted++;
        } else {
            ring[i % WINDOW] = 0;
            drops++;
        }
    }
    printf("  %" PRIu64 " inserted, %" PRIu64 " dropped with at most %d of %" PRIu64
           " live; %" PRIu64 " of %zu slots used\n",
           inserted, drops, WINDOW, hm.capacity, memprof__hm_used(&hm), hm.nslots);
    EXPECT_EQ_U(drops, 0);
    EXPECT_EQ_U(hm.full_drops, drops);
    memprof__hm_destroy(&hm);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_round_trip_returns_size_stack_and_time),
        TEST_CASE(test_large_sizes_are_exact),
        TEST_CASE(test_sizes_beyond_max_are_clamped_and_counted),
        TEST_CASE(test_remove_of_unknown_key_is_not_found),
        TEST_CASE(test_death_during_birth),
        TEST_CASE(test_tombstone_reuse_is_counted),
        TEST_CASE(test_capacity_is_rounded_to_a_power_of_two),
        TEST_CASE(test_full_table_drops_and_counts),
        TEST_CASE(test_full_table_recovers_after_removal),
        TEST_CASE(test_segments_open_as_the_map_fills),
        TEST_CASE(test_segments_are_mapped_when_they_open),
        TEST_CASE(test_a_segment_that_cannot_be_mapped_leaves_the_map_full_for_now),
        TEST_CASE(test_for_each_visits_exactly_the_live_entries),
        TEST_CASE(test_churn_with_few_live_entries_never_drops),
        TEST_CASE(test_walking_a_map_nothing_was_inserted_in_touches_none_of_its_pages),
    };
    return TEST_MAIN(cases, false);
}
