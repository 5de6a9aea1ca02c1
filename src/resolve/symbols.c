/* SPDX-License-Identifier: MIT */
/*
 * Native symbolization (symbols.h): the per-address cache, module identity (path, build id,
 * load bias), and two back ends: libdw (file:line and inlined frames), loaded with the
 * symbolizer module on the first lookup (symbolizer.h), and, when that module cannot be
 * loaded, dladdr plus the module's ELF symbol table. One mutex serialises everything here:
 * lookups only run at resolve and export time, and libdw's Dwfl is not thread-safe.
 */
#define _GNU_SOURCE
#include "config.h"
#include "resolve/symbols.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic.h"
#include "common/hash.h"
#include "resolve/strpool.h"
#include "resolve/symbolizer.h"
#include "resolve/symtab.h"

#define MAX_INLINE_DEPTH 32

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t n_resolved, n_unresolved;
/* memprof__sym_set_symbolize(); set without the lock, which every process under
 * `memprof run` would otherwise take at start (a page of its own to fault). */
static _Atomic bool symbolize = true;

/* The symbolizer module's table (symbolizer.h), NULL until asked for or when it cannot be
 * loaded. Asked for once, under the lock, by the first lookup that needs names. */
static const struct memprof__symbolizer *backend;
static bool backend_asked;

static const struct memprof__symbolizer *symbolizer(void)
{
    if (!backend_asked) {
        backend = memprof__symbolizer_get();
        backend_asked = true;
    }
    return backend;
}

/* ---- demangling ------------------------------------------------------------------------- */

/* The profiler demangles C++ and Rust names itself (demangle.h, in the symbolizer module:
 * names stay as spelled when it cannot be loaded), whatever the process loaded. Symbol-table
 * names may carry an ELF symbol version ("memcpy@@GLIBC_2.14"), which
 * is no part of the function's name. *system gets the name as the binary spells it (pprof's
 * system_name) when that differs from the one returned, else NULL. */
static const char *demangle(const char *versioned, const char **system)
{
    *system = NULL;
    if (!versioned)
        return NULL;
    const char *at = strchr(versioned, '@');
    char *name = at && at != versioned ? strndup(versioned, (size_t)(at - versioned)) : NULL;
    const char *spelled = memprof__strpool_intern(name ? name : versioned);
    free(name);
    const struct memprof__symbolizer *sz = spelled ? symbolizer() : NULL;
    char *readable = sz ? sz->demangle(spelled) : NULL;
    if (!readable)
        return spelled;
    const char *out = memprof__strpool_intern(readable);
    free(readable);
    *system = out ? spelled : NULL;
    return out ? out : spelled;
}

/* ---- module identity -------------------------------------------------------------------- */

static void hex(const unsigned char *bits, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[bits[i] >> 4];
        out[2 * i + 1] = digits[bits[i] & 15];
    }
    out[2 * n] = 0;
}

struct module_query {
    uintptr_t pc;
    const char *path;
    uintptr_t bias;
    uintptr_t map_start, map_limit;
    uint64_t map_offset;
    char build_id[2 * 64 + 1];
    int found;
};

/* Finds the loaded object containing pc, and its GNU build id note (from the program
 * headers in memory, so it works for stripped and deleted files too). */
