/* SPDX-License-Identifier: MIT */
/*
 * The program the symbolization tests profile: one 64 MiB block from big_block() and 63
 * page-sized ones from level3_small(), which reaches malloc through an inlined helper. The
 * big block is the profile's largest site, so every way of naming the profile (in the
 * process, `memprof report --symbolize`, pprof with the binary, addr2line) must name that
 * site big_block at the line marked BIG; a mapping computed wrong names a neighbour.
 */
#include <stdlib.h>
#include <string.h>

void *big_block(size_t n);
void *level3_small(size_t n);

static inline __attribute__((always_inline)) void *small_helper(size_t n)
{
    return malloc(n); /* SMALL */
}

__attribute__((noinline)) void *big_block(size_t n)
{
    void *p = malloc(n); /* BIG */
    if (p)
        memset(p, 1, n);
    return p;
}

__attribute__((noinline)) void *level3_small(size_t n)
{
    void *p = small_helper(n);
    if (p)
        memset(p, 2, n);
    return p;
}

static void *volatile keep[64];

int main(void)
{
    keep[0] = big_block((size_t)64 << 20);
    for (int i = 1; i < 64; i++)
        keep[i] = level3_small(4096);
    return 0;
}
