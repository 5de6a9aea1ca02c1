/* SPDX-License-Identifier: MIT */
/*
 * The cached x86-64 DWARF walk (unwind_fast.h): a table of per-return-address rules, and the
 * interpretation of an FDE's call frame instructions for the three rules a walk needs.
 */
#include "core/unwind_fast.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "common/atomic.h"
#include "common/hash.h"

#if MEMPROF_HAVE_UNWIND_FAST

/* libgcc's lookup of the FDE covering an address (its unwind-dw2-fde.h; this library links
 * libgcc's unwinder statically, -static-libgcc). `func` is where the FDE's code starts. */
struct dwarf_eh_bases {
    void *tbase, *dbase, *func;
};
extern const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);
/* The main thread's stack pointer at start (glibc's loader). */
extern void *__libc_stack_end;

/* DWARF register numbers on x86-64. */
#define REG_BP 6
#define REG_SP 7

/* A rule in 64 bits: the CFA's offset from rsp or rbp, where rbp and the return address are
 * saved (offsets from the CFA, in words), two outcomes, and 24 check bits of the address's
 * hash (its low bits: the table index takes its high ones). */
#define RULE_CFA_OFF     ((UINT64_C(1) << 20) - 1)
#define RULE_CFA_BP      (UINT64_C(1) << 20)
#define RULE_BP_SAVED    (UINT64_C(1) << 21)
#define RULE_END         (UINT64_C(1) << 22) /* the return address is undefined: outermost */
#define RULE_GIVE_UP     (UINT64_C(1) << 23) /* libgcc's full unwinder is needed */
#define RULE_BP_SHIFT    24                  /* int8: rbp's slot / 8 */
#define RULE_RA_SHIFT    32                  /* int8: the return address's slot / 8 */
#define RULE_CHECK_SHIFT 40

/* 2,048 entries (32 KiB of .bss, touched as used): a program's samples pass through a few
 * hundred distinct return addresses, a large one's through a few thousand. */
#define TABLE_BITS 11
static struct slot {
    _Atomic uint64_t key, rule;
} table[1u << TABLE_BITS];

/* ---- reading call frame information --------------------------------------------------- */

struct cursor {
    const uint8_t *p, *end;
    bool bad;
};

static uint64_t uleb(struct cursor *c)
{
    uint64_t v = 0;
    for (unsigned shift = 0; c->p < c->end; shift += 7) {
        uint8_t b = *c->p++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    c->bad = true;
    return 0;
}

static int64_t sleb(struct cursor *c)
{
    uint64_t v = 0;
    unsigned shift = 0;
    while (c->p < c->end) {
        uint8_t b = *c->p++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) {
            if (shift < 64 && (b & 0x40))
                v |= ~UINT64_C(0) << shift;
            return (int64_t)v;
        }
    }
    c->bad = true;
    return 0;
}

/* An n-byte little-endian unsigned value. */
static uint64_t fixed(struct cursor *c, unsigned n)
{
    uint64_t v = 0;
    if ((uint64_t)(c->end - c->p) < n) {
        c->bad = true;
        return 0;
    }
    for (unsigned i = 0; i < n; i++)
        v |= (uint64_t)c->p[i] << (8 * i);
    c->p += n;
    return v;
}

static const uint8_t *skip(struct cursor *c, uint64_t n)
{
    if (n > (uint64_t)(c->end - c->p)) {
        c->bad = true;
        return c->end;
    }
    c->p += n;
    return c->p;
}

/* Bytes of a pointer in DW_EH_PE encoding `enc`; 0 when not a fixed size (LEB128, aligned). */
static unsigned encoded_size(uint8_t enc)
{
    if ((enc & 0x70) == 0x50) /* DW_EH_PE_aligned */
        return 0;
    switch (enc & 0x0f) {
    case 0x00: /* absptr */
    case 0x04: /* udata8 */
    case 0x0c: /* sdata8 */
        return 8;
    case 0x02:
    case 0x0a:
        return 2;
    case 0x03:
    case 0x0b:
        return 4;
    default:
        return 0;
    }
}

struct cie {
    const uint8_t *insns, *end;
    uint64_t code_align, ra_reg;
    int64_t data_align;
    unsigned ptr_size; /* of the FDE's pc_begin and pc_range */
    bool z;            /* FDEs carry augmentation data */
};

/* The length-prefixed entry at p: its contents in *c. 64-bit lengths are not expected in
 * .eh_frame and make the walk give up. */
