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
 * When. The entries are found at start (memprof__preload_retarget_prepare(): a few hash
 * probes), but written only when first needed (memprof__preload_retarget_ready()): writing
 * makes the pages holding them writable and copies each one (five page copies and two
 * mprotect() calls, ~33 us, a twentieth of a /bin/true), which a process that never samples
 * need not pay. Needed means either of: the first block of the sample heap (before it
 * exists, no lookup can give glibc's free a block it must not see), and the first call into
 * the dynamic loader's lookup functions from outside the plugin (dlopen, dlmopen, dlsym,
 * dlvsym, which the plugin defines where it can: preload_dl.c), through which alone a lookup
 * can end in libc's table after start. Whoever comes first writes; the others wait for it.
 * Where the plugin cannot define those functions, the constructor writes at once.
 *
 * What it cannot change: references bound before the plugin's constructor runs, and the
 * __libc_free/__libc_realloc aliases, left as glibc's so that code wanting glibc's own
 * functions can still name them (a block of the sample heap must not be passed to them).
 *
 * The same lookup through an object's hash table answers whether an object defines a name
 * (memprof__preload_defines()), which the plugin asks of the global free at start.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <elf.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/atomic.h"
#include "common/compiler.h"
#include "interpose/preload.h"
#include "loader/elf_dynamic.h"

/* Whether entry i defines a symbol called `name`, of any type. */
static bool defines_named(const struct memprof_elf_dynamic *d, uint32_t i, const char *name)
{
    const ElfW(Sym) *sym = &d->symtab[i];
    return sym->st_shndx != SHN_UNDEF && sym->st_name < d->strsz &&
           strcmp(d->strtab + sym->st_name, name) == 0;
}

static bool is_named(const struct memprof_elf_dynamic *d, uint32_t i, const char *name)
{
    return defines_named(d, i, name) && ELF64_ST_TYPE(d->symtab[i].st_info) == STT_FUNC;
}

/* The entries to retarget and their new values, all found before any is written: the
 * pages that hold them are then made writable once, with one mprotect() call before and one
 * after, instead of two per entry. (glibc has one version of each name on the architectures
 * it supports; a few more would still fit.) */
#define MAX_ENTRIES 12

struct entries {
    ElfW(Sym) * sym[MAX_ENTRIES];
    ElfW(Addr) value[MAX_ENTRIES];
    unsigned n;
};

/* Found at start, written when needed. */
static struct entries pending MEMPROF_START_DATA;

/* memprof__preload_retarget_word: the state (RETARGET_*, the low byte, which preload_dl.c's
 * code compares) and, while being written, the pid of the process writing (the high bits):
 * a fork() child of a process in the middle of writing finds a pid not its own and writes
 * again (the writes are the same, and end with the pages read-only). */
enum {
    RETARGET_UNPREPARED = 0, /* before the constructor: nothing to write yet */
    RETARGET_PENDING = 1,    /* found, not written */
    RETARGET_WRITING = 2,
    RETARGET_DONE = MEMPROF_RETARGET_DONE, /* written, or nothing to write */
    RETARGET_FAILED = 4,                   /* the sample heap must not be used */
};
_Atomic uint64_t memprof__preload_retarget_word MEMPROF_START_DATA;

/* The thread writing, so that a signal handler interrupting it does not wait for itself. */
static __thread bool writing;

/* Adds each defined function symbol called `name` (every version of it), found through the
 * object's hash table (memprof__elf_hash_begin): a few probes per name instead of a scan of
 * libc's three thousand symbols, which every process under the plugin would pay. Returns the
 * number of entries found, or -1 if libc has no hash table or there are too many. */
static int find_named(const struct memprof_elf_dynamic *d, const char *name, ElfW(Addr) value,
                      struct entries *e)
{
    struct memprof_elf_hash_walk w;
    if (!memprof__elf_hash_begin(&w, d, name))
        return -1;
    int found = 0;
    for (uint32_t i; memprof__elf_hash_next(&w, &i);) {
        if (!is_named(d, i, name))
            continue;
        if (e->n == MAX_ENTRIES)
            return -1;
        e->sym[e->n] = &d->symtab[i];
        e->value[e->n++] = value;
        found++;
    }
    return found;
}

/* The page size. Not from sysconf() where it is fixed: its code and its table are two pages of
 * libc that nothing else touches at start, a page fault each in every process. */
static size_t page_size(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return 4096;
#else
    return (size_t)sysconf(_SC_PAGESIZE);
#endif
}

/* Writes every entry, the pages from the first entry's to the last one's writable meanwhile
 * (all inside libc's .dynsym, in its read-only segment, which is what they go back to). */
static bool store_all(const struct entries *e)
{
    if (e->n == 0)
        return true;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (unsigned i = 0; i < e->n; i++) {
        uintptr_t at = (uintptr_t)&e->sym[i]->st_value;
        lo = at < lo ? at : lo;
        hi = at > hi ? at : hi;
    }
    size_t page = page_size();
    lo &= ~(uintptr_t)(page - 1);
    hi = (hi + sizeof(ElfW(Addr)) + page - 1) & ~(uintptr_t)(page - 1);
    if (mprotect((void *)lo, hi - lo, PROT_READ | PROT_WRITE) != 0)
        return false;
    for (unsigned i = 0; i < e->n; i++)
        __atomic_store_n(&e->sym[i]->st_value, e->value[i], __ATOMIC_RELEASE);
    mprotect((void *)lo, hi - lo, PROT_READ);
    return true;
}

/* The load bias and dynamic section of the object holding `addr`, found by its program
 * headers: dladdr1() would scan the object's whole symbol table for the nearest symbol
 * (~50 us for libc), in every process. */
struct object_at {
    uintptr_t addr, base;
    const ElfW(Dyn) * dyn;
};

