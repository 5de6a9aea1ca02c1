/* SPDX-License-Identifier: MIT */
/*
 * Sites named by the user's code (profile.h, "Sites"): which frame of a stack names its call
 * site, and the stacks as the human-facing writers (text, HTML, collapsed, the command's
 * summaries and diff) show them.
 *
 * A stack is captured from the allocator hook outward, so its innermost frames are whatever
 * stands between the user's code and the heap: an allocator wrapper (xmalloc, g_malloc,
 * operator new, sqlite3Malloc), or for an interpreter its object allocator and the C
 * functions of the interpreter that called it. Naming a site by its innermost frame would
 * name every site of a GNU program "xmalloc" and every Python site "PyObject_Malloc". So a
 * site is named by its innermost frame that is the user's:
 *
 *  - when the stack holds interpreter frames (MEMPROF_FRAME_RUNTIME, from a frame source),
 *    the innermost of them: what the script was running (memray's convention);
 *  - otherwise the innermost native frame outside the allocator: the caller of the
 *    outermost allocator wrapper among the innermost WRAPPER_DEPTH frames (the frames
 *    inside a wrapper are the allocator's own), a wrapper being a function of the default
 *    list below (doc/guide.md, "Site names", documents it) or one matched by a pattern of
 *    MEMPROF_WRAPPERS (what `memprof report/run/diff --wrapper` set). A stack of wrappers
 *    only is named by its outermost frame.
 *
 * The binding's own hook frames never reach a profile: a binding marks its object as hook
 * code (memprof_register_hook_code(), runtime.h) and capture drops it with the profiler's
 * own frames.
 *
 * As shown (memprof__profile_presented()), a stack starts at its site's frame, and the
 * native frames between two interpreter frames, the interpreter running itself, are folded
 * away; with MEMPROF_NATIVE=1 (`--native`) stacks keep every frame, the site still named as
 * above. pprof and speedscope, inputs of other tools, always keep every frame.
 *
 * Patterns are shell globs (fnmatch(3)) matched against the whole function name as the
 * writers show it (C++ demangled, with its parameters: "operator new(unsigned long)") and
 * against the symbol's own spelling (a mangled name). MEMPROF_WRAPPERS separates them with
 * commas. The variables are read when a profile is written; a copy taken at load serves a
 * process whose plugin removed MEMPROF_* from its environment (MEMPROF_FOLLOW=0).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "export/profile.h"

/* ---- the default wrappers ------------------------------------------------------------- */

/* Allocation functions whose callers are the ones to name. Keep doc/guide.md ("Site names")
 * in step. Patterns end in '*' where a family has many members or C++ adds parameters. */
