/* SPDX-License-Identifier: MIT */
/*
 * The GOT backend: memprof_start() in a process without the preload plugin rewrites the
 * Global Offset Table slots through which every loaded ELF object calls the allocator, so
 * those calls reach the shared wrappers (wrappers.h) and then the allocator the object's
 * own symbol resolution chose: libc's, or a malloc family the program or a library defines
 * itself ("Allocator families" below).
 *
 * Facts this relies on (learned the hard way; doc/architecture.md, Decisions: Interposition backends):
 * - Both JUMP_SLOT (PLT) and GLOB_DAT relocations are patched: code built with -fno-plt,
 *   function-pointer uses, and libc's own internal calls (strdup -> malloc) go through
 *   GLOB_DAT slots. libc itself is patched too, so strdup's block is seen.
 * - Slots inside a PT_GNU_RELRO range are read-only after start-up (always with -z now):
 *   the page is made writable for the store and read-only again.
 * - The real functions are *definitions*: libc's looked up through libc's own handle, others
 *   checked against their object's symbol table. dlsym(RTLD_DEFAULT, "malloc") in a non-PIE
 *   program (Debian's python3) returns the program's PLT stub (an undefined symbol's
 *   canonical address), which after patching jumps back into the hook: endless recursion.
 * - Objects loaded later are patched from a dlopen hook. glibc's dlopen takes its caller
 *   from its return address (for the search path: the caller's RPATH or RUNPATH, $ORIGIN;
 *   the namespace; the new object's loader), which inside a hook would be this library; so
 *   the hook calls glibc's dlopen with a return address inside the caller's own code
 *   ("dlopen as the caller" below) and glibc searches exactly as without the profiler.
 * - Frees of blocks allocated before patching arrive at the free hook and cost one check
 *   (nothing live, or the Bloom filter says no). The dynamic loader's own allocations use
 *   its private pointers to libc's allocator, not GOT slots, and stay invisible; the loader
 *   and this library are not patched.
 * - Code may hold libc's free() in a pointer taken before patching (pthread_key_create(&k,
 *   free), obstacks), so a sampled block can reach libc's free() directly. Sampled blocks
 *   therefore come from the sample heap only in glibc's own mmap()ed-chunk format, which
 *   libc's free(), realloc() and malloc_usable_size() handle (sampleheap.h, "Chunk
 *   framing"); that costs a page per live sample and is used at rates of 64 pages or more,
 *   unless MEMPROF_SAMPLE_HEAP=0. Otherwise sampled blocks are libc's and frees ask the
 *   Bloom filter.
 * Shutdown leaves the hooks in place: they become pass-throughs (the engine ignores them).
 */
#define _GNU_SOURCE
#include "config.h"
#include "interpose/got.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/values.h"
#include "loader/elf_dynamic.h"
#include "core/backend.h"
#include "loader/imports.h"
#include "interpose/seccomp.h"
#include "interpose/wrappers.h"

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "the GOT backend supports x86_64 and aarch64"
#endif

static void *(*real_dlopen)(const char *, int);
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int installed;
static uintptr_t self_base;
static size_t page_size;

/* ---- allocator families ------------------------------------------------------------------ */

/* Each object's allocator calls go where the dynamic loader bound them: to the global
 * scope's first definition (libc's, or the program's own malloc family, which libc's
 * internal calls then use too), or, for a library loaded with RTLD_DEEPBIND (and its
 * dependencies loaded with it) or linked -Bsymbolic-style (DT_SYMBOLIC), to its own scope's
 * first (a malloc family of its own). A family is one such set of real functions; its
 * hooks forward to it. Family 0 is libc's: only its sampled blocks may come from the sample
 * heap, the others' stay their allocator's (an allocator that is not glibc's would not take
 * a block of the sample heap, framed or not). Families are created under `lock` and never
 * change; a process with more than MAX_FAMILIES leaves the extra objects' allocator slots
 * unpatched (their calls unseen, as before the start).
 *
 * Where an object's calls go is read from the object itself where it can be: a slot the
 * loader has already bound (every GLOB_DAT slot, and JUMP_SLOTs after their first call or
 * with -z now) holds the definition, accepted once the defining object's symbol table
 * confirms it (a slot read while another thread's dlopen is still relocating its object
 * holds no such address). A lazy slot not yet bound gets its scope's answer: the global
 * definition, the library's own scope's for objects a DEEPBIND dlopen loaded through the
 * hook, the object's own definition under DT_SYMBOLIC. */

