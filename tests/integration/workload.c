/* SPDX-License-Identifier: MIT */
/*
 * A deterministic, allocation-heavy workload that goes through every allocator entry point
 * the preload plugin wraps: malloc, calloc, realloc (growing, shrinking, realloc(NULL, n)
 * and realloc(p, 0)), reallocarray, posix_memalign, aligned_alloc, memalign, valloc, pvalloc,
 * free, and malloc_usable_size. Four threads each run their own seeded sequence of
 * operations on a table of live blocks, write a pattern into every block, verify it after
 * each realloc (and that calloc'd memory is zero), and the main thread frees what the
 * threads left behind (cross-thread frees).
 *
 * The output (per-thread operation counts and content checksums) depends only on the
 * seeds, never on addresses or on the heap's layout, so the runner can
 * require the same stdout and exit status with and without the profiler. The exit status is
 * 1 if any invariant (alignment, usable size, contents, errno) was violated. With the
 * argument "no-pvalloc" it calls valloc where it would call pvalloc, for allocators such as
 * jemalloc that do not define pvalloc (glibc's would then allocate from glibc's heap).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define THREADS 4
#define SLOTS 1024
#define OPS 60000
#define EDGE 64 /* bytes written and checked at each end of a block */

struct block {
    unsigned char *p;
    size_t n;
    unsigned tag;
};

struct worker {
    unsigned index;
    uint64_t rng;
    struct block slots[SLOTS];
    uint64_t allocs, frees, reallocs, zero_reallocs, checksum;
    uint64_t errors;
};

static struct worker workers[THREADS];
static size_t page_size;
static int no_pvalloc; /* argv[1] "no-pvalloc": for allocators without pvalloc (jemalloc) */

static uint64_t next_rand(struct worker *w)
{
    /* xorshift64*: deterministic for a given seed. */
    w->rng ^= w->rng >> 12;
    w->rng ^= w->rng << 25;
    w->rng ^= w->rng >> 27;
    return w->rng * 0x2545F4914F6CDD1DULL;
}

static size_t pick_size(struct worker *w)
{
    uint64_t r = next_rand(w);
    unsigned kind = (unsigned)(r % 100);
    r >>= 8;
    if (kind < 70)
        return 1 + (size_t)(r % 256);
    if (kind < 99)
        return 257 + (size_t)(r % 65280);
    return 65537 + (size_t)(r % (1u << 20)); /* above the mmap threshold */
}

static unsigned char pattern(unsigned tag, size_t i)
{
    return (unsigned char)(tag * 131u + i * 31u + 7u);
}

static void fail(struct worker *w, const char *what, size_t n)
{
    if (w->errors++ < 5)
        fprintf(stderr, "thread %u: %s (n=%zu)\n", w->index, what, n);
}

static void mix(struct worker *w, uint64_t v)
{
    w->checksum = (w->checksum ^ v) * 0x100000001B3ULL;
}

/* Writes the pattern at both ends of a block. */
static void fill(struct block *b)
{
    size_t k = b->n < EDGE ? b->n : EDGE;
    for (size_t i = 0; i < k; i++)
        b->p[i] = pattern(b->tag, i);
    for (size_t i = b->n - k; i < b->n; i++)
        b->p[i] = pattern(b->tag, i);
}

/* Checks the pattern in the first `n` bytes' ends and folds it into the checksum. */
static void verify(struct worker *w, const struct block *b, size_t n)
{
    size_t k = n < EDGE ? n : EDGE;
    for (size_t i = 0; i < k; i++) {
        if (b->p[i] != pattern(b->tag, i)) {
            fail(w, "block contents changed", b->n);
            return;
        }
        mix(w, b->p[i]);
    }
    if (n == b->n)
        for (size_t i = n - k; i < n; i++)
            if (b->p[i] != pattern(b->tag, i)) {
                fail(w, "block tail changed", b->n);
                return;
            }
}

static void check_zero(struct worker *w, const unsigned char *p, size_t n)
{
    size_t k = n < EDGE ? n : EDGE;
    for (size_t i = 0; i < k; i++)
        if (p[i] || p[n - 1 - i]) {
            fail(w, "calloc memory not zero", n);
            return;
        }
}

/* The usable size itself depends on the heap's history (glibc hands out a whole free
 * chunk when the remainder would be too small), so only the bound is checked. */
static void check_usable(struct worker *w, void *p, size_t n)
{
    if (malloc_usable_size(p) < n)
        fail(w, "malloc_usable_size smaller than the request", n);
}

static void check_aligned(struct worker *w, void *p, size_t align, size_t n)
{
    if ((uintptr_t)p % align)
        fail(w, "misaligned block", n);
    check_usable(w, p, n);
}

