/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the stack table (src/core/stacktab.h), single threaded: identical stacks
 * intern to one id and different ones (also prefixes, and the empty stack) to different
 * ids; ids are stable and their records keep the frames; the table grows to many thousands
 * of stacks, mapping records and frames by segments as they come; when the ids or the frame
 * arena run out, interns return the overflow id 0 and are counted while known stacks keep
 * their ids; the truncated flag is recorded. Concurrent interning is tested in
 * tests/stress/.
 */
#include <string.h>

#include "core/stacktab.h"
#include "test.h"

/* Deterministic frames of stack number `n` (depth 1..max_depth): return-address-like. */
static unsigned make_stack(uint64_t n, uintptr_t *frames, unsigned max_depth)
{
    uint64_t s = n * 0x9E3779B97F4A7C15ull + 1;
    unsigned depth = 1 + (unsigned)(test_rand(&s) % max_depth);
    for (unsigned i = 0; i < depth; i++)
        frames[i] = (uintptr_t)(0x400000 + (test_rand(&s) % 0x100000));
    /* Make stacks distinct for sure: the leaf frame encodes n. */
    frames[0] = (uintptr_t)(0x7f0000000000ull + n * 8);
    return depth;
}

static bool record_is(struct memprof_stacktab *st, uint32_t id, const uintptr_t *frames,
                      unsigned depth)
{
    struct memprof_stack *s = memprof__st_get(st, id);
    return s && s->depth == depth &&
           memcmp(memprof__st_frames(st, s), frames, depth * sizeof *frames) == 0;
}

static void test_identical_stacks_share_one_id(void)
{
    struct memprof_stacktab st;
    CHECK_EQ(memprof__st_init(&st, 1024), 0);
    uintptr_t a[] = {0x401000, 0x402000, 0x403000};
    uintptr_t a_copy[] = {0x401000, 0x402000, 0x403000};
    uint32_t id = memprof__st_intern(&st, a, 3, false);
    EXPECT(id != MEMPROF_STACK_OVERFLOW_ID);
    for (int i = 0; i < 10; i++)
        EXPECT_EQ_U(memprof__st_intern(&st, a_copy, 3, false), id);
    EXPECT_EQ_U(st.published, 2); /* the stack and the overflow stack */
    EXPECT(record_is(&st, id, a, 3));
    memprof__st_destroy(&st);
}

static void test_different_stacks_get_different_ids(void)
{
    struct memprof_stacktab st;
    CHECK_EQ(memprof__st_init(&st, 1024), 0);
    uintptr_t base[] = {0x401000, 0x402000, 0x403000};
    uintptr_t other_leaf[] = {0x401004, 0x402000, 0x403000};
    uintptr_t other_root[] = {0x401000, 0x402000, 0x403004};
    uintptr_t swapped[] = {0x402000, 0x401000, 0x403000};
    uint32_t ids[] = {
        memprof__st_intern(&st, base, 3, false),
        memprof__st_intern(&st, other_leaf, 3, false),
        memprof__st_intern(&st, other_root, 3, false),
        memprof__st_intern(&st, swapped, 3, false),
        memprof__st_intern(&st, base, 2, false), /* a prefix */
        memprof__st_intern(&st, base, 1, false),
        memprof__st_intern(&st, base, 0, false), /* no frames at all (stack unknown) */
    };
    enum { N = sizeof ids / sizeof ids[0] };
    for (int i = 0; i < N; i++) {
        EXPECT(ids[i] != MEMPROF_STACK_OVERFLOW_ID);
        for (int j = 0; j < i; j++)
            EXPECT(ids[i] != ids[j]);
    }
    EXPECT_EQ_U(st.published, N + 1);
    EXPECT_EQ_U(st.overflows, 0);
    EXPECT(record_is(&st, ids[4], base, 2));
    EXPECT(record_is(&st, ids[6], base, 0));
    /* Re-interning finds each again. */
    EXPECT_EQ_U(memprof__st_intern(&st, base, 0, false), ids[6]);
    EXPECT_EQ_U(memprof__st_intern(&st, swapped, 3, false), ids[3]);
    memprof__st_destroy(&st);
}