static bool entry(const uint8_t *p, struct cursor *c)
{
    uint32_t len;
    memcpy(&len, p, 4);
    if (len == 0 || len == 0xffffffffu)
        return false;
    *c = (struct cursor){p + 4, p + 4 + len, false};
    return true;
}

static bool parse_cie(const uint8_t *at, struct cie *out)
{
    struct cursor c;
    if (!entry(at, &c))
        return false;
    uint64_t id = fixed(&c, 4), version = fixed(&c, 1);
    if (c.bad || id != 0 || (version != 1 && version != 3))
        return false;
    const char *aug = (const char *)c.p;
    size_t alen = strnlen(aug, (size_t)(c.end - c.p));
    skip(&c, alen + 1);
    /* "z..." or nothing; "eh" (a pointer of GCC 2's) and other vendors' strings are not read. */
    if (c.bad || (aug[0] && aug[0] != 'z'))
        return false;
    out->code_align = uleb(&c);
    out->data_align = sleb(&c);
    out->ra_reg = version == 1 ? fixed(&c, 1) : uleb(&c);
    out->ptr_size = 8;
    out->z = aug[0] == 'z';
    if (out->z) {
        uint64_t n = uleb(&c);
        struct cursor a = {c.p, c.p, false};
        a.end = skip(&c, n);
        for (const char *k = aug + 1; *k && !a.bad; k++) {
            uint8_t enc = (uint8_t)fixed(&a, 1);
            if (*k == 'R') {
                if ((out->ptr_size = encoded_size(enc)) == 0)
                    return false;
            } else if (*k == 'P') {
                unsigned size = encoded_size(enc);
                if (size == 0)
                    return false;
                skip(&a, size);
            } else if (*k != 'L') {
                return false; /* 'S' (a signal frame), or one this walk does not know */
            }
        }
        if (a.bad)
            return false;
    }
    out->insns = c.p;
    out->end = c.end;
    return !c.bad;
}

/* How a register is found in the caller: unchanged, saved at CFA + offset, or otherwise
 * (undefined, in another register, by an expression): the last makes the walk give up. */
enum how { SAME, SAVED, UNDEFINED, OTHER };

struct row {
    int64_t cfa_off, bp_off, ra_off;
    uint64_t cfa_reg;
    bool cfa_expr;
    uint8_t bp, ra;
};

#define MAX_REMEMBERED 8

struct interp {
    const struct cie *cie;
    struct row row, init; /* init: after the CIE's instructions, for DW_CFA_restore */
    struct row saved[MAX_REMEMBERED];
    unsigned depth;
};

static void set_rule(struct interp *s, uint64_t reg, enum how how, int64_t off)
{
    if (reg == REG_BP) {
        s->row.bp = (uint8_t)how;
        s->row.bp_off = off;
    } else if (reg == s->cie->ra_reg) {
        s->row.ra = (uint8_t)how;
        s->row.ra_off = off;
    }
}

static void restore_rule(struct interp *s, uint64_t reg)
{
    if (reg == REG_BP) {
        s->row.bp = s->init.bp;
        s->row.bp_off = s->init.bp_off;
    } else if (reg == s->cie->ra_reg) {
        s->row.ra = s->init.ra;
        s->row.ra_off = s->init.ra_off;
    }
}

/* Runs instructions [c) while the location is below `target`, as libgcc does (the row for
 * a return address is the one before it). False on an instruction this walk does not read. */
