/* SPDX-License-Identifier: MIT */
/*
 * The sample heap: where the backends put the blocks they sample (unless
 * MEMPROF_SAMPLE_HEAP=0), so that free() can tell a sampled block from any other by its
 * address alone.
 *
 * Without it, every free() of a program with anything sampled live must ask the Bloom
 * filter (about 30 instructions and a cache line), and addresses that allocators hand out
 * again keep matching stale filter bits. With it, the free path is one subtraction and one
 * compare against a read-mostly range, whatever the number of threads or live samples;
 * jemalloc's and tcmalloc's samplers get the same effect by owning the allocator. Sampled
 * blocks are about one allocation in several hundred at the default rate, so this heap can
 * afford to be simple. The price: a plain block of this heap must never reach the real
 * allocator's free(), which aborts on it, so only a backend that sees every free uses plain
 * blocks (the preload plugin retargets libc's own free entries for the lookups that bypass
 * it); the GOT start uses framed ones (below).
 *
 * Layout. A window of MEMPROF_SHEAP_CLASSES sub-ranges of 1 GiB, one per power-of-two size
 * class from 16 bytes to 1 GiB (27 GiB of address space), so that a block's class is
 * (p - base) >> 30 and the free path's test is one range compare. A class-c sub-range is an
 * array of 2^c-byte slots, so every block is aligned to its class size (aligned requests take
 * the class of max(size, alignment)). Nothing of the window is reserved: it is a random
 * place far below where the kernel puts mappings of its own choosing (memprof__pf_window()),
 * and the heap maps the parts it uses there with MAP_FIXED_NOREPLACE, never over anyone
 * else's (under ThreadSanitizer, which dictates where memory lies, the window is a
 * reservation instead: platform.h). So the heap's address space, private writable memory
 * and commit charge follow its blocks -- a program that limits its own address space or
 * data size (RLIMIT_AS, RLIMIT_DATA), however it sets the limit, or runs under
 * vm.overcommit_memory=2, keeps its budget -- and a mapping that fails (a limit reached,
 * someone else's mapping in the way) only sends samples to the real allocator.
 *   Small classes (slots below MEMPROF_SHEAP_LARGE_MIN): each class maps its sub-range from
 *   the start as its bump index needs it, an eighth more each time (at least 64 KiB), and
 *   never unmaps it: freed slots go to the class's lock-free stack (Treiber) whose head packs
 *   the slot index + 1 with a tag against ABA; the link lives in the freed slot's first word
 *   (never unmapped, so a stale read is harmless and the tagged CAS rejects it). One thread
 *   grows a class at a time (a try-lock: the others' samples meanwhile come from the real
 *   allocator, nobody waits).
 *   Large classes (128 KiB and more, where glibc maps each block on its own): each block is
 *   a mapping of its own, the request rounded up to pages (not the slot: address space and
 *   commit charge are what the block needs), mapped when the block is handed out and
 *   unmapped when it is freed, which returns its memory, its address space and any lock the
 *   program put on it (mlock(), mlockall(MCL_CURRENT)), and makes a recycled slot read as
 *   zero; under mlockall(MCL_FUTURE) the kernel locks and faults in the new mapping as it
 *   would glibc's. The free list's links and each slot's state (handed out, pages mapped)
 *   live in a side table, since a free slot has no memory to hold them.
 * A slot is the heap's only below its class's bump index (small) or while its state says it
 * is handed out (large): anything else in the window is someone else's mapping, and
 * memprof__sheap_used() and memprof__sheap_holds() tell them apart. No locks on the block
 * paths: a fork or a signal at any point leaves a usable heap.
 *
 * A request the heap cannot serve (a class full, a block above 1 GiB, a mapping that fails,
 * no window) gets NULL, and the caller takes the block from the real allocator instead: such
 * samples are tracked by the heap map and the Bloom filter as before.
 *
 * Chunk framing (the GOT start). A backend that cannot see every free() -- code may hold
 * glibc's free() in a pointer taken before profiling started -- can still use the heap if
 * its blocks are ones glibc's free(), realloc() and malloc_usable_size() accept: glibc's
 * own mmap()ed chunks. With framing, every slot is at least a page and its block starts a
 * `lead` of 16 bytes (or the alignment asked for) into it, preceded by the two words of
 * glibc's chunk header: the lead minus 16 ("prev_size", the chunk's offset in its mapping)
 * and the slot size (a large block's: its mapped pages) minus that offset with the
 * IS_MMAPPED bit. glibc then frees such a block
 * by unmapping its slot (the heap never learns, and never reuses the slot) and reallocs it
 * with mremap(). Because a slot unmapped that way leaves a hole the kernel may reuse, a
 * framed block is only taken for the heap's when its header is intact
 * (memprof__sheap_holds()). The price is a page of memory per live block, which is why
 * the engine frames only at rates far above a page.
 */
#ifndef MEMPROF_CORE_SAMPLEHEAP_H
#define MEMPROF_CORE_SAMPLEHEAP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"
#include "core/platform.h"

