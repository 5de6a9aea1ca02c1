/* SPDX-License-Identifier: MIT */
/*
 * A workload that tunes and trims the allocator while it runs, for runs under the profiler
 * with glibc's malloc or with another allocator (jemalloc, tcmalloc) preloaded after the
 * plugin. It calls mallopt (mmap and trim thresholds, arena count, top pad, perturb), then
 * 4 threads allocate blocks of many sizes with every allocation function, fill and check
 * them, call malloc_usable_size, grow and shrink them with realloc, free them, and call
 * malloc_trim between rounds. It prints a checksum per thread, the same with and without
 * the profiler (runner.py compares the outputs).
 *
 * With --got it starts the profiler itself (no plugin: the GOT backend). Under another
 * allocator that must be refused with -ENOTSUP (its blocks must never reach glibc's free),
 * and the program carries on unprofiled; under glibc's malloc it must succeed. The rate is
 * MEMPROF_RATE (a plain number; unset: the default).
 */
#include "limits.h"

#include <malloc.h>
#include <pthread.h>
#include <unistd.h>

enum { THREADS = 4, ROUNDS = 6, BLOCKS = 600 };

struct blk {
    unsigned char *p;
    size_t n;
};

void *limits_alloc_any(unsigned kind, size_t n);

/* Allocates n bytes with one of the allocation functions (not pvalloc: jemalloc has none). */
__attribute__((noinline)) void *limits_alloc_any(unsigned kind, size_t n)
{
    void *p = NULL;
    switch (kind % 6) {
    case 0:
        return malloc(n);
    case 1:
        p = calloc(1, n);
        for (size_t i = 0; p && i < n; i += 97)
            CHECK(((unsigned char *)p)[i] == 0, "calloc returned dirty memory");
        return p;
    case 2:
        return posix_memalign(&p, 64, n) == 0 ? p : NULL;
    case 3:
        return aligned_alloc(256, (n + 255) & ~(size_t)255);
    case 4:
        return memalign(4096, n);
    default:
        return valloc(n);
    }
}

static void fill(struct blk *b, unsigned seed)
{
    for (size_t i = 0; i < b->n; i += 61)
        b->p[i] = (unsigned char)(seed + i);
}

static uint64_t verify(const struct blk *b, unsigned seed)
{
    uint64_t sum = 0;
    for (size_t i = 0; i < b->n; i += 61) {
        CHECK(b->p[i] == (unsigned char)(seed + i), "a block's contents changed");
        sum += b->p[i];
    }
    return sum;
}

static uint64_t sums[THREADS];

static void *worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t x = id * 0x9e3779b97f4a7c15u + 11, sum = 0;
    static __thread struct blk b[BLOCKS];
    for (unsigned r = 0; r < ROUNDS; r++) {
        for (unsigned i = 0; i < BLOCKS; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            /* Mostly small blocks, some above the mmap threshold. */
            b[i].n = x % 16 == 0 ? 70000 + x % 300000 : 1 + x % 3000;
            b[i].p = limits_alloc_any((unsigned)(x >> 32), b[i].n);
            CHECK(b[i].p, "allocation of %zu bytes failed", b[i].n);
            CHECK(malloc_usable_size(b[i].p) >= b[i].n, "malloc_usable_size too small");
            fill(&b[i], i + r);
        }
        for (unsigned i = 0; i < BLOCKS; i += 2) {
            sum += verify(&b[i], i + r);
            free(b[i].p);
            b[i].p = NULL;
        }
        if (id % 2 == 0)
            malloc_trim(0);
        for (unsigned i = 1; i < BLOCKS; i += 2) {
            sum += verify(&b[i], i + r);
            size_t n = i % 4 == 1 ? b[i].n * 3 + 100 : b[i].n / 2 + 1;
            unsigned char *q = realloc(b[i].p, n);
            CHECK(q, "realloc to %zu failed", n);
            size_t keep = n < b[i].n ? n : b[i].n;
            for (size_t k = 0; k < keep; k += 61)
                CHECK(q[k] == (unsigned char)(i + r + k), "realloc lost the contents");
            b[i].p = q;
            b[i].n = n;
            fill(&b[i], i * 7 + r);
            sum += verify(&b[i], i * 7 + r);
        }
        for (unsigned i = 1; i < BLOCKS; i += 2)
            free(b[i].p);
        malloc_trim(64 << 10);
    }
    sums[id] = sum;
    return NULL;
}

static int malloc_is_glibc(void)
{
    void *(*volatile m)(size_t) = malloc;
    Dl_info info;
    return dladdr((void *)m, &info) && info.dli_fname && strstr(info.dli_fname, "libc.so");
}

int main(int argc, char **argv)
{
    /* Before the GOT is patched, after which malloc's address is the GOT backend's hook. */
    int glibc = malloc_is_glibc();
    if (argc > 1 && !strcmp(argv[1], "--got")) {
        CHECK(!limits_preloaded(), "the plugin is loaded in a GOT run");
        int rc = memprof_init(limits_rate());
        CHECK(rc == 0, "memprof_init: %s", memprof_strerror(rc));
        rc = memprof_start();
        CHECK(rc == (glibc ? 0 : -ENOTSUP), "memprof_start with %s malloc: %s",
              glibc ? "glibc's" : "another", memprof_strerror(rc));
    }
    /* Values chosen to change glibc's behaviour; other allocators may ignore them. */
    mallopt(M_MMAP_THRESHOLD, 64 * 1024);
    mallopt(M_TRIM_THRESHOLD, 128 * 1024);
    mallopt(M_TOP_PAD, 0);
    mallopt(M_ARENA_MAX, 2);
    mallopt(M_PERTURB, 0x5a);
    /* glibc's own malloc is set up here, before the threads: when another allocator
     * (tcmalloc) is preloaded, glibc's malloc_trim() is the first call into it, and glibc
     * 2.36 sets itself up unsynchronised (ptmalloc_init), so several threads trimming at
     * once corrupt its arena count and crash at thread exit -- without any profiler too:
     * 43 of 300 runs of 8 threads calling malloc_trim(0) at once under tcmalloc alone. */
    malloc_trim(0);
    pthread_t t[THREADS];
    for (uintptr_t i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, worker, (void *)i) == 0, "pthread_create");
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    malloc_trim(0);
    for (int i = 0; i < THREADS; i++)
        printf("thread %d: checksum %llu\n", i, (unsigned long long)sums[i]);
    /* Checked, not printed: the output must equal the unprofiled run's. */
    memprof_stats s = limits_stats();
    if (limits_preloaded() || (argc > 1 && glibc))
        CHECK(s.state == MEMPROF_STATE_ACTIVE && s.total_samples > 0,
              "the profiler did not sample (state %u, %llu samples)", s.state,
              (unsigned long long)s.total_samples);
    else
        CHECK(s.total_samples == 0, "samples taken without a working backend");
    return 0;
}