static const char *const default_wrappers[] = {
    /* libc: the malloc family (the plugin's own entry points are never in a stack), and the
     * functions that return memory the caller owns. */
    "malloc",
    "calloc",
    "realloc",
    "reallocarray",
    "free",
    "posix_memalign",
    "aligned_alloc",
    "memalign",
    "valloc",
    "pvalloc",
    "__libc_malloc",
    "__libc_calloc",
    "__libc_realloc",
    "__libc_memalign",
    "strdup",
    "strndup",
    "__strdup",
    "__strndup",
    "wcsdup",
    "asprintf",
    "vasprintf",
    "__asprintf",
    "__vasprintf_internal",
    "___asprintf",
    /* libstdc++ and libc++: operator new and the standard allocators. */
    "operator new*",
    "operator new[]*",
    "__gnu_cxx::new_allocator<*>::allocate*",
    "std::__new_allocator<*>::allocate*",
    "std::allocator<*>::allocate*",
    "std::allocator_traits<*>::allocate*",
    "std::__1::allocator<*>::allocate*",
    "std::__1::__libcpp_allocate*",
    "std::__libcpp_allocate*",
    "_Znwm",
    "_Znam",
    "_ZnwmRKSt9nothrow_t",
    "_ZnamRKSt9nothrow_t",
    "_ZnwmSt11align_val_t",
    "_ZnamSt11align_val_t",
    /* GLib. */
    "g_malloc",
    "g_malloc0",
    "g_malloc_n",
    "g_malloc0_n",
    "g_realloc",
    "g_realloc_n",
    "g_try_malloc*",
    "g_try_realloc*",
    "g_slice_alloc",
    "g_slice_alloc0",
    "g_slice_copy",
    "g_memdup",
    "g_memdup2",
    "g_strdup",
    "g_strndup",
    "g_strdup_printf",
    "g_strdup_vprintf",
    "g_aligned_alloc*",
    /* CPython's allocators (a Python site is named by its Python frame; these name the
     * interpreter's own native sites, at start-up and in extensions, by their callers). */
    "PyMem_*",
    "_PyMem_*",
    "PyObject_Malloc",
    "PyObject_Calloc",
    "PyObject_Realloc",
    "_PyObject_Malloc",
    "_PyObject_Calloc",
    "_PyObject_Realloc",
    "pymalloc_alloc",
    "pymalloc_realloc",
    "allocate_from_new_pool",
    "_PyObject_ArenaMmap",
    "new_arena",
    "_PyObject_GC_New*",
    "_PyObject_GC_Malloc",
    "gc_alloc",
    "_PyObject_New*",
    "PyType_GenericAlloc",
    "_PyType_AllocNoTrack",
    /* Ruby. */
    "ruby_xmalloc*",
    "ruby_xcalloc*",
    "ruby_xrealloc*",
    "ruby_strdup",
    "ruby_mimmalloc",
    "objspace_xmalloc*",
    "objspace_xcalloc*",
    "objspace_xrealloc*",
    "objspace_malloc_fixup",
    "rb_xmalloc_mul_add*",
    "rb_xcalloc_mul_add*",
    "rb_xrealloc_mul_add*",
    "rb_aligned_malloc",
    "rb_alloc_tmp_buffer*",
    /* Perl. */
    "Perl_safesysmalloc",
    "Perl_safesyscalloc",
    "Perl_safesysrealloc",
    "Perl_savepv",
    "Perl_savepvn",
    "Perl_savesharedpv*",
    /* The xmalloc families: gnulib (coreutils, grep, tar...), libiberty (GCC, binutils),
     * git, and obstack's chunk allocator. */
    "xmalloc",
    "xcalloc",
    "xrealloc",
    "xreallocarray",
    "xzalloc",
    "xnmalloc",
    "xnrealloc",
    "x2realloc",
    "x2nrealloc",
    "xcharalloc",
    "xpalloc",
    "ximalloc",
    "xicalloc",
    "xirealloc",
    "xizalloc",
    "xireallocarray",
    "xmemdup",
    "xmemdupz",
    "ximemdup*",
    "xstrdup",
    "xstrndup",
    "xmallocz",
    "xmallocz_gently",
    "do_xmalloc",
    "_obstack_newchunk",
    "_obstack_begin*",
    /* SQLite: its malloc layer and the per-connection allocators above it. */
    "sqlite3Malloc",
    "sqlite3MallocZero",
    "sqlite3MemMalloc",
    "sqlite3MemRealloc",
    "sqlite3Realloc",
    "sqlite3DbMalloc*",
    "sqlite3DbRealloc*",
    "sqlite3DbStrDup",
    "sqlite3DbStrNDup",
    "sqlite3DbSpanDup",
    "sqlite3_malloc",
    "sqlite3_malloc64",
    "sqlite3_realloc",
    "sqlite3_realloc64",
    "mallocWithAlarm",
    "dbMallocRawFinish",
    "dbReallocFinish",
    /* Rust: the allocator shims in their plain and v0 spellings, the functions of older
     * rustc behind them, the alloc crate's allocation API and growth paths (inlined into
     * the caller, or not), the methods of a GlobalAlloc or Allocator implementation, and
     * the Vec and Box functions that allocate for their caller (not those that call the
     * caller's closures, such as collecting an iterator). */
    "__rust_alloc",
    "__rust_alloc_zeroed",
    "__rust_realloc",
    "__rust_dealloc",
    "__rustc::__rust_*",
    "__rg_*",
    "__rdl_*",
    "std::alloc::__default_lib_allocator::*",
    "alloc::alloc::*",
    "<alloc::alloc::*",
    "alloc::raw_vec::*",
    "<alloc::raw_vec::*",
    "* as core::alloc::global::GlobalAlloc>::*",
    "* as core::alloc::Allocator>::*",
    "alloc::vec::from_elem*",
    "* as alloc::vec::spec_from_elem::SpecFromElem>::*",
    "alloc::vec::Vec<*>::with_capacity*",
    "<alloc::vec::Vec<*>>::with_capacity*",
    "alloc::vec::Vec<*>::reserve*",
    "<alloc::vec::Vec<*>>::reserve*",
    "alloc::vec::Vec<*>::push*",
    "<alloc::vec::Vec<*>>::push*",
    "alloc::boxed::Box<*>::new*",
    "<alloc::boxed::Box<*>>::new*",
};