#define MEMPROF_SHEAP_MIN_SHIFT   4u  /* 16-byte blocks, glibc's alignment */
#define MEMPROF_SHEAP_MAX_SHIFT   30u /* 1 GiB */
#define MEMPROF_SHEAP_RANGE_SHIFT 30u /* each class's sub-range */
#define MEMPROF_SHEAP_CLASSES     (MEMPROF_SHEAP_MAX_SHIFT - MEMPROF_SHEAP_MIN_SHIFT + 1)
/* Classes from here on map each block on its own (above). */
#define MEMPROF_SHEAP_LARGE_SHIFT 17u
#define MEMPROF_SHEAP_LARGE_MIN   ((size_t)1 << MEMPROF_SHEAP_LARGE_SHIFT)

struct memprof_sheap_class {
    _Alignas(64) _Atomic uint64_t free_head; /* (tag << 32) | (slot index + 1); low half 0 =
                                                empty. One class per cache line: threads
                                                sampling other sizes do not contend. */
    _Atomic uint64_t bumped;                 /* slots ever handed out from fresh memory, at
                                                most the class's capacity */
    _Atomic uint64_t mapped;                 /* small classes: bytes mapped from the class's
                                                start, published after the mapping */
    _Atomic uint32_t growing;                /* small classes: try-lock of the thread mapping
                                                more; | SHEAP_STUCK once someone else's
                                                mapping is in the way */
};

struct memprof_sheap {
    /* Read by every free(): `size` is 0 while there is no window, which makes
     * memprof__sheap_owns() false for every pointer, NULL included. */
    uintptr_t base;
    uintptr_t size;
    /* The classes' headers, followed by the large slots' states (a mapping of their own,
     * outside the window), so that this struct stays small on the free path's cache line. */
    struct memprof_sheap_class *classes;
    /* 0, or the page size when blocks are framed as glibc's mmap()ed chunks (above). */
    size_t frame;
};

/* Chooses the window and maps the classes' headers; `frame` is 0, or the page size to frame
 * every block as a glibc mmap()ed chunk (above). Returns 0, or -ENOMEM if no window is free
 * or the headers cannot be mapped; the heap then stays empty and serves nothing. Not
 * thread-safe: called once before any allocation can reach the heap. */
int memprof__sheap_init(struct memprof_sheap *h, size_t frame);
/* The parts of the window mapped for no block yet: each small class's mapping above its
 * bump index (from the next page). Writes at most `max` ranges to `out`
 * (MEMPROF_SHEAP_CLASSES suffice) and returns how many; 0 without a window. What lies below
 * the marks, and every large block, holds the program's sampled blocks, live or recycled. */
MEMPROF_INTERNAL size_t memprof__sheap_unused(const struct memprof_sheap *h,
                                              struct memprof_range *out, size_t max);
/* Unmaps everything. Only when no block can still be in use (tests). */
void memprof__sheap_destroy(struct memprof_sheap *h);
/* After fork(), in the child: a thread that was growing a class is gone, so its try-lock is
 * released. */
MEMPROF_INTERNAL void memprof__sheap_after_fork(struct memprof_sheap *h);

/* Whether p is a block of the heap (false for NULL). Inline: every free() asks. */
MEMPROF_INLINE bool memprof__sheap_owns(const struct memprof_sheap *h, const void *p)
{
    return (uintptr_t)p - h->base < h->size;
}

/* A block of at least n bytes aligned to `align` (a power of two; 0 or anything up to 16
 * means 16), zero-filled if `zero`. NULL if the heap cannot serve it: the caller uses the
 * real allocator. Lock-free; leaves errno alone; makes system calls only to map memory (a
 * small class growing, a large block). */
void *memprof__sheap_alloc(struct memprof_sheap *h, size_t n, size_t align, bool zero);
/* Returns a block of the heap. Lock-free; leaves errno alone; unmaps a large block (one
 * system call). */
void memprof__sheap_free(struct memprof_sheap *h, void *p);
/* Whether p, which memprof__sheap_owns(), lies in a slot the heap has handed out (below its
 * small class's bump index, or a large slot handed out and not freed): false for a block
 * someone else mapped in the window. Reads no memory at p, so it may be asked about a block
 * another thread is freeing. */
MEMPROF_INTERNAL bool memprof__sheap_used(const struct memprof_sheap *h, const void *p);
/* Whether p, which memprof__sheap_owns(), is a live-or-free block of the heap rather than
 * someone else's: memprof__sheap_used(), where the heap's blocks start, and with framing an
 * intact chunk header (not a block in a hole left by glibc's unmapping of a framed slot).
 * Reads the header: callers ask in cold paths only, about a block handed to free() or
 * realloc(), before handing it to the heap. */
MEMPROF_INTERNAL bool memprof__sheap_holds(const struct memprof_sheap *h, const void *p);
/* The usable size of a block of the heap: its slot size, or a large block's mapped pages,
 * less the lead if framed. */
MEMPROF_INTERNAL size_t memprof__sheap_usable(const struct memprof_sheap *h, const void *p);
/* Makes block p hold n bytes (n > 0) where it is, if n gets the same slot size: a large block
 * maps or unmaps pages at its end. False (nothing changed) if the class differs or the pages
 * cannot be mapped: realloc moves the block. */
MEMPROF_INTERNAL bool memprof__sheap_resize(struct memprof_sheap *h, void *p, size_t n);

#endif