static void test_overflow_stack_is_published_and_empty(void)
{
    struct memprof_stacktab st;
    CHECK_EQ(memprof__st_init(&st, 1024), 0);
    struct memprof_stack *s = memprof__st_get(&st, MEMPROF_STACK_OVERFLOW_ID);
    CHECK(s != NULL);
    EXPECT_EQ(s->depth, 0);
    EXPECT(s->flags & MEMPROF_STACK_OVERFLOW);
    EXPECT_EQ_U(memprof__st_nids(&st), 1);
    EXPECT_EQ_U(st.published, 1);
    /* Unknown ids are not records. */
    EXPECT(memprof__st_get(&st, 1) == NULL);
    EXPECT(memprof__st_get(&st, 1024) == NULL);
    EXPECT(memprof__st_get(&st, UINT32_MAX) == NULL);
    memprof__st_destroy(&st);
}

static void test_ids_are_stable_and_records_keep_frames(void)
{
    enum { N = 5000, MAXD = 40 };
    struct memprof_stacktab st;
    CHECK_EQ(memprof__st_init(&st, 16384), 0);
    static uint32_t ids[N];
    uintptr_t frames[MAXD];
    for (uint64_t n = 0; n < N; n++) {
        unsigned d = make_stack(n, frames, MAXD);
        ids[n] = memprof__st_intern(&st, frames, d, false);
        CHECK(ids[n] != MEMPROF_STACK_OVERFLOW_ID);
    }
    /* In another order, interleaved with new stacks: the old ids come back unchanged. */
    uint64_t bad = 0;
    for (uint64_t k = 0; k < N; k++) {
        uint64_t n = (k * 7919) % N; /* a permutation, 7919 is prime */
        unsigned d = make_stack(n, frames, MAXD);
        bad += memprof__st_intern(&st, frames, d, false) != ids[n];
        bad += !record_is(&st, ids[n], frames, d);
        d = make_stack(N + k, frames, MAXD);
        memprof__st_intern(&st, frames, d, true);
    }
    EXPECT_EQ_U(bad, 0);
    EXPECT_EQ_U(st.published, 2 * N + 1);
    memprof__st_destroy(&st);
}

static void test_table_grows_to_many_thousands_of_stacks(void)
{
    enum { N = 200000, MAXD = 48 };
    struct memprof_stacktab st;
    CHECK_EQ(memprof__st_init(&st, 262144), 0);
    uint32_t *ids = calloc(N, sizeof *ids);
    uint8_t *used = calloc(262144, 1);
    CHECK(ids && used);
    uintptr_t frames[MAXD];
    uint64_t dup = 0, overflow = 0;
    for (uint64_t n = 0; n < N; n++) {
        unsigned d = make_stack(n, frames, MAXD);
        ids[n] = memprof__st_intern(&st, frames, d, false);
        overflow += ids[n] == MEMPROF_STACK_OVERFLOW_ID;
        if (ids[n] < 262144)
            dup += used[ids[n]]++ != 0;
    }
    EXPECT_EQ_U(overflow, 0);
    EXPECT_EQ_U(dup, 0);
    EXPECT_EQ_U(st.published, N + 1);
    EXPECT_EQ_U(st.overflows, 0);
    /* Ids are dense: single-threaded, none is abandoned. */
    EXPECT_EQ_U(memprof__st_nids(&st), N + 1);
    uint64_t bad = 0;
    for (uint64_t n = 0; n < N; n++) {
        unsigned d = make_stack(n, frames, MAXD);
        bad += !record_is(&st, ids[n], frames, d);
    }
    EXPECT_EQ_U(bad, 0);
    free(ids);
    free(used);
    memprof__st_destroy(&st);
}

