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
 * Layout. One reservation of MEMPROF_SHEAP_CLASSES sub-ranges of 1 GiB, one per power-of-two
 * size class from 16 bytes to 1 GiB (27 GiB of address space, no memory until used). A class-c
 * sub-range is an array of 2^c-byte slots, so every block is aligned to its class size (aligned
 * requests take the class of max(size, alignment)), its class is (p - base) >> 30 and its usable
 * size 2^c. Slots are handed out from a per-class bump index, and freed slots go to a per-class
 * lock-free stack (Treiber) whose head packs the slot index + 1 with a tag against ABA; the link
 * lives in the freed slot's first word (the memory is never unmapped, so a stale read is harmless
 * and the tagged CAS rejects it). No locks: a fork or a signal at any point leaves a usable
 * heap. Pages are committed as blocks touch them; slots of MEMPROF_SHEAP_RELEASE_MIN bytes or
 * more give their pages back when freed (as glibc does for its mmap'ed chunks), made writable
 * again first (the program may have protected them, as it may glibc's mapped blocks), and keep
 * their links in an array after the class headers instead, so that nothing writes into them
 * once freed. The range is
 * left out of core dumps, but for each class's slots handed out so far, put back in steps of
 * 1 MiB as the bump index grows (the program's sampled blocks belong in its core).
 *
 * A request the heap cannot serve (a class full, a block above 1 GiB, no reservation) gets
 * NULL, and the caller takes the block from the real allocator instead: such samples are
 * tracked by the heap map and the Bloom filter as before.
 *
 * Sealing. The reservation counts against RLIMIT_AS like any mapping, and against
 * RLIMIT_DATA like any private writable one, so a program that limits its own address
 * space or data size after start-up (the heap is not reserved when a limit is already set) would
 * find its allocations failing far below its limit. Before such a limit takes effect the backends
 * seal the heap: each class stops taking fresh slots (its bump index gets a sealed bit, set by the
 * same compare-and-swap that bumps, so no thread can take a slot past the mark) and the part of its
 * sub-range above the last slot ever handed out is unmapped. Blocks already out and recycled slots
 * keep working. Addresses above a class's mark may then be mapped by anyone, which is why
 * memprof__sheap_used() and memprof__sheap_holds() compare a block's slot with the mark.
 *
 * Chunk framing (the GOT start). A backend that cannot see every free() -- code may hold
 * glibc's free() in a pointer taken before profiling started -- can still use the heap if
 * its blocks are ones glibc's free(), realloc() and malloc_usable_size() accept: glibc's
 * own mmap()ed chunks. With framing, every slot is at least a page and its block starts a
 * `lead` of 16 bytes (or the alignment asked for) into it, preceded by the two words of
 * glibc's chunk header: the lead minus 16 ("prev_size", the chunk's offset in its mapping)
 * and the slot size minus that offset with the IS_MMAPPED bit. glibc then frees such a block
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
#define MEMPROF_SHEAP_RELEASE_MIN ((size_t)128 * 1024)

struct memprof_sheap_class {
    _Alignas(64) _Atomic uint64_t free_head; /* (tag << 32) | (slot index + 1); low half 0 =
                                                empty. One class per cache line: threads
                                                sampling other sizes do not contend. */
    _Atomic uint64_t bumped;                 /* slots ever handed out from fresh memory, at
                                                most the class's capacity; | SHEAP_SEALED */
    _Atomic uint64_t dumped;                 /* bytes from the class's start put back into
                                                core dumps */
};

struct memprof_sheap {
    /* Read by every free(): `size` is 0 while there is no reservation, which makes
     * memprof__sheap_owns() false for every pointer, NULL included. */
    uintptr_t base;
    uintptr_t size;
    /* The classes' headers, in the reservation's last page (outside [base, base + size)),
     * so that this struct stays three words on the free path's cache line. */
    struct memprof_sheap_class *classes;
    /* 0, or the page size when blocks are framed as glibc's mmap()ed chunks (above). */
    size_t frame;
};

/* Reserves the address range; `frame` is 0, or the page size to frame every block as a
 * glibc mmap()ed chunk (above). Returns 0, or -ENOMEM if it cannot be had (the address space
 * or data size is limited by RLIMIT_AS or RLIMIT_DATA, or the mapping failed); the heap then stays
 * empty and serves nothing. Not thread-safe: called once before any allocation can reach the heap.
 */
int memprof__sheap_init(struct memprof_sheap *h, size_t frame);
/* The parts of the reservation no block has used yet: each class's sub-range above its bump
 * index (rounded up to 64 KiB). Writes at most `max` ranges to `out` (MEMPROF_SHEAP_CLASSES
 * suffice) and returns how many; 0 without a reservation. What lies below the marks holds
 * the program's sampled blocks, live or recycled. */
MEMPROF_INTERNAL size_t memprof__sheap_unused(const struct memprof_sheap *h,
                                              struct memprof_range *out, size_t max);
/* Unmaps the range. Only when no block can still be in use (tests). */
void memprof__sheap_destroy(struct memprof_sheap *h);

/* Whether p is a block of the heap (false for NULL). Inline: every free() asks. */
MEMPROF_INLINE bool memprof__sheap_owns(const struct memprof_sheap *h, const void *p)
{
    return (uintptr_t)p - h->base < h->size;
}

/* A block of at least n bytes aligned to `align` (a power of two; 0 or anything up to 16
 * means 16), zero-filled if `zero`. NULL if the heap cannot serve it: the caller uses the
 * real allocator. Lock-free; leaves errno alone; makes no system call but, when a class's
 * slots grow past a MiB boundary, the one that puts them into core dumps. */
void *memprof__sheap_alloc(struct memprof_sheap *h, size_t n, size_t align, bool zero);
/* Returns a block of the heap. Lock-free; may give its pages back to the kernel (a system
 * call for blocks of MEMPROF_SHEAP_RELEASE_MIN bytes or more); leaves errno alone. */
void memprof__sheap_free(struct memprof_sheap *h, void *p);
/* Whether p, which memprof__sheap_owns(), lies in a slot the heap has handed out (below its
 * class's bump index): false for a block someone else mapped above the mark of a sealed
 * heap. Reads no memory at p, so it may be asked about a block another thread is freeing. */
MEMPROF_INTERNAL bool memprof__sheap_used(const struct memprof_sheap *h, const void *p);
/* Whether p, which memprof__sheap_owns(), is a live-or-free block of the heap rather than
 * someone else's: memprof__sheap_used(), and with framing an intact chunk header (not a
 * block in a hole left by glibc's unmapping of a framed slot). Reads the header: callers
 * ask in cold paths only, about a block handed to free() or realloc(), before handing it to
 * the heap. */
MEMPROF_INTERNAL bool memprof__sheap_holds(const struct memprof_sheap *h, const void *p);
/* Seals the heap (above): no fresh slots from now on, and the address space above each
 * class's last slot is given back. Returns the bytes of address space given back (0 if
 * there is no reservation or it was sealed before). Lock-free; safe while other threads
 * allocate and free; a system call per class. */
MEMPROF_INTERNAL size_t memprof__sheap_seal(struct memprof_sheap *h);
/* The usable size of a block of the heap (its slot size, less the lead if framed). */
MEMPROF_INTERNAL size_t memprof__sheap_usable(const struct memprof_sheap *h, const void *p);
/* Whether a block of n bytes (n > 0) would get the slot size of block p, so that realloc
 * can keep p where it is. */
MEMPROF_INTERNAL bool memprof__sheap_fits(const struct memprof_sheap *h, const void *p, size_t n);

#endif
