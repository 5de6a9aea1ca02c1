/* SPDX-License-Identifier: MIT */
/*
 * Reading a loaded ELF object's dynamic section: where its symbol, string, hash and
 * relocation tables are, and the definitions it exports. Shared by the GOT-slot rewriting
 * (imports.c, got.c) and the preload plugin's retargeting of libc's symbol entries
 * (preload_retarget.c); inline, so the plugin needs no entry point of the library for it.
 * Includers define _GNU_SOURCE (link.h's ElfW).
 */
#ifndef MEMPROF_LOADER_ELF_DYNAMIC_H
#define MEMPROF_LOADER_ELF_DYNAMIC_H

#include <elf.h>
#include <link.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct memprof_elf_dynamic {
    ElfW(Sym) * symtab;
    const char *strtab;
    size_t strsz;
    const uint32_t *hash, *gnu_hash; /* DT_HASH, DT_GNU_HASH (either may be missing) */
    uintptr_t jmprel, rela, rel;     /* relocation tables, 0 if absent */
    size_t pltrelsz, relasz, relsz;
    long pltrel;   /* DT_REL or DT_RELA: the kind of the PLT's relocations */
    bool symbolic; /* DT_SYMBOLIC, or DF_SYMBOLIC in DT_FLAGS: its own definitions first */
    size_t soname; /* DT_SONAME's offset in the string table; SIZE_MAX if none */
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
    *d = (struct memprof_elf_dynamic){.pltrel = DT_RELA, .soname = SIZE_MAX};
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
        case DT_SYMBOLIC:
            d->symbolic = true;
            break;
        case DT_FLAGS:
            d->symbolic |= (val & DF_SYMBOLIC) != 0;
            break;
        case DT_SONAME:
            d->soname = val;
            break;
        default:
            break;
        }
    }
}

static inline bool memprof__elf_defines(const struct memprof_elf_dynamic *d, uint32_t i,
                                        const char *name)
{
    const ElfW(Sym) *s = &d->symtab[i];
    unsigned type = ELF64_ST_TYPE(s->st_info), bind = ELF64_ST_BIND(s->st_info);
    return s->st_shndx != SHN_UNDEF && s->st_name < d->strsz &&
           (type == STT_FUNC || type == STT_NOTYPE) && (bind == STB_GLOBAL || bind == STB_WEAK) &&
           ELF64_ST_VISIBILITY(s->st_other) != STV_HIDDEN &&
           strcmp(d->strtab + s->st_name, name) == 0;
}

/* The entries a name's hash leads to in an object's GNU hash table, else its SysV one: the
 * few candidates to compare by name instead of a scan of every symbol. One walk for the
 * lookups of got.c and the retargeting of libc's entries (preload_retarget.c), which differ
 * only in what they do with a match. */
struct memprof_elf_hash_walk {
    const uint32_t *chain; /* GNU: hash values from symoffset on; SysV: next indices */
    uint32_t next;         /* the next index to yield, 0 (or done) when there is none */
    uint32_t limit;        /* GNU: symoffset; SysV: nchain */
    uint32_t hash;         /* GNU: the name's hash */
    bool gnu, done;
};

/* Starts the walk of `name`'s entries; false if the object has no hash table at all. */
static inline bool memprof__elf_hash_begin(struct memprof_elf_hash_walk *w,
                                           const struct memprof_elf_dynamic *d, const char *name)
{
    *w = (struct memprof_elf_hash_walk){.done = true};
    if (d->gnu_hash) {
        const uint32_t *gh = d->gnu_hash;
        uint32_t nbuckets = gh[0], symoffset = gh[1], bloom_words = gh[2];
        const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gh + 4) + bloom_words);
        uint32_t h = 5381;
        for (const unsigned char *c = (const unsigned char *)name; *c; c++)
            h = h * 33 + *c;
        w->gnu = true;
        w->chain = buckets + nbuckets;
        w->limit = symoffset;
        w->hash = h;
        w->next = nbuckets ? buckets[h % nbuckets] : 0;
        /* An empty bucket holds an index below symoffset. */
        w->done = nbuckets == 0 || w->next < symoffset;
        return true;
    }
    if (d->hash) {
        uint32_t nbucket = d->hash[0];
        const uint32_t *bucket = d->hash + 2;
        uint32_t h = 0;
        for (const unsigned char *c = (const unsigned char *)name; *c; c++) {
            h = (h << 4) + *c;
            h = (h ^ ((h & 0xf0000000u) >> 24)) & 0x0fffffffu;
        }
        w->chain = bucket + nbucket;
        w->limit = d->hash[1];
        w->next = nbucket ? bucket[h % nbucket] : 0;
        w->done = false;
        return true;
    }
    return false;
}

/* The next symbol index that may be `name` (its hash matches), false at the chain's end.
 * The caller compares the name and whatever else it requires. */
static inline bool memprof__elf_hash_next(struct memprof_elf_hash_walk *w, uint32_t *index)
{
    if (w->gnu) {
        while (!w->done) {
            uint32_t i = w->next++;
            uint32_t h = w->chain[i - w->limit];
            w->done = (h & 1) != 0; /* the low bit ends the chain */
            if ((h | 1) == (w->hash | 1)) {
                *index = i;
                return true;
            }
        }
        return false;
    }
    if (w->done || w->next == 0 || w->next >= w->limit)
        return false;
    *index = w->next;
    w->next = w->chain[w->next];
    return true;
}

/* The address of the function `name` that the object at `base` defines and exports (not an
 * indirect function), 0 if none: looked up through its hash table in memory, so without
 * the dynamic loader's lock. */
static inline uintptr_t memprof__elf_lookup(uintptr_t base, const struct memprof_elf_dynamic *d,
                                            const char *name)
{
    struct memprof_elf_hash_walk w;
    if (!d->symtab || !d->strtab || !memprof__elf_hash_begin(&w, d, name))
        return 0;
    for (uint32_t i; memprof__elf_hash_next(&w, &i);)
        if (memprof__elf_defines(d, i, name))
            return base + d->symtab[i].st_value;
    return 0;
}

#endif
