/* SPDX-License-Identifier: MIT */
/*
 * Points libc's own dynamic-symbol entries for the functions that take a block back (free,
 * realloc, reallocarray, malloc_usable_size, cfree, free_sized) at the preload plugin's
 * definitions.
 *
 * LD_PRELOAD makes the plugin win every lookup that starts in the global scope, but some
 * lookups end in libc's own symbol table: a library loaded with RTLD_DEEPBIND binds to its
 * own dependencies (libc) first, and dlsym() on libc's handle (ctypes.CDLL("libc.so.6").free)
 * searches libc alone. Those calls would reach glibc's free() directly: for a block of the
 * sample heap that aborts the program, and for any sampled block it leaves a stale sample.
 * Once libc's entries hold the plugin's addresses, every later lookup of these names, from
 * any scope, resolves to the plugin; symbol values are offsets from the object's base, so
 * the entry holds (plugin function - libc base), modulo 2^64. The functions that hand out
 * blocks keep glibc's entries: a block glibc made is fine for the plugin's free.
 *
 * What it cannot change: references bound before it runs (the plugin's constructor runs
 * before any program code), and the __libc_free/__libc_realloc aliases, left as glibc's
 * so that code wanting glibc's own functions can still name them (a block of the sample
 * heap must not be passed to them).
 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <elf.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "interpose/preload.h"

/* The loader relocates libc's dynamic-section pointers in place; other objects (the vDSO)
 * keep offsets. */
static uintptr_t dyn_ptr(uintptr_t base, ElfW(Addr) v)
{
    return v < base ? base + v : v;
}

/* Number of dynamic symbols: DT_HASH's chain count, or the last chain of DT_GNU_HASH. */
static size_t symbol_count(const uint32_t *hash, const uint32_t *gnu_hash)
{
    if (hash)
        return hash[1];
    if (!gnu_hash)
        return 0;
    uint32_t nbuckets = gnu_hash[0], symoffset = gnu_hash[1], bloom_words = gnu_hash[2];
    const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gnu_hash + 4) + bloom_words);
    const uint32_t *chain = buckets + nbuckets;
    uint32_t last = 0;
    for (uint32_t b = 0; b < nbuckets; b++)
        if (buckets[b] > last)
            last = buckets[b];
    if (last < symoffset)
        return symoffset;
    while (!(chain[last - symoffset] & 1))
        last++;
    return (size_t)last + 1;
}

static bool store_value(ElfW(Sym) * sym, ElfW(Addr) value, size_t page)
{
    uintptr_t pg = (uintptr_t)&sym->st_value & ~(uintptr_t)(page - 1);
    if (mprotect((void *)pg, page, PROT_READ | PROT_WRITE) != 0)
        return false;
    __atomic_store_n(&sym->st_value, value, __ATOMIC_RELEASE);
    mprotect((void *)pg, page, PROT_READ);
    return true;
}

bool memprof__preload_retarget_libc(const struct memprof_retarget *targets, size_t n)
{
    Dl_info info;
    struct link_map *libc = NULL;
    if (!dladdr1((void *)gnu_get_libc_version, &info, (void **)&libc, RTLD_DL_LINKMAP) || !libc)
        return false;
    uintptr_t base = libc->l_addr;
    ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    size_t strsz = 0;
    const uint32_t *hash = NULL, *gnu_hash = NULL;
    for (const ElfW(Dyn) *d = libc->l_ld; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB:
            symtab = (ElfW(Sym) *)dyn_ptr(base, d->d_un.d_ptr);
            break;
        case DT_STRTAB:
            strtab = (const char *)dyn_ptr(base, d->d_un.d_ptr);
            break;
        case DT_STRSZ:
            strsz = d->d_un.d_val;
            break;
        case DT_HASH:
            hash = (const uint32_t *)dyn_ptr(base, d->d_un.d_ptr);
            break;
        case DT_GNU_HASH:
            gnu_hash = (const uint32_t *)dyn_ptr(base, d->d_un.d_ptr);
            break;
        default:
            break;
        }
    }
    size_t nsyms = symbol_count(hash, gnu_hash);
    if (!symtab || !strtab || nsyms == 0)
        return false;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uint64_t found = 0; /* bit t: targets[t] retargeted (every version of the name) */
    for (size_t i = 1; i < nsyms; i++) {
        ElfW(Sym) *sym = &symtab[i];
        if (sym->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(sym->st_info) != STT_FUNC ||
            sym->st_name >= strsz)
            continue;
        const char *name = strtab + sym->st_name;
        for (size_t t = 0; t < n; t++) {
            if (strcmp(name, targets[t].name) != 0)
                continue;
            /* A failure leaves the entries done so far retargeted: harmless, the plugin's
             * functions take any block. */
            if (!store_value(sym, (ElfW(Addr))((uintptr_t)targets[t].fn - base), page))
                return false;
            found |= (uint64_t)1 << t;
        }
    }
    for (size_t t = 0; t < n; t++)
        if (targets[t].required && !(found & ((uint64_t)1 << t)))
            return false;
    return true;
}