static void test_full_table_returns_overflow_id_and_counts(void)
{
    struct memprof_stacktab st;
    CHECK_EQ(memprof__st_init(&st, 16), 0); /* ids 1..15 */
    uintptr_t frames[8];
    uint32_t ids[20];
    for (uint64_t n = 0; n < 20; n++) {
        unsigned d = make_stack(n, frames, 8);
        ids[n] = memprof__st_intern(&st, frames, d, false);
        if (n < 15)
            EXPECT(ids[n] != MEMPROF_STACK_OVERFLOW_ID);
        else
            EXPECT_EQ_U(ids[n], MEMPROF_STACK_OVERFLOW_ID);
    }
    EXPECT_EQ_U(st.overflows, 5);
    EXPECT_EQ_U(st.published, 16);
    EXPECT_EQ_U(memprof__st_nids(&st), 16);
    /* Stacks interned before the table filled keep their ids; no overflow is counted. */
    for (uint64_t n = 0; n < 15; n++) {
        unsigned d = make_stack(n, frames, 8);
        EXPECT_EQ_U(memprof__st_intern(&st, frames, d, false), ids[n]);
    }
    EXPECT_EQ_U(st.overflows, 5);
    /* Each further new stack counts again. */
    unsigned d = make_stack(100, frames, 8);
    EXPECT_EQ_U(memprof__st_intern(&st, frames, d, false), MEMPROF_STACK_OVERFLOW_ID);
    EXPECT_EQ_U(st.overflows, 6);
    memprof__st_destroy(&st);
}

static void test_records_and_frames_are_mapped_as_stacks_come(void)
{
    /* A table for 1M stacks maps its buckets and 256 records; more records and frames are
     * mapped by segments as ids and frames are handed out, never the capacity. */
    struct memprof_stacktab st;
    CHECK_EQ(memprof__st_init(&st, (size_t)1 << 20), 0);
    size_t buckets = st.nbuckets * sizeof(uint32_t), rec = sizeof(struct memprof_stack);
    EXPECT_EQ_U(st.mapped_bytes, buckets + 256 * rec);
    uintptr_t frames[40];
    for (uint64_t n = 0; n < 1000; n++) {
        unsigned d = make_stack(n, frames, 40);
        CHECK(memprof__st_intern(&st, frames, d, false) != MEMPROF_STACK_OVERFLOW_ID);
    }
    /* 1,001 ids: record segments of 256, 256 and 512; at most 40,000 frames: arena
     * segments of 8192, 8192, 16384 and 32768 frames at most. */
    EXPECT(st.mapped_bytes >= buckets + 1024 * rec);
    EXPECT(st.mapped_bytes <= buckets + 1024 * rec + 65536 * sizeof(uintptr_t));
    struct memprof_range r[1 + 2 * MEMPROF_SEG_MAX];
    EXPECT(memprof__st_ranges(&st, r, 1 + 2 * MEMPROF_SEG_MAX) >= 5);
    uint64_t bad = 0;
    for (uint64_t n = 0; n < 1000; n++) {
        unsigned d = make_stack(n, frames, 40);
        bad += !record_is(&st, memprof__st_intern(&st, frames, d, false), frames, d);
    }
    EXPECT_EQ_U(bad, 0);
    memprof__st_destroy(&st);
}

static void test_full_frame_arena_returns_overflow_id(void)
{
    /* The frame arena is sized for an average depth; two stacks of half its size fill it,
     * and a third stack overflows although ids remain. */
    struct memprof_stacktab st;
    CHECK_EQ(memprof__st_init(&st, 16), 0);
    size_t depth = st.arena_cap / 2;
    CHECK(depth >= 2 && depth <= MEMPROF_STACK_MAX_DEPTH);
    uintptr_t *frames = calloc(depth, sizeof *frames);
    CHECK(frames != NULL);
    uint32_t ids[3];
    for (int n = 0; n < 3; n++) {
        for (size_t i = 0; i < depth; i++)
            frames[i] = 0x400000 + (uintptr_t)n * 0x10000 + i;
        ids[n] = memprof__st_intern(&st, frames, (unsigned)depth, false);
    }
    EXPECT(ids[0] != MEMPROF_STACK_OVERFLOW_ID);
    EXPECT(ids[1] != MEMPROF_STACK_OVERFLOW_ID);
    EXPECT_EQ_U(ids[2], MEMPROF_STACK_OVERFLOW_ID);
    EXPECT_EQ_U(st.overflows, 1);
    EXPECT_EQ_U(st.published, 3);
    /* Once the arena is full even a one-frame stack overflows. */
    uintptr_t one = 0x1234;
    EXPECT_EQ_U(memprof__st_intern(&st, &one, 1, false), MEMPROF_STACK_OVERFLOW_ID);
    free(frames);
    memprof__st_destroy(&st);
}

