/* SPDX-License-Identifier: MIT */
/*
 * The sample heap (design in sampleheap.h): power-of-two slots in a window of address space
 * mapped as it is used, a bump index and a tagged lock-free free list per size class, small
 * classes mapped from their start as they grow, large blocks mapped one by one, and
 * optionally glibc's chunk header in front of every block.
 */
#include "core/sampleheap.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/atomic.h"
#include "core/glibc_chunk.h"
#include "core/platform.h"

#define RANGE      ((uintptr_t)1 << MEMPROF_SHEAP_RANGE_SHIFT)
#define INDEX_MASK ((uint64_t)0xffffffffu)
/* A small class grows by an eighth of what it has mapped, and by at least this much: a
 * multiple of the largest page size of x86_64 and aarch64 and of every small slot. */
#define GROW_MIN ((uint64_t)64 * 1024)
/* In a small class's `growing`: a thread is mapping more; someone else's mapping is in the
 * way, so the class grows no more. */
#define GROW_BUSY  1u
#define GROW_STUCK 2u
/* A large slot's state: (pages mapped << 32) | link in the free list, and LIVE while the
 * block is handed out. Class c's slots are numbered from 2^(30 - c) on, which gives every
 * large slot its own word among 2^14. */
#define LARGE_SLOTS        ((size_t)1 << (MEMPROF_SHEAP_MAX_SHIFT - MEMPROF_SHEAP_LARGE_SHIFT + 1))
#define STATE_LIVE         ((uint64_t)1 << 63)
#define STATE_PAGES(state) (((state) & ~STATE_LIVE) >> 32)
/* The classes' headers, then the large slots' states, in one mapping outside the window. */
#define CLASS_BYTES (MEMPROF_SHEAP_CLASSES * sizeof(struct memprof_sheap_class))
#define META_BYTES  (CLASS_BYTES + LARGE_SLOTS * sizeof(uint64_t))

/* The page size: large blocks are mapped in whole pages. */
static size_t page;

int memprof__sheap_init(struct memprof_sheap *h, size_t frame)
{
    /* Slots are aligned to their size only if every class's sub-range is, so the window
     * starts on a multiple of the largest class. */
    page = (size_t)sysconf(_SC_PAGESIZE);
    size_t size = (size_t)MEMPROF_SHEAP_CLASSES << MEMPROF_SHEAP_RANGE_SHIFT;
    uintptr_t base = memprof__pf_window(size, (size_t)1 << MEMPROF_SHEAP_MAX_SHIFT);
    /* Fresh mappings are zero: every class starts empty, every large slot unused. */
    struct memprof_sheap_class *classes = base ? memprof__pf_map(META_BYTES) : NULL;
    if (!classes)
        return -ENOMEM;
    h->classes = classes;
    h->frame = frame;
    h->base = base;
    /* Last, released: a free() running meanwhile sees no window until the rest is set (the
     * heap may be set up while the program runs: a framed one, or at a first sample). */
    __atomic_store_n(&h->size, size, __ATOMIC_RELEASE);
    return 0;
}

static inline bool is_large(unsigned shift)
{
    return shift >= MEMPROF_SHEAP_LARGE_SHIFT;
}

static inline uintptr_t slot_addr(const struct memprof_sheap *h, unsigned shift, uint64_t index)
{
    return h->base + ((uintptr_t)(shift - MEMPROF_SHEAP_MIN_SHIFT) << MEMPROF_SHEAP_RANGE_SHIFT) +
           ((uintptr_t)index << shift);
}

/* The state word of large slot `index` of class `shift`. */
static inline _Atomic uint64_t *state_of(const struct memprof_sheap *h, unsigned shift,
                                         uint64_t index)
{
    _Atomic uint64_t *states = (_Atomic uint64_t *)((char *)h->classes + CLASS_BYTES);
    return &states[((size_t)1 << (MEMPROF_SHEAP_MAX_SHIFT - shift)) + index];
}

