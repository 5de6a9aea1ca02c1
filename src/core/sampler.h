/* SPDX-License-Identifier: MIT */
/*
 * Per-thread Poisson sampler: the thread-local state and the inline fast path that every
 * allocation runs.
 *
 * Sampling is a Poisson process over allocated bytes with mean interval R (the sampling
 * rate). Each thread keeps a countdown C of bytes to the next sample point, drawn as
 * floor(Exp(R)) + 1. An allocation of s bytes is sampled when the sample point falls within
 * it, i.e. when C <= s, which happens with probability
 * p(s) = 1 - exp(-s / R) exactly for integer s. After a sample a fresh countdown is drawn;
 * after a miss the remainder C - s is again exponential (memorylessness), so allocations are
 * sampled independently and a sample of size s stands for s / p(s) bytes and 1 / p(s)
 * allocations (the Horvitz-Thompson weights; see estimate.h). This is the geometric
 * interval of jemalloc's prof_sample and tcmalloc's sampler, cf. Devroye, "Non-Uniform
 * Random Variate Generation" (1986), ch. 2.
 *
 * The fast path is one TLS compare, a well-predicted branch and a TLS store: no atomics,
 * no global loads. Anything else (seeding, state checks, rate changes) happens in the cold path.
 */
#ifndef MEMPROF_CORE_SAMPLER_H
#define MEMPROF_CORE_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"

/* xorshift128+ state (Vigna, "Further scramblings of Marsaglia's xorshift generators"). */
struct memprof_rng {
    uint64_t s[2];
};

/* Thread-local state. Kept small (initial-exec TLS is scarce when the library is dlopen'ed):
 * no frame buffers here, those live on the cold path's stack. Zero-initialised, which makes
 * a new thread's first allocation take the cold path, where the thread is seeded. */
struct memprof_tls {
    int64_t countdown; /* bytes until the next sample point; 0 = not drawn yet (cold path) */
    struct memprof_rng rng;
    uintptr_t stack_lo;  /* [stack_lo, stack_top): the mapping of the stack this thread */
    uintptr_t stack_top; /* last sampled on, for frame-pointer walks; 0, 0 = not known */
    uint32_t generation; /* engine generation the countdown was drawn for */
    uint8_t guard;       /* set while profiler code runs on this thread (re-entrancy); */
                         /* MEMPROF_GUARD_PRIVATE: and its allocations avoid the real one */
    uint8_t seeded;      /* rng has been seeded (cleared in a fork child) */
    uint16_t thread;     /* threads.h index; 0 = not registered, UINT16_MAX = registry full */
};

/* The guard's value on a thread whose own allocations must not enter the real allocator,
 * which it may have interrupted (a signal handler's exit()) holding its lock or in the middle
 * of changing it: they come from the sample heap when the engine has one (wrappers.h). Any
 * non-zero guard is a guard. */
#define MEMPROF_GUARD_PRIVATE 2

/* initial-exec: a __tls_get_addr call could itself allocate and recurse into the hooks. */
extern MEMPROF_INTERNAL __thread struct memprof_tls memprof__tls
    __attribute__((tls_model("initial-exec")));

/* Seeds a generator; two equal seeds give equal sequences. A zero seed is remapped, since
 * xorshift128+ must not start from the all-zero state. */
void memprof__rng_seed(struct memprof_rng *rng, uint64_t seed);
/* Next 64 random bits. */
uint64_t memprof__rng_next(struct memprof_rng *rng);
/* A countdown for mean interval `mean` bytes: floor(Exp(mean)) + 1, always >= 1. */
int64_t memprof__sampler_draw(struct memprof_rng *rng, uint64_t mean);

/* The allocation fast path: charges `size` bytes to the calling thread and says whether
 * the cold path (memprof__sample_begin) must run for this allocation, i.e. whether the next
 * sample point C falls within it (C <= size). The countdown is never negative: 0 means "not
 * drawn yet" and sends any allocation to the cold path, which draws a fresh countdown
 * whenever it returns, so the countdown is not charged on that branch. An unsigned compare
 * instead of a signed subtraction needs no saturation for sizes above INT64_MAX. */
MEMPROF_INLINE bool memprof__sampler_charge(size_t size)
{
    uint64_t c = (uint64_t)memprof__tls.countdown;
    if (MEMPROF_UNLIKELY((uint64_t)size >= c))
        return true;
    memprof__tls.countdown = (int64_t)(c - size);
    return false;
}

#endif