/* The functions of struct memprof_allocator, in its order. */
enum {
    FN_MALLOC,
    FN_FREE,
    FN_CALLOC,
    FN_REALLOC,
    FN_POSIX_MEMALIGN,
    FN_ALIGNED_ALLOC,
    FN_MEMALIGN,
    FN_VALLOC,
    FN_PVALLOC,
    FN_USABLE,
    N_FN
};
static const char *const fn_names[N_FN] = {
    "malloc",        "free",     "calloc", "realloc", "posix_memalign",
    "aligned_alloc", "memalign", "valloc", "pvalloc", "malloc_usable_size"};

struct family {
    void *fn[N_FN];
    struct memprof_allocator a;
};

#define MAX_FAMILIES 8
static struct family families[MAX_FAMILIES];
static unsigned n_families; /* under `lock`; family k's hooks are stored only after it */

#define HOOK MEMPROF_SAMPLING_TEXT static

/* Family k's hooks: every one the same code as another family's but for the address of the
 * real functions, a constant. */
#define FAMILY_HOOKS(k)                                                                            \
    HOOK void *got_malloc_##k(size_t n)                                                            \
    {                                                                                              \
        return memprof__wrap_malloc(&families[k].a, n);                                            \
    }                                                                                              \
    HOOK void got_free_##k(void *p)                                                                \
    {                                                                                              \
        memprof__wrap_free(&families[k].a, p);                                                     \
    }                                                                                              \
    HOOK void *got_calloc_##k(size_t n, size_t size)                                               \
    {                                                                                              \
        return memprof__wrap_calloc(&families[k].a, n, size);                                      \
    }                                                                                              \
    HOOK void *got_realloc_##k(void *p, size_t n)                                                  \
    {                                                                                              \
        return memprof__wrap_realloc(&families[k].a, p, n);                                        \
    }                                                                                              \
    HOOK void *got_reallocarray_##k(void *p, size_t n, size_t size)                                \
    {                                                                                              \
        return memprof__wrap_reallocarray(&families[k].a, p, n, size);                             \
    }                                                                                              \
    HOOK int got_posix_memalign_##k(void **out, size_t align, size_t n)                            \
    {                                                                                              \
        return memprof__wrap_posix_memalign(&families[k].a, out, align, n);                        \
    }                                                                                              \
    HOOK void *got_aligned_alloc_##k(size_t align, size_t n)                                       \
    {                                                                                              \
        return memprof__wrap_aligned_alloc(&families[k].a, align, n);                              \
    }                                                                                              \
    HOOK void *got_memalign_##k(size_t align, size_t n)                                            \
    {                                                                                              \
        return memprof__wrap_memalign(&families[k].a, align, n);                                   \
    }                                                                                              \
    HOOK void *got_valloc_##k(size_t n)                                                            \
    {                                                                                              \
        return memprof__wrap_valloc(&families[k].a, n, page_size);                                 \
    }                                                                                              \
    HOOK void *got_pvalloc_##k(size_t n)                                                           \
    {                                                                                              \
        return memprof__wrap_pvalloc(&families[k].a, n, page_size);                                \
    }

FAMILY_HOOKS(0)
FAMILY_HOOKS(1)
FAMILY_HOOKS(2)
FAMILY_HOOKS(3)
FAMILY_HOOKS(4)
FAMILY_HOOKS(5)
FAMILY_HOOKS(6)
FAMILY_HOOKS(7)

/* The allocator imports patched, in the order of each family's hooks below. */
enum {
    IMP_MALLOC,
    IMP_FREE,
    IMP_CALLOC,
    IMP_REALLOC,
    IMP_REALLOCARRAY,
    IMP_POSIX_MEMALIGN,
    IMP_ALIGNED_ALLOC,
    IMP_MEMALIGN,
    IMP_VALLOC,
    IMP_PVALLOC,
    N_IMP
};
/* The function of struct memprof_allocator each import is, -1 for reallocarray (its hook
 * calls realloc). */
static const int imp_fn[N_IMP] = {FN_MALLOC, FN_FREE,           FN_CALLOC,        FN_REALLOC,
                                  -1,        FN_POSIX_MEMALIGN, FN_ALIGNED_ALLOC, FN_MEMALIGN,
                                  FN_VALLOC, FN_PVALLOC};

#define HOOKS_OF(k)                                                                                \
    {                                                                                              \
        (void *)got_malloc_##k, (void *)got_free_##k, (void *)got_calloc_##k,                      \
            (void *)got_realloc_##k, (void *)got_reallocarray_##k, (void *)got_posix_memalign_##k, \
            (void *)got_aligned_alloc_##k, (void *)got_memalign_##k, (void *)got_valloc_##k,       \
            (void *)got_pvalloc_##k                                                                \
    }
