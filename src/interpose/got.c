/* SPDX-License-Identifier: MIT */
/*
 * The GOT backend: memprof_start() in a process without the preload plugin rewrites the
 * Global Offset Table slots through which every loaded ELF object calls the allocator, so
 * those calls reach the shared wrappers (wrappers.h) and then libc's allocator.
 *
 * Facts this relies on (learned the hard way; see DESIGN.md "Interposition backends"):
 * - Both JUMP_SLOT (PLT) and GLOB_DAT relocations are patched: code built with -fno-plt,
 *   function-pointer uses, and libc's own internal calls (strdup -> malloc) go through
 *   GLOB_DAT slots. libc itself is patched too, so strdup's block is seen.
 * - Slots inside a PT_GNU_RELRO range are read-only after start-up (always with -z now):
 *   the page is made writable for the store and read-only again.
 * - The real functions are libc's *defined* symbols, looked up through libc's own handle.
 *   dlsym(RTLD_DEFAULT, "malloc") in a non-PIE program (Debian's python3) returns the
 *   program's PLT stub, which after patching jumps back into the hook: endless recursion.
 * - Objects loaded later are patched from a dlopen hook. glibc's dlopen finds $ORIGIN,
 *   RPATH and RUNPATH from its caller's return address, which inside a hook is this
 *   library; so the hook searches the way the caller would (dlinfo RTLD_DI_SERINFO and
 *   RTLD_DI_ORIGIN of the caller's link map) and hands glibc a path.
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
#include "core/engine.h"
#include "core/imports.h"
#include "interpose/seccomp.h"
#include "interpose/wrappers.h"

#if !defined(__x86_64__) && !defined(__aarch64__)
#error "the GOT backend supports x86_64 and aarch64"
#endif

static struct memprof_allocator real;
static void *(*real_dlopen)(const char *, int);
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int installed;
static uintptr_t self_base;
static size_t page_size;

/* ---- hooks ------------------------------------------------------------------------------- */

#define HOOK MEMPROF_SAMPLING_TEXT static

HOOK void *got_malloc(size_t n)
{
    return memprof__wrap_malloc(&real, n);
}

HOOK void got_free(void *p)
{
    memprof__wrap_free(&real, p);
}

HOOK void *got_calloc(size_t n, size_t size)
{
    return memprof__wrap_calloc(&real, n, size);
}

HOOK void *got_realloc(void *p, size_t n)
{
    return memprof__wrap_realloc(&real, p, n);
}

HOOK void *got_reallocarray(void *p, size_t n, size_t size)
{
    return memprof__wrap_reallocarray(&real, p, n, size);
}

HOOK int got_posix_memalign(void **out, size_t align, size_t n)
{
    return memprof__wrap_posix_memalign(&real, out, align, n);
}

HOOK void *got_aligned_alloc(size_t align, size_t n)
{
    return memprof__wrap_aligned_alloc(&real, align, n);
}

HOOK void *got_memalign(size_t align, size_t n)
{
    return memprof__wrap_memalign(&real, align, n);
}

HOOK void *got_valloc(size_t n)
{
    return memprof__wrap_valloc(&real, n, page_size);
}

HOOK void *got_pvalloc(size_t n)
{
    return memprof__wrap_pvalloc(&real, n, page_size);
}

/* mlockall without faulting in the engine's tables and sample heap (engine.h). */
static int (*real_mlockall)(int);

static int got_mlockall(int flags)
{
    return memprof__engine_mlockall(flags, real_mlockall);
}

/* The ways of installing a seccomp filter (seccomp.h): the engine gets ready for it first.
 * Each reads as many arguments as glibc's own does, whatever the caller passed. */
typedef long syscall_fn(long, ...);
typedef int prctl_fn(int, ...);
static syscall_fn *real_syscall;
static prctl_fn *real_prctl;

static long got_syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    bool strict;
    const void *fprog;
    if (!memprof__syscall_seccomp(nr, a, &strict, &fprog))
        return real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
    uint32_t marked = memprof__engine_seccomp_before(strict, fprog);
    long rc = real_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
    memprof__engine_seccomp_after(marked, rc != -1);
    return rc;
}

