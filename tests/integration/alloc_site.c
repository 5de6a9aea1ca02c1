/* SPDX-License-Identifier: MIT */
/*
 * A program whose heap at exit is dominated by one known call site, for the tests of the
 * exit-time profile (MEMPROF_OUTPUT): main calls itest_hold_blocks(), which allocates
 * 64 x 1 MiB and keeps the blocks live until exit, and itest_churn(), which allocates and
 * frees small blocks (noise that must not show as live). It prints "pid <pid>" so the
 * runner can check the %p substitution in the profile's file name, and exits with the
 * status given as argv[1] (default 0), so the runner can check that the exit-time profile
 * never changes it. With ITEST_CHDIR set it then changes to that directory, as a daemon
 * does, so the runner can check where a relative MEMPROF_OUTPUT goes. It does not link
 * libmemprof: it is profiled only through LD_PRELOAD.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "itest.h"

#define HELD 64

static void *held[HELD];

void itest_hold_blocks(void);
void itest_churn(void);

__attribute__((noinline)) void itest_hold_blocks(void)
{
    for (int i = 0; i < HELD; i++) {
        held[i] = malloc((size_t)1 << 20);
        CHECK(held[i] != NULL, "malloc(1 MiB) failed");
        itest_touch(held[i], (unsigned char)i);
    }
}

__attribute__((noinline)) void itest_churn(void)
{
    for (int i = 0; i < 20000; i++) {
        void *p = malloc(16 + (size_t)(i % 512));
        itest_touch(p, (unsigned char)i);
        free(p);
    }
}

int main(int argc, char **argv)
{
    int status = argc > 1 ? atoi(argv[1]) : 0;
    itest_hold_blocks();
    itest_churn();
    printf("pid %d\n", (int)getpid());
    const char *dir = getenv("ITEST_CHDIR");
    CHECK(!dir || chdir(dir) == 0, "chdir failed");
    return status; /* the blocks stay live: the profile is written after this */
}
