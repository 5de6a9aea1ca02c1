/* SPDX-License-Identifier: MIT */
/*
 * The sampler's random numbers: xorshift128+ and exponential countdown draws. The
 * thread-local state itself is defined here too; the fast path is inline in sampler.h.
 */
#include "core/sampler.h"

#include "common/mathfn.h"

__thread struct memprof_tls memprof__tls __attribute__((tls_model("initial-exec")));

/* splitmix64 (Steele, Lea, Flood 2014): spreads a seed over both state words. */
static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void memprof__rng_seed(struct memprof_rng *rng, uint64_t seed)
{
    uint64_t x = seed;
    rng->s[0] = splitmix64(&x);
    rng->s[1] = splitmix64(&x);
    if ((rng->s[0] | rng->s[1]) == 0)
        rng->s[1] = 1;
}

uint64_t memprof__rng_next(struct memprof_rng *rng)
{
    uint64_t s1 = rng->s[0];
    const uint64_t s0 = rng->s[1];
    const uint64_t result = s0 + s1;
    rng->s[0] = s0;
    s1 ^= s1 << 23;
    rng->s[1] = s1 ^ s0 ^ (s1 >> 18) ^ (s0 >> 5);
    return result;
}

int64_t memprof__sampler_draw(struct memprof_rng *rng, uint64_t mean)
{
    if (mean <= 1) {
        /* Rate 1: floor(Exp(1)) + 1 still gives p(s) = 1 - e^-s; keep the general path. */
        mean = 1;
    }
    /* u uniform in (0, 1]: the top 53 bits plus one, scaled, so ln(u) is finite. */
    double u = (double)((memprof__rng_next(rng) >> 11) + 1) * 0x1.0p-53;
    double c = -memprof__ln(u) * (double)mean;
    if (c >= 9.0e18)
        c = 9.0e18;
    return (int64_t)c + 1;
}
