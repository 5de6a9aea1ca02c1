/* SPDX-License-Identifier: MIT */
/*
 * The Zend Memory Manager hooks: PHP allocates nearly everything (strings, arrays, objects,
 * the VM's frames) with emalloc() from its own heap, carved out of 2 MiB chunks that it maps
 * with mmap, so libmemprof's malloc backends never see those blocks. We install custom
 * handlers on the request's heap (zend_mm_set_custom_handlers) that forward to the same
 * heap's own allocator (_zend_mm_alloc/_free/_realloc, which do not look at the custom
 * handlers) and charge each request to a byte countdown (memprof_sample_interval() /
 * memprof_report_sampled(), runtime.h). Hooking the heap itself rather than swapping in a
 * proxy heap keeps memory_get_usage(), memory_limit and the heap's own accounting intact.
 * Persistent allocations (pemalloc, extensions' own malloc) reach malloc and are sampled by
 * the library's GOT backend; the Zend MM's chunks come from mmap, so nothing is counted twice.
 *
 * Cost: an allocation that is not sampled pays the indirect call PHP makes to a custom
 * handler, a compare and a subtraction, and the non-inlined entry into the Zend MM. A free
 * must know whether its block was sampled: a small open-addressing set of the sampled blocks
 * still live answers that with one multiply and one load in the usual case (an empty slot),
 * so memprof_report_free() is called only for blocks that were sampled.
 *
 * The end of a request: zend_mm_shutdown() does nothing to a heap with custom handlers but
 * call its free handler on the heap, so the hooks come off in RSHUTDOWN, before the engine's
 * deactivation; the heap then releases the request's memory in bulk, with no free per block,
 * so every sampled block still live is reported freed at that point.
 *
 * Threads: Debian's PHP is NTS, one request per process at a time, and the Zend heap is only
 * used by the thread that runs PHP; the countdown and the set are plain globals (under ZTS
 * they are thread-local, as the heap is).
 */
#include "binding.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#ifdef ZTS
#define MPPHP_TLS __thread
#else
#define MPPHP_TLS
#endif

/* While the engine does not sample, ask it again after this many bytes. */
#define IDLE_POLL (64u << 10)

static MPPHP_TLS zend_mm_heap *hooked;

/* ---- the sampled-block set --------------------------------------------------------------
 * Linear probing over block addresses, 0 = empty, grown at half load, removal by backward
 * shift (no tombstones, so a lookup of an unsampled block stops at the first empty slot). */

static MPPHP_TLS uintptr_t *set_slots;
static MPPHP_TLS size_t set_mask; /* capacity - 1 */
static MPPHP_TLS size_t set_count;

static inline size_t set_home(uintptr_t p)
{
    return (size_t)(((uint64_t)(p >> 3) * 0x9e3779b97f4a7c15ull) >> 32) & set_mask;
}

/* The set's storage comes from mmap, not malloc: it grows just after a sample is reported,
 * outside the profiler's re-entrancy guard, and a malloc there would be sampled by the GOT
 * backend as an allocation of the PHP code running (its first 8 KiB outliving every block of
 * that code). mmap's pages are zero, as the empty set needs. */
static bool set_grow(void)
{
    size_t cap = set_slots ? (set_mask + 1) * 2 : 1024;
    uintptr_t *slots =
        mmap(NULL, cap * sizeof *slots, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (slots == MAP_FAILED)
        return false;
    uintptr_t *old = set_slots;
    size_t old_cap = old ? set_mask + 1 : 0;
    set_slots = slots;
    set_mask = cap - 1;
    for (size_t i = 0; i < old_cap; i++) {
        if (!old[i])
            continue;
        size_t at = set_home(old[i]);
        while (set_slots[at])
            at = (at + 1) & set_mask;
        set_slots[at] = old[i];
    }
    if (old)
        munmap(old, old_cap * sizeof *old);
    return true;
}

static bool set_add(uintptr_t p)
{
    if ((set_count + 1) * 2 > (set_slots ? set_mask + 1 : 0) && !set_grow())
        return false;
    size_t at = set_home(p);
    while (set_slots[at])
        at = (at + 1) & set_mask;
    set_slots[at] = p;
    set_count++;
    return true;
}

/* Removes p if present; true if it was. */
static bool set_remove(uintptr_t p)
{
    size_t at = set_home(p);
    for (;;) {
        uintptr_t v = set_slots[at];
        if (!v)
            return false;
        if (v == p)
            break;
        at = (at + 1) & set_mask;
    }
    /* Backward shift: move later entries of the cluster into the hole when their home
     * slot does not lie cyclically in (hole, their slot]. */
    size_t hole = at;
    for (size_t j = (hole + 1) & set_mask; set_slots[j]; j = (j + 1) & set_mask) {
        size_t home = set_home(set_slots[j]);
        bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            set_slots[hole] = set_slots[j];
            hole = j;
        }
    }
    set_slots[hole] = 0;
    set_count--;
    return true;
}

