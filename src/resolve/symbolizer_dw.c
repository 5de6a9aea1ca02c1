/* SPDX-License-Identifier: MIT */
/*
 * The libdw back end of the symbolizer (symbolizer.h): a return address of this process, or
 * a file address of a module another file reported, to the function containing it, the
 * functions inlined there (innermost first) and their source files and lines, with the
 * module's symbol table for the outermost name. Built into libmemprof-symbolize.so, the
 * module the library loads on its first lookup, and linked into the command and the unit
 * tests. Every function runs under the resolver's lock (symbols.c).
 */
#define _GNU_SOURCE
#include "config.h"
#include "resolve/symbolizer.h"

#include <link.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if HAVE_LIBDW
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#endif

#include "common/hash.h"
#include "resolve/debugcache.h"
#include "resolve/debugfind.h"
#include "resolve/demangle.h"
#include "resolve/symtab.h"

#define MAX_INLINE_DEPTH 32

static const struct memprof__symbolizer_host *host;

#if HAVE_LIBDW
static const char *intern(const char *s)
{
    return host->intern(s);
}

/* A symbol-table or DWARF name as the binary spells it, interned, without the ELF symbol
 * version a symbol-table name may carry ("memcpy@@GLIBC_2.14"), which is no part of the
 * function's name. */
static const char *spelling(const char *versioned)
{
    const char *at = strchr(versioned, '@');
    char *name = at && at != versioned ? strndup(versioned, (size_t)(at - versioned)) : NULL;
    const char *spelled = intern(name ? name : versioned);
    free(name);
    return spelled;
}

/* The readable name of `spelled` (interned, spelling()), interned; *system gets `spelled`
 * when that differs, else NULL. */
static const char *demangle_spelled(const char *spelled, const char **system)
{
    *system = NULL;
    char *readable = spelled ? memprof__demangle(spelled) : NULL;
    if (!readable)
        return spelled;
    const char *out = intern(readable);
    free(readable);
    *system = out ? spelled : NULL;
    return out ? out : spelled;
}

/* The readable name of a symbol-table or DWARF name, interned; *system as above. */
static const char *demangle(const char *versioned, const char **system)
{
    *system = NULL;
    return versioned ? demangle_spelled(spelling(versioned), system) : NULL;
}

/* ---- function symbol indexes -------------------------------------------------------------- */

/* A module's function symbols sorted by address, built once per module: libdw's own
 * address-to-symbol lookup scans the whole table on every call, far too slow for the
 * hundreds of thousands of addresses a big profile holds. Addresses are file (unbiased). */
/* A defined function symbol and the range it may answer for: its size, or for an unsized
 * one (hand-written assembly, some PLT stubs) up to the end of its section; the lookup takes
 * the last symbol starting at or before an address, so a range never reaches past the next
 * defined symbol either. Undefined symbols (SHN_UNDEF: a non-PIE program's canonical PLT
 * entries such as strcmp@GLIBC_2.2.5, whose value is a PLT address) are never kept: as the
 * last symbol before an address they named every function of the gcc driver "strcmp". */
static struct symtab *symtabs;

/* Reads a module's function symbols through libdw, which also finds separate debug files
 * and MiniDebugInfo. */
static void load_symtab(struct symtab *t, Dwfl_Module *m)
{
    int nsyms = dwfl_module_getsymtab(m);
    Dwarf_Addr bias = 0;
    if (nsyms <= 0 || !dwfl_module_getelf(m, &bias))
        return;
    t->syms = calloc((size_t)nsyms, sizeof *t->syms);
    if (!t->syms)
        return;
    size_t n = 0;
    for (int i = 0; i < nsyms; i++) {
        GElf_Sym sym;
        GElf_Addr addr;
        GElf_Word shndx = SHN_UNDEF;
        Elf *elf = NULL;
        const char *name = dwfl_module_getsym_info(m, i, &sym, &addr, &shndx, &elf, NULL);
        int type = GELF_ST_TYPE(sym.st_info);
        if (!name || !*name || addr == 0 || (type != STT_FUNC && type != STT_GNU_IFUNC) ||
            shndx == SHN_UNDEF || shndx >= SHN_LORESERVE)
            continue;
        uintptr_t start = addr - bias, size = sym.st_size;
        if (!size) {
            GElf_Shdr mem, *sh = elf ? gelf_getshdr(elf_getscn(elf, shndx), &mem) : NULL;
            if (sh && sh->sh_addr + sh->sh_size > start)
                size = sh->sh_addr + sh->sh_size - start;
        }
        if (!size)
            continue; /* not inside its section: nothing it can answer for */
        /* Interned and demangled when first looked up (symtab_lookup()): a module has tens
         * of thousands of symbols, a profile's stacks touch a few hundred of them (interning
         * them all was a third of `memprof run`'s work after a build). Until then `name` is
         * NULL and `system` the name as the symbol table holds it, in the module's Elf, which
         * lives as long as the module: module_gone() drops the index first. */
        t->syms[n++] = (struct func_sym){start, size, NULL, name};
    }
    t->n = n;
    memprof__symtab_sort(t);
}

