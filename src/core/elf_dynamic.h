/* SPDX-License-Identifier: MIT */
/*
 * Reading a loaded ELF object's dynamic section: where its symbol, string, hash and
 * relocation tables are. Shared by the GOT-slot rewriting (imports.c) and the preload
 * plugin's retargeting of libc's symbol entries (preload_retarget.c); inline, so the plugin
 * needs no entry point of the library for it. Includers define _GNU_SOURCE (link.h's ElfW).
 */
#ifndef MEMPROF_CORE_ELF_DYNAMIC_H
#define MEMPROF_CORE_ELF_DYNAMIC_H

#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>

struct memprof_elf_dynamic {
    ElfW(Sym) * symtab;
    const char *strtab;
    size_t strsz;
    const uint32_t *hash, *gnu_hash; /* DT_HASH, DT_GNU_HASH (either may be missing) */
    uintptr_t jmprel, rela, rel;     /* relocation tables, 0 if absent */
    size_t pltrelsz, relasz, relsz;
    long pltrel; /* DT_REL or DT_RELA: the kind of the PLT's relocations */
};

/* The loader relocates most objects' dynamic-section pointers in place; the vDSO's (and
 * some platforms') are left as offsets. */
static inline uintptr_t memprof__elf_dyn_ptr(uintptr_t base, ElfW(Addr) v)
{
    return v < base ? base + v : v;
}

/* Fills *d from the dynamic section `dyn` of the object loaded at `base`. */
static inline void memprof__elf_read_dynamic(uintptr_t base, const ElfW(Dyn) * dyn,
                                             struct memprof_elf_dynamic *d)
{
    *d = (struct memprof_elf_dynamic){.pltrel = DT_RELA};
    for (; dyn->d_tag != DT_NULL; dyn++) {
        uintptr_t ptr = memprof__elf_dyn_ptr(base, dyn->d_un.d_ptr);
        size_t val = dyn->d_un.d_val;
        switch (dyn->d_tag) {
        case DT_SYMTAB:
            d->symtab = (ElfW(Sym) *)ptr;
            break;
        case DT_STRTAB:
            d->strtab = (const char *)ptr;
            break;
        case DT_STRSZ:
            d->strsz = val;
            break;
        case DT_HASH:
            d->hash = (const uint32_t *)ptr;
            break;
        case DT_GNU_HASH:
            d->gnu_hash = (const uint32_t *)ptr;
            break;
        case DT_JMPREL:
            d->jmprel = ptr;
            break;
        case DT_PLTRELSZ:
            d->pltrelsz = val;
            break;
        case DT_PLTREL:
            d->pltrel = (long)val;
            break;
        case DT_RELA:
            d->rela = ptr;
            break;
        case DT_RELASZ:
            d->relasz = val;
            break;
        case DT_REL:
            d->rel = ptr;
            break;
        case DT_RELSZ:
            d->relsz = val;
            break;
        default:
            break;
        }
    }
}

#endif
