/* SPDX-License-Identifier: MIT */
/*
 * The allocator wrappers keep the C semantics exactly, checked under the preload plugin at
 * MEMPROF_RATE=1 so that every allocation goes through the profiler's cold path (stack
 * capture, interning, heap-map insert). Modes (argv[1]), one behaviour each:
 *
 *   success-preserves-errno      every successful call (malloc, calloc, realloc grow/shrink,
 *                                realloc(NULL, n), reallocarray, posix_memalign,
 *                                aligned_alloc, memalign, valloc, pvalloc,
 *                                malloc_usable_size, free) leaves errno as it was.
 *   calloc-overflow-enomem       calloc whose n * size overflows: NULL with errno ENOMEM.
 *   posix-memalign-einval        an alignment that is not a power of two or is smaller than
 *                                sizeof(void *) returns EINVAL and leaves *memptr alone.
 *   reallocarray-overflow-enomem reallocarray whose n * size overflows: NULL with ENOMEM,
 *                                and the old block is left intact.
 *   huge-malloc-enomem           malloc and realloc of more than PTRDIFF_MAX: NULL, ENOMEM.
 *   failed-realloc-keeps-sample  a realloc that fails leaves the old block's sample live;
 *                                freeing the block then removes it.
 *
 * The program links libmemprof only to confirm, through memprof_get_stats(), that the
 * plugin is active at rate 1 and that the calls were really sampled.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memprof/memprof.h>

#include "itest.h"

#define SENTINEL 4242

/* Opaque to the optimiser, so GCC neither folds nor warns about the huge requests. */
static volatile size_t big_half = SIZE_MAX / 2 + 2;
static volatile size_t huge = (size_t)PTRDIFF_MAX + 4096;

static memprof_stats stats(void)
{
    memprof_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    int rc = memprof_get_stats(&s);
    CHECK(rc == 0, "memprof_get_stats: %s", memprof_strerror(rc));
    return s;
}

static void require_rate_1(void)
{
    memprof_stats s = stats();
    CHECK(s.state == MEMPROF_STATE_ACTIVE && s.sampling_rate == 1,
          "expected an active engine at rate 1 (LD_PRELOAD and MEMPROF_RATE=1), got state %"
          PRIu32 " rate %" PRIu64, s.state, s.sampling_rate);
}

#define EXPECT_ERRNO_KEPT(what)                                                               \
    CHECK(errno == SENTINEL, "%s changed errno to %d (%s)", what, errno, strerror(errno))

static int success_preserves_errno(void)
{
    require_rate_1();
    uint64_t before = stats().total_samples;
    void *p[12];
    int n = 0, rc;

    errno = SENTINEL;
    p[n++] = malloc(1000);
    EXPECT_ERRNO_KEPT("malloc");
    p[n++] = calloc(10, 100);
    EXPECT_ERRNO_KEPT("calloc");
    p[n++] = realloc(NULL, 1000);
    EXPECT_ERRNO_KEPT("realloc(NULL, n)");
    p[n - 1] = realloc(p[n - 1], 100000);
    EXPECT_ERRNO_KEPT("realloc (grow)");
    p[n - 1] = realloc(p[n - 1], 500);
    EXPECT_ERRNO_KEPT("realloc (shrink)");
    p[n++] = reallocarray(NULL, 10, 100);
    EXPECT_ERRNO_KEPT("reallocarray(NULL, ...)");
    p[n - 1] = reallocarray(p[n - 1], 100, 100);
    EXPECT_ERRNO_KEPT("reallocarray (grow)");
    rc = posix_memalign(&p[n++], 64, 1000);
    CHECK(rc == 0, "posix_memalign failed: %d", rc);
    EXPECT_ERRNO_KEPT("posix_memalign");
    p[n++] = aligned_alloc(256, 1024);
    EXPECT_ERRNO_KEPT("aligned_alloc");
    p[n++] = memalign(128, 1000);
    EXPECT_ERRNO_KEPT("memalign");
    p[n++] = valloc(1000);
    EXPECT_ERRNO_KEPT("valloc");
    p[n++] = pvalloc(1000);
    EXPECT_ERRNO_KEPT("pvalloc");
    for (int i = 0; i < n; i++) {
        CHECK(p[i] != NULL, "allocation %d failed", i);
        CHECK(malloc_usable_size(p[i]) >= 500, "malloc_usable_size too small for block %d", i);
    }
    EXPECT_ERRNO_KEPT("malloc_usable_size");

    /* rate 1: every one of those (12 allocating calls, sizes >= 500 B) was sampled */
    uint64_t sampled = stats().total_samples - before;
    printf("%" PRIu64 " samples taken by 12 allocating calls\n", sampled);
    CHECK(sampled >= 12, "only %" PRIu64 " of 12 allocations sampled at rate 1", sampled);

    for (int i = 0; i < n; i++) {
        free(p[i]);
        EXPECT_ERRNO_KEPT("free");
    }
    free(NULL);
    EXPECT_ERRNO_KEPT("free(NULL)");
    return 0;
}

