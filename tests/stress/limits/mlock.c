/* SPDX-License-Identifier: MIT */
/*
 * A program that locks its memory with mlockall(MCL_CURRENT | MCL_FUTURE) (real-time code,
 * cryptsetup, chronyd -m) gets what it asked for, and no more: its own mappings are faulted
 * in and locked, later ones too, but the profiler's tables and sample heap (hundreds of MiB
 * and 27 GiB of reserved address space) are not faulted in. Without that care the kernel
 * would try to make all of it resident, and the program would be killed for lack of memory.
 * argv: BACKEND, "preload" (LD_PRELOAD, MEMPROF_START=0) or "got" (no plugin); the rate is
 * MEMPROF_RATE. Needs the right to lock that much (root, or CAP_IPC_LOCK): skipped otherwise.
 */
#include "limits.h"

#include <sys/mman.h>
#include <unistd.h>

#define BEFORE ((size_t)32 << 20) /* mapped, not touched, before mlockall */
#define AFTER                                                                                      \
    ((size_t)16 << 20)         /* mapped, not touched, after it (mmap: a sampled malloc            \
                                  block would come from the sample heap, whose fresh               \
                                  slots are locked as they are touched) */
#define SLACK ((long)64 << 20) /* what else may become resident */

/* VmRSS in bytes. */
static long rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    CHECK(f != NULL, "cannot read /proc/self/status");
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1)
            break;
    fclose(f);
    CHECK(kib >= 0, "no VmRSS in /proc/self/status");
    return kib * 1024;
}

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: %s preload|got", argv[0]);
    limits_expect_backend(argv[1]);
    if (geteuid() != 0) {
        printf("skipped: locking the profiler's address space needs root or CAP_IPC_LOCK\n");
        return LIMITS_SKIP;
    }
    memprof_config c;
    memprof_config_init(&c);
    c.sampling_rate = limits_rate();
    limits_start(&c);
    /* The call must reach the profiler's mlockall, or a regression would lock 27 GiB. */
    int (*volatile lock_all)(int) = mlockall;
    Dl_info info;
    CHECK(dladdr((void *)lock_all, &info) && info.dli_fname &&
              strstr(info.dli_fname, "libmemprof") != NULL,
          "mlockall is %s's, not the profiler's", info.dli_fname ? info.dli_fname : "nobody");

    void *(*volatile alloc)(size_t) = malloc; /* not dropped by the compiler */
    char *before = alloc(BEFORE);
    CHECK(before != NULL, "malloc failed");
    long r0 = rss();
    CHECK(lock_all(MCL_CURRENT | MCL_FUTURE) == 0, "mlockall: %s", strerror(errno));
    long r1 = rss();
    printf("resident: %ld MiB before mlockall, %ld MiB after\n", r0 >> 20, r1 >> 20);
    CHECK(r1 - r0 >= (long)BEFORE - (1 << 20), "the program's own block was not faulted in");
    CHECK(r1 - r0 <= (long)BEFORE + SLACK, "the profiler's memory was faulted in");

    char *after = mmap(NULL, AFTER, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(after != MAP_FAILED, "mmap failed");
    long r2 = rss();
    printf("resident: %ld MiB after a later block\n", r2 >> 20);
    CHECK(r2 - r1 >= (long)AFTER - (1 << 20), "MCL_FUTURE did not fault in a later block");
    CHECK(munlockall() == 0, "munlockall: %s", strerror(errno));
    munmap(after, AFTER);
    free(before);
    return 0;
}