MEMPROF_START_TEXT static int find_object(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct object_at *o = data;
    const ElfW(Dyn) *dyn = NULL;
    bool contains = false;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && o->addr >= start && o->addr - start < ph->p_memsz)
            contains = true;
        else if (ph->p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)start;
    }
    if (!contains)
        return 0;
    o->base = info->dlpi_addr;
    o->dyn = dyn;
    return 1;
}

/* The load bias (in *base) and dynamic section of the object holding `addr`; false if no
 * object holds it, or it has no symbol or string table. */
MEMPROF_START_TEXT static bool dynamic_of(const void *addr, uintptr_t *base,
                                          struct memprof_elf_dynamic *d)
{
    struct object_at o = {.addr = (uintptr_t)addr};
    if (!dl_iterate_phdr(find_object, &o) || !o.dyn)
        return false;
    *base = o.base;
    memprof__elf_read_dynamic(o.base, o.dyn, d);
    return d->symtab && d->strtab;
}

/* libc's, found once (libc is never unloaded): asked for several times at start. Filled by
 * the first thread to find it; another one meanwhile finds it again for itself. */
static struct {
    _Atomic int state; /* 0: not yet, 1: being filled, 2: filled */
    uintptr_t base;
    struct memprof_elf_dynamic d;
} libc_dyn MEMPROF_START_DATA;

MEMPROF_START_TEXT static bool libc_dynamic(uintptr_t *base, struct memprof_elf_dynamic *d)
{
    if (memprof_atomic_load_acquire(&libc_dyn.state) == 2) {
        *base = libc_dyn.base;
        *d = libc_dyn.d;
        return true;
    }
    if (!dynamic_of((const void *)gnu_get_libc_version, base, d))
        return false;
    int expected = 0;
    if (memprof_atomic_cas_seqcst(&libc_dyn.state, &expected, 1)) {
        libc_dyn.base = *base;
        libc_dyn.d = *d;
        memprof_atomic_store_release(&libc_dyn.state, 2);
    }
    return true;
}

MEMPROF_START_TEXT bool memprof__preload_retarget_prepare(const struct memprof_retarget *targets,
                                                          size_t n)
{
    uintptr_t base;
    struct memprof_elf_dynamic d;
    if (!libc_dynamic(&base, &d))
        return false;
    pending.n = 0;
    for (size_t t = 0; t < n; t++) {
        int found = find_named(&d, targets[t].name, (ElfW(Addr))((uintptr_t)targets[t].fn - base),
                               &pending);
        if (found < 0 || (targets[t].required && found == 0))
            return false;
    }
    memprof_atomic_store_release(&memprof__preload_retarget_word, RETARGET_PENDING);
#if !MEMPROF_PRELOAD_DL_HOOKS
    /* Without the plugin's own dlopen and dlsym, a lookup could end in libc's table at any
     * time from now on, unseen: write at once. */
    return memprof__preload_retarget_ready();
#else
    return true;
#endif
}

void memprof__preload_retarget_none(void)
{
    memprof_atomic_store_release(&memprof__preload_retarget_word, RETARGET_DONE);
}

/* Writes the pending entries, or waits for the thread that does. */
static bool write_or_wait(void)
{
    for (;;) {
        uint64_t w = memprof_atomic_load_acquire(&memprof__preload_retarget_word);
        unsigned state = (unsigned)(w & 0xff);
        if (state == RETARGET_DONE)
            return true;
        if (state == RETARGET_FAILED || state == RETARGET_UNPREPARED)
            return false;
        uint64_t me = (uint64_t)getpid() << 8;
        if (state == RETARGET_WRITING && (w & ~(uint64_t)0xff) == me) {
            if (writing)
                return false; /* a signal handler of the writing thread */
            sched_yield();
            continue;
        }
        /* Pending, or being written by the process this one was forked from. */
        if (!memprof_atomic_cas_seqcst(&memprof__preload_retarget_word, &w, me | RETARGET_WRITING))
            continue;
        writing = true;
        bool ok = store_all(&pending);
        writing = false;
        memprof_atomic_store_release(&memprof__preload_retarget_word,
                                     ok ? RETARGET_DONE : RETARGET_FAILED);
        return ok;
    }
}

bool memprof__preload_retarget_ready(void)
{
    uint64_t w = memprof_atomic_load_acquire(&memprof__preload_retarget_word);
    if (MEMPROF_LIKELY((w & 0xff) == RETARGET_DONE))
        return true;
    return write_or_wait();
}

MEMPROF_START_TEXT void *memprof__preload_libc_function(const char *name)
{
    uintptr_t base;
    struct memprof_elf_dynamic d;
    if (!libc_dynamic(&base, &d))
        return NULL;
    return (void *)memprof__elf_lookup(base, &d, name);
}

MEMPROF_START_TEXT memprof_dlsym_fn *memprof__preload_libc_dlsym(void)
{
    /* The same function for every thread that finds it: a racing store is harmless. */
    static _Atomic(memprof_dlsym_fn *) found MEMPROF_START_DATA;
    memprof_dlsym_fn *f = memprof_atomic_load_relaxed(&found);
    if (!f) {
        f = (memprof_dlsym_fn *)memprof__preload_libc_function("dlsym");
        memprof_atomic_store_relaxed(&found, f);
    }
    return f;
}

int memprof__preload_defines(const void *addr, const char *name)
{
    uintptr_t base;
    struct memprof_elf_dynamic d;
    struct memprof_elf_hash_walk w;
    if (!dynamic_of(addr, &base, &d) || !memprof__elf_hash_begin(&w, &d, name))
        return -1;
    for (uint32_t i; memprof__elf_hash_next(&w, &i);)
        if (defines_named(&d, i, name))
            return 1;
    return 0;
}