static void test_truncated_flag_is_recorded(void)
{
    struct memprof_stacktab st;
    CHECK_EQ(memprof__st_init(&st, 1024), 0);
    uintptr_t a[] = {0x401000, 0x402000}, b[] = {0x501000, 0x502000};
    uint32_t ia = memprof__st_intern(&st, a, 2, true);
    uint32_t ib = memprof__st_intern(&st, b, 2, false);
    struct memprof_stack *sa = memprof__st_get(&st, ia), *sb = memprof__st_get(&st, ib);
    CHECK(sa && sb);
    EXPECT(sa->flags & MEMPROF_STACK_TRUNCATED);
    EXPECT(sa->flags & MEMPROF_STACK_PUBLISHED);
    EXPECT(!(sb->flags & MEMPROF_STACK_TRUNCATED));
    EXPECT(sb->flags & MEMPROF_STACK_PUBLISHED);
    EXPECT(!(sa->flags & MEMPROF_STACK_OVERFLOW));
    memprof__st_destroy(&st);
}

static void test_depth_beyond_maximum_is_clamped(void)
{
    struct memprof_stacktab st;
    CHECK_EQ(memprof__st_init(&st, 1024), 0);
    static uintptr_t frames[MEMPROF_STACK_MAX_DEPTH + 10];
    for (unsigned i = 0; i < MEMPROF_STACK_MAX_DEPTH + 10; i++)
        frames[i] = 0x400000 + i;
    uint32_t id = memprof__st_intern(&st, frames, MEMPROF_STACK_MAX_DEPTH + 10, true);
    CHECK(id != MEMPROF_STACK_OVERFLOW_ID);
    EXPECT(record_is(&st, id, frames, MEMPROF_STACK_MAX_DEPTH));
    /* The clamped stack is the same as its 256-frame prefix. */
    EXPECT_EQ_U(memprof__st_intern(&st, frames, MEMPROF_STACK_MAX_DEPTH, true), id);
    memprof__st_destroy(&st);
}

static void test_new_records_have_zero_counters(void)
{
    struct memprof_stacktab st;
    CHECK_EQ(memprof__st_init(&st, 1024), 0);
    uintptr_t a[] = {0x401000};
    struct memprof_stack *s = memprof__st_get(&st, memprof__st_intern(&st, a, 1, false));
    CHECK(s != NULL);
    EXPECT_EQ_U(s->live_samples + s->live_bytes + s->alloc_samples + s->alloc_bytes +
                    s->alloc_est_bytes + s->alloc_est_count_fp16,
                0);
    memprof__st_destroy(&st);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_identical_stacks_share_one_id),
        TEST_CASE(test_different_stacks_get_different_ids),
        TEST_CASE(test_overflow_stack_is_published_and_empty),
        TEST_CASE(test_ids_are_stable_and_records_keep_frames),
        TEST_CASE(test_table_grows_to_many_thousands_of_stacks),
        TEST_CASE(test_full_table_returns_overflow_id_and_counts),
        TEST_CASE(test_records_and_frames_are_mapped_as_stacks_come),
        TEST_CASE(test_full_frame_arena_returns_overflow_id),
        TEST_CASE(test_truncated_flag_is_recorded),
        TEST_CASE(test_depth_beyond_maximum_is_clamped),
        TEST_CASE(test_new_records_have_zero_counters),
    };
    return TEST_MAIN(cases, false);
}