const char *const *memprof__wrappers_default(size_t *n)
{
    *n = sizeof default_wrappers / sizeof *default_wrappers;
    return default_wrappers;
}

/* ---- the user's patterns -------------------------------------------------------------- */

#define ENV_COPY 4096

/* The variables as the process started with them (see the top of the file). */
static char env_wrappers[ENV_COPY], env_native[8];

/* environ walked by hand: nothing that may allocate runs at load (doc/architecture.md,
 * Decisions: Nothing before main may allocate). */
extern char **environ;
static void copy_env(const char *name, char *to, size_t size)
{
    size_t len = strlen(name);
    for (char **e = environ; e && *e; e++)
        if (!strncmp(*e, name, len) && (*e)[len] == '=') {
            const char *v = *e + len + 1;
            size_t n = strlen(v);
            if (n < size) /* a longer value is not copied at all: never half a pattern */
                memcpy(to, v, n + 1);
            return;
        }
}

__attribute__((constructor)) static void remember_env(void)
{
    copy_env("MEMPROF_WRAPPERS", env_wrappers, sizeof env_wrappers);
    copy_env("MEMPROF_NATIVE", env_native, sizeof env_native);
}

static const char *env_value(const char *name, const char *copy)
{
    const char *v = getenv(name);
    return v ? v : copy[0] ? copy : NULL;
}

bool memprof__present_native(void)
{
    const char *v = env_value("MEMPROF_NATIVE", env_native);
    return v && v[0] && strcmp(v, "0") != 0;
}

/* Whether `name` matches one of the comma-separated patterns of `list`. */
static bool matches_list(const char *list, const char *name)
{
    char pattern[512];
    for (const char *p = list; p && *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        /* Blanks around a pattern are the list's, not the pattern's. */
        while (n && (*p == ' ' || *p == '\t'))
            p++, n--;
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n && n < sizeof pattern) {
            memcpy(pattern, p, n);
            pattern[n] = 0;
            if (fnmatch(pattern, name, 0) == 0)
                return true;
        }
        p = end ? end + 1 : NULL;
    }
    return false;
}

static bool name_is_wrapper(const char *name, const char *user)
{
    for (size_t i = 0; i < sizeof default_wrappers / sizeof *default_wrappers; i++)
        if (fnmatch(default_wrappers[i], name, 0) == 0)
            return true;
    return user && matches_list(user, name);
}

/* The one check, with the user's list already looked up. */
static bool is_wrapper(const struct memprof_pframe *f, const char *user)
{
    if ((f->flags & MEMPROF_FRAME_RUNTIME) || !f->function)
        return false;
    return name_is_wrapper(f->function, user) ||
           (f->system_name && name_is_wrapper(f->system_name, user));
}

bool memprof__pframe_is_wrapper(const struct memprof_pframe *f)
{
    return is_wrapper(f, env_value("MEMPROF_WRAPPERS", env_wrappers));
}

/* ---- the site of a stack -------------------------------------------------------------- */

/* How deep into a stack a wrapper is looked for: an allocator's own internals (pymalloc's
 * arena_map_get() under new_arena(), GLib's magazine functions under g_slice_alloc()) sit
 * inside its wrappers, innermost, and a site is named by the frame outside the outermost
 * wrapper of that region. Deeper, a wrapper is a caller like any other. */
#define WRAPPER_DEPTH 12

/* Whether frame i of st is a wrapper, with the verdicts of p's frames at hand (NULL: ask). */
static bool wrapper_at(const struct memprof_profile *p, const struct memprof_pstack *st, uint32_t i,
                       const uint8_t *wrapper, const char *user)
{
    uint32_t k = st->frames[i];
    if (k >= p->nframes)
        return false;
    return wrapper ? wrapper[k] : is_wrapper(&p->frames[k], user);
}

