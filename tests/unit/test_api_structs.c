/* SPDX-License-Identifier: MIT */
/*
 * Tests of the size-stamped structs of the public API (include/memprof/memprof.h), the
 * mechanism that lets them grow without breaking callers: memprof_get_stats() and
 * memprof_snapshot_estimate() write only the prefix the caller's `size` covers (canaries
 * after it stay intact) and refuse sizes too small to hold their key field;
 * memprof_init_config() reads only the prefix its `size` covers, accepts a larger struct
 * whose unknown tail is zero, and refuses a non-zero tail, a too-small size and out-of-range
 * fields (leaving the engine uninitialised). One engine per process: each case is its own
 * test in meson.build.
 */
#include <errno.h>
#include <stddef.h>

#include "config.h"
#include "core/engine.h"
#include "memprof/memprof.h"
#include "test.h"

#define FIELD_END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
#define CANARY 0xA5

static bool all_bytes_are(const void *p, size_t from, size_t to, unsigned char v)
{
    for (size_t i = from; i < to; i++)
        if (((const unsigned char *)p)[i] != v)
            return false;
    return true;
}

static uint32_t state(void)
{
    memprof_stats s = {.size = sizeof s};
    EXPECT_EQ(memprof_get_stats(&s), 0);
    return s.state;
}

/* A stats struct with room after it, for canaries. */
struct big_stats {
    memprof_stats s;
    unsigned char tail[64];
};

static void test_get_stats_rejects_null_and_tiny_sizes(void)
{
    EXPECT_EQ(memprof_get_stats(NULL), -EINVAL);
    CHECK_EQ(memprof_init(4096), 0);
    EXPECT_EQ(memprof_get_stats(NULL), -EINVAL);
    const size_t sizes[] = {0, 1, sizeof(size_t), FIELD_END(memprof_stats, state) - 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        struct big_stats b;
        memset(&b, CANARY, sizeof b);
        b.s.size = sizes[i];
        EXPECT_EQ(memprof_get_stats(&b.s), -EINVAL);
        /* Nothing was written. */
        EXPECT_EQ_U(b.s.size, sizes[i]);
        EXPECT(all_bytes_are(&b, sizeof(size_t), sizeof b, CANARY));
    }
}

static void test_get_stats_writes_only_the_covered_prefix(void)
{
    CHECK_EQ(memprof_init(4096), 0);
    const size_t sizes[] = {
        FIELD_END(memprof_stats, state),
        FIELD_END(memprof_stats, sampling_rate),
        offsetof(memprof_stats, sampling_rate) + 4, /* half a field */
        offsetof(memprof_stats, heap_map_capacity),
        sizeof(memprof_stats) - 8,
        sizeof(memprof_stats),
    };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        struct big_stats b;
        memset(&b, CANARY, sizeof b);
        b.s.size = sizes[i];
        CHECK_EQ(memprof_get_stats(&b.s), 0);
        EXPECT_EQ_U(b.s.size, sizes[i]);
        EXPECT_EQ(b.s.state, MEMPROF_STATE_INITIALIZED);
        if (sizes[i] >= FIELD_END(memprof_stats, sampling_rate))
            EXPECT_EQ_U(b.s.sampling_rate, 4096);
        if (!all_bytes_are(&b, sizes[i], sizeof b, CANARY)) {
            EXPECT(all_bytes_are(&b, sizes[i], sizeof b, CANARY));
            printf("  size %zu: bytes after the prefix were written\n", sizes[i]);
        }
    }
}

static void test_get_stats_with_a_larger_struct_keeps_the_tail(void)
{
    /* A caller compiled against a newer header, with fields this library does not know. */
    CHECK_EQ(memprof_init(4096), 0);
    struct big_stats b;
    memset(&b, CANARY, sizeof b);
    b.s.size = sizeof b;
    CHECK_EQ(memprof_get_stats(&b.s), 0);
    EXPECT_EQ_U(b.s.size, sizeof b);
    EXPECT_EQ_U(b.s.sampling_rate, 4096);
    EXPECT_EQ_U(b.s.total_samples, 0);
    EXPECT(all_bytes_are(&b, sizeof b.s, sizeof b, CANARY));
}

static void test_config_init_fills_the_defaults(void)
{
    memprof_config c;
    memset(&c, CANARY, sizeof c);
    memprof_config_init(&c);
    EXPECT_EQ_U(c.size, sizeof c);
    EXPECT_EQ_U(c.sampling_rate, MEMPROF_DEFAULT_RATE);
    /* The header's default is the library's, whatever the build configured. */
    EXPECT_EQ_U(c.sampling_rate, MEMPROF_DEFAULT_SAMPLING_RATE);
    EXPECT_EQ_U(c.heap_map_capacity, MEMPROF_DEFAULT_HEAP_MAP_CAPACITY);
    EXPECT_EQ_U(c.max_stacks, MEMPROF_DEFAULT_MAX_STACKS);
    EXPECT_EQ(c.max_frames, MEMPROF_DEFAULT_FRAMES);
    EXPECT_EQ(c.flags, 0);
    EXPECT_EQ_U(c.seed, 0);
    EXPECT(c.log_fn == NULL && c.log_ctx == NULL);
    memprof_config_init(NULL);
    /* The engine is untouched. */
    EXPECT_EQ(state(), MEMPROF_STATE_UNINITIALIZED);
}