static int calloc_overflow_enomem(void)
{
    require_rate_1();
    errno = 0;
    void *p = calloc(big_half, 2);
    CHECK(p == NULL && errno == ENOMEM, "calloc(SIZE_MAX/2+2, 2) = %p, errno %d", p, errno);
    errno = 0;
    p = calloc(2, big_half);
    CHECK(p == NULL && errno == ENOMEM, "calloc(2, SIZE_MAX/2+2) = %p, errno %d", p, errno);
    errno = 0;
    p = calloc(big_half, big_half);
    CHECK(p == NULL && errno == ENOMEM, "calloc(SIZE_MAX/2+2, SIZE_MAX/2+2) = %p, errno %d",
          p, errno);
    return 0;
}

static int posix_memalign_einval(void)
{
    require_rate_1();
    static const size_t bad[] = {0, 3, 4, 24, 48, 1000, sizeof(void *) / 2};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        void *p = (void *)&bad; /* must stay untouched */
        errno = SENTINEL;
        int rc = posix_memalign(&p, bad[i], 100);
        CHECK(rc == EINVAL, "posix_memalign(align %zu) returned %d, expected EINVAL", bad[i],
              rc);
        CHECK(p == (void *)&bad, "posix_memalign(align %zu) wrote *memptr on failure", bad[i]);
        EXPECT_ERRNO_KEPT("a failing posix_memalign");
    }
    return 0;
}

static int reallocarray_overflow_enomem(void)
{
    require_rate_1();
    errno = 0;
    void *p = reallocarray(NULL, big_half, 2);
    CHECK(p == NULL && errno == ENOMEM, "reallocarray(NULL, overflow) = %p, errno %d", p,
          errno);
    char *old = malloc(100);
    CHECK(old != NULL, "malloc failed");
    memset(old, 'x', 100);
    errno = 0;
    p = reallocarray(old, 3, big_half);
    CHECK(p == NULL && errno == ENOMEM, "reallocarray(p, overflow) = %p, errno %d", p, errno);
    for (int i = 0; i < 100; i++)
        CHECK(old[i] == 'x', "the old block changed after a failed reallocarray");
    free(old);
    return 0;
}

static int huge_malloc_enomem(void)
{
    require_rate_1();
    errno = 0;
    void *p = malloc(huge);
    CHECK(p == NULL && errno == ENOMEM, "malloc(> PTRDIFF_MAX) = %p, errno %d", p, errno);
    char *old = malloc(100);
    CHECK(old != NULL, "malloc failed");
    errno = 0;
    p = realloc(old, huge);
    CHECK(p == NULL && errno == ENOMEM, "realloc(p, > PTRDIFF_MAX) = %p, errno %d", p, errno);
    free(old);
    return 0;
}

static int failed_realloc_keeps_sample(void)
{
    require_rate_1();
    char *p = malloc(1000);
    CHECK(p != NULL, "malloc failed");
    memprof_stats s1 = stats();
    errno = 0;
    void *q = realloc(p, huge);
    CHECK(q == NULL && errno == ENOMEM, "realloc(p, huge) = %p, errno %d", q, errno);
    memprof_stats s2 = stats();
    free(p);
    memprof_stats s3 = stats();
    /* Print only now: at rate 1, stdout's buffer would be one more live sample. */
    printf("live samples: %" PRIu64 " before the failed realloc, %" PRIu64 " after, %" PRIu64
           " after free\n", s1.live_samples, s2.live_samples, s3.live_samples);
    CHECK(s2.live_samples == s1.live_samples,
          "a failed realloc changed the live samples from %" PRIu64 " to %" PRIu64,
          s1.live_samples, s2.live_samples);
    CHECK(s2.estimated_live_bytes == s1.estimated_live_bytes,
          "a failed realloc changed the estimate from %" PRIu64 " to %" PRIu64 " B",
          s1.estimated_live_bytes, s2.estimated_live_bytes);
    CHECK(s3.live_samples + 1 == s1.live_samples,
          "freeing the block took live samples from %" PRIu64 " to %" PRIu64
          " (expected one fewer)", s1.live_samples, s3.live_samples);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*run)(void);
    } modes[] = {
        {"success-preserves-errno", success_preserves_errno},
        {"calloc-overflow-enomem", calloc_overflow_enomem},
        {"posix-memalign-einval", posix_memalign_einval},
        {"reallocarray-overflow-enomem", reallocarray_overflow_enomem},
        {"huge-malloc-enomem", huge_malloc_enomem},
        {"failed-realloc-keeps-sample", failed_realloc_keeps_sample},
    };
    for (size_t i = 0; argc > 1 && i < sizeof modes / sizeof *modes; i++)
        if (!strcmp(argv[1], modes[i].name))
            return modes[i].run();
    fprintf(stderr, "usage: %s MODE\n", argv[0]);
    return 2;
}
