/* SPDX-License-Identifier: MIT */
/*
 * A C program the eBPF tests build statically with frame pointers (-static
 * -fno-omit-frame-pointer), so there is no libc.so to probe and nothing could be
 * preloaded: it holds 100 MiB allocated at one site (hold_c_site: 400 blocks of 256 KiB)
 * among churn (small blocks malloc'ed and freed), and the tests expect hold_c_site as the
 * top live site with about 100 MiB. It also keeps one 1 MiB block allocated by a function
 * built without frame pointers (GCC), as libc's own functions are: too small a share of the
 * profile for the summary to ask for a rebuild. With the argument "wait" it prints "ready"
 * and waits for a line on stdin before allocating, then "done" and waits for another before
 * exiting.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BIG_BLOCK  (256u << 10)
#define BIG_BLOCKS 400 /* 100 MiB */

static void *held[BIG_BLOCKS];

__attribute__((noinline)) static void hold_c_site(void)
{
    for (int i = 0; i < BIG_BLOCKS; i++) {
        held[i] = malloc(BIG_BLOCK);
        if (!held[i])
            exit(1);
        memset(held[i], 1, 64);
    }
}

#define SMALL_CACHE (1u << 20)

static void *small_cache;

#ifndef __clang__ /* clang has no per-function frame-pointer setting */
__attribute__((optimize("omit-frame-pointer")))
#endif
__attribute__((noinline)) static void
cache_without_frame_pointer(void)
{
    small_cache = malloc(SMALL_CACHE);
    if (!small_cache)
        exit(1);
    memset(small_cache, 1, 64);
}

__attribute__((noinline)) static unsigned churn(unsigned rounds)
{
    unsigned sum = 0, x = 12345;
    for (unsigned i = 0; i < rounds; i++) {
        x = x * 1103515245u + 12345u;
        size_t n = 16 + (x >> 8) % 4096;
        unsigned char *p = malloc(n);
        if (!p)
            exit(1);
        p[n - 1] = (unsigned char)x;
        sum += p[n - 1];
        free(p);
    }
    return sum;
}

static void wait_line(void)
{
    char line[16];
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin))
        exit(1);
}

int main(int argc, char **argv)
{
    int wait = argc > 1 && strcmp(argv[1], "wait") == 0;
    if (wait) {
        puts("ready");
        wait_line();
    }
    unsigned s = churn(20000);
    cache_without_frame_pointer();
    hold_c_site();
    s += churn(20000);
    printf("held %d blocks, churn %u\n", BIG_BLOCKS, s & 1);
    if (wait) {
        puts("done");
        wait_line();
    }
    return 0;
}