/* The fast test of the free path. */
static inline bool maybe_sampled(const void *p)
{
    return set_count && set_slots[set_home((uintptr_t)p)];
}

static void forget(const void *p)
{
    if (set_remove((uintptr_t)p))
        memprof_report_free((uint64_t)(uintptr_t)p);
}

/* ---- the countdown ----------------------------------------------------------------------
 * Bytes to the next sample point, as runtime.h describes; 0 with `idle` when none is drawn
 * (the engine was not sampling when last asked). */

static MPPHP_TLS uint64_t countdown;
static MPPHP_TLS bool idle = true;

/* The countdown ran out within a request of `size` bytes (size >= countdown) and `p` is the
 * block: samples it if a sample point falls within it, and draws the next countdown. Named
 * for what it is because it is the innermost native frame of every sample of the Zend heap,
 * which the text and HTML outputs show as the site's label. Out of line, so that the hot
 * handlers are a test and a tail call. */
__attribute__((noinline, cold)) static void *emalloc_sampled(void *p, size_t size)
{
    if (!p)
        return p;
    if (idle) {
        uint64_t c = memprof_sample_interval();
        if (c == 0) {
            countdown = IDLE_POLL;
            return p;
        }
        idle = false;
        if (c > size) {
            countdown = c - size;
            return p;
        }
    }
    uint64_t id = (uint64_t)(uintptr_t)p;
    if (memprof_report_sampled(id, size) == 1 && !set_add((uintptr_t)p))
        memprof_report_free(id); /* its free could not be tracked: drop the sample */
    uint64_t c = memprof_sample_interval();
    idle = c == 0;
    countdown = c ? c : IDLE_POLL;
    return p;
}

void mpphp_heap_rearm(void)
{
    idle = true;
    countdown = 0;
}

/* ---- the handlers ------------------------------------------------------------------------
 * The usual case of each is a compare and a tail call into the Zend MM; the rest is out of
 * line (cold), so that the compiler saves no registers for it. */

static void *hook_malloc(size_t size)
{
    if (EXPECTED(size < countdown)) {
        countdown -= size;
        return _zend_mm_alloc(hooked, size ZEND_FILE_LINE_CC ZEND_FILE_LINE_EMPTY_CC);
    }
    return emalloc_sampled(_zend_mm_alloc(hooked, size ZEND_FILE_LINE_CC ZEND_FILE_LINE_EMPTY_CC),
                           size);
}

__attribute__((noinline, cold)) static void free_sampled(void *p)
{
    forget(p);
    _zend_mm_free(hooked, p ZEND_FILE_LINE_CC ZEND_FILE_LINE_EMPTY_CC);
}

static void hook_free(void *p)
{
    if (UNEXPECTED(maybe_sampled(p)))
        free_sampled(p);
    else
        _zend_mm_free(hooked, p ZEND_FILE_LINE_CC ZEND_FILE_LINE_EMPTY_CC);
}

static void *hook_realloc(void *p, size_t size)
{
    /* The old block ends here, the new one is a new allocation of `size` bytes (also when it
     * stays in place): the library treats realloc the same way. */
    if (p && UNEXPECTED(maybe_sampled(p)))
        forget(p);
    void *q = _zend_mm_realloc(hooked, p, size ZEND_FILE_LINE_CC ZEND_FILE_LINE_EMPTY_CC);
    if (EXPECTED(size < countdown)) {
        countdown -= size;
        return q;
    }
    return emalloc_sampled(q, size);
}

bool mpphp_heap_hook(void)
{
    if (hooked)
        return true;
    zend_mm_heap *heap = zend_mm_get_heap();
    if (!heap || zend_mm_is_custom_heap(heap))
        return false;
    hooked = heap;
    zend_mm_set_custom_handlers(heap, hook_malloc, hook_free, hook_realloc);
    return true;
}

void mpphp_heap_unhook(void)
{
    if (!hooked)
        return;
    zend_mm_set_custom_handlers(hooked, NULL, NULL, NULL);
    hooked = NULL;
    if (set_slots) {
        for (size_t i = 0; i <= set_mask; i++) {
            if (set_slots[i]) {
                memprof_report_free((uint64_t)set_slots[i]);
                set_slots[i] = 0;
            }
        }
    }
    set_count = 0;
}
