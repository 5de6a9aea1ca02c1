/* SPDX-License-Identifier: MIT */
/*
 * Rewriting an ELF object's GOT slots for named imports (imports.h): the dynamic section
 * gives the symbol and string tables and the relocation tables; each JUMP_SLOT or GLOB_DAT
 * relocation whose symbol is one of the imports gets its slot rewritten.
 */
#define _GNU_SOURCE
#include "core/imports.h"

#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

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
};

static void patch_slot(const struct object *o, void **slot, void *fn)
{
    if (*slot == fn)
        return;
    uintptr_t at = (uintptr_t)slot, pg = at & ~(o->page - 1);
    bool ro = at >= o->ro_lo && at < o->ro_hi;
    if (ro && mprotect((void *)pg, o->page, PROT_READ | PROT_WRITE) != 0)
        return;
    __atomic_store_n(slot, fn, __ATOMIC_RELEASE);
    if (ro)
        mprotect((void *)pg, o->page, PROT_READ);
}

static void *replacement_for(const struct object *o, size_t symidx)
{
    const ElfW(Sym) *sym = &o->symtab[symidx];
    if (sym->st_name >= o->strsz)
        return NULL;
    const char *name = o->strtab + sym->st_name;
    for (size_t i = 0; i < o->nimports; i++)
        if (strcmp(name, o->imports[i].name) == 0)
            return o->imports[i].fn;
    return NULL;
}

/* One relocation: if it binds one of the imports through a GOT slot, rewrite the slot. */
static void patch_reloc(const struct object *o, uint64_t info, uint64_t offset)
{
#if defined(R_JUMP_SLOT)
    unsigned long type = ELF64_R_TYPE(info);
    if (type != R_JUMP_SLOT && type != R_GLOB_DAT)
        return;
    void *fn = replacement_for(o, ELF64_R_SYM(info));
    if (fn)
        patch_slot(o, (void **)(o->base + offset), fn);
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

/* The loader relocates most objects' dynamic-section pointers in place; the vDSO's (and
 * some platforms') are left as offsets. */
static uintptr_t dyn_ptr(uintptr_t base, ElfW(Addr) v)
{
    return v < base ? base + v : v;
}

void memprof__imports_patch(const struct dl_phdr_info *info, const struct memprof_import *imports,
                            size_t n)
{
    struct object o = {.base = info->dlpi_addr,
                       .page = (size_t)sysconf(_SC_PAGESIZE),
                       .imports = imports,
                       .nimports = n};
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
    uintptr_t jmprel = 0, rela = 0, rel = 0;
    size_t pltrelsz = 0, relasz = 0, relsz = 0;
    long pltrel = DT_RELA;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB:
            o.symtab = (const ElfW(Sym) *)dyn_ptr(o.base, dyn->d_un.d_ptr);
            break;
        case DT_STRTAB:
            o.strtab = (const char *)dyn_ptr(o.base, dyn->d_un.d_ptr);
            break;
        case DT_STRSZ:
            o.strsz = dyn->d_un.d_val;
            break;
        case DT_JMPREL:
            jmprel = dyn_ptr(o.base, dyn->d_un.d_ptr);
            break;
        case DT_PLTRELSZ:
            pltrelsz = dyn->d_un.d_val;
            break;
        case DT_PLTREL:
            pltrel = (long)dyn->d_un.d_val;
            break;
        case DT_RELA:
            rela = dyn_ptr(o.base, dyn->d_un.d_ptr);
            break;
        case DT_RELASZ:
            relasz = dyn->d_un.d_val;
            break;
        case DT_REL:
            rel = dyn_ptr(o.base, dyn->d_un.d_ptr);
            break;
        case DT_RELSZ:
            relsz = dyn->d_un.d_val;
            break;
        default:
            break;
        }
    }
    if (!o.symtab || !o.strtab)
        return;
    if (jmprel && pltrel == DT_RELA)
        patch_rela(&o, (const ElfW(Rela) *)jmprel, pltrelsz);
    else if (jmprel)
        patch_rel(&o, (const ElfW(Rel) *)jmprel, pltrelsz);
    if (rela)
        patch_rela(&o, (const ElfW(Rela) *)rela, relasz);
    if (rel)
        patch_rel(&o, (const ElfW(Rel) *)rel, relsz);
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
