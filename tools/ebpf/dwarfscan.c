/* SPDX-License-Identifier: MIT */
/*
 * The DWARF walk of dwarfscan.h, with libdw. Every compile unit's DIE tree is walked once:
 * an inlined copy (DW_TAG_inlined_subroutine) of a Rust allocator shim (__rust_alloc,
 * __rust_alloc_zeroed, __rust_realloc, __rust_dealloc, the __rg_* of older rustc) or of a
 * GlobalAlloc method (alloc, alloc_zeroed, realloc, dealloc) becomes a site at its lowest
 * address, with its arguments' locations there; an out-of-line GlobalAlloc method the
 * symbol scan left alone (a local symbol, whose arguments rustc may have moved) becomes a
 * site at its entry. Only the outermost such copy is probed (a shim inlined with the
 * GlobalAlloc method inside it is one allocation), nothing inside a function the symbol
 * scan probes (the BPF program ignores nested calls anyway), and nothing of std's System
 * allocator, which calls malloc: the C library's probes count those.
 *
 * Arguments are found by position in the abstract function (self, layout, ...), since a
 * GlobalAlloc implementation names its own parameters; a Layout's size by the `size`
 * member of its type.
 */
#define _GNU_SOURCE
#include "config.h"

#include "dwarfscan.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <gelf.h>

#include "elfscan.h"
#include "offline/offline.h"

enum entry {
    ENTRY_NONE,
    SHIM_ALLOC,   /* (size, align) */
    SHIM_REALLOC, /* (ptr, old_size, align, new_size) */
    SHIM_FREE,    /* (ptr, size, align) */
    GA_ALLOC,     /* (&self, layout) */
    GA_REALLOC,   /* (&self, ptr, layout, new_size) */
    GA_FREE,      /* (&self, ptr, layout) */
    ENTRY_SYSTEM, /* std's System allocator and __rdl_*: malloc underneath */
};

struct walk {
    Elf *elf;
    size_t nphdr;
    const struct memprof_ebpf_elf *syms;
    bool layout_align_first;
    size_t max_sites;
    struct memprof_ebpf_dwarf *out;
    size_t cap; /* of out->sites */
    int err;
    /* Pass 1 probes the out-of-line GlobalAlloc methods, pass 2 the inlined copies. */
    int pass;
    /* The site kinds (bits 1 << MEMPROF_EBPF_SITE_*) an out-of-line GlobalAlloc method
     * probed by symbol or in pass 1 covers: an inlined shim that only calls it is not an
     * allocation of its own (the method's probe counts it). */
    unsigned out_of_line;
};

static const char *const shim_names[] = {
    "__rust_alloc", "__rust_alloc_zeroed", "__rust_realloc", "__rust_dealloc",
    "__rg_alloc",   "__rg_alloc_zeroed",   "__rg_realloc",   "__rg_dealloc"};

static enum entry shim_entry(const char *last)
{
    for (size_t i = 0; i < sizeof shim_names / sizeof *shim_names; i++)
        if (strcmp(last, shim_names[i]) == 0) {
            if (strstr(last, "realloc"))
                return SHIM_REALLOC;
            return strstr(last, "dealloc") ? SHIM_FREE : SHIM_ALLOC;
        }
    return strncmp(last, "__rdl_", 6) == 0 ? ENTRY_SYSTEM : ENTRY_NONE;
}

static enum entry method_entry(const char *method)
{
    size_t n = strcspn(method, ":<");
    if (n == 5 && strncmp(method, "alloc", 5) == 0)
        return GA_ALLOC;
    if (n == 12 && strncmp(method, "alloc_zeroed", 12) == 0)
        return GA_ALLOC;
    if (n == 7 && strncmp(method, "realloc", 7) == 0)
        return GA_REALLOC;
    if (n == 7 && strncmp(method, "dealloc", 7) == 0)
        return GA_FREE;
    return ENTRY_NONE;
}

#define GA_IMPL    " as core::alloc::global::GlobalAlloc>::"
#define GA_DEFAULT "core::alloc::global::GlobalAlloc::"