static void *const family_hooks[MAX_FAMILIES][N_IMP] = {
    HOOKS_OF(0), HOOKS_OF(1), HOOKS_OF(2), HOOKS_OF(3),
    HOOKS_OF(4), HOOKS_OF(5), HOOKS_OF(6), HOOKS_OF(7),
};

/* The family with the real functions fn[], created if new; -1 if one of its essential
 * functions is missing or every family is taken. Under `lock`. */
static int family_of(void *const fn[N_FN])
{
    for (unsigned k = 0; k < n_families; k++)
        if (memcmp(families[k].fn, fn, sizeof families[k].fn) == 0)
            return (int)k;
    for (int i = 0; i < N_FN; i++)
        if (!fn[i] && i != FN_PVALLOC)
            return -1;
    if (n_families == MAX_FAMILIES)
        return -1;
    struct family *f = &families[n_families];
    memcpy(f->fn, fn, sizeof f->fn);
    f->a = (struct memprof_allocator){
        .malloc = (void *(*)(size_t))fn[FN_MALLOC],
        .free = (void (*)(void *))fn[FN_FREE],
        .calloc = (void *(*)(size_t, size_t))fn[FN_CALLOC],
        .realloc = (void *(*)(void *, size_t))fn[FN_REALLOC],
        .posix_memalign = (int (*)(void **, size_t, size_t))fn[FN_POSIX_MEMALIGN],
        .aligned_alloc = (void *(*)(size_t, size_t))fn[FN_ALIGNED_ALLOC],
        .memalign = (void *(*)(size_t, size_t))fn[FN_MEMALIGN],
        .valloc = (void *(*)(size_t))fn[FN_VALLOC],
        .pvalloc = (void *(*)(size_t))fn[FN_PVALLOC],
        .malloc_usable_size = (size_t(*)(void *))fn[FN_USABLE],
        .no_sample_heap = n_families != 0, /* family 0 is libc's */
    };
    return (int)n_families++;
}

/* ---- hooks ------------------------------------------------------------------------------- */

/* mlockall without faulting in the engine's tables and sample heap (backend.h). */
static int (*real_mlockall)(int);

static int got_mlockall(int flags)
{
    return memprof__engine_mlockall(flags, real_mlockall);
}

/* The ways of installing a seccomp filter (seccomp.h): the engine gets ready for it first. */
typedef long syscall_fn(long, ...);
typedef int prctl_fn(int, ...);
static syscall_fn *real_syscall;
static prctl_fn *real_prctl;

static long forward_syscall(long nr, const long *a)
{
    return real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

static int forward_prctl(int option, const unsigned long *a)
{
    return real_prctl(option, a[0], a[1], a[2], a[3]);
}

static long got_syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long rc = memprof__seccomp_syscall(nr, ap, forward_syscall);
    va_end(ap);
    return rc;
}

static int got_prctl(int option, ...)
{
    va_list ap;
    va_start(ap, option);
    int rc = memprof__seccomp_prctl(option, ap, forward_prctl);
    va_end(ap);
    return rc;
}

static void *got_dlopen(const char *file, int mode);

static const struct memprof_import hooks[] = {
    {"prctl", (void *)got_prctl},
    {"syscall", (void *)got_syscall},
    /* The allocator's, from FIRST_IMP in IMP_ order: a family's hooks (choose_hook()). */
    {"malloc", NULL},
    {"free", NULL},
    {"calloc", NULL},
    {"realloc", NULL},
    {"reallocarray", NULL},
    {"posix_memalign", NULL},
    {"aligned_alloc", NULL},
    {"memalign", NULL},
    {"valloc", NULL},
    {"pvalloc", NULL},
    {"dlopen", (void *)got_dlopen},
    /* Last: patched only if libc has it (find_real()). */
    {"mlockall", (void *)got_mlockall},
};
#define N_OPTIONAL_HOOKS 1
static size_t n_hooks = MEMPROF_ARRAY_SIZE(hooks);

/* ---- patching ---------------------------------------------------------------------------- */

static bool skip_object(const struct dl_phdr_info *info)
{
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    return info->dlpi_addr == self_base || strstr(name, "/ld-linux") || strstr(name, "ld64.so") ||
           strstr(name, "linux-vdso") || strstr(name, "linux-gate");
}

/* hooks[FIRST_IMP + i] is the allocator import IMP_i. */
#define FIRST_IMP 2

