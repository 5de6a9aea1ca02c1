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

#include "loader/elf_dynamic.h"
#include "interpose/preload.h"

static bool is_named(const struct memprof_elf_dynamic *d, uint32_t i, const char *name)
{
    const ElfW(Sym) *sym = &d->symtab[i];
    return sym->st_name < d->strsz && strcmp(d->strtab + sym->st_name, name) == 0 &&
           sym->st_shndx != SHN_UNDEF && ELF64_ST_TYPE(sym->st_info) == STT_FUNC;
}

/* What a retargeted entry becomes, and how many entries got it. */
struct target_value {
    ElfW(Addr) value;
    unsigned stored;
};

static bool store_value(ElfW(Sym) * sym, struct target_value *v)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t pg = (uintptr_t)&sym->st_value & ~(uintptr_t)(page - 1);
    if (mprotect((void *)pg, page, PROT_READ | PROT_WRITE) != 0)
        return false;
    __atomic_store_n(&sym->st_value, v->value, __ATOMIC_RELEASE);
    mprotect((void *)pg, page, PROT_READ);
    v->stored++;
    return true;
}

/* Retargets each defined function symbol called `name` (every version of it), found through
 * the object's hash table (memprof__elf_hash_begin): a few probes per name instead of a
 * scan of libc's three thousand symbols, which every process under the plugin would pay.
 * Returns false if a store failed or libc has no hash table. */
static bool retarget_named(const struct memprof_elf_dynamic *d, const char *name,
                           struct target_value *v)
{
    struct memprof_elf_hash_walk w;
    if (!memprof__elf_hash_begin(&w, d, name))
        return false;
    for (uint32_t i; memprof__elf_hash_next(&w, &i);)
        if (is_named(d, i, name) && !store_value(&d->symtab[i], v))
            return false;
    return true;
}

bool memprof__preload_retarget_libc(const struct memprof_retarget *targets, size_t n)
{
    Dl_info info;
    struct link_map *libc = NULL;
    if (!dladdr1((void *)gnu_get_libc_version, &info, (void **)&libc, RTLD_DL_LINKMAP) || !libc)
        return false;
    uintptr_t base = libc->l_addr;
    struct memprof_elf_dynamic d;
    memprof__elf_read_dynamic(base, libc->l_ld, &d);
    if (!d.symtab || !d.strtab)
        return false;
    for (size_t t = 0; t < n; t++) {
        struct target_value v = {(ElfW(Addr))((uintptr_t)targets[t].fn - base), 0};
        /* A failure leaves the entries done so far retargeted: harmless, the plugin's
         * functions take any block. */
        if (!retarget_named(&d, targets[t].name, &v) || (targets[t].required && v.stored == 0))
            return false;
    }
    return true;
}
