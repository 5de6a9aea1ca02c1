/* SPDX-License-Identifier: MIT */
/*
 * The workload of bench/ebpf_cost.py: PAIRS malloc+free pairs of SIZE bytes (default
 * 2,000,000 of 64 bytes), timed around the loop only, so process start-up and the probes'
 * attach are outside it. Prints "ns_per_pair N". Run plain, under `memprof run --ebpf`,
 * and beside a traced copy of itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    long pairs = argc > 1 ? atol(argv[1]) : 2000000;
    size_t size = argc > 2 ? (size_t)atol(argv[2]) : 64;
    if (pairs <= 0 || size == 0)
        return 2;
    /* volatile: the compiler may not drop a malloc whose block is never used. */
    void *volatile sink;
    double t0 = now_ns();
    for (long i = 0; i < pairs; i++) {
        sink = malloc(size);
        free(sink);
    }
    double t1 = now_ns();
    printf("ns_per_pair %.1f\n", (t1 - t0) / (double)pairs);
    return 0;
}
