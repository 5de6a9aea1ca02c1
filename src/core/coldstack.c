/* SPDX-License-Identifier: MIT */
/*
 * The pool of stacks the sampled path records on, and the stack switch (design in
 * coldstack.h).
 */
#include "core/coldstack.h"

#include <stdatomic.h>

#include "common/atomic.h"
#include "core/platform.h"
#include "core/sampler.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define COLDSTACK_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define COLDSTACK_SANITIZED 1
#endif
#endif

#if defined(__x86_64__) && !defined(COLDSTACK_SANITIZED)
#define COLDSTACK_SWITCH 1
#else
#define COLDSTACK_SWITCH 0
#endif

#define WORDS         (MEMPROF_COLDSTACK_SLOTS / 64)
#define COLDSTACK_GAP ((size_t)2 << 20)

/* The pool's first slot (0: none), written once at init before any hook can sample. */
static uintptr_t pool;
/* Bit i of word i / 64 set: slot i is taken. */
static _Atomic uint64_t busy[WORDS];
#if COLDSTACK_SWITCH
/* Bit i set: slot i is mapped readable and writable (written by the slot's holder). */
static _Atomic uint64_t ready[WORDS];
/* One past the highest slot made ready: threads look for a ready slot below it first. */
static _Atomic unsigned ready_hi;
#endif

#if COLDSTACK_SWITCH
/* memprof__coldstack_call(fn, arg, top): calls fn(arg) with the stack pointer at `top`
 * (16-byte aligned) and returns with it restored. The program's stack pointer stays in the
 * frame pointer register, which the call frame information names as the frame's base
 * (CFA = rbp + 16), so an unwinder inside fn walks on into the caller's frames on the
 * program's stack. In the sampling section: its frame is skipped like the engine's own. */
__asm__(".pushsection memprof_sampling_text,\"ax\",@progbits\n"
        ".p2align 4\n"
        ".globl memprof__coldstack_call\n"
        ".hidden memprof__coldstack_call\n"
        ".type memprof__coldstack_call,@function\n"
        "memprof__coldstack_call:\n"
        ".cfi_startproc\n"
        "pushq %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbp, -16\n"
        "movq %rsp, %rbp\n"
        ".cfi_def_cfa_register %rbp\n"
        "movq %rdx, %rsp\n"
        "movq %rdi, %rax\n"
        "movq %rsi, %rdi\n"
        "call *%rax\n"
        "movq %rbp, %rsp\n"
        "popq %rbp\n"
        ".cfi_def_cfa %rsp, 8\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size memprof__coldstack_call, .-memprof__coldstack_call\n"
        ".popsection\n");
#else
/* Never called (there is no pool to claim a stack from), but the engine links to it. */
void memprof__coldstack_call(void (*fn)(void *), void *arg, uintptr_t top)
{
    (void)top;
    fn(arg);
}
#endif

size_t memprof__coldstack_init(void)
{
#if COLDSTACK_SWITCH
    if (pool)
        return 0;
    /* Address space only: a slot becomes private writable memory (what RLIMIT_DATA and the
     * commit charge count) when a thread first needs it. Inaccessible space either side: an
     * overflow of the outermost slots faults, and valgrind, which takes a stack pointer that
     * moves by less than 2 MB for a frame pushed or popped (not a switch), never finds the
     * program's stack that close. */
    size_t size = (size_t)MEMPROF_COLDSTACK_SLOTS * MEMPROF_COLDSTACK_SIZE;
    void *p = memprof__pf_reserve(size + 2 * COLDSTACK_GAP);
    if (!p)
        return 0;
    pool = (uintptr_t)p + COLDSTACK_GAP;
    return size;
#else
    return 0;
#endif
}

bool memprof__coldstack_range(uintptr_t *lo, uintptr_t *hi)
{
    if (!pool)
        return false;
    *lo = pool;
    *hi = pool + (size_t)MEMPROF_COLDSTACK_SLOTS * MEMPROF_COLDSTACK_SIZE;
    return true;
}