/* The index of module `path` (interned), NULL before its first lookup. */
static struct symtab *symtab_of(const char *path)
{
    struct symtab *t = symtabs;
    while (t && t->path != path)
        t = t->next;
    return t;
}

/* The Dwfl module each index was read from (its names are that module's until looked up),
 * parallel to `symtabs` through struct symtab's `next`: kept here, symtab.h being shared
 * with the back end without libdw. */
struct symtab_of_module {
    struct symtab t;
    Dwfl_Module *mod;
};

/* Looks vaddr (a file address) up in the index of module `path`; `mod` is what the back
 * end needs to build the index. Returns the function's name, its spelling in *system. */
static const char *symtab_lookup(const char *path, const void *mod, uintptr_t vaddr,
                                 uintptr_t *offset, const char **system)
{
    *system = NULL;
    struct symtab *t = symtab_of(path);
    if (!t) {
        struct symtab_of_module *tm = calloc(1, sizeof *tm);
        if (!tm)
            return NULL;
        t = &tm->t;
        tm->mod = (Dwfl_Module *)mod;
        t->path = path;
        load_symtab(t, tm->mod);
        t->next = symtabs;
        symtabs = t;
    }
    struct func_sym *f = memprof__symtab_find_sym(t, vaddr);
    if (f && !f->name) {
        const char *spelled = spelling(f->system);
        if (!spelled)
            return NULL; /* out of memory: asked again next time */
        f->name = demangle_spelled(spelled, &f->system);
    }
    return memprof__symtab_answer(f, vaddr, offset, system);
}

/* symbolizer.h: whether module `path`'s index holds any function. */
static bool module_has_symbols(const char *path)
{
    const struct symtab *t = symtab_of(path);
    return t && t->n > 0;
}

static Dwfl *dwfl;
static unsigned long long reported_adds = ~0ull;

static int adds_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
        *(unsigned long long *)data = info->dlpi_adds;
    return 1;
}

/* (Re)reads the process's modules when objects were loaded since the last report. */
/* Separate debug files from this machine only (symbols.h: libdw's standard search would
 * ask the servers of DEBUGINFOD_URLS from inside the profiled program), read from the cache
 * of decompressed copies where the command made one (debugcache.h; never written here). */
static int find_local_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname,
                                Dwarf_Addr base, const char *file_name, const char *debuglink,
                                GElf_Word crc, char **debuginfo_file_name)
{
    (void)userdata, (void)modname, (void)base, (void)crc;
    int fd = memprof__debug_find(mod, file_name, debuglink, NULL, 0, debuginfo_file_name);
    return memprof__debug_cache(fd, debuginfo_file_name, false);
}

static int module_removed(Dwfl_Module *mod, void *userdata, const char *name, Dwarf_Addr base,
                          void *arg);

static void dwfl_refresh(void)
{
    static Dwfl_Callbacks callbacks = {
        .find_elf = dwfl_linux_proc_find_elf,
        .find_debuginfo = find_local_debuginfo,
    };
    unsigned long long adds = 0;
    dl_iterate_phdr(adds_cb, &adds);
    if (dwfl && adds == reported_adds)
        return;
    if (!dwfl) {
        /* The user may let the process ask debuginfod itself (symbols.h). */
        const char *ask = getenv("MEMPROF_DEBUGINFOD");
        if (ask && !strcmp(ask, "1"))
            callbacks.find_debuginfo = dwfl_standard_find_debuginfo;
        if (!(dwfl = dwfl_begin(&callbacks)))
            return;
    }
    dwfl_report_begin(dwfl);
    dwfl_linux_proc_report(dwfl, getpid());
    dwfl_report_end(dwfl, module_removed, NULL);
    reported_adds = adds;
}