static int got_prctl(int option, ...)
{
    va_list ap;
    va_start(ap, option);
    unsigned long a[4];
    for (int i = 0; i < 4; i++)
        a[i] = va_arg(ap, unsigned long);
    va_end(ap);
    bool strict;
    const void *fprog;
    if (!memprof__prctl_seccomp(option, a[0], a[1], &strict, &fprog))
        return real_prctl(option, a[0], a[1], a[2], a[3]);
    uint32_t marked = memprof__engine_seccomp_before(strict, fprog);
    int rc = real_prctl(option, a[0], a[1], a[2], a[3]);
    memprof__engine_seccomp_after(marked, rc != -1);
    return rc;
}

static void *got_dlopen(const char *file, int mode);

static const struct memprof_import hooks[] = {
    {"prctl", (void *)got_prctl},
    {"syscall", (void *)got_syscall},
    {"malloc", (void *)got_malloc},
    {"free", (void *)got_free},
    {"calloc", (void *)got_calloc},
    {"realloc", (void *)got_realloc},
    {"reallocarray", (void *)got_reallocarray},
    {"posix_memalign", (void *)got_posix_memalign},
    {"aligned_alloc", (void *)got_aligned_alloc},
    {"memalign", (void *)got_memalign},
    {"valloc", (void *)got_valloc},
    {"pvalloc", (void *)got_pvalloc},
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

static int patch_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size, (void)data;
    if (!skip_object(info))
        memprof__imports_patch(info, hooks, n_hooks);
    return 0;
}

/* Patches every loaded object; slots already pointing at a hook are left alone, so running
 * it again after a dlopen only touches what is new. */
static void patch_all(void)
{
    uint8_t g = memprof__guard_enter();
    pthread_mutex_lock(&lock);
    dl_iterate_phdr(patch_cb, NULL);
    pthread_mutex_unlock(&lock);
    memprof__guard_leave(g);
}

/* ---- dlopen on the caller's behalf --------------------------------------------------------- */

/* Replaces $ORIGIN / ${ORIGIN} in `file` with the caller's origin; false if too long. */
static bool expand_origin(const char *file, const char *origin, char *out, size_t size)
{
    size_t o = 0;
    for (const char *p = file; *p;) {
        size_t skip = !strncmp(p, "$ORIGIN", 7) ? 7 : !strncmp(p, "${ORIGIN}", 9) ? 9 : 0;
        const char *add = skip ? origin : p;
        size_t n = skip ? strlen(origin) : 1;
        if (o + n >= size)
            return false;
        memcpy(out + o, add, n);
        o += n;
        p += skip ? skip : 1;
    }
    out[o] = 0;
    return true;
}

/* Opens `file` as glibc would for a dlopen called from `caller`. */
static void *open_as(const void *caller, const char *file, int mode)
{
    if (!file)
        return real_dlopen(file, mode);
    Dl_info info;
    struct link_map *map = NULL;
    bool known = dladdr1(caller, &info, (void **)&map, RTLD_DL_LINKMAP) && map;
    if (known && strstr(file, "ORIGIN")) {
        char origin[PATH_MAX], path[PATH_MAX];
        if (dlinfo(map, RTLD_DI_ORIGIN, origin) == 0 &&
            expand_origin(file, origin, path, sizeof path))
            return real_dlopen(path, mode);
        return real_dlopen(file, mode);
    }
    if (!known || strchr(file, '/'))
        return real_dlopen(file, mode);
    /* A bare name: already loaded (by soname) wins, as in glibc. */
    void *h = real_dlopen(file, mode | RTLD_NOLOAD);
    if (h)
        return h;
    /* Then the caller's search path: its RPATH, LD_LIBRARY_PATH, its RUNPATH, the system
     * directories, in glibc's order. */
    Dl_serinfo probe;
    if (dlinfo(map, RTLD_DI_SERINFOSIZE, &probe) == 0 && probe.dls_size > 0) {
        Dl_serinfo *si = malloc(probe.dls_size);
        if (si) {
            *si = probe;
            if (dlinfo(map, RTLD_DI_SERINFO, si) == 0) {
                for (unsigned i = 0; i < si->dls_cnt && !h; i++) {
                    char path[PATH_MAX];
                    int n = snprintf(path, sizeof path, "%s/%s", si->dls_serpath[i].dls_name, file);
                    if (n > 0 && (size_t)n < sizeof path && access(path, F_OK) == 0)
                        h = real_dlopen(path, mode);
                }
            }
            free(si);
        }
    }
    /* Otherwise (e.g. only in ld.so.cache): glibc's own search. */
    return h ? h : real_dlopen(file, mode);
}

static void *got_dlopen(const char *file, int mode)
{
    void *h = open_as(__builtin_return_address(0), file, mode);
    if (h)
        patch_all();
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
    real = a;
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
