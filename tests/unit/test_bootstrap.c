/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the preload plugin's bootstrap heap (src/interpose/bootstrap.h), which serves
 * the allocations made while the real allocator is being looked up: blocks aligned as asked
 * (by address, for every power of two the heap accepts, whatever the heap's own alignment),
 * their sizes recorded, ownership by address, and exhaustion reported with ENOMEM. The heap
 * is the process's and never reuses a block, so the cases run in this order in one process
 * and the exhaustion case comes last.
 */
#include <errno.h>
#include <stdint.h>

#include "interpose/bootstrap.h"
#include "test.h"

static void test_blocks_are_aligned_as_asked(void)
{
    for (size_t align = 1; align <= MEMPROF_BOOTSTRAP_BYTES / 4; align *= 2) {
        unsigned char *p = memprof__bootstrap_alloc(24, align);
        CHECK(p != NULL);
        size_t want = align < 16 ? 16 : align;
        EXPECT_EQ_U((uintptr_t)p % want, 0);
        EXPECT(memprof__bootstrap_owns(p) && memprof__bootstrap_owns(p + 23));
        EXPECT_EQ_U(memprof__bootstrap_size(p), 24);
    }
}

static void test_blocks_are_zeroed_and_disjoint(void)
{
    unsigned char *a = memprof__bootstrap_alloc(100, 16), *b = memprof__bootstrap_alloc(100, 16);
    CHECK(a != NULL && b != NULL);
    EXPECT(a + 100 <= b || b + 100 <= a);
    for (int i = 0; i < 100; i++)
        EXPECT_EQ(a[i] | b[i], 0);
}

static void test_memory_outside_the_heap_is_not_its_own(void)
{
    int local;
    EXPECT(!memprof__bootstrap_owns(&local));
    EXPECT(!memprof__bootstrap_owns(memprof__bootstrap_heap + MEMPROF_BOOTSTRAP_BYTES));
}

static void test_requests_it_cannot_serve_fail_with_enomem(void)
{
    errno = 0;
    EXPECT(memprof__bootstrap_alloc(MEMPROF_BOOTSTRAP_BYTES + 1, 16) == NULL);
    EXPECT_EQ(errno, ENOMEM);
    errno = 0;
    EXPECT(memprof__bootstrap_alloc(16, MEMPROF_BOOTSTRAP_BYTES / 2) == NULL);
    EXPECT_EQ(errno, ENOMEM);
    /* Exhaustion: blocks until none is left, then ENOMEM. */
    int n = 0;
    while (memprof__bootstrap_alloc(1024, 16) && n < 1000)
        n++;
    EXPECT(n > 0 && n < 64);
    errno = 0;
    EXPECT(memprof__bootstrap_alloc(1024, 16) == NULL);
    EXPECT_EQ(errno, ENOMEM);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_blocks_are_aligned_as_asked),
        TEST_CASE(test_blocks_are_zeroed_and_disjoint),
        TEST_CASE(test_memory_outside_the_heap_is_not_its_own),
        TEST_CASE(test_requests_it_cannot_serve_fail_with_enomem),
    };
    return TEST_MAIN(cases, false);
}