void memprof__coldstack_after_fork(void)
{
    for (unsigned w = 0; w < WORDS; w++)
        memprof_atomic_store_relaxed(&busy[w], 0);
}

#if COLDSTACK_SWITCH
/* Claims a free slot of word w among the bits `allowed`: the lowest at or above bit `from`,
 * else the lowest. Returns its index, or -1. */
MEMPROF_SAMPLING_TEXT static int claim_in_word(unsigned w, uint64_t allowed, unsigned from)
{
    uint64_t taken = memprof_atomic_load_relaxed(&busy[w]);
    for (;;) {
        uint64_t free_bits = ~taken & allowed;
        if (!free_bits)
            return -1;
        uint64_t above = free_bits & (~(uint64_t)0 << from);
        unsigned i = (unsigned)__builtin_ctzll(above ? above : free_bits);
        /* Acquire: the slot's last user's writes to its stack come before ours. */
        if (memprof_atomic_cas_weak_acquire(&busy[w], &taken, taken | ((uint64_t)1 << i)))
            return (int)(w * 64 + i);
    }
}

/* The bits of word w for slots below n. */
static inline uint64_t below(unsigned w, unsigned n)
{
    if (n <= w * 64)
        return 0;
    return n - w * 64 >= 64 ? ~(uint64_t)0 : ((uint64_t)1 << (n - w * 64)) - 1;
}

/* A slot for this thread, mapped, or -1. A thread first tries the ready slots from the one
 * its TLS block hashes to, so that it keeps finding the slot its core's cache holds; with
 * none free it takes the lowest slot not yet ready and maps it (one system call per slot in
 * the life of the process), so that the slots in use stay one run of pages. */
MEMPROF_SAMPLING_TEXT static int claim(void)
{
    unsigned n = memprof_atomic_load_acquire(&ready_hi);
    int i = -1;
    if (n) {
        uint64_t h = (uint64_t)(uintptr_t)&memprof__tls * 0x9E3779B97F4A7C15ull;
        unsigned first = (unsigned)(((h >> 32) * n) >> 32), words = (n + 63) / 64;
        for (unsigned k = 0; k < words && i < 0; k++) {
            unsigned w = (first / 64 + k) % words;
            i = claim_in_word(w, below(w, n), k == 0 ? first % 64 : 0);
        }
    }
    for (unsigned w = 0; w < WORDS && i < 0; w++)
        i = claim_in_word(w, ~below(w, n), 0);
    if (i < 0)
        return -1;
    uint64_t bit = (uint64_t)1 << (i % 64);
    if (!(memprof_atomic_load_relaxed(&ready[i / 64]) & bit)) {
        if (!memprof__pf_writable((void *)(pool + (size_t)i * MEMPROF_COLDSTACK_SIZE),
                                  MEMPROF_COLDSTACK_SIZE)) {
            /* A limit on private writable memory or the commit charge: not this time. */
            memprof_atomic_and_release(&busy[i / 64], ~bit);
            return -1;
        }
        memprof_atomic_or_relaxed(&ready[i / 64], bit);
        unsigned hi = memprof_atomic_load_relaxed(&ready_hi);
        while (hi < (unsigned)i + 1 &&
               !memprof_atomic_cas_weak_release(&ready_hi, &hi, (unsigned)i + 1))
            ;
    }
    return i;
}
#endif

MEMPROF_SAMPLING_TEXT uintptr_t memprof__coldstack_claim(void)
{
#if COLDSTACK_SWITCH
    int i = pool ? claim() : -1;
    if (i >= 0)
        return pool + (size_t)(i + 1) * MEMPROF_COLDSTACK_SIZE;
#endif
    return 0;
}

MEMPROF_SAMPLING_TEXT void memprof__coldstack_release(uintptr_t top)
{
    size_t i = (top - pool) / MEMPROF_COLDSTACK_SIZE - 1;
    memprof_atomic_and_release(&busy[i / 64], ~((uint64_t)1 << (i % 64)));
}