/* Objects a DEEPBIND dlopen loaded through the hook (the library and the dependencies
 * loaded with it), by address and name, and the real functions their scope gives them. */
struct deep {
    uintptr_t base;
    uint64_t name_hash;
    void *fn[N_FN];
};
#define MAX_DEEP 64
static struct deep deeps[MAX_DEEP];
static unsigned n_deeps; /* under `lock` */

static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

/* v if it is a definition of function `fn`, else libc's: a program that is not
 * position-independent has its PLT stub as the canonical address of a function it calls,
 * an undefined symbol with a value, which dlsym() returns. Takes the loader's lock. */
static void *definition(void *v, int fn)
{
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (!v || !dladdr1(v, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym ||
        sym->st_shndx == SHN_UNDEF)
        return families[0].fn[fn];
    return v;
}

/* One patching round: where lazy slots in the global scope will go, by FN_ index. */
struct round {
    void *global[N_FN];
};

/* One object being patched: the real functions its calls go to, which of them a bound
 * slot has told, and its family (-2: not chosen yet). */
struct choice {
    void *fn[N_FN];
    unsigned told;
    int family;
};

struct find_def {
    uintptr_t addr;
    const char *name;
    bool is_def;
};

static int find_def_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct find_def *f = data;
    const ElfW(Dyn) *dyn = NULL;
    bool holds = false;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && f->addr >= start && f->addr < start + ph->p_memsz)
            holds = true;
        else if (ph->p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)start;
    }
    if (!holds)
        return 0;
    if (dyn) {
        struct memprof_elf_dynamic d;
        memprof__elf_read_dynamic(info->dlpi_addr, dyn, &d);
        f->is_def = memprof__elf_lookup(info->dlpi_addr, &d, f->name) == f->addr;
    }
    return 1;
}

/* Whether `v` is an exported definition of `name` in the object that holds it (not a lazy
 * slot's PLT address, a canonical PLT stub, or what a slot holds before its relocation).
 * Inside dl_iterate_phdr(), which a nested call may take again. */
static bool is_definition(void *v, const char *name)
{
    struct find_def f = {(uintptr_t)v, name, false};
    dl_iterate_phdr(find_def_cb, &f);
    return f.is_def;
}

/* First pass over an object's slots: those the loader has bound say where its calls go. */
static void *read_slot(void *ctx, size_t i, void *value)
{
    struct choice *c = ctx;
    int fn = i >= FIRST_IMP && i < FIRST_IMP + N_IMP ? imp_fn[i - FIRST_IMP] : -1;
    if (fn < 0 || (c->told & 1u << fn))
        return NULL;
    c->told |= 1u << fn;
    if (value != c->fn[fn] && is_definition(value, fn_names[fn]))
        c->fn[fn] = value;
    return NULL;
}

/* Second pass: each slot's hook (the family's, made on the first allocator slot). */
static void *choose_hook(void *ctx, size_t i, void *value)
{
    (void)value;
    struct choice *c = ctx;
    if (i < FIRST_IMP || i >= FIRST_IMP + N_IMP)
        return hooks[i].fn;
    if (c->family == -2)
        c->family = family_of(c->fn);
    return c->family >= 0 ? family_hooks[c->family][i - FIRST_IMP] : NULL;
}

static int patch_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    if (skip_object(info))
        return 0;
    const struct round *r = data;
    struct choice c = {.family = -2};
    memcpy(c.fn, r->global, sizeof c.fn);
    uint64_t name = hash_str(info->dlpi_name);
    for (unsigned i = 0; i < n_deeps; i++)
        if (deeps[i].base == info->dlpi_addr && deeps[i].name_hash == name) {
            memcpy(c.fn, deeps[i].fn, sizeof c.fn);
            break;
        }
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_DYNAMIC)
            continue;
        /* DT_SYMBOLIC: the object's own definitions come first for it. */
        struct memprof_elf_dynamic d;
        memprof__elf_read_dynamic(info->dlpi_addr,
                                  (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr), &d);
        for (int fn = 0; d.symbolic && fn < N_FN; fn++) {
            uintptr_t own = memprof__elf_lookup(info->dlpi_addr, &d, fn_names[fn]);
            if (own)
                c.fn[fn] = (void *)own;
        }
    }
    memprof__imports_rewrite(info, hooks, n_hooks, read_slot, &c);
    memprof__imports_rewrite(info, hooks, n_hooks, choose_hook, &c);
    return 0;
}

/* Patches every loaded object; slots already pointing at a hook are left alone, so running
 * it again after a dlopen only touches what is new. The global definitions are looked up
 * before `lock` is taken: dlsym() and dladdr() take the loader's lock, which a dlopen calling
 * the hook from a library's constructor holds while it waits for `lock`. */
