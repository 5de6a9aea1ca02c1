/* SPDX-License-Identifier: MIT */
/*
 * Rewriting an ELF object's GOT slots for named imports (imports.h): the dynamic section
 * gives the symbol and string tables and the relocation tables; each JUMP_SLOT or GLOB_DAT
 * relocation whose symbol is one of the imports gets its slot rewritten.
 */
#define _GNU_SOURCE
#include "loader/imports.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "loader/elf_dynamic.h"

#if defined(__x86_64__)
#define R_JUMP_SLOT R_X86_64_JUMP_SLOT
#define R_GLOB_DAT  R_X86_64_GLOB_DAT
#elif defined(__aarch64__)
#define R_JUMP_SLOT R_AARCH64_JUMP_SLOT
#define R_GLOB_DAT  R_AARCH64_GLOB_DAT
#endif

struct object {
    uintptr_t base;
    uintptr_t ro_lo, ro_hi; /* page range that RELRO made read-only */
    const ElfW(Sym) * symtab;
    const char *strtab;
    size_t strsz;
    size_t page;
    const struct memprof_import *imports;
    size_t nimports;
    uint64_t first[4]; /* bit c: some import's name starts with byte c */
    void *(*choose)(void *ctx, size_t i, void *value); /* NULL: imports[i].fn */
    void *ctx;
};

/* The executable segments of the object this file is linked into (the profiler's own code),
 * from its program headers: no lookup, so no loader lock inside dl_iterate_phdr(). */
/* Declared as bytes, not as one Ehdr: the program headers lie beyond the header, and a
 * pointer derived from a one-struct object may not reach them (UBSan's object-size check). */
extern const char __ehdr_start[] __attribute__((visibility("hidden")));

static bool is_own_code(const void *p)
{
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)(const void *)__ehdr_start;
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)((const char *)eh + eh->e_phoff);
    uintptr_t base = 0, at = (uintptr_t)p;
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && ph[i].p_offset == 0) /* the segment with the header */
            base = (uintptr_t)eh - ph[i].p_vaddr;
    for (int i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X) && at >= base + ph[i].p_vaddr &&
            at < base + ph[i].p_vaddr + ph[i].p_memsz)
            return true;
    return false;
}

static void patch_slot(const struct object *o, void **slot, void *fn)
{
    /* A slot that holds one of the profiler's own replacements stays: libunwind's syscall
     * import is the descriptor-free probe (unwind_probe.c), which the GOT start's syscall
     * hook must not displace. */
    if (*slot == fn || is_own_code(*slot))
        return;
    uintptr_t at = (uintptr_t)slot, pg = at & ~(o->page - 1);
    bool ro = at >= o->ro_lo && at < o->ro_hi;
    if (ro && mprotect((void *)pg, o->page, PROT_READ | PROT_WRITE) != 0)
        return;
    __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    if (ro)
        mprotect((void *)pg, o->page, PROT_READ);
}

/* The index in o->imports of the symbol's name, o->nimports if it is none of them. */
static size_t import_index(const struct object *o, size_t symidx)
{
    const ElfW(Sym) *sym = &o->symtab[symidx];
    if (sym->st_name >= o->strsz)
        return o->nimports;
    const unsigned char *name = (const unsigned char *)o->strtab + sym->st_name;
    /* The first byte settles most names without a loop or a call: a program's start looks
     * at every import of every object (thousands in a C++ program), and a strcmp per import
     * each was 0.5 % of a short compiler run. */
    if (!(o->first[name[0] >> 6] >> (name[0] & 63) & 1))
        return o->nimports;
    for (size_t i = 0; i < o->nimports; i++)
        if (strcmp((const char *)name, o->imports[i].name) == 0)
            return i;
    return o->nimports;
}

/* One relocation: if it binds one of the imports through a GOT slot, rewrite the slot. */
static void patch_reloc(const struct object *o, uint64_t info, uint64_t offset)
{
#if defined(R_JUMP_SLOT)
    unsigned long type = ELF64_R_TYPE(info);
    if (type != R_JUMP_SLOT && type != R_GLOB_DAT)
        return;
    size_t i = import_index(o, ELF64_R_SYM(info));
    if (i == o->nimports)
        return;
    void **slot = (void **)(o->base + offset);
    void *value = __atomic_load_n(slot, __ATOMIC_RELAXED);
    if (is_own_code(value))
        return;
    void *fn = o->choose ? o->choose(o->ctx, i, value) : o->imports[i].fn;
    if (fn)
        patch_slot(o, slot, fn);
#else
    (void)o, (void)info, (void)offset; /* no GOT patching on this architecture */
#endif
}

static void patch_rela(const struct object *o, const ElfW(Rela) * r, size_t bytes)
{
    for (size_t i = 0; i < bytes / sizeof *r; i++)
        patch_reloc(o, r[i].r_info, r[i].r_offset);
}

static void patch_rel(const struct object *o, const ElfW(Rel) * r, size_t bytes)
{
    for (size_t i = 0; i < bytes / sizeof *r; i++)
        patch_reloc(o, r[i].r_info, r[i].r_offset);
}

void memprof__imports_rewrite(const struct dl_phdr_info *info, const struct memprof_import *imports,
                              size_t n, void *(*choose)(void *ctx, size_t i, void *value),
                              void *ctx)
{
    struct object o = {.base = info->dlpi_addr,
                       .page = (size_t)sysconf(_SC_PAGESIZE),
                       .imports = imports,
                       .nimports = n,
                       .choose = choose,
                       .ctx = ctx};
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)imports[i].name[0];
        o.first[c >> 6] |= (uint64_t)1 << (c & 63);
    }
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(o.base + ph->p_vaddr);
        else if (ph->p_type == PT_GNU_RELRO) {
            o.ro_lo = (o.base + ph->p_vaddr) & ~(o.page - 1);
            o.ro_hi = (o.base + ph->p_vaddr + ph->p_memsz) & ~(o.page - 1);
        }
    }
    if (!dyn)
        return;
    struct memprof_elf_dynamic d;
    memprof__elf_read_dynamic(o.base, dyn, &d);
    o.symtab = d.symtab;
    o.strtab = d.strtab;
    o.strsz = d.strsz;
    if (!o.symtab || !o.strtab)
        return;
    if (d.jmprel && d.pltrel == DT_RELA)
        patch_rela(&o, (const ElfW(Rela) *)d.jmprel, d.pltrelsz);
    else if (d.jmprel)
        patch_rel(&o, (const ElfW(Rel) *)d.jmprel, d.pltrelsz);
    if (d.rela)
        patch_rela(&o, (const ElfW(Rela) *)d.rela, d.relasz);
    if (d.rel)
        patch_rel(&o, (const ElfW(Rel) *)d.rel, d.relsz);
}

void memprof__imports_patch(const struct dl_phdr_info *info, const struct memprof_import *imports,
                            size_t n)
{
    memprof__imports_rewrite(info, imports, n, NULL, NULL);
}

struct patch_at {
    uintptr_t addr;
    const struct memprof_import *imports;
    size_t n;
    bool found;
};

static int patch_at_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct patch_at *p = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && p->addr >= start && p->addr < start + ph->p_memsz) {
            memprof__imports_patch(info, p->imports, p->n);
            p->found = true;
            return 1;
        }
    }
    return 0;
}

int memprof__imports_patch_at(const void *addr, const struct memprof_import *imports, size_t n)
{
    struct patch_at p = {(uintptr_t)addr, imports, n, false};
    dl_iterate_phdr(patch_at_cb, &p);
    return p.found ? 0 : -ENOENT;
}