static void allocate(struct worker *w, struct block *b)
{
    size_t n = pick_size(w);
    static const size_t aligns[] = {16, 32, 64, 256, 4096};
    size_t align = aligns[next_rand(w) % 5];
    unsigned kind = (unsigned)(next_rand(w) % 10);
    void *p = NULL;
    errno = 12345;
    switch (kind) {
    case 0:
    case 1:
        p = malloc(n);
        if (p)
            check_usable(w, p, n);
        break;
    case 2:
        p = calloc(1 + n % 7, n / (1 + n % 7) + 1);
        if (p) {
            n = (1 + n % 7) * (n / (1 + n % 7) + 1);
            check_zero(w, p, n);
            check_usable(w, p, n);
        }
        break;
    case 3:
        p = realloc(NULL, n);
        if (p)
            check_usable(w, p, n);
        break;
    case 4:
        p = reallocarray(NULL, n, 1);
        if (p)
            check_usable(w, p, n);
        break;
    case 5: {
        int rc = posix_memalign(&p, align, n);
        if (rc) {
            fail(w, "posix_memalign failed", n);
            p = NULL;
        } else
            check_aligned(w, p, align, n);
        break;
    }
    case 6:
        p = aligned_alloc(align, (n + align - 1) / align * align);
        if (p) {
            n = (n + align - 1) / align * align;
            check_aligned(w, p, align, n);
        }
        break;
    case 7:
        p = memalign(align, n);
        if (p)
            check_aligned(w, p, align, n);
        break;
    case 8:
        p = valloc(n);
        if (p)
            check_aligned(w, p, page_size, n);
        break;
    default:
        p = no_pvalloc ? valloc((n + page_size - 1) / page_size * page_size) : pvalloc(n);
        if (p) {
            n = (n + page_size - 1) / page_size * page_size;
            check_aligned(w, p, page_size, n);
        }
        break;
    }
    if (!p) {
        fail(w, "allocation failed", n);
        return;
    }
    if (errno != 12345)
        fail(w, "successful allocation changed errno", n);
    b->p = p;
    b->n = n;
    b->tag = (unsigned)next_rand(w);
    fill(b);
    w->allocs++;
    mix(w, kind * 1000003u + n);
}

static void reallocate(struct worker *w, struct block *b)
{
    unsigned how = (unsigned)(next_rand(w) % 20);
    if (how == 0) {
        /* realloc(p, 0): glibc frees the block and returns NULL. */
        verify(w, b, b->n);
        void *q = realloc(b->p, 0);
        w->zero_reallocs++;
        mix(w, q == NULL);
        free(q);
        b->p = NULL;
        return;
    }
    size_t n = how < 10 ? b->n + pick_size(w) : 1 + b->n / 2; /* grow or shrink */
    size_t keep = n < b->n ? n : b->n;
    void *q = how % 3 ? realloc(b->p, n) : reallocarray(b->p, 1, n);
    if (!q) {
        fail(w, "realloc failed", n);
        return;
    }
    b->p = q;
    verify(w, b, keep);
    b->n = n;
    b->tag = (unsigned)next_rand(w);
    fill(b);
    check_usable(w, q, n);
    w->reallocs++;
}

static void *run(void *arg)
{
    struct worker *w = arg;
    for (unsigned op = 0; op < OPS; op++) {
        struct block *b = &w->slots[next_rand(w) % SLOTS];
        if (!b->p) {
            allocate(w, b);
        } else if (next_rand(w) % 4 == 0) {
            reallocate(w, b);
        } else {
            verify(w, b, b->n);
            free(b->p);
            b->p = NULL;
            w->frees++;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    no_pvalloc = argc > 1 && !strcmp(argv[1], "no-pvalloc");
    page_size = (size_t)sysconf(_SC_PAGESIZE);
    pthread_t tids[THREADS];
    for (unsigned i = 0; i < THREADS; i++) {
        workers[i].index = i;
        workers[i].rng = 0x9E3779B97F4A7C15ULL * (i + 1);
        workers[i].checksum = 0xCBF29CE484222325ULL;
        if (pthread_create(&tids[i], NULL, run, &workers[i]) != 0) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    }
    uint64_t errors = 0;
    for (unsigned i = 0; i < THREADS; i++) {
        pthread_join(tids[i], NULL);
        struct worker *w = &workers[i];
        unsigned left = 0;
        for (unsigned s = 0; s < SLOTS; s++)
            if (w->slots[s].p) {
                verify(w, &w->slots[s], w->slots[s].n);
                free(w->slots[s].p); /* freed by another thread than the allocator */
                left++;
            }
        printf("thread %u: allocs=%" PRIu64 " frees=%" PRIu64 " reallocs=%" PRIu64
               " realloc0=%" PRIu64 " left=%u checksum=%016" PRIx64
               " errors=%" PRIu64 "\n",
               i, w->allocs, w->frees, w->reallocs, w->zero_reallocs, left,
               w->checksum, w->errors);
        errors += w->errors;
    }
    return errors ? 1 : 0;
}
