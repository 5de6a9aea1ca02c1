/* SPDX-License-Identifier: MIT */
/*
 * The lifetime buckets of freed samples, shared by the engine (which counts into them), the
 * profile model and the API (which read quantiles out of them): bucket 0 holds lifetimes
 * under 1 us, bucket b in 1 .. MEMPROF_LIFETIME_BUCKETS - 2 those in [4^(b-1), 4^b) us, the
 * last one the rest (4^14 us, about 4.5 minutes, or more). One definition, so the edges a
 * site's histogram was counted with are the edges it is read with.
 */
#ifndef MEMPROF_COMMON_LIFETIME_H
#define MEMPROF_COMMON_LIFETIME_H

#include <stdint.h>

#define MEMPROF_LIFETIME_BUCKETS 16u

/* A bucket's upper edge in nanoseconds (1 us * 4^b); UINT64_MAX for the last, open one. */
static inline uint64_t memprof__lifetime_bucket_end_ns(unsigned b)
{
    return b + 1 < MEMPROF_LIFETIME_BUCKETS ? (uint64_t)1000 << (2 * b) : UINT64_MAX;
}

/* The bucket a lifetime of @ns nanoseconds falls in. */
static inline unsigned memprof__lifetime_bucket(uint64_t ns)
{
    unsigned b = 0;
    while (b < MEMPROF_LIFETIME_BUCKETS - 1 && ns >= memprof__lifetime_bucket_end_ns(b))
        b++;
    return b;
}

/* The q-quantile (0 < q < 1) of a lifetime histogram, as the upper edge of the bucket it
 * falls in, in nanoseconds; 0 for an empty histogram. */
static inline uint64_t memprof__lifetime_quantile(const uint32_t counts[MEMPROF_LIFETIME_BUCKETS],
                                                  double q)
{
    uint64_t total = 0, seen = 0;
    for (unsigned b = 0; b < MEMPROF_LIFETIME_BUCKETS; b++)
        total += counts[b];
    for (unsigned b = 0; b < MEMPROF_LIFETIME_BUCKETS && total; b++) {
        seen += counts[b];
        if ((double)seen >= q * (double)total && counts[b])
            return memprof__lifetime_bucket_end_ns(b);
    }
    return 0;
}

#endif