static void patch_all(void)
{
    uint8_t g = memprof__guard_enter();
    struct round r;
    for (int i = 0; i < N_FN; i++)
        r.global[i] = definition(dlsym(RTLD_DEFAULT, fn_names[i]), i);
    pthread_mutex_lock(&lock);
    dl_iterate_phdr(patch_cb, &r);
    pthread_mutex_unlock(&lock);
    memprof__guard_leave(g);
}

/* ---- dlopen as the caller ----------------------------------------------------------------- */

/* glibc's dlopen() takes its caller from its return address: the object containing it gives
 * the search path ($ORIGIN, DT_RPATH or DT_RUNPATH), the namespace, and the new object's
 * loader (whose DT_RPATH its dependencies' searches use). From the hook that would be this
 * library. So the hook calls it with a return address inside the caller's object: a return
 * instruction there (a "gadget"), which returns to the hook's continuation. The frame looks
 * to an unwinder like a call from the gadget's function, and the word above the return
 * address is the continuation too, so whichever state that function's unwind information
 * gives the gadget, the walk comes back through the trampoline. Where no gadget can be used
 * (none found; on x86_64 a shadow stack, which would refuse the return; another
 * architecture) dlopen() is called directly: a bare name is then searched with this
 * library's paths (doc/guarantees.md). */
#if defined(__x86_64__)
/* memprof__got_dlopen_as(file, mode, fn, gadget): fn(file, mode) returning to `gadget`, a
 * `ret` in the caller's object, which returns to 1: below. */
void *memprof__got_dlopen_as(const char *file, int mode, void *(*fn)(const char *, int),
                             uintptr_t gadget);
__asm__(".pushsection .text\n"
        ".p2align 4\n"
        ".globl memprof__got_dlopen_as\n"
        ".hidden memprof__got_dlopen_as\n"
        ".type memprof__got_dlopen_as,@function\n"
        "memprof__got_dlopen_as:\n"
        ".cfi_startproc\n"
        "pushq %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbp, -16\n"
        "movq %rsp, %rbp\n"
        ".cfi_def_cfa_register %rbp\n"
        "leaq 1f(%rip), %rax\n"
        "pushq %rax\n" /* above the continuation: the continuation again (see above) */
        "pushq %rax\n" /* where the gadget's ret goes */
        "pushq %rcx\n" /* the return address fn sees; fn's stack is aligned as after a call */
        "jmp *%rdx\n"
        "1:\n"
        "movq %rbp, %rsp\n"
        "popq %rbp\n"
        ".cfi_def_cfa %rsp, 8\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size memprof__got_dlopen_as, .-memprof__got_dlopen_as\n"
        ".popsection\n");

/* A shadow stack (CET) would refuse the gadget's return: RDSSP reads its pointer, 0 without
 * one (the instruction is a no-op on processors without CET). */
static bool shadow_stack(void)
{
    uint64_t ssp = 0;
    __asm__ volatile(".byte 0xf3, 0x48, 0x0f, 0x1e, 0xc8" : "+a"(ssp)); /* rdsspq %rax */
    return ssp != 0;
}

/* A `ret` in [lo, hi), preferably one ending a function (after pop %rbp, leave, pop %rbx). */
static uintptr_t find_gadget(uintptr_t lo, uintptr_t hi)
{
    const unsigned char *p = (const unsigned char *)lo, *end = (const unsigned char *)hi;
    for (const unsigned char *q = p + 1; q < end; q++)
        if (*q == 0xc3 && (q[-1] == 0x5d || q[-1] == 0xc9 || q[-1] == 0x5b))
            return (uintptr_t)q;
    for (const unsigned char *q = p; q < end; q++)
        if (*q == 0xc3)
            return (uintptr_t)q;
    return 0;
}
#elif defined(__aarch64__)
/* The same with a gadget `ldp x29, x30, [sp], #16; ret` (a function's epilogue), which pops
 * the pair stored below the frame: the frame pointer and the continuation. */
void *memprof__got_dlopen_as(const char *file, int mode, void *(*fn)(const char *, int),
                             uintptr_t gadget);
