/* SPDX-License-Identifier: MIT */
/*
 * Locked memory comes back when the block that holds it is freed, and calloc() zeroes
 * whatever a freed block left behind, as with glibc, whose large blocks are mappings of their
 * own that free() unmaps. Real-time code, key stores and password managers mlock() a buffer
 * they malloc()ed, or lock everything with mlockall(); an unprivileged program has
 * RLIMIT_MEMLOCK (8 MiB by default) for all of it.
 * argv: BACKEND CASE; BACKEND "plain" (no profiler), "preload" (LD_PRELOAD, MEMPROF_START=0)
 * or "got" (no plugin); the rate is MEMPROF_RATE (a plain number; unset: the default). CASE:
 *   mlock-free  blocks of 512 KiB to 3 MiB, filled, mlock()ed and freed: VmLck is back
 *               where it was after each free, and a calloc() of the same size reads zero;
 *   budget      with RLIMIT_MEMLOCK at 8 MiB and without CAP_IPC_LOCK (as root the
 *               program drops to nobody; skipped if it cannot), 3 MiB and 1.5 MiB blocks
 *               locked and freed, then a 6 MiB block must lock;
 *   mlockall    after mlockall(MCL_CURRENT | MCL_FUTURE) (skipped without the right to
 *               lock everything), blocks filled and freed, then calloc()ed again, read zero,
 *               and VmLck returns where it was after each free.
 * glibc's mmap threshold is fixed at 128 KiB (M_MMAP_THRESHOLD), which the sample heap's
 * large slots follow: by default glibc raises it to the size of each mapped block freed, up
 * to 32 MiB, and smaller blocks then come from its heap, where their pages keep their locks
 * after free() (as they would under the profiler).
 * Large blocks are sampled at every rate tested (the default rate samples a 1 MiB block
 * 86 % of the time; the cases use several). Before this (issue 18) mlock-free, budget and
 * mlockall failed under the plugin: the sample heap freed a large block with
 * MADV_DONTNEED, which the kernel refuses for locked pages, so the slot kept its lock and
 * its contents, and calloc() took a recycled large slot for zero.
 */
#include "limits.h"

#include <grp.h>
#include <malloc.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* VmLck of /proc/self/status in bytes. */
static long locked_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    CHECK(f != NULL, "cannot read /proc/self/status");
    char line[256];
    long kib = -1;
    while (kib < 0 && fgets(line, sizeof line, f))
        if (sscanf(line, "VmLck: %ld kB", &kib) != 1)
            kib = -1;
    fclose(f);
    CHECK(kib >= 0, "no VmLck in /proc/self/status");
    return kib * 1024;
}

void *locked_alloc(size_t n, bool zero);

/* Not inlined, and through volatile pointers: the compiler must not fuse or drop calls. */
__attribute__((noinline)) void *locked_alloc(size_t n, bool zero)
{
    void *(*volatile m)(size_t) = malloc;
    void *(*volatile c)(size_t, size_t) = calloc;
    return zero ? c(1, n) : m(n);
}

static void expect_zero(const unsigned char *p, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        CHECK(p[i] == 0, "%s: byte %zu of %zu is %#x, not 0", what, i, n, p[i]);
}

/* What else may become locked while a block is allocated and freed under MCL_FUTURE, which
 * locks every new mapping: the profiler's own (a size class's first 64 KiB for a sampled
 * block of the test's stdio, a table's next segment) and glibc's heap growing. Every block
 * checked is larger, so a block that kept its lock still fails. */
#define SLACK ((long)256 << 10)

/* A block of n bytes filled with 0xa5 and freed (locked meanwhile if `lock`), then
 * calloc(1, n), which must read zero; if `slack` >= 0, VmLck must be back where it was after
 * the free, give or take `slack` bytes (not checked in a first round under MCL_FUTURE, where
 * the profiler's tables first grow to the test's stacks). */
