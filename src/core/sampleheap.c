/* SPDX-License-Identifier: MIT */
/*
 * The sample heap (design in sampleheap.h): power-of-two slots in one sparse reservation,
 * a bump index and a tagged lock-free free list per size class, and optionally glibc's
 * chunk header in front of every block.
 */
#include "core/sampleheap.h"

#include <errno.h>
#include <string.h>

#include "common/atomic.h"
#include "core/platform.h"

#define RANGE      ((uintptr_t)1 << MEMPROF_SHEAP_RANGE_SHIFT)
#define INDEX_MASK ((uint64_t)0xffffffffu)
/* In a class's bump index: sealed, no fresh slots (memprof__sheap_seal()). */
#define SHEAP_SEALED ((uint64_t)1 << 63)
/* What a seal unmaps starts on a multiple of the largest page size of x86_64 and aarch64. */
#define SEAL_ALIGN ((uintptr_t)64 * 1024)
/* Core dumps take a class's slots in steps of this many bytes (a multiple of SEAL_ALIGN). */
#define DUMP_STEP ((uint64_t)1 << 20)
/* The smallest class whose free list keeps its links outside the blocks (link_of()). */
#define RELEASE_SHIFT 17u
_Static_assert(((size_t)1 << RELEASE_SHIFT) == MEMPROF_SHEAP_RELEASE_MIN,
               "the classes that give their pages back are those with links outside the blocks");
/* Those links: one word per slot of every class from RELEASE_SHIFT up, class c's at
 * 2^(30 - c) - 1 (one for the 1 GiB class, two for 512 MiB, ...), 2^14 - 1 in all. */
#define OUTER_LINKS ((size_t)1 << (MEMPROF_SHEAP_RANGE_SHIFT - RELEASE_SHIFT + 1))
/* The class headers, then those links, after the slots; rounded to a page. */
#define CLASS_HEADERS (MEMPROF_SHEAP_CLASSES * sizeof(struct memprof_sheap_class))
#define HEADERS       ((CLASS_HEADERS + OUTER_LINKS * sizeof(uint64_t) + 4095) & ~(size_t)4095)

int memprof__sheap_init(struct memprof_sheap *h, size_t frame)
{
    /* Slots are aligned to their size only if every class's sub-range is, so the range
     * starts on a multiple of the largest class: map one class more and trim. */
    size_t size = (size_t)MEMPROF_SHEAP_CLASSES << MEMPROF_SHEAP_RANGE_SHIFT;
    size_t align = (size_t)1 << MEMPROF_SHEAP_MAX_SHIFT, total = size + HEADERS + align;
    void *p = memprof__pf_map_sparse(total);
    if (!p)
        return -ENOMEM;
    uintptr_t lo = (uintptr_t)p, base = (lo + align - 1) & ~(uintptr_t)(align - 1);
    if (base > lo)
        memprof__pf_unmap(p, base - lo);
    if (lo + total > base + size + HEADERS)
        memprof__pf_unmap((void *)(base + size + HEADERS), lo + total - (base + size + HEADERS));
    /* Fresh mappings are zero: every class starts empty. */
    h->classes = (struct memprof_sheap_class *)(base + size);
    h->frame = frame;
    h->base = base;
    h->size = size;
    return 0;
}