void memprof__sheap_destroy(struct memprof_sheap *h)
{
    for (unsigned shift = MEMPROF_SHEAP_MIN_SHIFT; h->size && shift <= MEMPROF_SHEAP_MAX_SHIFT;
         shift++) {
        struct memprof_sheap_class *k = &h->classes[shift - MEMPROF_SHEAP_MIN_SHIFT];
        if (!is_large(shift)) {
            memprof__pf_unmap_at((void *)slot_addr(h, shift, 0), k->mapped);
            continue;
        }
        for (uint64_t i = 0; i < k->bumped; i++)
            memprof__pf_unmap_at((void *)slot_addr(h, shift, i),
                                 STATE_PAGES(*state_of(h, shift, i)) * page);
    }
    if (h->size) {
        memprof__pf_unmap(h->classes, META_BYTES);
        memprof__pf_window_release(h->base, h->size);
    }
    h->base = 0;
    h->size = 0;
    h->classes = NULL;
    h->frame = 0;
}

void memprof__sheap_after_fork(struct memprof_sheap *h)
{
    for (unsigned c = 0; h->size && c < MEMPROF_SHEAP_CLASSES; c++)
        memprof_atomic_and_relaxed(&h->classes[c].growing, ~GROW_BUSY);
}

/* The class of a request: the log2 of its slot size, or MEMPROF_SHEAP_MAX_SHIFT + 1 if too
 * large. */
static unsigned shift_for(size_t n)
{
    if (n <= ((size_t)1 << MEMPROF_SHEAP_MIN_SHIFT))
        return MEMPROF_SHEAP_MIN_SHIFT;
    if (n > ((size_t)1 << MEMPROF_SHEAP_MAX_SHIFT))
        return MEMPROF_SHEAP_MAX_SHIFT + 1;
    return 64u - (unsigned)__builtin_clzll((unsigned long long)(n - 1));
}

static unsigned shift_of(const struct memprof_sheap *h, const void *p)
{
    return (unsigned)(((uintptr_t)p - h->base) >> MEMPROF_SHEAP_RANGE_SHIFT) +
           MEMPROF_SHEAP_MIN_SHIFT;
}

/* The slot holding block p (its first byte, unless the block is framed). */
static inline uintptr_t slot_of(const void *p, unsigned shift)
{
    return (uintptr_t)p & ~(((uintptr_t)1 << shift) - 1);
}

/* How far into its slot block p starts: 0 unless the block is framed. */
static inline size_t lead_of(const void *p, unsigned shift)
{
    return (uintptr_t)p - slot_of(p, shift);
}

size_t memprof__sheap_unused(const struct memprof_sheap *h, struct memprof_range *out, size_t max)
{
    size_t n = 0;
    for (unsigned shift = MEMPROF_SHEAP_MIN_SHIFT;
         h->size && shift < MEMPROF_SHEAP_LARGE_SHIFT && n < max; shift++) {
        const struct memprof_sheap_class *k = &h->classes[shift - MEMPROF_SHEAP_MIN_SHIFT];
        uint64_t bumped = memprof_atomic_load_relaxed(&k->bumped);
        uintptr_t lo = (slot_addr(h, shift, bumped) + page - 1) & ~(uintptr_t)(page - 1);
        uintptr_t hi = slot_addr(h, shift, 0) + memprof_atomic_load_acquire(&k->mapped);
        if (lo < hi)
            out[n++] = (struct memprof_range){lo, hi};
    }
    return n;
}

/* The link of a free slot: a small slot's first word, a large slot's state. Another thread
 * may be writing the block it just popped while a loser of that race reads here: the read
 * is atomic, and the loser's CAS fails on the changed tag. */
static inline _Atomic uint64_t *link_of(const struct memprof_sheap *h, unsigned shift,
                                        uint64_t index)
{
    return is_large(shift) ? state_of(h, shift, index)
                           : (_Atomic uint64_t *)slot_addr(h, shift, index);
}

static bool pop(const struct memprof_sheap *h, struct memprof_sheap_class *k, unsigned shift,
                uint64_t *index)
{
    uint64_t head = memprof_atomic_load_acquire(&k->free_head);
    for (;;) {
        uint64_t top = head & INDEX_MASK;
        if (top == 0)
            return false;
        uint64_t next = memprof_atomic_load_relaxed(link_of(h, shift, top - 1));
        uint64_t desired = ((head & ~INDEX_MASK) + ((uint64_t)1 << 32)) | (next & INDEX_MASK);
        if (memprof_atomic_cas_acqrel(&k->free_head, &head, desired)) {
            *index = top - 1;
            return true;
        }
    }
}