__asm__(".pushsection .text\n"
        ".p2align 4\n"
        ".globl memprof__got_dlopen_as\n"
        ".hidden memprof__got_dlopen_as\n"
        ".type memprof__got_dlopen_as,%function\n"
        "memprof__got_dlopen_as:\n"
        ".cfi_startproc\n"
        "stp x29, x30, [sp, #-32]!\n"
        ".cfi_def_cfa_offset 32\n"
        ".cfi_offset x29, -32\n"
        ".cfi_offset x30, -24\n"
        "mov x29, sp\n"
        ".cfi_def_cfa x29, 32\n"
        "adr x9, 1f\n"
        "sub sp, sp, #16\n"
        "stp x29, x9, [sp]\n" /* what the gadget's ldp pops */
        "mov x30, x3\n"       /* the return address fn sees */
        "mov x16, x2\n"
        "br x16\n"
        "1:\n"
        "ldp x29, x30, [sp], #32\n"
        ".cfi_def_cfa sp, 0\n"
        ".cfi_restore x29\n"
        ".cfi_restore x30\n"
        "ret\n"
        ".cfi_endproc\n"
        ".size memprof__got_dlopen_as, .-memprof__got_dlopen_as\n"
        ".popsection\n");

static bool shadow_stack(void)
{
    return false;
}

static uintptr_t find_gadget(uintptr_t lo, uintptr_t hi)
{
    lo = (lo + 3) & ~(uintptr_t)3;
    for (const uint32_t *q = (const uint32_t *)lo; (uintptr_t)(q + 2) <= hi; q++)
        if (q[0] == 0xa8c17bfdu && q[1] == 0xd65f03c0u) /* ldp x29, x30, [sp], #16; ret */
            return (uintptr_t)q;
    return 0;
}
#endif

struct gadget_search {
    uintptr_t addr, lo, hi, gadget;
};

static int gadget_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct gadget_search *s = data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_filesz;
        if (ph->p_type != PT_LOAD || s->addr < start || s->addr >= end)
            continue;
        /* Executable and readable (execute-only code cannot be searched). */
        if ((ph->p_flags & (PF_X | PF_R)) == (PF_X | PF_R)) {
            s->lo = start;
            s->hi = end;
            s->gadget = find_gadget(s->addr, end);
            if (!s->gadget)
                s->gadget = find_gadget(start, s->addr);
        }
        return 1;
    }
    return 0;
}

/* The gadget for a caller, from a small cache of the code segments searched so far. */
static uintptr_t gadget_for(const void *caller)
{
    static struct {
        uintptr_t lo, hi, gadget;
    } cache[16];
    static unsigned next;
    if (shadow_stack())
        return 0;
    uintptr_t at = (uintptr_t)caller, gadget = 0;
    pthread_mutex_lock(&lock);
    for (unsigned i = 0; i < MEMPROF_ARRAY_SIZE(cache) && !gadget; i++)
        if (at >= cache[i].lo && at < cache[i].hi)
            gadget = cache[i].gadget;
    if (!gadget) {
        struct gadget_search s = {.addr = at};
        dl_iterate_phdr(gadget_cb, &s);
        if (s.gadget) {
            unsigned i = next++ % MEMPROF_ARRAY_SIZE(cache);
            cache[i].lo = s.lo;
            cache[i].hi = s.hi;
            cache[i].gadget = gadget = s.gadget;
        }
    }
    pthread_mutex_unlock(&lock);
    return gadget;
}

/* ---- objects a DEEPBIND dlopen loads -------------------------------------------------------- */

#define MAX_NEEDED 32

/* A loaded object: where, its names' hashes (path, file name, soname), its DT_NEEDED
 * names' hashes; `deep`: in the closure of the library's dependencies. */
struct loaded {
    uintptr_t base;
    uint64_t name_hash, file_hash, soname_hash;
    uint64_t needed[MAX_NEEDED];
    unsigned n_needed;
    bool deep;
};

struct loaded_list {
    struct loaded *v;
    size_t n, cap;
    const uintptr_t *before; /* bases loaded before the dlopen, sorted */
    size_t n_before;
    bool overflow;
};

static int cmp_base(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return (x > y) - (x < y);
}

static int collect_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct loaded_list *l = data;
    uintptr_t base = info->dlpi_addr;
    if (bsearch(&base, l->before, l->n_before, sizeof base, cmp_base))
        return 0;
    if (l->n == l->cap) {
        l->overflow = true;
        return 0;
    }
    struct loaded *o = &l->v[l->n++];
    memset(o, 0, sizeof *o);
    o->base = base;
    o->name_hash = hash_str(info->dlpi_name);
    const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    o->file_hash = hash_str(slash ? slash + 1 : info->dlpi_name);
    for (int i = 0; i < info->dlpi_phnum; i++) {
        if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
            continue;
        const ElfW(Dyn) *dyn = (const ElfW(Dyn) *)(base + info->dlpi_phdr[i].p_vaddr);
        struct memprof_elf_dynamic d;
        memprof__elf_read_dynamic(base, dyn, &d);
        if (!d.strtab)
            break;
        if (d.soname < d.strsz)
            o->soname_hash = hash_str(d.strtab + d.soname);
        for (; dyn->d_tag != DT_NULL; dyn++)
            if (dyn->d_tag == DT_NEEDED && dyn->d_un.d_val < d.strsz && o->n_needed < MAX_NEEDED)
                o->needed[o->n_needed++] = hash_str(d.strtab + dyn->d_un.d_val);
    }
    return 0;
}