/* A config with room after it, for a newer caller's fields. */
struct big_config {
    memprof_config c;
    unsigned char tail[32];
};

static void test_init_config_rejects_invalid_configs(void)
{
    struct big_config b;
    int n = 0;
#define EXPECT_REJECTED(stmt)                                                          \
    do {                                                                               \
        memset(&b, 0, sizeof b);                                                       \
        memprof_config_init(&b.c);                                                     \
        stmt;                                                                          \
        if (!EXPECT_EQ(memprof_init_config(&b.c), -EINVAL))                            \
            printf("  accepted: %s\n", #stmt);                                         \
        EXPECT_EQ(state(), MEMPROF_STATE_UNINITIALIZED);                               \
        n++;                                                                           \
    } while (0)
    EXPECT_REJECTED(b.c.size = 0);
    EXPECT_REJECTED(b.c.size = sizeof(size_t));
    EXPECT_REJECTED(b.c.size = FIELD_END(memprof_config, sampling_rate) - 1);
    EXPECT_REJECTED(b.c.sampling_rate = ((uint64_t)1 << 40) + 1);
    EXPECT_REJECTED(b.c.sampling_rate = UINT64_MAX);
    EXPECT_REJECTED(b.c.heap_map_capacity = ((uint64_t)1 << 34) + 1);
    EXPECT_REJECTED(b.c.heap_map_capacity = UINT64_MAX);
    EXPECT_REJECTED(b.c.max_stacks = 15);
    EXPECT_REJECTED(b.c.max_stacks = MEMPROF_HM_MAX_STACK);
    EXPECT_REJECTED(b.c.max_stacks = UINT64_MAX);
    EXPECT_REJECTED(b.c.max_frames = 257); /* the header says: at most 256 */
    EXPECT_REJECTED(b.c.max_frames = UINT32_MAX);
    EXPECT_REJECTED(b.c.flags = 1);
    EXPECT_REJECTED(b.c.flags = 0x80000000u);
    EXPECT_REJECTED(b.c.unwinder = MEMPROF_UNWIND_DWARF + 1);
    EXPECT_REJECTED(b.c.reserved0 = 1);
    /* A newer caller's struct whose unknown fields are set: refused, not ignored. */
    EXPECT_REJECTED(b.c.size = sizeof b; b.tail[0] = 1);
    EXPECT_REJECTED(b.c.size = sizeof b; b.tail[sizeof b.tail - 1] = 0x80);
#undef EXPECT_REJECTED
    EXPECT_EQ(n, 18);
    /* The same larger struct with a zero tail is fine. */
    memset(&b, 0, sizeof b);
    memprof_config_init(&b.c);
    b.c.size = sizeof b;
    b.c.sampling_rate = 8192;
    EXPECT_EQ(memprof_init_config(&b.c), 0);
    EXPECT_EQ(state(), MEMPROF_STATE_INITIALIZED);
    memprof_stats s = {.size = sizeof s};
    EXPECT_EQ(memprof_get_stats(&s), 0);
    EXPECT_EQ_U(s.sampling_rate, 8192);
}

static void test_init_config_accepts_boundary_values(void)
{
    memprof_config c;
    memprof_config_init(&c);
    c.sampling_rate = (uint64_t)1 << 40;
    c.max_stacks = MEMPROF_HM_MAX_STACK - 1;
    c.max_frames = 256;
    c.heap_map_capacity = 4096;
    CHECK_EQ(memprof_init_config(&c), 0);
    memprof_stats s = {.size = sizeof s};
    EXPECT_EQ(memprof_get_stats(&s), 0);
    EXPECT_EQ_U(s.sampling_rate, (uint64_t)1 << 40);
    EXPECT_EQ_U(s.stack_table_capacity, MEMPROF_HM_MAX_STACK - 1);
    EXPECT_EQ_U(s.heap_map_capacity, 4096);
}

static void test_init_config_reads_only_the_covered_prefix(void)
{
    /* An older caller's struct that ends after sampling_rate: whatever follows in memory is
     * not part of it and must not be read. */
    struct big_config b;
    memset(&b, 0xFF, sizeof b);
    b.c.size = FIELD_END(memprof_config, sampling_rate);
    b.c.sampling_rate = 3000;
    CHECK_EQ(memprof_init_config(&b.c), 0);
    memprof_stats s = {.size = sizeof s};
    EXPECT_EQ(memprof_get_stats(&s), 0);
    EXPECT_EQ_U(s.sampling_rate, 3000);
    EXPECT_EQ_U(s.heap_map_capacity, MEMPROF_DEFAULT_HEAP_MAP_CAPACITY);
    EXPECT_EQ_U(s.stack_table_capacity, MEMPROF_DEFAULT_MAX_STACKS);
}

static void test_init_config_null_uses_the_defaults(void)
{
    CHECK_EQ(memprof_init_config(NULL), 0);
    memprof_stats s = {.size = sizeof s};
    EXPECT_EQ(memprof_get_stats(&s), 0);
    EXPECT_EQ_U(s.sampling_rate, MEMPROF_DEFAULT_RATE);
    EXPECT_EQ_U(s.heap_map_capacity, MEMPROF_DEFAULT_HEAP_MAP_CAPACITY);
    EXPECT_EQ_U(s.stack_table_capacity, MEMPROF_DEFAULT_MAX_STACKS);
}

static void test_init_config_zero_fields_use_the_defaults(void)
{
    memprof_config c;
    memset(&c, 0, sizeof c);
    c.size = sizeof c;
    CHECK_EQ(memprof_init_config(&c), 0);
    memprof_stats s = {.size = sizeof s};
    EXPECT_EQ(memprof_get_stats(&s), 0);
    EXPECT_EQ_U(s.sampling_rate, MEMPROF_DEFAULT_RATE);
    EXPECT_EQ_U(s.heap_map_capacity, MEMPROF_DEFAULT_HEAP_MAP_CAPACITY);
    EXPECT_EQ_U(s.stack_table_capacity, MEMPROF_DEFAULT_MAX_STACKS);
}

/* An estimate struct with room after it, for canaries. */
struct big_estimate {
    memprof_estimate e;
    unsigned char tail[32];
};

static void test_snapshot_estimate_size_handling(void)
{
    CHECK_EQ(memprof_init(4096), 0);
    memprof_snapshot *snap = NULL;
    CHECK_EQ(memprof_get_snapshot(&snap), 0);
    struct big_estimate b;
    memset(&b, CANARY, sizeof b);
    b.e.size = sizeof b.e;
    EXPECT_EQ(memprof_snapshot_estimate(NULL, &b.e), -EINVAL);
    EXPECT_EQ(memprof_snapshot_estimate(snap, NULL), -EINVAL);
    /* Too small to hold `bytes`: refused, nothing written. */
    const size_t small[] = {0, sizeof(size_t), FIELD_END(memprof_estimate, bytes) - 1};
    for (size_t i = 0; i < 3; i++) {
        memset(&b, CANARY, sizeof b);
        b.e.size = small[i];
        EXPECT_EQ(memprof_snapshot_estimate(snap, &b.e), -EINVAL);
        EXPECT(all_bytes_are(&b, sizeof(size_t), sizeof b, CANARY));
    }
    /* Prefixes: written up to size, canaries after. */
    const size_t sizes[] = {FIELD_END(memprof_estimate, bytes),
                            FIELD_END(memprof_estimate, count),
                            sizeof(memprof_estimate) - 4, sizeof(memprof_estimate), sizeof b};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        memset(&b, CANARY, sizeof b);
        b.e.size = sizes[i];
        CHECK_EQ(memprof_snapshot_estimate(snap, &b.e), 0);
        EXPECT_EQ_U(b.e.size, sizes[i]);
        EXPECT_EQ_U(b.e.bytes, 0);
        EXPECT_EQ_U(b.e.live_samples, 0);
        size_t end = sizes[i] < sizeof b.e ? sizes[i] : sizeof b.e;
        if (!all_bytes_are(&b, end, sizeof b, CANARY)) {
            EXPECT(all_bytes_are(&b, end, sizeof b, CANARY));
            printf("  size %zu: bytes after the prefix were written\n", sizes[i]);
        }
    }
    memset(&b, CANARY, sizeof b);
    b.e.size = sizeof b.e;
    CHECK_EQ(memprof_snapshot_estimate(snap, &b.e), 0);
    EXPECT_EQ_U(b.e.sampling_rate, 4096);
    EXPECT_EQ(b.e.low_confidence, 1);
    EXPECT_EQ(b.e.reserved, 0);
    memprof_free_snapshot(snap);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_get_stats_rejects_null_and_tiny_sizes),
        TEST_CASE(test_get_stats_writes_only_the_covered_prefix),
        TEST_CASE(test_get_stats_with_a_larger_struct_keeps_the_tail),
        TEST_CASE(test_config_init_fills_the_defaults),
        TEST_CASE(test_init_config_rejects_invalid_configs),
        TEST_CASE(test_init_config_accepts_boundary_values),
        TEST_CASE(test_init_config_reads_only_the_covered_prefix),
        TEST_CASE(test_init_config_null_uses_the_defaults),
        TEST_CASE(test_init_config_zero_fields_use_the_defaults),
        TEST_CASE(test_snapshot_estimate_size_handling),
    };
    return TEST_MAIN(cases, true);
}