/* A DIE's name: the demangled linkage name if there is one, else DW_AT_name; both looked up
 * through DW_AT_abstract_origin/DW_AT_specification (dwarf_attr_integrate). */
static const char *die_name(Dwarf_Die *die, const char **system)
{
    Dwarf_Attribute attr;
    const char *name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
    if (!name)
        name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
    if (!name)
        name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr));
    return demangle(name, system);
}

/* ---- per-CU function scope index --------------------------------------------------------
 * dwarf_getscopes() walks a compilation unit's DIE tree from its root on every call. With a
 * large CU and many addresses that dominates symbolization, so each CU's function scopes
 * (subprograms and inlined subroutines with their address ranges and nesting depth) are
 * collected once and searched per address instead. */

struct scope {
    Dwarf_Addr lo, hi;
    Dwarf_Die die;
    unsigned depth;
};

struct cu_index {
    Dwfl_Module *mod; /* whose DWARF it is: module_gone() */
    Dwarf *dbg;
    Dwarf_Off off;
    struct scope *v;
    size_t n, cap;
    struct cu_index *next;
};

#define CU_BUCKETS 1024
static struct cu_index *cu_buckets[CU_BUCKETS];

static void add_scope(struct cu_index *cu, Dwarf_Die *die, unsigned depth)
{
    ptrdiff_t off = 0;
    Dwarf_Addr base, lo, hi;
    while ((off = dwarf_ranges(die, off, &base, &lo, &hi)) > 0) {
        if (cu->n == cu->cap) {
            size_t cap = cu->cap ? cu->cap * 2 : 64;
            struct scope *v = realloc(cu->v, cap * sizeof *v);
            if (!v)
                return;
            cu->v = v;
            cu->cap = cap;
        }
        cu->v[cu->n++] = (struct scope){lo, hi, *die, depth};
    }
}

static void walk_scopes(struct cu_index *cu, Dwarf_Die *first, unsigned depth)
{
    Dwarf_Die die = *first;
    do {
        int tag = dwarf_tag(&die);
        if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine)
            add_scope(cu, &die, depth);
        /* Functions and inlined code nest inside these; nothing else holds code. */
        bool descend = tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
                       tag == DW_TAG_lexical_block || tag == DW_TAG_namespace ||
                       tag == DW_TAG_class_type || tag == DW_TAG_structure_type ||
                       tag == DW_TAG_union_type || tag == DW_TAG_module;
        Dwarf_Die child;
        if (descend && depth < 64 && dwarf_child(&die, &child) == 0)
            walk_scopes(cu, &child, depth + 1);
    } while (dwarf_siblingof(&die, &die) == 0);
}

static struct cu_index *cu_index_get(Dwfl_Module *mod, Dwarf_Die *cudie)
{
    Dwarf *dbg = dwarf_cu_getdwarf(cudie->cu);
    Dwarf_Off off = dwarf_dieoffset(cudie);
    size_t b = (size_t)(memprof__mix64(off ^ (uint64_t)(uintptr_t)dbg) & (CU_BUCKETS - 1));
    for (struct cu_index *c = cu_buckets[b]; c; c = c->next)
        if (c->dbg == dbg && c->off == off)
            return c;
    struct cu_index *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->mod = mod;
    c->dbg = dbg;
    c->off = off;
    Dwarf_Die child;
    if (dwarf_child(cudie, &child) == 0)
        walk_scopes(c, &child, 1);
    c->next = cu_buckets[b];
    cu_buckets[b] = c;
    return c;
}