void memprof__sheap_destroy(struct memprof_sheap *h)
{
    if (h->size)
        memprof__pf_unmap((void *)h->base, h->size + HEADERS);
    h->base = 0;
    h->size = 0;
    h->classes = NULL;
    h->frame = 0;
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

static inline uintptr_t slot_addr(const struct memprof_sheap *h, unsigned shift, uint64_t index)
{
    return h->base + ((uintptr_t)(shift - MEMPROF_SHEAP_MIN_SHIFT) << MEMPROF_SHEAP_RANGE_SHIFT) +
           ((uintptr_t)index << shift);
}

/* The unused part of class `shift` with `bumped` slots handed out: from the first SEAL_ALIGN
 * boundary at or past the last slot to the class's end. False if there is none. */
static bool unused_tail(const struct memprof_sheap *h, unsigned shift, uint64_t bumped,
                        struct memprof_range *r)
{
    r->lo = (slot_addr(h, shift, bumped) + SEAL_ALIGN - 1) & ~(SEAL_ALIGN - 1);
    r->hi = slot_addr(h, shift, RANGE >> shift);
    return r->lo < r->hi;
}

size_t memprof__sheap_unused(const struct memprof_sheap *h, struct memprof_range *out, size_t max)
{
    size_t n = 0;
    for (unsigned shift = MEMPROF_SHEAP_MIN_SHIFT;
         h->size && shift <= MEMPROF_SHEAP_MAX_SHIFT && n < max; shift++) {
        const struct memprof_sheap_class *k = &h->classes[shift - MEMPROF_SHEAP_MIN_SHIFT];
        uint64_t bumped = memprof_atomic_load_relaxed(&k->bumped) & ~SHEAP_SEALED;
        n += unused_tail(h, shift, bumped, &out[n]);
    }
    return n;
}

/* Puts the first `slots` slots of a class into core dumps, in steps of DUMP_STEP (or a slot);
 * the thread whose compare-and-swap extends the mark makes the call. */
static void include_in_dumps(const struct memprof_sheap *h, struct memprof_sheap_class *k,
                             unsigned shift, uint64_t slots)
{
    uint64_t need = slots << shift, have = memprof_atomic_load_relaxed(&k->dumped);
    while (have < need) {
        uint64_t to = (need + DUMP_STEP - 1) & ~(uint64_t)(DUMP_STEP - 1);
        if (atomic_compare_exchange_weak_explicit(&k->dumped, &have, to, memory_order_relaxed,
                                                  memory_order_relaxed)) {
            uintptr_t start = slot_addr(h, shift, 0);
            memprof__pf_dump((void *)(start + have), (size_t)(to - have));
            return;
        }
    }
}

/* The link of free slot `index` of class `shift`. Below MEMPROF_SHEAP_RELEASE_MIN it is the
 * slot's first word: another thread may be writing the block it just popped while a loser of
 * that race reads there, so the read is atomic, and the loser's CAS fails on the changed tag.
 * The larger slots, which can be whole pages a program protects (a JIT's code made read-only,
 * a table sealed with PROT_READ, PROT_NONE over a block given back to an allocator of its own)
 * and then frees, as glibc lets it do with its mapped blocks, keep their links in an array
 * after the class headers: the heap never writes into such a block once it is freed, nor
 * reads a block that a lost race left to its new owner. */
static inline _Atomic uint64_t *link_of(const struct memprof_sheap *h, unsigned shift,
                                        uint64_t index)
{
    if (shift < RELEASE_SHIFT)
        return (_Atomic uint64_t *)slot_addr(h, shift, index);
    _Atomic uint64_t *outer = (_Atomic uint64_t *)((uintptr_t)h->classes + CLASS_HEADERS);
    return outer + ((((size_t)1 << (MEMPROF_SHEAP_RANGE_SHIFT - shift)) - 1) + index);
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

static void push(const struct memprof_sheap *h, struct memprof_sheap_class *k, unsigned shift,
                 uint64_t index)
{
    _Atomic uint64_t *link = link_of(h, shift, index);
    uint64_t head = memprof_atomic_load_relaxed(&k->free_head);
    for (;;) {
        memprof_atomic_store_relaxed(link, head & INDEX_MASK);
        uint64_t desired = ((head & ~INDEX_MASK) + ((uint64_t)1 << 32)) | (index + 1);
        if (memprof_atomic_cas_acqrel(&k->free_head, &head, desired))
            return;
    }
}

/* glibc's IS_MMAPPED bit in a chunk's size word. */
#define CHUNK_MMAPPED ((uint64_t)2)
/* glibc's chunk header: prev_size and size, the two words before the block. */
#define CHUNK_HEADER (2 * sizeof(uint64_t))

/* The block of a slot: the slot itself, or with framing the slot `lead` bytes in behind a
 * chunk header that tells glibc to unmap the whole slot (sampleheap.h). */
static void *block_in(uintptr_t slot, size_t slot_size, size_t lead)
{
    if (!lead)
        return (void *)slot;
    uint64_t offset = lead - CHUNK_HEADER;
    /* prev_size may be the slot's link word, which a thread whose pop lost the race may
     * still read: stored atomically. */
    memprof_atomic_store_relaxed((_Atomic uint64_t *)(slot + offset), offset);
    ((uint64_t *)(slot + lead))[-1] = (slot_size - offset) | CHUNK_MMAPPED;
    return (void *)(slot + lead);
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
    size_t slot_size = (size_t)1 << shift;
    uint64_t index;
    if (pop(h, k, shift, &index)) {
        void *p = (void *)slot_addr(h, shift, index);
        /* A recycled slot holds its old contents, but for the link in its first word, except
         * released ones, which read as zero (their links are elsewhere). */
        if (zero && slot_size < MEMPROF_SHEAP_RELEASE_MIN) {
            /* The link word atomically: a thread whose pop lost the race may still read it. */
            memprof_atomic_store_relaxed(link_of(h, shift, index), 0);
            memset((char *)p + sizeof(uint64_t), 0, slot_size - sizeof(uint64_t));
        }
        return block_in((uintptr_t)p, slot_size, lead);
    }
    /* Fresh memory is zero. A full class stays full, and later requests of this size go to
     * the real allocator (or the free list); so does every one once the class is sealed, its
     * sealed bit making the index look past any capacity. A compare-and-swap, not an add,
     * so that the index never passes the capacity or the seal's mark. */
    uint64_t cap = RANGE >> shift;
    index = memprof_atomic_load_relaxed(&k->bumped);
    do {
        if (index >= cap)
            return NULL;
    } while (!atomic_compare_exchange_weak_explicit(&k->bumped, &index, index + 1,
                                                    memory_order_relaxed, memory_order_relaxed));
    include_in_dumps(h, k, shift, index + 1);
    return block_in(slot_addr(h, shift, index), slot_size, lead);
}

void memprof__sheap_free(struct memprof_sheap *h, void *p)
{
    unsigned shift = shift_of(h, p);
    size_t slot_size = (size_t)1 << shift;
    uintptr_t slot = slot_of(p, shift);
    if (slot_size >= MEMPROF_SHEAP_RELEASE_MIN) {
        /* The program may have protected the block (link_of()): the slot's next owner gets
         * it writable, as glibc's next mapping would be; one the kernel will not make
         * writable again (a limit on the commit charge) is never handed out again. Nothing
         * here writes into the block. */
        if (!memprof__pf_writable((void *)slot, slot_size))
            return;
        memprof__pf_release((void *)slot, slot_size);
    }
    uint64_t index = ((slot - h->base) & (RANGE - 1)) >> shift;
    push(h, &h->classes[shift - MEMPROF_SHEAP_MIN_SHIFT], shift, index);
}

bool memprof__sheap_used(const struct memprof_sheap *h, const void *p)
{
    /* The block's slot was bumped before the block was handed out, and that happened before
     * anyone could ask about it: coherence makes the bump visible here. */
    unsigned shift = shift_of(h, p);
    const struct memprof_sheap_class *k = &h->classes[shift - MEMPROF_SHEAP_MIN_SHIFT];
    uint64_t bumped = memprof_atomic_load_relaxed(&k->bumped) & ~SHEAP_SEALED;
    return (((uintptr_t)p - h->base) & (RANGE - 1)) >> shift < bumped;
}

bool memprof__sheap_holds(const struct memprof_sheap *h, const void *p)
{
    if (!memprof__sheap_used(h, p))
        return false;
    if (!h->frame)
        return true;
    /* A block handed to free() or realloc() is mapped, and so are the header words glibc
     * keeps before it: reading them is safe whoever the block's owner is. */
    unsigned shift = shift_of(h, p);
    size_t slot_size = (size_t)1 << shift, lead = lead_of(p, shift);
    if (slot_size < h->frame || lead < CHUNK_HEADER)
        return false;
    const uint64_t *w = p;
    return w[-2] == lead - CHUNK_HEADER && w[-1] == ((slot_size - w[-2]) | CHUNK_MMAPPED);
}

size_t memprof__sheap_usable(const struct memprof_sheap *h, const void *p)
{
    unsigned shift = shift_of(h, p);
    return ((size_t)1 << shift) - lead_of(p, shift);
}

bool memprof__sheap_fits(const struct memprof_sheap *h, const void *p, size_t n)
{
    unsigned shift = shift_of(h, p);
    size_t lead = lead_of(p, shift);
    if (n > SIZE_MAX - lead)
        return false;
    n += lead;
    return shift_for(n > h->frame ? n : h->frame) == shift;
}

size_t memprof__sheap_seal(struct memprof_sheap *h)
{
    size_t released = 0;
    if (!h->size)
        return 0;
    for (unsigned shift = MEMPROF_SHEAP_MIN_SHIFT; shift <= MEMPROF_SHEAP_MAX_SHIFT; shift++) {
        struct memprof_sheap_class *k = &h->classes[shift - MEMPROF_SHEAP_MIN_SHIFT];
        uint64_t bumped = memprof_atomic_load_relaxed(&k->bumped);
        do {
            if (bumped & SHEAP_SEALED)
                break; /* sealed by another thread, which unmaps the rest */
        } while (!atomic_compare_exchange_weak_explicit(&k->bumped, &bumped, bumped | SHEAP_SEALED,
                                                        memory_order_relaxed,
                                                        memory_order_relaxed));
        if (bumped & SHEAP_SEALED)
            continue;
        /* Slots below the mark stay mapped (live blocks, the free list's links); the rest
         * of the sub-range, from the first whole page past the mark, is given back. */
        struct memprof_range tail;
        if (unused_tail(h, shift, bumped, &tail)) {
            memprof__pf_unmap((void *)tail.lo, tail.hi - tail.lo);
            released += tail.hi - tail.lo;
        }
    }
    return released;
}