/* Pushes a slot; `high` goes into the link word's upper half (a large slot's pages still
 * mapped). */
static void push(const struct memprof_sheap *h, struct memprof_sheap_class *k, unsigned shift,
                 uint64_t index, uint64_t high)
{
    _Atomic uint64_t *link = link_of(h, shift, index);
    uint64_t head = memprof_atomic_load_relaxed(&k->free_head);
    for (;;) {
        memprof_atomic_store_relaxed(link, high | (head & INDEX_MASK));
        uint64_t desired = ((head & ~INDEX_MASK) + ((uint64_t)1 << 32)) | (index + 1);
        if (memprof_atomic_cas_acqrel(&k->free_head, &head, desired))
            return;
    }
}

/* Maps more of small class `shift`, so that its first `need` bytes are mapped. False if
 * another thread is at it (the caller's sample goes to the real allocator rather than wait),
 * or the mapping fails. */
static bool grow(const struct memprof_sheap *h, struct memprof_sheap_class *k, unsigned shift,
                 uint64_t need)
{
    uint32_t idle = 0;
    if (!memprof_atomic_cas_acquire(&k->growing, &idle, GROW_BUSY))
        return false;
    uint64_t have = memprof_atomic_load_relaxed(&k->mapped);
    bool ok = have >= need, stuck = false;
    if (!ok) {
        /* An eighth more keeps the number of mappings logarithmic and what is mapped ahead of
         * the blocks within an eighth; if that much does not fit (a limit, someone's mapping
         * further on), just what the next slot needs. */
        uint64_t least = (need - have + GROW_MIN - 1) & ~(GROW_MIN - 1);
        uint64_t more = (have / 8 + GROW_MIN - 1) & ~(GROW_MIN - 1);
        if (more < least)
            more = least;
        if (more > RANGE - have)
            more = RANGE - have;
        void *at = (void *)(slot_addr(h, shift, 0) + have);
        int rc = memprof__pf_map_at(at, more);
        if (rc != 0 && more > least) {
            more = least;
            rc = memprof__pf_map_at(at, more);
        }
        if (rc == 0) {
            memprof__pf_no_huge_pages(at, more);
            memprof_atomic_store_release(&k->mapped, have + more);
            ok = true;
        }
        stuck = rc == -EEXIST;
    }
    memprof_atomic_store_release(&k->growing, stuck ? GROW_STUCK : 0u);
    return ok;
}

#define CHUNK_HEADER MEMPROF_CHUNK_HEADER

/* The block of a slot: the slot itself, or with framing the slot `lead` bytes in behind a
 * chunk header that tells glibc to unmap the slot's `size` bytes (sampleheap.h). */
static void *block_in(uintptr_t slot, size_t size, size_t lead)
{
    if (!lead)
        return (void *)slot;
    /* prev_size may be the slot's link word, which a thread whose pop lost the race may
     * still read: memprof__chunk_write() stores it atomically. */
    memprof__chunk_write((void *)(slot + lead), lead - CHUNK_HEADER, size);
    return (void *)(slot + lead);
}

/* A large block of `n` bytes (the lead included): a recycled slot or a fresh one, mapped for
 * the pages the block needs (sampleheap.h). */