static void fill_free_calloc(size_t n, bool lock, long slack)
{
    long before = locked_bytes();
    unsigned char *p = locked_alloc(n, false);
    CHECK(p != NULL, "malloc(%zu) failed", n);
    memset(p, 0xa5, n);
    if (lock) {
        if (mlock(p, n) != 0) {
            printf("skipped: mlock of %zu KiB: %s\n", n >> 10, strerror(errno));
            exit(LIMITS_SKIP);
        }
        CHECK(locked_bytes() >= before + (long)n - 4096, "mlock did not lock the block");
    }
    free(p);
    long after = locked_bytes();
    CHECK(slack < 0 || after <= before + slack,
          "%zu KiB block: VmLck %ld KiB before, %ld KiB after its free", n >> 10, before >> 10,
          after >> 10);
    unsigned char *q = locked_alloc(n, true);
    CHECK(q != NULL, "calloc(1, %zu) failed", n);
    expect_zero(q, n, "calloc after a locked block was freed");
    free(q);
}

/* All above what glibc's top chunk may hold in a program this small, so that glibc maps
 * each of them (and the profiler's unsampled blocks behave the same). */
static const size_t sizes[] = {3 * MIB, 512 * KIB, MIB, 3 * MIB / 2 + 4000, 640 * KIB + 8, 3 * MIB};

/* Gives up CAP_IPC_LOCK, so that RLIMIT_MEMLOCK applies: as root, becomes nobody. */
static void unprivileged(rlim_t budget)
{
    struct rlimit lim;
    CHECK(getrlimit(RLIMIT_MEMLOCK, &lim) == 0, "getrlimit: %s", strerror(errno));
    if (lim.rlim_max != RLIM_INFINITY && lim.rlim_max < budget) {
        printf("skipped: RLIMIT_MEMLOCK's hard limit is below %llu KiB\n",
               (unsigned long long)budget >> 10);
        exit(LIMITS_SKIP);
    }
    lim.rlim_cur = lim.rlim_max = budget;
    CHECK(setrlimit(RLIMIT_MEMLOCK, &lim) == 0, "setrlimit: %s", strerror(errno));
    if (geteuid() == 0 && (setgroups(0, NULL) != 0 || setresgid(65534, 65534, 65534) != 0 ||
                           setresuid(65534, 65534, 65534) != 0)) {
        printf("skipped: cannot drop root: %s\n", strerror(errno));
        exit(LIMITS_SKIP);
    }
}

int main(int argc, char **argv)
{
    CHECK(argc == 3, "usage: %s plain|preload|got mlock-free|budget|mlockall", argv[0]);
    const char *backend = argv[1], *what = argv[2];
    bool plain = limits_expect_backend_or_plain(backend);
    CHECK(mallopt(M_MMAP_THRESHOLD, 128 * 1024) == 1, "mallopt failed");
    if (!plain)
        limits_start_at_rate();
    if (!strcmp(what, "mlock-free")) {
        for (int round = 0; round < 3; round++)
            for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
                fill_free_calloc(sizes[i], true, 0);
    } else if (!strcmp(what, "budget")) {
        unprivileged((rlim_t)8 * MIB);
        static const size_t before[] = {3 * MIB, 3 * MIB / 2, 3 * MIB, 3 * MIB / 2};
        for (size_t i = 0; i < sizeof before / sizeof *before; i++) {
            char *p = locked_alloc(before[i], false);
            CHECK(p != NULL, "malloc failed");
            memset(p, 1, before[i]);
            CHECK(mlock(p, before[i]) == 0, "mlock of %zu KiB (block %zu): %s (VmLck %ld KiB)",
                  before[i] >> 10, i, strerror(errno), locked_bytes() >> 10);
            free(p);
        }
        size_t n = 6 * MIB;
        char *p = locked_alloc(n, false);
        CHECK(p != NULL, "malloc failed");
        CHECK(mlock(p, n) == 0, "mlock of 6 MiB within an 8 MiB budget: %s (VmLck %ld KiB)",
              strerror(errno), locked_bytes() >> 10);
        CHECK(munlock(p, n) == 0, "munlock: %s", strerror(errno));
        free(p);
    } else if (!strcmp(what, "mlockall")) {
        if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) {
            printf("skipped: mlockall: %s\n", strerror(errno));
            return LIMITS_SKIP;
        }
        for (int round = 0; round < 3; round++)
            for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
                fill_free_calloc(sizes[i], false, round > 0 ? SLACK : -1);
        fill_free_calloc(3000, false, -1); /* a small block too (glibc's heap may grow) */
        CHECK(munlockall() == 0, "munlockall: %s", strerror(errno));
    } else {
        CHECK(0, "unknown case '%s'", what);
    }
    if (!plain)
        limits_print_stats("done");
    return 0;
}