/* What a function is, from its (abstract) DIE's linkage name and name. */
static enum entry classify(Dwarf_Die *die)
{
    Dwarf_Attribute a;
    const char *link = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
    if (!link)
        link = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
    if (!link || (!strstr(link, "GlobalAlloc") && !strstr(link, "__r")))
        return ENTRY_NONE;
    char *d = memprof__offline_demangle(link);
    const char *name = d ? d : link;
    enum entry e = ENTRY_NONE;
    const char *ga = strstr(name, GA_IMPL);
    if (name[0] == '<' && ga) {
        e = method_entry(ga + strlen(GA_IMPL));
        if (e != ENTRY_NONE && strstr(name, "std::alloc::System"))
            e = ENTRY_SYSTEM;
    } else if (strncmp(name, GA_DEFAULT, strlen(GA_DEFAULT)) == 0) {
        /* A provided method (realloc, alloc_zeroed): the implementing type is only in the
         * DW_AT_name ("realloc<own::Bump>"). */
        e = method_entry(name + strlen(GA_DEFAULT));
        const char *plain = dwarf_diename(die);
        if (e != ENTRY_NONE && plain && strstr(plain, "System"))
            e = ENTRY_SYSTEM;
    } else {
        const char *last = strrchr(name, ':');
        e = shim_entry(last ? last + 1 : name);
    }
    free(d);
    return e;
}

/* The DIE an attribute refers to (DW_AT_abstract_origin, DW_AT_type). */
static bool ref_die(Dwarf_Die *die, unsigned name, Dwarf_Die *out)
{
    Dwarf_Attribute a;
    return dwarf_attr(die, name, &a) && dwarf_formref_die(&a, out);
}