static void *alloc_large(struct memprof_sheap *h, struct memprof_sheap_class *k, unsigned shift,
                         size_t n, size_t lead, bool zero)
{
    size_t want = (n + page - 1) & ~(page - 1);
    uint64_t index;
    bool fresh = !pop(h, k, shift, &index);
    if (fresh) {
        /* A compare-and-swap, not an add, so that the index never passes the capacity. */
        uint64_t cap = RANGE >> shift;
        index = memprof_atomic_load_relaxed(&k->bumped);
        do {
            if (index >= cap)
                return NULL;
        } while (!memprof_atomic_cas_weak_relaxed(&k->bumped, &index, index + 1));
    }
    uintptr_t slot = slot_addr(h, shift, index);
    _Atomic uint64_t *state = state_of(h, shift, index);
    /* A freed slot is unmapped, unless the kernel refused (memprof__sheap_free()): then its
     * pages are still there, with the last block's contents and whatever protection the
     * program gave them, which the next block must not inherit. If the kernel will not make
     * them writable either, the slot is not handed out again. */
    size_t have = fresh ? 0 : STATE_PAGES(memprof_atomic_load_relaxed(state)) * page;
    if (have && !memprof__pf_writable((void *)slot, have))
        return NULL;
    if (have < want) {
        int rc = memprof__pf_map_at((void *)(slot + have), want - have);
        if (rc != 0) {
            /* Someone else's mapping in the way makes the slot useless to the heap; a limit
             * reached may not last, so the slot goes back for a later block. */
            if (rc != -EEXIST)
                push(h, k, shift, index, (uint64_t)(have / page) << 32);
            return NULL;
        }
    } else if (have > want && memprof__pf_unmap_at((void *)(slot + want), have - want) != 0) {
        want = have;
    }
    if (zero && have)
        memset((void *)slot, 0, have < want ? have : want);
    memprof_atomic_store_relaxed(state, STATE_LIVE | (uint64_t)(want / page) << 32);
    return block_in(slot, want, lead);
}

void *memprof__sheap_alloc(struct memprof_sheap *h, size_t n, size_t align, bool zero)
{
    if (!h->size)
        return NULL;
    size_t lead = 0;
    if (h->frame) {
        lead = align > CHUNK_HEADER ? align : CHUNK_HEADER;
        if (n > SIZE_MAX - lead)
            return NULL;
        n += lead;
        if (align < h->frame)
            align = h->frame;
    }
    unsigned shift = shift_for(n > align ? n : align);
    if (shift > MEMPROF_SHEAP_MAX_SHIFT)
        return NULL;
    struct memprof_sheap_class *k = &h->classes[shift - MEMPROF_SHEAP_MIN_SHIFT];
    if (is_large(shift))
        return alloc_large(h, k, shift, n, lead, zero);
    size_t slot_size = (size_t)1 << shift;
    uint64_t index;
    if (pop(h, k, shift, &index)) {
        void *p = (void *)slot_addr(h, shift, index);
        /* A recycled slot holds its old contents. */
        if (zero) {
            /* The link word atomically: a thread whose pop lost the race may still read it. */
            memprof_atomic_store_relaxed((_Atomic uint64_t *)p, 0);
            memset((char *)p + sizeof(uint64_t), 0, slot_size - sizeof(uint64_t));
        }
        return block_in((uintptr_t)p, slot_size, lead);
    }
    /* Fresh memory is zero. A full class stays full, and later requests of this size go to
     * the real allocator (or the free list). A compare-and-swap, not an add, so that the
     * index never passes the capacity, nor the part of the class mapped so far: a slot
     * past it first waits for grow(). */
    uint64_t cap = RANGE >> shift;
    index = memprof_atomic_load_relaxed(&k->bumped);
    for (;;) {
        if (index >= cap)
            return NULL;
        uint64_t need = (index + 1) << shift;
        if (need > memprof_atomic_load_acquire(&k->mapped)) {
            if (!grow(h, k, shift, need))
                return NULL;
            index = memprof_atomic_load_relaxed(&k->bumped);
            continue;
        }
        if (memprof_atomic_cas_weak_relaxed(&k->bumped, &index, index + 1))
            break;
    }
    return block_in(slot_addr(h, shift, index), slot_size, lead);
}