static bool run(struct interp *s, struct cursor *c, uintptr_t *loc, uintptr_t target)
{
    const int64_t da = s->cie->data_align;
    const uint64_t ca = s->cie->code_align;
    while (c->p < c->end && *loc < target && !c->bad) {
        uint8_t op = *c->p++;
        uint64_t reg, u;
        switch (op & 0xc0) {
        case 0x40: /* DW_CFA_advance_loc */
            *loc += (op & 0x3f) * ca;
            continue;
        case 0x80: /* DW_CFA_offset */
            set_rule(s, op & 0x3f, SAVED, (int64_t)uleb(c) * da);
            continue;
        case 0xc0: /* DW_CFA_restore */
            restore_rule(s, op & 0x3f);
            continue;
        }
        switch (op) {
        case 0x00: /* nop */
            break;
        case 0x02: /* advance_loc1, 2, 4 */
        case 0x03:
        case 0x04:
            *loc += fixed(c, 1u << (op - 0x02)) * ca;
            break;
        case 0x05: /* offset_extended */
            reg = uleb(c);
            set_rule(s, reg, SAVED, (int64_t)uleb(c) * da);
            break;
        case 0x06: /* restore_extended */
            restore_rule(s, uleb(c));
            break;
        case 0x07: /* undefined */
            set_rule(s, uleb(c), UNDEFINED, 0);
            break;
        case 0x08: /* same_value */
            set_rule(s, uleb(c), SAME, 0);
            break;
        case 0x09: /* register, val_offset, val_offset_sf: a LEB128 operand, skipped alike */
        case 0x14:
        case 0x15:
            reg = uleb(c);
            uleb(c);
            set_rule(s, reg, OTHER, 0);
            break;
        case 0x0a: /* remember_state */
            if (s->depth == MAX_REMEMBERED)
                return false;
            s->saved[s->depth++] = s->row;
            break;
        case 0x0b: /* restore_state: the CFA rule too, as libgcc since GCC 9 */
            if (s->depth == 0)
                return false;
            s->row = s->saved[--s->depth];
            break;
        case 0x0c: /* def_cfa */
            s->row.cfa_reg = uleb(c);
            s->row.cfa_off = (int64_t)uleb(c);
            s->row.cfa_expr = false;
            break;
        case 0x0d: /* def_cfa_register */
            s->row.cfa_reg = uleb(c);
            s->row.cfa_expr = false;
            break;
        case 0x0e: /* def_cfa_offset */
            s->row.cfa_off = (int64_t)uleb(c);
            break;
        case 0x0f: /* def_cfa_expression */
            skip(c, uleb(c));
            s->row.cfa_expr = true;
            break;
        case 0x10: /* expression, val_expression */
        case 0x16:
            reg = uleb(c);
            skip(c, uleb(c));
            set_rule(s, reg, OTHER, 0);
            break;
        case 0x11: /* offset_extended_sf */
            reg = uleb(c);
            set_rule(s, reg, SAVED, sleb(c) * da);
            break;
        case 0x12: /* def_cfa_sf */
            s->row.cfa_reg = uleb(c);
            s->row.cfa_off = sleb(c) * da;
            s->row.cfa_expr = false;
            break;
        case 0x13: /* def_cfa_offset_sf */
            s->row.cfa_off = sleb(c) * da;
            break;
        case 0x2e: /* GNU_args_size: for landing pads only */
            uleb(c);
            break;
        case 0x2f: /* GNU_negative_offset_extended */
            reg = uleb(c);
            u = uleb(c);
            set_rule(s, reg, SAVED, -(int64_t)u * da);
            break;
        default: /* set_loc, and anything else */
            return false;
        }
    }
    return !c->bad;
}

static bool word_offset(int64_t off, uint64_t *out)
{
    if (off % 8 != 0 || off < -1024 || off > 1016)
        return false;
    *out = (uint64_t)(uint8_t)(int8_t)(off / 8);
    return true;
}

/* The rule for the frame whose code address (a return address, or the walk's start) is pc. */
static uint64_t compute(uintptr_t pc)
{
    struct dwarf_eh_bases bases;
    const uint8_t *fde = _Unwind_Find_FDE((void *)(pc - 1), &bases);
    if (!fde)
        return RULE_GIVE_UP; /* no FDE here: a JIT's code, registered with the process's libgcc_s */
    struct cursor c;
    struct cie cie;
    if (!entry(fde, &c))
        return RULE_GIVE_UP;
    const uint8_t *at = c.p;
    int32_t back = (int32_t)(uint32_t)fixed(&c, 4); /* the CIE's distance back from `at` */
    if (c.bad || !parse_cie(at - back, &cie))
        return RULE_GIVE_UP;
    skip(&c, 2 * (uint64_t)cie.ptr_size); /* pc_begin, pc_range */
    if (cie.z)
        skip(&c, uleb(&c));
    if (c.bad)
        return RULE_GIVE_UP;

    struct interp s = {.cie = &cie, .row = {.bp = SAME, .ra = SAME}};
    uintptr_t loc = (uintptr_t)bases.func;
    struct cursor ci = {cie.insns, cie.end, false};
    if (!run(&s, &ci, &loc, pc))
        return RULE_GIVE_UP;
    s.init = s.row;
    if (!run(&s, &c, &loc, pc))
        return RULE_GIVE_UP;

    const struct row *r = &s.row;
    if (r->ra == UNDEFINED)
        return RULE_END;
    uint64_t bp_slot = 0, ra_slot;
    if (r->cfa_expr || (r->cfa_reg != REG_SP && r->cfa_reg != REG_BP) || r->cfa_off <= 0 ||
        (uint64_t)r->cfa_off > RULE_CFA_OFF || r->ra != SAVED ||
        !word_offset(r->ra_off, &ra_slot) || (r->bp != SAME && r->bp != SAVED) ||
        (r->bp == SAVED && !word_offset(r->bp_off, &bp_slot)))
        return RULE_GIVE_UP;
    return (uint64_t)r->cfa_off | (r->cfa_reg == REG_BP ? RULE_CFA_BP : 0) |
           (r->bp == SAVED ? RULE_BP_SAVED : 0) | bp_slot << RULE_BP_SHIFT |
           ra_slot << RULE_RA_SHIFT;
}