/* The file offset of virtual address `vaddr`, through the code segment holding it. */
static bool file_offset(const struct walk *w, uint64_t vaddr, uint64_t *off)
{
    for (size_t i = 0; i < w->nphdr; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(w->elf, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
            continue;
        if (vaddr >= ph.p_vaddr && vaddr < ph.p_vaddr + ph.p_filesz) {
            *off = vaddr - ph.p_vaddr + ph.p_offset;
            return true;
        }
    }
    return false;
}

static bool probed_by_symbol(const struct walk *w, uint64_t off)
{
    for (size_t i = 0; i < w->syms->nprobes; i++)
        if (w->syms->probes[i].offset == off)
            return true;
    return false;
}

#if defined(__x86_64__)
#define MAX_DWARF_REG 15 /* rax .. r15 */
#else
#define MAX_DWARF_REG 31 /* x0 .. x30, sp */
#endif

static bool reg_op(unsigned atom, uint64_t number, unsigned base, uint32_t *reg)
{
    unsigned r = atom == DW_OP_regx || atom == DW_OP_bregx ? (unsigned)number : atom - base;
    if (r > MAX_DWARF_REG)
        return false;
    *reg = r;
    return true;
}

/* One piece of a location expression as a memprof_ebpf_loc, `extra` bytes into the value
 * (a member of a struct in memory). Only the forms rustc's LLVM emits for scalars. */
static struct memprof_ebpf_loc simple_loc(const Dwarf_Op *ops, size_t n, uint64_t extra,
                                          const struct memprof_ebpf_loc *frame_base, bool at_entry)
{
    struct memprof_ebpf_loc l = {0};
    uint32_t reg;
    if (n == 1) {
        unsigned a = ops[0].atom;
        if (((a >= DW_OP_reg0 && a <= DW_OP_reg31) || a == DW_OP_regx) && extra == 0 &&
            reg_op(a, ops[0].number, DW_OP_reg0, &reg))
            l = (struct memprof_ebpf_loc){MEMPROF_EBPF_LOC_REG, reg, 0};
        else if (((a >= DW_OP_breg0 && a <= DW_OP_breg31) || a == DW_OP_bregx) &&
                 reg_op(a, ops[0].number, DW_OP_breg0, &reg))
            l = (struct memprof_ebpf_loc){
                MEMPROF_EBPF_LOC_MEM, reg,
                (int64_t)(a == DW_OP_bregx ? ops[0].number2 : ops[0].number) + (int64_t)extra};
        else if (a == DW_OP_fbreg && frame_base->kind == MEMPROF_EBPF_LOC_REG && !at_entry)
            l = (struct memprof_ebpf_loc){MEMPROF_EBPF_LOC_MEM, frame_base->reg,
                                          (int64_t)ops[0].number + (int64_t)extra};
        else if (a == DW_OP_implicit_value && ops[0].number <= 8 && extra == 0) {
            uint64_t v = 0;
            memcpy(&v, (const void *)(uintptr_t)ops[0].number2, ops[0].number);
            l = (struct memprof_ebpf_loc){MEMPROF_EBPF_LOC_CONST, 0, (int64_t)v};
        }
        return l;
    }
    if (n != 2 || ops[1].atom != DW_OP_stack_value || extra != 0)
        return l;
    unsigned a = ops[0].atom;
    if (a >= DW_OP_lit0 && a <= DW_OP_lit31)
        l = (struct memprof_ebpf_loc){MEMPROF_EBPF_LOC_CONST, 0, a - DW_OP_lit0};
    else if (a == DW_OP_constu || a == DW_OP_const1u || a == DW_OP_const2u || a == DW_OP_const4u ||
             a == DW_OP_const8u || a == DW_OP_consts || a == DW_OP_const1s || a == DW_OP_const2s ||
             a == DW_OP_const4s || a == DW_OP_const8s)
        l = (struct memprof_ebpf_loc){MEMPROF_EBPF_LOC_CONST, 0, (int64_t)ops[0].number};
    else if (((a >= DW_OP_breg0 && a <= DW_OP_breg31) || a == DW_OP_bregx) &&
             reg_op(a, ops[0].number, DW_OP_breg0, &reg))
        l = (struct memprof_ebpf_loc){MEMPROF_EBPF_LOC_REG, reg,
                                      (int64_t)(a == DW_OP_bregx ? ops[0].number2 : ops[0].number)};
    else if ((a == DW_OP_entry_value || a == DW_OP_GNU_entry_value) && at_entry &&
             ops[0].number == 1) {
        /* At a function's entry, the entry value of a register is the register. */
        unsigned inner = *(const unsigned char *)(uintptr_t)ops[0].number2;
        if (inner >= DW_OP_reg0 && inner <= DW_OP_reg31 && reg_op(inner, 0, DW_OP_reg0, &reg))
            l = (struct memprof_ebpf_loc){MEMPROF_EBPF_LOC_REG, reg, 0};
    }
    return l;
}

/* The location at `pc` of the `want`-th byte onwards of parameter DIE `p`. */
static struct memprof_ebpf_loc param_loc(Dwarf_Die *p, uint64_t pc, uint64_t want,
                                         const struct memprof_ebpf_loc *frame_base, bool at_entry)
{
    struct memprof_ebpf_loc none = {0};
    Dwarf_Attribute a;
    Dwarf_Word cv;
    if (dwarf_attr(p, DW_AT_const_value, &a))
        return want == 0 && dwarf_formudata(&a, &cv) == 0
                   ? (struct memprof_ebpf_loc){MEMPROF_EBPF_LOC_CONST, 0, (int64_t)cv}
                   : none;
    if (!dwarf_attr(p, DW_AT_location, &a))
        return none;
    Dwarf_Op *ops;
    size_t nops;
    if (dwarf_getlocation_addr(&a, pc, &ops, &nops, 1) != 1 || nops == 0)
        return none;
    uint64_t at = 0;
    size_t start = 0;
    bool pieces = false;
    for (size_t i = 0; i < nops; i++) {
        if (ops[i].atom != DW_OP_piece)
            continue;
        pieces = true;
        if (want >= at && want < at + ops[i].number)
            return i > start ? simple_loc(ops + start, i - start, 0, frame_base, at_entry) : none;
        at += ops[i].number;
        start = i + 1;
    }
    return pieces ? none : simple_loc(ops, nops, want, frame_base, at_entry);
}

/* The byte offset of Layout's `size` in the type of parameter `p`. */
static uint64_t layout_size_offset(const struct walk *w, Dwarf_Die *p)
{
    Dwarf_Die type, m;
    Dwarf_Attribute a;
    Dwarf_Word off;
    if (ref_die(p, DW_AT_type, &type) && dwarf_child(&type, &m) == 0)
        do {
            const char *n = dwarf_diename(&m);
            if (dwarf_tag(&m) == DW_TAG_member && n && strcmp(n, "size") == 0 &&
                dwarf_attr(&m, DW_AT_data_member_location, &a) && dwarf_formudata(&a, &off) == 0)
                return off;
        } while (dwarf_siblingof(&m, &m) == 0);
    return w->layout_align_first ? 8 : 0; /* the order of the rustc that built the file */
}

#define MAX_PARAMS 4

/* The concrete DIEs of `fn`'s first MAX_PARAMS parameters, in the order of the abstract
 * function `origin` declares them (NULL where the concrete DIE lists none). */
static void params_of(Dwarf_Die *fn, Dwarf_Die *origin, Dwarf_Die conc[MAX_PARAMS],
                      Dwarf_Die abs[MAX_PARAMS], bool have[MAX_PARAMS])
{
    Dwarf_Off order[MAX_PARAMS] = {0};
    size_t n = 0;
    Dwarf_Die c;
    memset(have, 0, MAX_PARAMS * sizeof *have);
    if (dwarf_child(origin, &c) == 0)
        do {
            if (dwarf_tag(&c) == DW_TAG_formal_parameter && n < MAX_PARAMS) {
                abs[n] = c;
                order[n++] = dwarf_dieoffset(&c);
            }
        } while (dwarf_siblingof(&c, &c) == 0);
    if (dwarf_child(fn, &c) != 0)
        return;
    do {
        if (dwarf_tag(&c) != DW_TAG_formal_parameter)
            continue;
        Dwarf_Die o;
        Dwarf_Off key =
            ref_die(&c, DW_AT_abstract_origin, &o) ? dwarf_dieoffset(&o) : dwarf_dieoffset(&c);
        for (size_t i = 0; i < n; i++)
            if (order[i] == key) {
                conc[i] = c;
                have[i] = true;
            }
    } while (dwarf_siblingof(&c, &c) == 0);
}

/* Adds a site; returns its index, SIZE_MAX when it was not added. */
static size_t add_site(struct walk *w, uint64_t off, const struct memprof_ebpf_site *desc)
{
    struct memprof_ebpf_dwarf *d = w->out;
    for (size_t i = 0; i < d->nsites; i++)
        if (d->sites[i].offset == off && d->sites[i].desc.kind == desc->kind &&
            d->sites[i].desc.entry == desc->entry)
            return SIZE_MAX; /* one copy can be listed under two scopes */
    if (d->nsites >= w->max_sites) {
        d->over_budget++;
        return SIZE_MAX;
    }
    if (d->nsites == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        struct memprof_ebpf_dwsite *s = realloc(d->sites, cap * sizeof *s);
        if (!s) {
            w->err = -ENOMEM;
            return SIZE_MAX;
        }
        d->sites = s;
        w->cap = cap;
    }
    d->sites[d->nsites] = (struct memprof_ebpf_dwsite){off, *desc};
    d->inlined += desc->inlined && desc->kind != MEMPROF_EBPF_SITE_RESULT;
    return d->nsites++;
}

#define MAX_RANGES      32
#define MAX_LATER_FREES 4

struct ends {
    uint64_t lo[MAX_RANGES], hi[MAX_RANGES];
    size_t n;
};

/* The address ranges of an inlined copy. */
static void copy_ranges(Dwarf_Die *copy, struct ends *r)
{
    Dwarf_Addr base, start, end;
    ptrdiff_t o = 0;
    r->n = 0;
    while ((o = dwarf_ranges(copy, o, &base, &start, &end)) > 0 && r->n < MAX_RANGES) {
        r->lo[r->n] = start;
        r->hi[r->n++] = end;
    }
}

static bool inside(const struct ends *r, uint64_t a)
{
    for (size_t i = 0; i < r->n; i++)
        if (a >= r->lo[i] && a < r->hi[i])
            return true;
    return false;
}

/* ---- the block an inlined allocation made ----------------------------------------------
 * Inlined code has no return, and nothing says which register holds its result. But the
 * code after it keeps the result in a variable (std's `raw_ptr` or `result`, the `ptr` of
 * an inlined NonNull::new, the caller's own `let p = alloc(..)`), whose location list
 * starts where the inlined copy's code ends. Such a variable of a pointer type, in a
 * register or memory, at an address where a range of the copy ends (and no other range
 * goes on), is a RESULT site: it reads the block's address for the sample taken at the
 * entry. */

static struct memprof_ebpf_loc frame_base_of(Dwarf_Die *fn);

static bool is_end(const struct ends *r, uint64_t a)
{
    for (size_t i = 0; i < r->n; i++)
        if (a == r->hi[i])
            return !inside(r, a);
    return false;
}

/* Whether a variable has the type an allocator's result comes in before the caller casts
 * it: *mut u8, NonNull<u8>, NonNull<[u8]>, or std's Option or Result of one. A pointer to
 * anything else (the caller's &mut Vec), or a pair holding an old block (realloc's
 * Option<(NonNull<u8>, Layout)>), is some other value. */
static bool pointer_like(Dwarf_Die *var)
{
    Dwarf_Die t;
    Dwarf_Attribute a; /* a concrete copy has its type through its abstract origin */
    if (!dwarf_attr_integrate(var, DW_AT_type, &a) || !dwarf_formref_die(&a, &t))
        return false;
    for (int i = 0; i < 8; i++) {
        int tag = dwarf_tag(&t);
        if (tag != DW_TAG_typedef && tag != DW_TAG_const_type && tag != DW_TAG_volatile_type)
            break;
        if (!ref_die(&t, DW_AT_type, &t))
            return false;
    }
    static const char *const names[] = {
        "*mut u8",
        "*const u8",
        "NonNull<u8>",
        "NonNull<[u8]>",
        "Option<core::ptr::non_null::NonNull<u8>>",
        "Result<core::ptr::non_null::NonNull<[u8]>, core::alloc::AllocError>",
    };
    const char *n = dwarf_diename(&t);
    for (size_t i = 0; n && i < sizeof names / sizeof *names; i++)
        if (strcmp(n, names[i]) == 0)
            return true;
    return false;
}

struct result_search {
    struct walk *w;
    Dwarf_Off skip; /* the inlined copy itself */
    const struct ends *r;
    size_t entry;
    const struct memprof_ebpf_loc *fb;
    bool found;
};

static void result_vars(struct result_search *rs, Dwarf_Die *parent, unsigned depth)
{
    Dwarf_Die c;
    if (depth > 256 || dwarf_child(parent, &c) != 0)
        return;
    do {
        if (dwarf_dieoffset(&c) == rs->skip)
            continue;
        int tag = dwarf_tag(&c);
        Dwarf_Attribute a;
        if ((tag == DW_TAG_variable || tag == DW_TAG_formal_parameter) &&
            dwarf_attr(&c, DW_AT_location, &a) && pointer_like(&c)) {
            Dwarf_Addr base, start, end;
            Dwarf_Op *ops;
            size_t nops;
            ptrdiff_t o = 0;
            while ((o = dwarf_getlocations(&a, o, &base, &start, &end, &ops, &nops)) > 0) {
                if (!is_end(rs->r, start) || nops == 0)
                    continue;
                size_t n = 0;
                while (n < nops && ops[n].atom != DW_OP_piece)
                    n++;
                struct memprof_ebpf_loc l = simple_loc(ops, n, 0, rs->fb, false);
                uint64_t off;
                if (l.kind != MEMPROF_EBPF_LOC_REG && l.kind != MEMPROF_EBPF_LOC_MEM)
                    continue;
                if (!file_offset(rs->w, start, &off))
                    continue;
                struct memprof_ebpf_site s = {.kind = MEMPROF_EBPF_SITE_RESULT,
                                              .inlined = 1,
                                              .entry = (uint32_t)rs->entry,
                                              .ptr = l};
                if (add_site(rs->w, off, &s) != SIZE_MAX)
                    rs->found = true;
            }
        }
        if (tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block)
            result_vars(rs, &c, depth + 1);
    } while (dwarf_siblingof(&c, &c) == 0);
}

/* RESULT sites for the inlined allocation `copy` (site `entry`) in function `fn`. */
static bool find_results(struct walk *w, Dwarf_Die *fn, Dwarf_Die *copy, size_t entry)
{
    struct ends r;
    copy_ranges(copy, &r);
    struct memprof_ebpf_loc fb = frame_base_of(fn);
    struct result_search rs = {w, dwarf_dieoffset(copy), &r, entry, &fb, false};
    result_vars(&rs, fn, 0);
    return rs.found;
}

/* An inlined free whose block's address the DWARF places only further into the copy
 * (computed after its first instruction): FREE sites where the address's locations start
 * inside the copy, a few at most. A free is harmless twice (the second finds no sample),
 * so more than one of them on a path costs time only. Returns whether any was added. */
static bool later_frees(struct walk *w, Dwarf_Die *copy, Dwarf_Die *ptr, uint64_t entry,
                        const struct memprof_ebpf_loc *frame_base,
                        const struct memprof_ebpf_site *tmpl)
{
    struct ends r;
    copy_ranges(copy, &r);
    Dwarf_Attribute a;
    if (!dwarf_attr(ptr, DW_AT_location, &a))
        return false;
    Dwarf_Addr base, start, end;
    Dwarf_Op *ops;
    size_t nops, added = 0;
    ptrdiff_t o = 0;
    while ((o = dwarf_getlocations(&a, o, &base, &start, &end, &ops, &nops)) > 0 &&
           added < MAX_LATER_FREES) {
        uint64_t off;
        if (start == entry || !inside(&r, start) || !file_offset(w, start, &off))
            continue;
        struct memprof_ebpf_site s = *tmpl;
        s.ptr = param_loc(ptr, start, 0, frame_base, false);
        if (s.ptr.kind != MEMPROF_EBPF_LOC_NONE && add_site(w, off, &s) != SIZE_MAX)
            added++;
    }
    return added > 0;
}

/* A site for `die` (an inlined copy in function `inlined_in`, or an out-of-line function
 * when that is NULL) of allocator entry `e` whose abstract function is `origin`, entered
 * at `pc`. */
static void site(struct walk *w, Dwarf_Die *die, Dwarf_Die *origin, enum entry e, uint64_t pc,
                 Dwarf_Die *inlined_in, const struct memprof_ebpf_loc *frame_base)
{
    bool inlined = inlined_in != NULL;
    uint64_t off;
    if (!file_offset(w, pc, &off) || probed_by_symbol(w, off))
        return;
    Dwarf_Die conc[MAX_PARAMS], abs[MAX_PARAMS];
    bool have[MAX_PARAMS];
    params_of(die, origin, conc, abs, have);
    int size_i = -1, ptr_i = -1, layout_i = -1;
    struct memprof_ebpf_site s = {.inlined = inlined};
    switch (e) {
    case SHIM_ALLOC:
        s.kind = MEMPROF_EBPF_SITE_ALLOC, size_i = 0;
        break;
    case SHIM_REALLOC:
        s.kind = MEMPROF_EBPF_SITE_REALLOC, ptr_i = 0, size_i = 3;
        break;
    case SHIM_FREE:
        s.kind = MEMPROF_EBPF_SITE_FREE, ptr_i = 0;
        break;
    case GA_ALLOC:
        s.kind = MEMPROF_EBPF_SITE_ALLOC, layout_i = 1;
        break;
    case GA_REALLOC:
        s.kind = MEMPROF_EBPF_SITE_REALLOC, ptr_i = 1, size_i = 3;
        break;
    case GA_FREE:
        s.kind = MEMPROF_EBPF_SITE_FREE, ptr_i = 1;
        break;
    default:
        return;
    }
    bool at_entry = !inlined;
    if (size_i >= 0 && have[size_i])
        s.size = param_loc(&conc[size_i], pc, 0, frame_base, at_entry);
    if (layout_i >= 0 && have[layout_i])
        s.size = param_loc(&conc[layout_i], pc, layout_size_offset(w, &abs[layout_i]), frame_base,
                           at_entry);
    if (ptr_i >= 0 && have[ptr_i])
        s.ptr = param_loc(&conc[ptr_i], pc, 0, frame_base, at_entry);
    /* An allocation needs its size; a free (or a realloc's old block) its address. A free
     * whose address is gone (an allocator that ignores it, as a bump allocator does) has
     * nothing to report. Each probe hit costs microseconds: a free is probed further into
     * its copy only when the entry cannot see the address. */
    if (inlined && s.kind == MEMPROF_EBPF_SITE_FREE && have[ptr_i] &&
        s.ptr.kind == MEMPROF_EBPF_LOC_NONE &&
        later_frees(w, die, &conc[ptr_i], pc, frame_base, &s))
        return; /* seen further in */
    bool ok = s.kind == MEMPROF_EBPF_SITE_FREE ? s.ptr.kind != MEMPROF_EBPF_LOC_NONE
                                               : s.size.kind != MEMPROF_EBPF_LOC_NONE;
    if (!ok) {
        /* An out-of-line method whose arguments are on its stack (unoptimised code) is
         * reached through the shims, which are probed by symbol: only an inlined
         * allocation is lost. */
        w->out->unreadable += inlined && s.kind != MEMPROF_EBPF_SITE_FREE;
        w->out->frees_unseen += inlined && s.kind == MEMPROF_EBPF_SITE_FREE;
        return;
    }
    size_t at = add_site(w, off, &s);
    if (inlined && s.kind != MEMPROF_EBPF_SITE_FREE && at != SIZE_MAX &&
        find_results(w, inlined_in, die, at))
        w->out->sites[at].desc.has_result = 1;
}

/* The lowest address of a DIE's code (its entry for an inlined copy without
 * DW_AT_entry_pc). */
static bool entry_address(Dwarf_Die *die, uint64_t *pc)
{
    Dwarf_Addr a;
    if (dwarf_entrypc(die, &a) == 0) {
        *pc = a;
        return true;
    }
    Dwarf_Addr base, start, end, low = UINT64_MAX;
    ptrdiff_t o = 0;
    while ((o = dwarf_ranges(die, o, &base, &start, &end)) > 0)
        if (start < low)
            low = start;
    *pc = low;
    return low != UINT64_MAX;
}

static struct memprof_ebpf_loc frame_base_of(Dwarf_Die *fn)
{
    struct memprof_ebpf_loc none = {0};
    Dwarf_Attribute a;
    Dwarf_Op *ops;
    size_t n;
    uint32_t reg;
    if (!dwarf_attr(fn, DW_AT_frame_base, &a) || dwarf_getlocation(&a, &ops, &n) != 0 || n != 1 ||
        ops[0].atom < DW_OP_reg0 || ops[0].atom > DW_OP_reg31 ||
        !reg_op(ops[0].atom, 0, DW_OP_reg0, &reg))
        return none;
    return (struct memprof_ebpf_loc){MEMPROF_EBPF_LOC_REG, reg, 0};
}

static void walk_children(struct walk *w, Dwarf_Die *parent, Dwarf_Die *fn,
                          const struct memprof_ebpf_loc *fb, unsigned depth);

static unsigned site_kind_bit(enum entry e)
{
    switch (e) {
    case SHIM_ALLOC:
    case GA_ALLOC:
        return 1u << MEMPROF_EBPF_SITE_ALLOC;
    case SHIM_REALLOC:
    case GA_REALLOC:
        return 1u << MEMPROF_EBPF_SITE_REALLOC;
    case SHIM_FREE:
    case GA_FREE:
        return 1u << MEMPROF_EBPF_SITE_FREE;
    default:
        return 0;
    }
}

/* Whether the inlined copy `die` of a shim has a GlobalAlloc method inlined in it (the
 * allocator's code is there) rather than calling one. */
static bool has_inlined_method(Dwarf_Die *die, unsigned depth)
{
    Dwarf_Die c, origin;
    if (depth > 64 || dwarf_child(die, &c) != 0)
        return false;
    do {
        int tag = dwarf_tag(&c);
        if (tag == DW_TAG_inlined_subroutine && ref_die(&c, DW_AT_abstract_origin, &origin)) {
            enum entry e = classify(&origin);
            if (e >= GA_ALLOC && e <= GA_FREE)
                return true;
        }
        if ((tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block) &&
            has_inlined_method(&c, depth + 1))
            return true;
    } while (dwarf_siblingof(&c, &c) == 0);
    return false;
}

static void walk_die(struct walk *w, Dwarf_Die *die, Dwarf_Die *fn,
                     const struct memprof_ebpf_loc *fb, unsigned depth)
{
    int tag = dwarf_tag(die);
    if (tag == DW_TAG_subprogram) {
        Dwarf_Addr low;
        if (dwarf_lowpc(die, &low) != 0)
            return; /* a declaration or an abstract instance: no code */
        struct memprof_ebpf_loc own_fb = frame_base_of(die);
        Dwarf_Die origin;
        if (!ref_die(die, DW_AT_abstract_origin, &origin) &&
            !ref_die(die, DW_AT_specification, &origin))
            origin = *die;
        enum entry e = classify(die);
        uint64_t off;
        bool by_symbol = e != ENTRY_NONE && file_offset(w, low, &off) && probed_by_symbol(w, off);
        if (w->pass == 1) {
            if (e < GA_ALLOC || e > GA_FREE)
                return;
            size_t before = w->out->nsites;
            if (!by_symbol)
                site(w, die, &origin, e, low, NULL, &own_fb);
            if (by_symbol || w->out->nsites > before)
                w->out_of_line |= site_kind_bit(e);
            return;
        }
        if (e != ENTRY_NONE)
            return; /* probed (or unprobeable) as a whole: what it calls counts in it */
        walk_children(w, die, die, &own_fb, depth + 1);
        return;
    }
    if (w->pass == 1) {
        if (tag == DW_TAG_namespace || tag == DW_TAG_structure_type || tag == DW_TAG_module)
            walk_children(w, die, fn, fb, depth + 1);
        return;
    }
    if (tag == DW_TAG_inlined_subroutine) {
        Dwarf_Die origin;
        enum entry e =
            ref_die(die, DW_AT_abstract_origin, &origin) ? classify(&origin) : ENTRY_NONE;
        if (e == ENTRY_SYSTEM)
            return;
        uint64_t pc;
        if (e != ENTRY_NONE) {
            /* A shim that calls an out-of-line method the probes see is that method's
             * call, not an allocation of its own. */
            bool calls_probed = e <= SHIM_FREE && (w->out_of_line & site_kind_bit(e)) &&
                                !has_inlined_method(die, 0);
            if (fn && !calls_probed && entry_address(die, &pc))
                site(w, die, &origin, e, pc, fn, fb);
            return; /* the outermost copy only */
        }
    }
    if (tag == DW_TAG_inlined_subroutine || tag == DW_TAG_lexical_block ||
        tag == DW_TAG_namespace || tag == DW_TAG_structure_type || tag == DW_TAG_module ||
        tag == DW_TAG_compile_unit || tag == DW_TAG_union_type || tag == DW_TAG_enumeration_type)
        walk_children(w, die, fn, fb, depth + 1);
}

static void walk_children(struct walk *w, Dwarf_Die *parent, Dwarf_Die *fn,
                          const struct memprof_ebpf_loc *fb, unsigned depth)
{
    Dwarf_Die c;
    if (depth > 256 || w->err || dwarf_child(parent, &c) != 0)
        return;
    do
        walk_die(w, &c, fn, fb, depth);
    while (!w->err && dwarf_siblingof(&c, &c) == 0);
}

int memprof__ebpf_dwarf_scan(const char *path, const struct memprof_ebpf_elf *elf, size_t max_sites,
                             struct memprof_ebpf_dwarf *out)
{
    memset(out, 0, sizeof *out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    Dwarf *dw = dwarf_begin(fd, DWARF_C_READ);
    if (!dw) {
        close(fd);
        return 0; /* no debug information */
    }
    struct walk w = {.elf = dwarf_getelf(dw),
                     .syms = elf,
                     .layout_align_first = elf->layout_align_first,
                     .max_sites = max_sites,
                     .out = out};
    if (w.elf && elf_getphdrnum(w.elf, &w.nphdr) == 0) {
        out->debug_info = true;
        struct memprof_ebpf_loc none = {0};
        for (w.pass = 1; w.pass <= 2 && !w.err; w.pass++) {
            Dwarf_Off o = 0, next;
            size_t hsize;
            while (!w.err && dwarf_nextcu(dw, o, &next, &hsize, NULL, NULL, NULL) == 0) {
                Dwarf_Die cu;
                if (dwarf_offdie(dw, o + hsize, &cu))
                    walk_children(&w, &cu, NULL, &none, 0);
                o = next;
            }
        }
    }
    dwarf_end(dw);
    close(fd);
    if (w.err)
        memprof__ebpf_dwarf_free(out);
    return w.err;
}

/* The call frame information says where the canonical frame address is kept at `vaddr`:
 * through %rbp (DWARF register 6 on x86-64) when the function keeps a frame pointer there,
 * through %rsp when it does not. Exact where reading the prologue is not: a compiler may
 * schedule other instructions between `push %rbp` and `mov %rsp,%rbp`. */
int memprof__ebpf_dwarf_fp_at(const char *path, uint64_t vaddr)
{
#if defined(__x86_64__)
    int fd;
    Elf *e = memprof__ebpf_elf_open(path, &fd);
    if (!e)
        return -1;
    Dwarf_CFI *cfi = dwarf_getcfi_elf(e);
    Dwarf_Frame *frame = NULL;
    Dwarf_Op *ops;
    size_t nops;
    int r = -1;
    if (cfi && dwarf_cfi_addrframe(cfi, vaddr, &frame) == 0 &&
        dwarf_frame_cfa(frame, &ops, &nops) == 0 && nops == 1) {
        uint64_t reg = ops[0].atom == DW_OP_bregx ? ops[0].number
                       : ops[0].atom >= DW_OP_breg0 && ops[0].atom <= DW_OP_breg31
                           ? (uint64_t)(ops[0].atom - DW_OP_breg0)
                           : UINT64_MAX;
        if (reg == 6)
            r = 1;
        else if (reg == 7)
            r = 0;
    }
    free(frame);
    if (cfi)
        dwarf_cfi_end(cfi);
    memprof__ebpf_elf_close(e, fd);
    return r;
#else
    (void)path;
    (void)vaddr;
    return -1;
#endif
}

#else /* !HAVE_LIBDW */

int memprof__ebpf_dwarf_fp_at(const char *path, uint64_t vaddr)
{
    (void)path;
    (void)vaddr;
    return -1;
}

int memprof__ebpf_dwarf_scan(const char *path, const struct memprof_ebpf_elf *elf, size_t max_sites,
                             struct memprof_ebpf_dwarf *out)
{
    (void)path;
    (void)elf;
    (void)max_sites;
    memset(out, 0, sizeof *out);
    return 0;
}

#endif

void memprof__ebpf_dwarf_free(struct memprof_ebpf_dwarf *d)
{
    free(d->sites);
    memset(d, 0, sizeof *d);
}