void memprof__sheap_free(struct memprof_sheap *h, void *p)
{
    unsigned shift = shift_of(h, p);
    uintptr_t slot = slot_of(p, shift);
    uint64_t index = ((slot - h->base) & (RANGE - 1)) >> shift, high = 0;
    if (is_large(shift)) {
        /* Unmapped, the block gives back its memory, its address space, its commit charge
         * and any lock the program put on it (MADV_DONTNEED would fail on locked pages and
         * keep them), and the slot reads as zero when it comes back. If the kernel refuses
         * (a split past vm.max_map_count), the pages stay for the slot's next block, which
         * zeroes them for calloc(). */
        size_t pages = STATE_PAGES(memprof_atomic_load_relaxed(state_of(h, shift, index)));
        if (memprof__pf_unmap_at((void *)slot, pages * page) == 0)
            pages = 0;
        high = (uint64_t)pages << 32;
    }
    push(h, &h->classes[shift - MEMPROF_SHEAP_MIN_SHIFT], shift, index, high);
}

bool memprof__sheap_used(const struct memprof_sheap *h, const void *p)
{
    /* The block's slot was taken before the block was handed out, and that happened before
     * anyone could ask about it: coherence makes the bump or the state visible here. */
    unsigned shift = shift_of(h, p);
    uint64_t index = (((uintptr_t)p - h->base) & (RANGE - 1)) >> shift;
    if (is_large(shift))
        return memprof_atomic_load_relaxed(state_of(h, shift, index)) & STATE_LIVE;
    const struct memprof_sheap_class *k = &h->classes[shift - MEMPROF_SHEAP_MIN_SHIFT];
    return index < memprof_atomic_load_relaxed(&k->bumped);
}

/* The bytes of block p's slot that glibc's chunk header counts from: a large block's mapped
 * pages, a small block's whole slot. */
static size_t extent_of(const struct memprof_sheap *h, const void *p, unsigned shift)
{
    if (!is_large(shift))
        return (size_t)1 << shift;
    uint64_t index = (((uintptr_t)p - h->base) & (RANGE - 1)) >> shift;
    return STATE_PAGES(memprof_atomic_load_relaxed(state_of(h, shift, index))) * page;
}

bool memprof__sheap_holds(const struct memprof_sheap *h, const void *p)
{
    if (!memprof__sheap_used(h, p))
        return false;
    unsigned shift = shift_of(h, p);
    size_t lead = lead_of(p, shift);
    /* A plain large block starts its slot: anything else there is in a hole someone else
     * mapped into (the slot's own pages start at the block). */
    if (!h->frame)
        return !is_large(shift) || lead == 0;
    /* A block handed to free() or realloc() is mapped, and so are the header words glibc
     * keeps before it: reading them is safe whoever the block's owner is. */
    size_t slot_size = (size_t)1 << shift;
    if (slot_size < h->frame || lead < CHUNK_HEADER)
        return false;
    /* The slot's extent is looked up only for a block whose offset word is right. */
    uint64_t offset = lead - CHUNK_HEADER;
    return memprof__chunk_offset(p) == offset &&
           memprof__chunk_is(p, offset, extent_of(h, p, shift));
}

size_t memprof__sheap_usable(const struct memprof_sheap *h, const void *p)
{
    unsigned shift = shift_of(h, p);
    return extent_of(h, p, shift) - lead_of(p, shift);
}

bool memprof__sheap_resize(struct memprof_sheap *h, void *p, size_t n)
{
    unsigned shift = shift_of(h, p);
    size_t lead = lead_of(p, shift);
    if (n > SIZE_MAX - lead)
        return false;
    n += lead;
    if (shift_for(n > h->frame ? n : h->frame) != shift)
        return false;
    if (!is_large(shift))
        return true;
    uintptr_t slot = slot_of(p, shift);
    _Atomic uint64_t *state = state_of(h, shift, ((slot - h->base) & (RANGE - 1)) >> shift);
    size_t have = STATE_PAGES(memprof_atomic_load_relaxed(state)) * page;
    size_t want = (n + page - 1) & ~(page - 1);
    if (want > have && memprof__pf_map_at((void *)(slot + have), want - have) != 0)
        return false;
    if (want < have && memprof__pf_unmap_at((void *)(slot + want), have - want) != 0)
        want = have;
    memprof_atomic_store_relaxed(state, STATE_LIVE | (uint64_t)(want / page) << 32);
    if (h->frame) /* glibc's size of the chunk: what it would unmap */
        memprof__chunk_resize(p, lead - CHUNK_HEADER, want);
    return true;
}