static int module_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct module_query *q = data;
    bool contains = false;
    for (int i = 0; i < info->dlpi_phnum && !contains; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        contains = ph->p_type == PT_LOAD && q->pc >= start && q->pc < start + ph->p_memsz;
        if (contains) {
            /* The segment as mmap() placed it (/proc/self/maps): whole pages, the start's
             * file offset being p_offset rounded down as p_vaddr is (the two agree modulo
             * the page size). One exception: pprof takes a mapping of a shared object at
             * file offset 0 for a kernel image (elfexec.GetBase's kernelBase(), "offset ==
             * 0") and computes its base as start - p_vaddr, wrong whenever p_vaddr !=
             * p_offset: lld puts the code of a small PIE at offset 0x700, vaddr 0x1700, in
             * the file's first page. Such a segment is described by its exact start and
             * p_offset, the same runtime-to-file map, which pprof computes right. */
            uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), skew = start & (page - 1);
            q->map_start = start - skew;
            q->map_limit = (start + ph->p_memsz + page - 1) & ~(page - 1);
            q->map_offset = ph->p_offset >= skew ? ph->p_offset - skew : 0;
            if (q->map_offset == 0 && ph->p_offset != 0 && ph->p_vaddr != ph->p_offset) {
                q->map_start = start;
                q->map_offset = ph->p_offset;
            }
        }
    }
    if (!contains)
        return 0;
    q->found = 1;
    q->bias = info->dlpi_addr;
    q->path = info->dlpi_name;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE)
            continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        const unsigned char *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *n = (const ElfW(Nhdr) *)p;
            const unsigned char *name = p + sizeof *n;
            const unsigned char *desc = name + ((n->n_namesz + 3) & ~3u);
            if (n->n_type == NT_GNU_BUILD_ID && n->n_namesz == 4 && !memcmp(name, "GNU", 4) &&
                n->n_descsz <= 64 && desc + n->n_descsz <= end) {
                hex(desc, n->n_descsz, q->build_id);
                return 1;
            }
            p = desc + ((n->n_descsz + 3) & ~3u);
        }
    }
    return 1;
}

/* The main program appears with an empty name in dl_iterate_phdr. */
static const char *main_program_path(void)
{
    static char path[4096];
    if (!path[0]) {
        ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
        if (n <= 0)
            strcpy(path, "[main program]");
        else
            path[n] = 0;
    }
    return path;
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

/* Reads the function symbols of an ELF file (.symtab if present, else .dynsym): the back end
 * without the symbolizer module. */
static void load_symtab(struct symtab *t)
{
    int fd = open(t->path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return;
    if (fstat(fd, &st) != 0 || st.st_size < (off_t)sizeof(ElfW(Ehdr))) {
        close(fd);
        return;
    }
    size_t len = (size_t)st.st_size;
    const unsigned char *map = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED)
        return;
    const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)map;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
        eh->e_shoff == 0 || eh->e_shoff + (size_t)eh->e_shnum * sizeof(ElfW(Shdr)) > len)
        goto out;
    const ElfW(Shdr) *sh = (const ElfW(Shdr) *)(map + eh->e_shoff);
    const ElfW(Shdr) *best = NULL;
    for (unsigned i = 0; i < eh->e_shnum; i++)
        if (sh[i].sh_type == SHT_SYMTAB || (sh[i].sh_type == SHT_DYNSYM && !best))
            best = &sh[i];
    if (!best || best->sh_link >= eh->e_shnum || best->sh_offset + best->sh_size > len)
        goto out;
    const ElfW(Shdr) *strs = &sh[best->sh_link];
    if (strs->sh_offset + strs->sh_size > len)
        goto out;
    const ElfW(Sym) *syms = (const ElfW(Sym) *)(map + best->sh_offset);
    size_t nsyms = best->sh_size / sizeof *syms, n = 0;
    t->syms = calloc(nsyms ? nsyms : 1, sizeof *t->syms);
    if (!t->syms)
        goto out;
    for (size_t i = 0; i < nsyms; i++) {
        unsigned type = ELF64_ST_TYPE(syms[i].st_info), shndx = syms[i].st_shndx;
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || syms[i].st_value == 0 ||
            shndx == SHN_UNDEF || shndx >= eh->e_shnum || syms[i].st_name >= strs->sh_size)
            continue;
        const char *name = (const char *)map + strs->sh_offset + syms[i].st_name;
        uintptr_t size = syms[i].st_size, end = sh[shndx].sh_addr + sh[shndx].sh_size;
        if (!size && end > syms[i].st_value)
            size = end - syms[i].st_value;
        if (!size)
            continue; /* not inside its section: nothing it can answer for */
        const char *system;
        const char *readable = demangle(name, &system);
        t->syms[n++] = (struct func_sym){syms[i].st_value, size, readable, system};
    }
    t->n = n;
    memprof__symtab_sort(t);