struct base_list {
    uintptr_t *v;
    size_t n, cap;
};

static int base_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct base_list *l = data;
    if (l->n < l->cap)
        l->v[l->n] = info->dlpi_addr;
    l->n++;
    return 0;
}

/* The sorted bases of the objects loaded now; NULL if they cannot be had. */
static uintptr_t *bases_now(size_t *n)
{
    struct base_list l = {.cap = 4096};
    l.v = malloc(l.cap * sizeof *l.v);
    if (!l.v)
        return NULL;
    dl_iterate_phdr(base_cb, &l);
    if (l.n > l.cap) {
        free(l.v);
        return NULL;
    }
    qsort(l.v, l.n, sizeof *l.v, cmp_base);
    *n = l.n;
    return l.v;
}

/* After dlopen(..., RTLD_DEEPBIND) returned `h`: the objects it loaded (new since `before`
 * and among the library's dependencies, by soname or file name, so that another thread's
 * loads meanwhile are not taken for them) get the real functions of the library's own
 * scope, which comes first for each of them. */
static void remember_deep(void *h, const uintptr_t *before, size_t n_before)
{
    struct link_map *map = NULL;
    if (dlinfo(h, RTLD_DI_LINKMAP, &map) != 0 || !map)
        return;
    void *fn[N_FN];
    for (int i = 0; i < N_FN; i++) {
        void *v = dlsym(h, fn_names[i]);
        fn[i] = v ? definition(v, i) : definition(dlsym(RTLD_DEFAULT, fn_names[i]), i);
    }
    struct loaded_list l = {.cap = 256, .before = before, .n_before = n_before};
    l.v = malloc(l.cap * sizeof *l.v);
    if (!l.v)
        return;
    dl_iterate_phdr(collect_cb, &l);
    for (size_t i = 0; i < l.n; i++)
        l.v[i].deep = l.v[i].base == map->l_addr;
    /* The closure: an object joins when one already in needs it, until none does. */
    for (bool grew = true; grew;) {
        grew = false;
        for (size_t i = 0; i < l.n; i++)
            for (size_t j = 0; j < l.n && !l.v[i].deep; j++)
                for (unsigned k = 0; l.v[j].deep && k < l.v[j].n_needed; k++)
                    if (l.v[j].needed[k] == l.v[i].soname_hash ||
                        l.v[j].needed[k] == l.v[i].file_hash) {
                        l.v[i].deep = grew = true;
                        break;
                    }
    }
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < l.n && n_deeps < MAX_DEEP; i++)
        if (l.v[i].deep) {
            deeps[n_deeps].base = l.v[i].base;
            deeps[n_deeps].name_hash = l.v[i].name_hash;
            memcpy(deeps[n_deeps].fn, fn, sizeof fn);
            n_deeps++;
        }
    pthread_mutex_unlock(&lock);
    free(l.v);
}

static void *got_dlopen(const char *file, int mode)
{
    const void *caller = __builtin_return_address(0);
    size_t n_before = 0;
    uintptr_t *before = NULL;
    if (mode & RTLD_DEEPBIND) {
        uint8_t g = memprof__guard_enter();
        before = bases_now(&n_before);
        memprof__guard_leave(g);
    }
    uintptr_t gadget = gadget_for(caller);
    void *h =
        gadget ? memprof__got_dlopen_as(file, mode, real_dlopen, gadget) : real_dlopen(file, mode);
    if (h) {
        uint8_t g = memprof__guard_enter();
        if (before)
            remember_deep(h, before, n_before);
        patch_all();
        dlerror(); /* a failed lookup of ours is not the program's error */
        memprof__guard_leave(g);
    }
    free(before);
    return h;
}

/* ---- installation ------------------------------------------------------------------------ */

static int self_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t start = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (uintptr_t)data >= start &&
            (uintptr_t)data < start + ph->p_memsz) {
            self_base = info->dlpi_addr;
            return 1;
        }
    }
    return 0;
}

