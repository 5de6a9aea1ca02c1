/* SPDX-License-Identifier: MIT */
/*
 * Hash mixers shared by the core tables. Pointers returned by malloc have few significant
 * low bits and cluster in a few regions, so they are always passed through a full 64-bit
 * finaliser before being reduced to a table index.
 */
#ifndef MEMPROF_COMMON_HASH_H
#define MEMPROF_COMMON_HASH_H

#include <stdint.h>

/* MurmurHash3's fmix64 finaliser: every input bit affects every output bit. */
static inline uint64_t memprof__mix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

#endif
