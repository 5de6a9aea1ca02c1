/* SPDX-License-Identifier: MIT */
/*
 * The preload plugin's dlopen, dlmopen, dlsym and dlvsym: through these alone can a lookup
 * end in libc's own symbol table after start (an RTLD_DEEPBIND library's bindings, dlsym on
 * libc's handle or with RTLD_NEXT from an object after the plugin). Before the first call
 * from outside the plugin is forwarded, libc's entries for free and the other functions that
 * take a block back are written to name the plugin's (memprof__preload_retarget_ready(),
 * preload_retarget.c); a process that never calls them and never samples never writes them.
 *
 * Each forwards to the next definition (glibc's, or another preloaded library's) with a
 * jump, not a call: glibc takes the caller from its return address (RTLD_NEXT, the scope of
 * RTLD_DEFAULT, the search path of a bare name, the namespace), which must stay the
 * caller's. Hence the code in assembly, for x86_64 (MEMPROF_PRELOAD_DL_HOOKS); elsewhere the
 * plugin defines none of these and its constructor writes the entries at once.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/atomic.h"
#include "common/compiler.h"
#include "core/platform.h"
#include "interpose/preload.h"

#if MEMPROF_PRELOAD_DL_HOOKS

/* In the order of the hooks' indexes below. */
static const char *const dl_names[] = {"dlopen", "dlmopen", "dlsym", "dlvsym"};

/* The next definitions, found on each one's first call (the code below reads them). */
_Atomic(void *) memprof__preload_dl_next[MEMPROF_ARRAY_SIZE(dl_names)] MEMPROF_START_DATA;

/* The plugin's own code: its calls (the constructor's dlsym(RTLD_NEXT)) need nothing
 * written. own_hi is stored last. */
static _Atomic uintptr_t own_lo MEMPROF_START_DATA, own_hi MEMPROF_START_DATA;

static void *find_next(unsigned which)
{
    /* dlsym(RTLD_NEXT) called from here: the next definition after the plugin's. */
    memprof_dlsym_fn *libc_dlsym = memprof__preload_libc_dlsym();
    void *f = libc_dlsym ? libc_dlsym(RTLD_NEXT, dl_names[which]) : NULL;
    if (!f)
        f = memprof__preload_libc_function(dl_names[which]);
    if (!f) {
        static const char msg[] = "memprof: cannot find glibc's dynamic-loader functions; "
                                  "aborting\n";
        (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
        abort();
    }
    memprof_atomic_store_release(&memprof__preload_dl_next[which], f);
    return f;
}

/* The slow path of the code below: the next definition of function `which`, once what a
 * call from `caller` needs is written. Keeps errno. */
void *memprof__preload_dl_enter(uintptr_t caller, unsigned which);
MEMPROF_START_TEXT void *memprof__preload_dl_enter(uintptr_t caller, unsigned which)
{
    int saved = errno;
    void *next = memprof_atomic_load_acquire(&memprof__preload_dl_next[which]);
    if (!next)
        next = find_next(which);
    uintptr_t hi = memprof_atomic_load_acquire(&own_hi), lo;
    if (hi)
        lo = memprof_atomic_load_relaxed(&own_lo);
    else if (memprof__pf_text_range((const void *)memprof__preload_dl_enter, &lo, &hi) == 0) {
        memprof_atomic_store_relaxed(&own_lo, lo);
        memprof_atomic_store_release(&own_hi, hi);
    } else
        lo = hi = 0;
    if (caller < lo || caller >= hi)
        (void)memprof__preload_retarget_ready();
    errno = saved;
    return next;
}

/* clang-format off */
#define STR_(x) #x
#define STR(x)  STR_(x)

/* The fast path: written, and the next definition known: jump to it. Otherwise the slow
 * path with the argument registers kept (three at most; %rcx too, for alignment) and the
 * caller's return address as its first argument, then the same jump. */
#define DL_HOOK(name, which)                                                                       \
    ".globl " #name "\n"                                                                           \
    ".type " #name ",@function\n"                                                                  \
    ".p2align 4\n" #name ":\n"                                                                     \
    ".cfi_startproc\n"                                                                             \
    "endbr64\n"                                                                                    \
    "movq memprof__preload_dl_next+8*" STR(which) "(%rip), %rax\n"                                 \
    "testq %rax, %rax\n"                                                                           \
    "je 1f\n"                                                                                      \
    "cmpb $" STR(MEMPROF_RETARGET_DONE) ", memprof__preload_retarget_word(%rip)\n"                 \
    "jne 1f\n"                                                                                     \
    "jmp *%rax\n"                                                                                  \
    "1:\n"                                                                                         \
    "pushq %rdi\n.cfi_adjust_cfa_offset 8\n"                                                       \
    "pushq %rsi\n.cfi_adjust_cfa_offset 8\n"                                                       \
    "pushq %rdx\n.cfi_adjust_cfa_offset 8\n"                                                       \
    "pushq %rcx\n.cfi_adjust_cfa_offset 8\n"                                                       \
    "subq $8, %rsp\n.cfi_adjust_cfa_offset 8\n"                                                    \
    "movq 40(%rsp), %rdi\n"                                                                        \
    "movl $" STR(which) ", %esi\n"                                                                 \
    "call memprof__preload_dl_enter\n"                                                             \
    "addq $8, %rsp\n.cfi_adjust_cfa_offset -8\n"                                                   \
    "popq %rcx\n.cfi_adjust_cfa_offset -8\n"                                                       \
    "popq %rdx\n.cfi_adjust_cfa_offset -8\n"                                                       \
    "popq %rsi\n.cfi_adjust_cfa_offset -8\n"                                                       \
    "popq %rdi\n.cfi_adjust_cfa_offset -8\n"                                                       \
    "jmp *%rax\n"                                                                                  \
    ".cfi_endproc\n"                                                                               \
    ".size " #name ", .-" #name "\n"

/* clang-format on */

__asm__(".pushsection .text\n" DL_HOOK(dlopen, 0) DL_HOOK(dlmopen, 1) DL_HOOK(dlsym, 2)
            DL_HOOK(dlvsym, 3) ".popsection\n");

#endif