/* The site's index (see memprof__pstack_site()). */
static uint32_t site_of(const struct memprof_profile *p, const struct memprof_pstack *st,
                        const uint8_t *wrapper, const char *user)
{
    for (uint32_t i = 0; i < st->nframes; i++)
        if (st->frames[i] < p->nframes && (p->frames[st->frames[i]].flags & MEMPROF_FRAME_RUNTIME))
            return i;
    uint32_t outermost = UINT32_MAX;
    for (uint32_t i = 0; i < st->nframes && i < WRAPPER_DEPTH; i++)
        if (wrapper_at(p, st, i, wrapper, user))
            outermost = i;
    if (outermost == UINT32_MAX)
        return 0;
    uint32_t i = outermost + 1;
    while (i < st->nframes && wrapper_at(p, st, i, wrapper, user))
        i++;
    return i < st->nframes ? i : st->nframes - 1;
}

uint32_t memprof__pstack_site(const struct memprof_profile *p, const struct memprof_pstack *st)
{
    return site_of(p, st, NULL, env_value("MEMPROF_WRAPPERS", env_wrappers));
}

uint32_t memprof__pstack_label(const struct memprof_profile *p, const struct memprof_pstack *st,
                               uint32_t site)
{
    for (uint32_t i = site; i < st->nframes && st->frames[i] < p->nframes; i++) {
        const struct memprof_pframe *f = &p->frames[st->frames[i]];
        if (!(f->flags & MEMPROF_FRAME_RUNTIME))
            break; /* native code between: the site's own frame names it */
        if (f->file)
            return i;
    }
    return site;
}

/* ---- stacks as shown ------------------------------------------------------------------ */

int memprof__profile_presented(const struct memprof_profile *p, bool native,
                               struct memprof_profile **out)
{
    *out = NULL;
    struct memprof_profile *q = malloc(sizeof *q);
    struct memprof_pstack *stacks = malloc((p->nstacks ? p->nstacks : 1) * sizeof *stacks);
    uint8_t *wrapper = malloc(p->nframes ? p->nframes : 1);
    size_t total = 0;
    for (size_t i = 0; i < p->nstacks; i++)
        total += p->stacks[i].nframes;
    uint32_t *idx = native ? NULL : malloc((total ? total : 1) * sizeof *idx);
    if (!q || !stacks || !wrapper || (!native && !idx)) {
        free(q);
        free(stacks);
        free(wrapper);
        free(idx);
        return -ENOMEM;
    }
    /* Each frame is judged once: profiles share frames between many stacks. */
    const char *user = env_value("MEMPROF_WRAPPERS", env_wrappers);
    for (size_t i = 0; i < p->nframes; i++)
        wrapper[i] = is_wrapper(&p->frames[i], user);
    *q = *p;
    q->stacks = stacks;
    q->arena = idx;
    uint32_t *next = idx;
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct memprof_pstack *st = &p->stacks[i];
        stacks[i] = *st;
        if (native || st->nframes == 0)
            continue;
        uint32_t site = site_of(p, st, wrapper, user), n = 0;
        /* The outermost interpreter frame: native frames inside it, up to the site, are the
         * interpreter's (folded); beyond it they are what started the interpreter (kept). */
        uint32_t last_runtime = UINT32_MAX;
        for (uint32_t j = st->nframes; j-- > site;)
            if (st->frames[j] < p->nframes &&
                (p->frames[st->frames[j]].flags & MEMPROF_FRAME_RUNTIME)) {
                last_runtime = j;
                break;
            }
        for (uint32_t j = site; j < st->nframes; j++) {
            bool runtime = st->frames[j] < p->nframes &&
                           (p->frames[st->frames[j]].flags & MEMPROF_FRAME_RUNTIME);
            if (!runtime && last_runtime != UINT32_MAX && j < last_runtime)
                continue; /* between two interpreter frames */
            next[n++] = st->frames[j];
        }
        stacks[i].frames = next;
        stacks[i].nframes = n;
        next += n;
    }
    free(wrapper);
    *out = q;
    return 0;
}

void memprof__profile_presented_free(struct memprof_profile *q)
{
    if (!q)
        return;
    free(q->arena);
    free(q->stacks);
    free(q);
}