out:
    munmap((void *)map, len);
}
/* Looks vaddr (a file address) up in the index of module `path`. Returns the function's
 * name, its spelling in *system. */
static const char *symtab_lookup(const char *path, uintptr_t vaddr, uintptr_t *offset,
                                 const char **system)
{
    *system = NULL;
    struct symtab *t = symtabs;
    while (t && t->path != path)
        t = t->next;
    if (!t) {
        if (!(t = calloc(1, sizeof *t)))
            return NULL;
        t->path = path;
        load_symtab(t);
        t->next = symtabs;
        symtabs = t;
    }
    return memprof__symtab_find(t, vaddr, offset, system);
}

/* ---- resolution and cache ----------------------------------------------------------------- */

static struct memprof_sym *resolve(uintptr_t pc, bool names)
{
    struct memprof_sym_frame frames[MAX_INLINE_DEPTH];
    unsigned n = 0;
    uintptr_t lookup = pc - 1, sym_offset = 0;
    struct module_query q = {.pc = lookup};
    dl_iterate_phdr(module_cb, &q);
    const char *path = q.found ? (q.path && q.path[0] ? q.path : main_program_path()) : NULL;
    path = memprof__strpool_intern(path);
    if (!names)
        goto done; /* the module and its segment are all a later symbolization needs */
    const struct memprof__symbolizer *sz = symbolizer();
    if (sz && sz->process_frames) {
        n = sz->process_frames(lookup, path, frames, MAX_INLINE_DEPTH, &sym_offset);
    } else if (path) {
        const char *system;
        const char *name = symtab_lookup(path, lookup - q.bias, &sym_offset, &system);
        if (name) {
            frames[n++] = (struct memprof_sym_frame){name, NULL, 0, false, system};
            sym_offset += 1;
        }
    }
    if ((n == 0 || !frames[n - 1].function) &&
        !(n > 0 && sz && sz->module_has_symbols && sz->module_has_symbols(path))) {
        /* Last resort: the dynamic symbol table through dladdr, which answers with the
         * nearest symbol before the address whatever its size or section: only a defined
         * symbol whose range holds the address will do. Not when the symbolizer read the
         * module's symbols: dladdr() scans every dynamic symbol for the nearest, 82 M
         * instructions at the exit of a cc1 (29,000 of them, 94 addresses without a name),
         * to find none the symbolizer did not have. */
        Dl_info dl;
        const ElfW(Sym) *ent = NULL;
        if (dladdr1((void *)lookup, &dl, (void **)&ent, RTLD_DL_SYMENT) && dl.dli_sname &&
            dl.dli_saddr && ent && ent->st_shndx != SHN_UNDEF && ent->st_size &&
            lookup < (uintptr_t)dl.dli_saddr + ent->st_size) {
            if (n == 0)
                n = 1, frames[0] = (struct memprof_sym_frame){0};
            frames[n - 1].function = demangle(dl.dli_sname, &frames[n - 1].system_name);
            sym_offset = pc - (uintptr_t)dl.dli_saddr;
        }
    }
done:
    if (n == 0)
        n = 1, frames[0] = (struct memprof_sym_frame){0};
    struct memprof_sym *s = malloc(sizeof *s + n * sizeof *frames);
    if (!s)
        return NULL;
    *s = (struct memprof_sym){.pc = pc,
                              .module = path,
                              .load_bias = q.bias,
                              .sym_offset = sym_offset,
                              .map_start = q.map_start,
                              .map_limit = q.map_limit,
                              .map_offset = q.map_offset,
                              .raw = !names,
                              .nframes = n};
    s->build_id = q.build_id[0] ? memprof__strpool_intern(q.build_id) : NULL;
    memcpy(s->frames, frames, n * sizeof *frames);
    /* Unsymbolized on purpose is not unresolved: the command resolves it later and counts. */
    if (s->frames[n - 1].function || !names)
        n_resolved++;
    else
        n_unresolved++;
    return s;
}