/* The function scopes containing addr, innermost first. Returns the count. */
static unsigned scopes_at(struct cu_index *cu, Dwarf_Addr addr, Dwarf_Die *out, unsigned max)
{
    struct scope *hits[MAX_INLINE_DEPTH];
    unsigned n = 0;
    for (size_t i = 0; i < cu->n && n < MAX_INLINE_DEPTH; i++)
        if (addr >= cu->v[i].lo && addr < cu->v[i].hi)
            hits[n++] = &cu->v[i];
    /* Deepest first (insertion sort: a handful of entries). */
    for (unsigned i = 1; i < n; i++)
        for (unsigned j = i; j > 0 && hits[j]->depth > hits[j - 1]->depth; j--) {
            struct scope *t = hits[j];
            hits[j] = hits[j - 1];
            hits[j - 1] = t;
        }
    unsigned k = 0;
    for (; k < n && k < max; k++)
        out[k] = hits[k]->die;
    return k;
}

/* The CU containing addr when the module has no .debug_aranges (clang does not emit them by
 * default, and libdw 0.188 then finds no CU): a scan of the CU headers, remembering the
 * last hit, since consecutive lookups tend to fall in the same CU. */
static Dwarf *last_dw;
static Dwarf_Off last_off;

static Dwarf_Die *cu_by_scan(Dwfl_Module *mod, Dwarf_Addr addr, Dwarf_Die *out, Dwarf_Addr *bias)
{
    Dwarf *dw = dwfl_module_getdwarf(mod, bias);
    if (!dw)
        return NULL;
    Dwarf_Addr a = addr - *bias;
    if (dw == last_dw && dwarf_offdie(dw, last_off, out) && dwarf_haspc(out, a) > 0)
        return out;
    Dwarf_Off off = 0, next;
    size_t hsize;
    while (dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL) == 0) {
        if (dwarf_offdie(dw, off + hsize, out) && dwarf_haspc(out, a) > 0) {
            last_dw = dw;
            last_off = off + hsize;
            return out;
        }
        off = next;
    }
    return NULL;
}

/* Fills frames (innermost first) from the DWARF scopes at addr; symname is the symbol-table
 * name of the function (already interned; symsys its spelling, demangle()), used for the
 * outermost frame. Returns the count. */
static unsigned dwarf_frames(Dwfl_Module *mod, Dwarf_Addr addr, const char *symname,
                             const char *symsys, struct memprof_sym_frame *frames, unsigned max)
{
    const char *file = NULL;
    int line = 0;
    Dwfl_Line *l = dwfl_module_getsrc(mod, addr);
    if (l)
        file = dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL);
    unsigned n = 0;
    Dwarf_Addr bias;
    Dwarf_Die cu_storage;
    Dwarf_Die *cu = dwfl_module_addrdie(mod, addr, &bias);
    if (!cu && (cu = cu_by_scan(mod, addr, &cu_storage, &bias)) != NULL && !l) {
        /* No .debug_aranges: the line table of the CU found by the scan. */
        Dwarf_Line *dl = dwarf_getsrc_die(cu, addr - bias);
        if (dl) {
            file = dwarf_linesrc(dl, NULL, NULL);
            dwarf_lineno(dl, &line);
        }
    }
    struct cu_index *index = cu ? cu_index_get(mod, cu) : NULL;
    Dwarf_Die scopes[MAX_INLINE_DEPTH];
    unsigned nscopes = index ? scopes_at(index, addr - bias, scopes, MAX_INLINE_DEPTH) : 0;
    Dwarf_Files *files = NULL;
    size_t nfiles = 0;
    if (cu)
        dwarf_getsrcfiles(cu, &files, &nfiles);
    for (unsigned i = 0; i < nscopes && n < max; i++) {
        int tag = dwarf_tag(&scopes[i]);
        if (tag == DW_TAG_inlined_subroutine) {
            const char *system;
            const char *name = die_name(&scopes[i], &system);
            frames[n++] = (struct memprof_sym_frame){name, intern(file),
                                                     (uint32_t)(line > 0 ? line : 0), true, system};
            /* The caller's position is this inline instance's call site. */
            Dwarf_Attribute attr;
            Dwarf_Word fidx = 0, cline = 0;
            file = NULL;
            if (dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_file, &attr), &fidx) == 0 &&
                files && fidx < nfiles)
                file = dwarf_filesrc(files, fidx, NULL, NULL);
            line = dwarf_formudata(dwarf_attr(&scopes[i], DW_AT_call_line, &attr), &cline) == 0
                       ? (int)cline
                       : 0;
        } else {
            const char *system = symsys;
            const char *name = symname ? symname : die_name(&scopes[i], &system);
            frames[n++] = (struct memprof_sym_frame){
                name, intern(file), (uint32_t)(line > 0 ? line : 0), false, system};
            break;
        }
    }
    if (n == 0 || frames[n - 1].inlined) {
        /* No DWARF function scope (no debug info, or a gap): the symbol table's name. */
        if (n < max)
            frames[n++] = (struct memprof_sym_frame){
                symname, intern(file), (uint32_t)(line > 0 ? line : 0), false, symsys};
    }
    return n;
}

