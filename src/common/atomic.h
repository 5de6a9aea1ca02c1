/* SPDX-License-Identifier: MIT */
/*
 * C11 atomics with the memory order in the name (after mimalloc's mi_atomic_*), so that
 * every access states the ordering it relies on and a reader can check it against the
 * invariants written beside each lock-free structure.
 */
#ifndef MEMPROF_COMMON_ATOMIC_H
#define MEMPROF_COMMON_ATOMIC_H

#include <stdatomic.h>

#define memprof_atomic_load_relaxed(p)     atomic_load_explicit((p), memory_order_relaxed)
#define memprof_atomic_load_acquire(p)     atomic_load_explicit((p), memory_order_acquire)
#define memprof_atomic_load_seqcst(p)      atomic_load_explicit((p), memory_order_seq_cst)
#define memprof_atomic_store_relaxed(p, v) atomic_store_explicit((p), (v), memory_order_relaxed)
#define memprof_atomic_store_release(p, v) atomic_store_explicit((p), (v), memory_order_release)
#define memprof_atomic_store_seqcst(p, v)  atomic_store_explicit((p), (v), memory_order_seq_cst)
#define memprof_atomic_add_relaxed(p, v)   atomic_fetch_add_explicit((p), (v), memory_order_relaxed)
#define memprof_atomic_add_release(p, v)   atomic_fetch_add_explicit((p), (v), memory_order_release)
#define memprof_atomic_sub_relaxed(p, v)   atomic_fetch_sub_explicit((p), (v), memory_order_relaxed)
#define memprof_atomic_or_relaxed(p, v)    atomic_fetch_or_explicit((p), (v), memory_order_relaxed)
#define memprof_atomic_or_acqrel(p, v)     atomic_fetch_or_explicit((p), (v), memory_order_acq_rel)
#define memprof_atomic_or_seqcst(p, v)     atomic_fetch_or_explicit((p), (v), memory_order_seq_cst)
#define memprof_atomic_and_relaxed(p, v)   atomic_fetch_and_explicit((p), (v), memory_order_relaxed)
#define memprof_atomic_and_release(p, v)   atomic_fetch_and_explicit((p), (v), memory_order_release)
#define memprof_atomic_and_seqcst(p, v)    atomic_fetch_and_explicit((p), (v), memory_order_seq_cst)
#define memprof_atomic_exchange_acqrel(p, v)                                                       \
    atomic_exchange_explicit((p), (v), memory_order_acq_rel)
/* Strong CAS: *expected is updated with the current value on failure. The name gives the
 * success order; the failure order is the strongest one a failed load may have (acquire
 * for acq_rel and release, the same order otherwise). */
#define memprof_atomic_cas_relaxed(p, expected, desired)                                           \
    atomic_compare_exchange_strong_explicit((p), (expected), (desired), memory_order_relaxed,      \
                                            memory_order_relaxed)
#define memprof_atomic_cas_acquire(p, expected, desired)                                           \
    atomic_compare_exchange_strong_explicit((p), (expected), (desired), memory_order_acquire,      \
                                            memory_order_relaxed)
#define memprof_atomic_cas_release(p, expected, desired)                                           \
    atomic_compare_exchange_strong_explicit((p), (expected), (desired), memory_order_release,      \
                                            memory_order_acquire)
#define memprof_atomic_cas_acqrel(p, expected, desired)                                            \
    atomic_compare_exchange_strong_explicit((p), (expected), (desired), memory_order_acq_rel,      \
                                            memory_order_acquire)
#define memprof_atomic_cas_seqcst(p, expected, desired)                                            \
    atomic_compare_exchange_strong_explicit((p), (expected), (desired), memory_order_seq_cst,      \
                                            memory_order_seq_cst)
/* Weak CAS for retry loops; *expected is updated on failure; failure orders as above
 * (relaxed for acquire and release: the loops reload and retry). */
#define memprof_atomic_cas_weak_acquire(p, expected, desired)                                      \
    atomic_compare_exchange_weak_explicit((p), (expected), (desired), memory_order_acquire,        \
                                          memory_order_relaxed)
#define memprof_atomic_cas_weak_release(p, expected, desired)                                      \
    atomic_compare_exchange_weak_explicit((p), (expected), (desired), memory_order_release,        \
                                          memory_order_relaxed)
#define memprof_atomic_cas_weak_relaxed(p, expected, desired)                                      \
    atomic_compare_exchange_weak_explicit((p), (expected), (desired), memory_order_relaxed,        \
                                          memory_order_relaxed)
#define memprof_atomic_cas_weak_acqrel(p, expected, desired)                                       \
    atomic_compare_exchange_weak_explicit((p), (expected), (desired), memory_order_acq_rel,        \
                                          memory_order_acquire)
#define memprof_atomic_fence_acquire() atomic_thread_fence(memory_order_acquire)
#define memprof_atomic_fence_release() atomic_thread_fence(memory_order_release)
#define memprof_atomic_fence_seqcst()  atomic_thread_fence(memory_order_seq_cst)

#endif