MEMPROF_START_TEXT void memprof__sym_set_symbolize(bool on)
{
    memprof_atomic_store_relaxed(&symbolize, on);
}

#if HAVE_LIBDW
unsigned memprof__sym_module_frames(struct Dwfl_Module *mod, const char *key, uintptr_t addr,
                                    struct memprof_sym_frame *frames, unsigned max,
                                    uintptr_t *sym_offset)
{
    pthread_mutex_lock(&lock);
    const struct memprof__symbolizer *sz = symbolizer();
    *sym_offset = 0;
    unsigned n =
        sz && sz->module_frames ? sz->module_frames(mod, key, addr, frames, max, sym_offset) : 0;
    pthread_mutex_unlock(&lock);
    return n;
}

void memprof__sym_module_gone(struct Dwfl_Module *mod)
{
    pthread_mutex_lock(&lock);
    if (backend && backend->module_gone) /* never loaded: nothing was kept */
        backend->module_gone(mod);
    pthread_mutex_unlock(&lock);
}
#endif

static struct memprof_sym **cache;
static size_t cache_cap, cache_used;

static struct memprof_sym **find_slot(struct memprof_sym **tab, size_t cap, uintptr_t pc)
{
    for (size_t i = memprof__mix64(pc) & (cap - 1);; i = (i + 1) & (cap - 1))
        if (!tab[i] || tab[i]->pc == pc)
            return &tab[i];
}

static bool grow_cache(void)
{
    size_t cap = cache_cap ? cache_cap * 2 : 4096;
    struct memprof_sym **tab = calloc(cap, sizeof *tab);
    if (!tab)
        return false;
    for (size_t i = 0; i < cache_cap; i++)
        if (cache[i])
            *find_slot(tab, cap, cache[i]->pc) = cache[i];
    free(cache);
    cache = tab;
    cache_cap = cap;
    return true;
}

const struct memprof_sym *memprof__sym_get(uintptr_t pc, bool need_names)
{
    static struct memprof_sym oom = {.nframes = 1};
    pthread_mutex_lock(&lock);
    struct memprof_sym *s = NULL;
    bool names = memprof_atomic_load_relaxed(&symbolize) || need_names;
    if ((cache_used + 1) * 2 <= cache_cap || grow_cache()) {
        struct memprof_sym **slot = find_slot(cache, cache_cap, pc);
        if (!*slot && (*slot = resolve(pc, names)) != NULL)
            cache_used++;
        else if (*slot && (*slot)->raw && names) {
            /* Named now. The raw result can go: its one caller (stacks.c, under its own
             * lock) never keeps a result past the next lookup. */
            struct memprof_sym *named = resolve(pc, true);
            if (named) {
                n_resolved--; /* the raw result was counted */
                free(*slot);
                *slot = named;
            }
        }
        s = *slot;
    }
    pthread_mutex_unlock(&lock);
    return s ? s : &oom;
}

void memprof__sym_counts(uint64_t *resolved, uint64_t *unresolved)
{
    pthread_mutex_lock(&lock);
    *resolved = n_resolved + n_unresolved;
    *unresolved = n_unresolved;
    pthread_mutex_unlock(&lock);
}

/* ---- fork ----------------------------------------------------------------------------- */

bool memprof__sym_fork_prepare(const struct timespec *until)
{
    return pthread_mutex_timedlock(&lock, until) == 0;
}

void memprof__sym_fork_parent(bool held)
{
    if (held)
        pthread_mutex_unlock(&lock);
}

void memprof__sym_fork_child(bool held)
{
    if (!held) {
        /* A thread that does not exist here was resolving: start afresh. Everything handed
         * out so far stays valid (nothing here is ever freed); the half-changed state is
         * left behind, as is a Dwfl whose descriptors may be another table's. */
        cache = NULL;
        cache_cap = cache_used = 0;
        symtabs = NULL;
        if (backend) /* never loaded here: dlopen() in a fork handler is no option */
            backend->forget();
        memprof__strpool_forget();
    }
    pthread_mutex_init(&lock, NULL);
}
