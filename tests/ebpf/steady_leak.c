/* SPDX-License-Identifier: MIT */
/*
 * A steady leaker among a start-up cache and churn, for the eBPF tests' leaks view: at
 * start-up cache_site fills a cache it keeps to the end (12.5 MiB at once); then, every
 * 10 ms for 150 rounds (about 1.5 s), leak_site loses a 64 KiB block and churn_site replaces
 * the oldest of a ring of 32 blocks of 64 KiB eight times (each lives about 40 ms). At exit
 * the cache, the leaked blocks and the ring are live: only leak_site's survivors are spread
 * over the run as a steady leak's are.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK       (64 << 10)
#define CACHE       200
#define ROUNDS      150
#define RING        32
#define CHURN_ROUND 8

static void *volatile sink; /* so no allocation is optimized away */

/* The three sites, external so that the compiler keeps their names; each marks its block
 * differently, so that it cannot fold them into one. */
void *cache_site(void);
void *leak_site(void);
void *churn_site(void);

static void *marked(void *p, char mark)
{
    if (!p)
        exit(1);
    memset(p, mark, 64);
    sink = p;
    return p;
}

__attribute__((noinline)) void *cache_site(void)
{
    return marked(malloc(BLOCK), 'c');
}

__attribute__((noinline)) void *leak_site(void)
{
    return marked(malloc(BLOCK), 'l');
}

__attribute__((noinline)) void *churn_site(void)
{
    return marked(malloc(BLOCK), 'r');
}

int main(void)
{
    static void *cache[CACHE], *ring[RING];
    for (int i = 0; i < CACHE; i++)
        cache[i] = cache_site();
    unsigned next = 0;
    for (int r = 0; r < ROUNDS; r++) {
        leak_site(); /* never freed */
        for (int c = 0; c < CHURN_ROUND; c++, next = (next + 1) % RING) {
            free(ring[next]);
            ring[next] = churn_site();
        }
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
    }
    sink = cache[0];
    sink = ring[0];
    return 0;
}