/* symbolizer.h: the frames of a return address less one of this process. */
static unsigned process_frames(uintptr_t lookup, const char *path, struct memprof_sym_frame *frames,
                               unsigned max, uintptr_t *sym_offset)
{
    *sym_offset = 0;
    dwfl_refresh();
    Dwfl_Module *mod = dwfl ? dwfl_addrmodule(dwfl, lookup) : NULL;
    if (!mod)
        return 0;
    Dwarf_Addr bias = 0;
    dwfl_module_getelf(mod, &bias);
    uintptr_t off = 0;
    const char *symsys = NULL;
    const char *symname = path ? symtab_lookup(path, mod, lookup - bias, &off, &symsys) : NULL;
    *sym_offset = symname ? off + 1 : 0;
    return dwarf_frames(mod, lookup, symname, symsys, frames, max);
}

static unsigned module_frames(struct Dwfl_Module *mod, const char *key, uintptr_t addr,
                              struct memprof_sym_frame *frames, unsigned max, uintptr_t *sym_offset)
{
    Dwarf_Addr bias = 0;
    uintptr_t off = 0;
    dwfl_module_getelf(mod, &bias);
    const char *symsys;
    const char *symname = symtab_lookup(key, mod, addr - bias, &off, &symsys);
    *sym_offset = symname ? off + 1 : 0;
    unsigned n = dwarf_frames(mod, addr, symname, symsys, frames, max);
    return n == 1 && !frames[0].function && !frames[0].file ? 0 : n;
}

/* symbolizer.h: module `mod` is about to end. Its indexes go with it: the names not yet
 * looked up and the DIEs are in its Elf and Dwarf, and a later module may be given the same
 * addresses. What they handed out is interned and stays. */
static void module_gone(struct Dwfl_Module *mod)
{
    for (struct symtab **p = &symtabs; *p;) {
        struct symtab_of_module *tm = (struct symtab_of_module *)*p;
        if (tm->mod != mod) {
            p = &(*p)->next;
            continue;
        }
        *p = tm->t.next;
        free(tm->t.syms);
        free(tm);
    }
    for (size_t b = 0; b < CU_BUCKETS; b++)
        for (struct cu_index **p = &cu_buckets[b]; *p;) {
            struct cu_index *c = *p;
            if (c->mod != mod) {
                p = &c->next;
                continue;
            }
            *p = c->next;
            free(c->v);
            free(c);
        }
    last_dw = NULL;
}

/* dwfl_report_end(): a module of the process that is gone (dlclose()). */
static int module_removed(Dwfl_Module *mod, void *userdata, const char *name, Dwarf_Addr base,
                          void *arg)
{
    (void)userdata, (void)name, (void)base, (void)arg;
    module_gone(mod);
    return DWARF_CB_OK;
}
#endif

/* Everything handed out so far stays valid (nothing here is ever freed); the half-changed
 * state is left behind, as is a Dwfl whose descriptors may be another table's. */
static void forget(void)
{
#if HAVE_LIBDW
    symtabs = NULL;
    dwfl = NULL;
    reported_adds = ~0ull;
    memset(cu_buckets, 0, sizeof cu_buckets);
#endif
}

__attribute__((visibility("default"))) const struct memprof__symbolizer *
memprof__symbolizer_open(const struct memprof__symbolizer_host *h)
{
    static const struct memprof__symbolizer table = {
        .abi = MEMPROF_SYMBOLIZER_ABI,
#if HAVE_LIBDW
        .process_frames = process_frames,
        .module_has_symbols = module_has_symbols,
        .module_frames = module_frames,
        .module_gone = module_gone,
#endif
        .demangle = memprof__demangle,
        .forget = forget,
    };
    if (!h || h->abi != MEMPROF_SYMBOLIZER_ABI || !h->intern)
        return NULL;
    host = h;
    return &table;
}