/* libc's definitions, and a check that nothing else is interposed. */
static int find_real(void)
{
    void *libc = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
    if (!libc)
        return -ENOTSUP;
    struct memprof_allocator a = {
        .malloc = (void *(*)(size_t))dlsym(libc, "malloc"),
        .free = (void (*)(void *))dlsym(libc, "free"),
        .calloc = (void *(*)(size_t, size_t))dlsym(libc, "calloc"),
        .realloc = (void *(*)(void *, size_t))dlsym(libc, "realloc"),
        .posix_memalign = (int (*)(void **, size_t, size_t))dlsym(libc, "posix_memalign"),
        .aligned_alloc = (void *(*)(size_t, size_t))dlsym(libc, "aligned_alloc"),
        .memalign = (void *(*)(size_t, size_t))dlsym(libc, "memalign"),
        .valloc = (void *(*)(size_t))dlsym(libc, "valloc"),
        .pvalloc = (void *(*)(size_t))dlsym(libc, "pvalloc"),
        .malloc_usable_size = (size_t(*)(void *))dlsym(libc, "malloc_usable_size"),
    };
    real_syscall = (syscall_fn *)dlsym(libc, "syscall");
    real_prctl = (prctl_fn *)dlsym(libc, "prctl");
    void *(*dl)(const char *, int) = (void *(*)(const char *, int))dlsym(libc, "dlopen");
    real_mlockall = (int (*)(int))dlsym(libc, "mlockall");
    if (!real_mlockall)
        n_hooks = MEMPROF_ARRAY_SIZE(hooks) - N_OPTIONAL_HOOKS;
    dlclose(libc);
    if (!a.malloc || !a.free || !a.calloc || !a.realloc || !a.posix_memalign || !a.aligned_alloc ||
        !a.memalign || !a.valloc || !dl || !real_syscall || !real_prctl)
        return -ENOTSUP;
    /* Another allocator interposed before libc (LD_PRELOAD of jemalloc, or a library that
     * exports malloc): its blocks must not reach libc's free. The main program's own PLT
     * stub (non-PIE programs) is fine. */
    Dl_info def, prog;
    void *seen = dlsym(RTLD_DEFAULT, "malloc");
    if (seen != (void *)a.malloc && dladdr(seen, &def) && dladdr((void *)find_real, &prog)) {
        void *main_handle = dlopen(NULL, RTLD_LAZY | RTLD_NOLOAD);
        struct link_map *main_map = main_handle, *seen_map = NULL;
        Dl_info info;
        dladdr1(seen, &info, (void **)&seen_map, RTLD_DL_LINKMAP);
        if (main_handle)
            dlclose(main_handle);
        if (seen_map != main_map)
            return -ENOTSUP;
    }
    /* Family 0: libc's allocator. */
    families[0].a = a;
    void *fn[N_FN] = {(void *)a.malloc,         (void *)a.free,
                      (void *)a.calloc,         (void *)a.realloc,
                      (void *)a.posix_memalign, (void *)a.aligned_alloc,
                      (void *)a.memalign,       (void *)a.valloc,
                      (void *)a.pvalloc,        (void *)a.malloc_usable_size};
    memcpy(families[0].fn, fn, sizeof fn);
    n_families = 1;
    real_dlopen = dl;
    page_size = (size_t)sysconf(_SC_PAGESIZE);
    return 0;
}

int memprof__got_install(void)
{
    static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;
    uint8_t g = memprof__guard_enter();
    pthread_mutex_lock(&install_lock);
    int rc = 0;
    /* The library prints nothing: a bad value is the log callback's (after the unlock). */
    const char *sheap = getenv("MEMPROF_SAMPLE_HEAP");
    int use_sheap = sheap ? memprof__parse_bool(sheap) : 1;
    bool first = !installed;
    if (first) {
        dl_iterate_phdr(self_cb, (void *)memprof__got_install);
        rc = find_real();
        if (rc == 0) {
            if (use_sheap != 0)
                memprof__engine_use_framed_sample_heap(page_size);
            patch_all();
            installed = 1;
            memprof__backend_register();
        }
    }
    pthread_mutex_unlock(&install_lock);
    if (first && rc == 0 && use_sheap < 0) {
        char msg[160];
        snprintf(msg, sizeof msg, "ignoring MEMPROF_SAMPLE_HEAP='%.64s': expected 1 or 0; using 1",
                 sheap);
        memprof__engine_log(MEMPROF_LOG_WARN, msg);
    }
    memprof__guard_leave(g);
    return rc;
}