static uint64_t rule_of(uintptr_t pc)
{
    uint64_t h = memprof__mix64(pc), check = h & ((UINT64_C(1) << (64 - RULE_CHECK_SHIFT)) - 1);
    struct slot *s = &table[h >> (64 - TABLE_BITS)];
    if (memprof_atomic_load_acquire(&s->key) == pc) {
        uint64_t v = memprof_atomic_load_relaxed(&s->rule);
        if (v >> RULE_CHECK_SHIFT == check)
            return v;
    }
    uint64_t v = compute(pc) | check << RULE_CHECK_SHIFT;
    /* The key is cleared while the rule changes, and the check bits catch a rule written by
     * a racing writer for another address. */
    memprof_atomic_store_relaxed(&s->key, 0);
    memprof_atomic_fence_release();
    memprof_atomic_store_relaxed(&s->rule, v);
    memprof_atomic_store_release(&s->key, pc);
    return v;
}

static inline int64_t slot_offset(uint64_t rule, unsigned shift)
{
    return (int64_t)(int8_t)(uint8_t)(rule >> shift) * 8;
}

/* The end of the stack sp is on (unwind_fast.h), or 0. The thread descriptor is the main
 * thread's too, but there it lies below the stack, in memory the loader mapped. */
static uintptr_t stack_end(uintptr_t sp)
{
    uintptr_t self = (uintptr_t)pthread_self();
    if (self > sp && self - sp <= MEMPROF_UNWIND_FAST_SPAN)
        return self;
    uintptr_t start = ((uintptr_t)__libc_stack_end | 4095) + 1;
    if (__libc_stack_end && start > sp && start - sp <= MEMPROF_UNWIND_FAST_SPAN)
        return start;
    return 0;
}

int memprof__unwind_fast(const struct memprof_regs *r, void **frames, int max, bool *ended)
{
    *ended = false;
    uintptr_t stack_top = stack_end(r->sp);
    if (max <= 0 || !stack_top)
        return -1;
    uintptr_t pc = r->pc, sp = r->sp, bp = r->bp;
    int n = 0;
    frames[n++] = (void *)pc;
    for (;;) {
        uint64_t rule = rule_of(pc);
        if (rule & RULE_GIVE_UP)
            return -1;
        if (rule & RULE_END) {
            *ended = true;
            return n;
        }
        uintptr_t cfa = ((rule & RULE_CFA_BP) ? bp : sp) + (rule & RULE_CFA_OFF);
        /* Each frame's CFA lies above the last, within the stack; so do the slots read. */
        if (cfa <= sp || cfa > stack_top || (cfa & 7))
            return -1;
        uintptr_t ra_at = cfa + (uintptr_t)slot_offset(rule, RULE_RA_SHIFT);
        if (ra_at < sp || ra_at > stack_top - sizeof(uintptr_t))
            return -1;
        uintptr_t ra = *(const uintptr_t *)ra_at;
        if (rule & RULE_BP_SAVED) {
            uintptr_t bp_at = cfa + (uintptr_t)slot_offset(rule, RULE_BP_SHIFT);
            if (bp_at < sp || bp_at > stack_top - sizeof(uintptr_t))
                return -1;
            bp = *(const uintptr_t *)bp_at;
        }
        sp = cfa;
        if (ra == 0) { /* a zero return address ends the stack, as in libgcc's walk */
            *ended = true;
            return n;
        }
        if (n == max)
            return n;
        frames[n++] = (void *)ra;
        pc = ra;
    }
}

#else

int memprof__unwind_fast(const struct memprof_regs *r, void **frames, int max, bool *ended)
{
    (void)r, (void)frames, (void)max;
    *ended = false;
    return -1;
}

#endif
