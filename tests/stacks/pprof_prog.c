/* SPDX-License-Identifier: MIT */
/*
 * A plain program (no libmemprof API) built with -O2 -fomit-frame-pointer -g, with a chain
 * of noinline functions and an always-inline wrapper, profiled by `memprof run`; the
 * resulting pprof file is checked with go tool pprof (memprof_run_pprof.sh).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../keep_frame.h"

static void *keep[3000];

TEST_KEEP_FRAME static void *grab_bytes(size_t n)
{
    void *p = malloc(n);
    memset(p, 7, n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static inline __attribute__((always_inline)) void fill_table(int from, int count, size_t n)
{
    for (int i = from; i < from + count; i++)
        keep[i] = grab_bytes(n);
}

TEST_KEEP_FRAME static void load_table(void)
{
    fill_table(0, 1500, 40000);
    __asm__ volatile("" ::: "memory");
}

TEST_KEEP_FRAME static void load_cache(void)
{
    for (int i = 1500; i < 3000; i++)
        keep[i] = grab_bytes(20000);
    __asm__ volatile("" ::: "memory");
}

int main(void)
{
    load_table();
    load_cache();
    printf("kept %p\n", keep[0]);
    return 0; /* the blocks stay live: the exit-time profile shows them */
}
