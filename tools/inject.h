/* SPDX-License-Identifier: MIT */
/*
 * Calling a function of a shared library inside another running process, without a
 * debugger (inject.c): the library is loaded there with the target's own dlopen() and one of
 * its exported functions called with a string argument, on a thread borrowed for the
 * duration of the call, which then continues exactly where it was. Used by `memprof attach`
 * (attach.c) to start and stop the profiler in a running program. x86_64 Linux only.
 */
#ifndef MEMPROF_TOOLS_INJECT_H
#define MEMPROF_TOOLS_INJECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* What one injected call did, for messages and the report's numbers. */
struct inject_result {
    long value;        /* the function's return value (an int in rax, sign-extended) */
    pid_t tid;         /* the thread borrowed */
    uint64_t away_ns;  /* from the thread's stop to its release: how long it was borrowed */
    unsigned attempts; /* stops until one was at a safe point */
    int in_syscall;    /* the thread was in a system call, which was restarted */
};

/* Loads `library` (a path as the target sees it) in process `pid` with RTLD_NOW and calls
 * `int function(const char *arg)` from it on one of the target's threads. Returns 0 with
 * *res filled, or -1 with one line (no "memprof:" prefix) in err. The target is never left
 * stopped or traced: if this process dies at any moment, the borrowed thread completes
 * the call on its own and resumes where it was (except for a window of microseconds
 * while the first call maps the code page, tools/inject.c). SIGINT, SIGTERM, SIGHUP and
 * SIGQUIT are blocked here while the call runs; in the target, signals arriving meanwhile are
 * delivered after it, where the thread was. */
int memprof_inject_call(pid_t pid, const char *library, const char *function, const char *arg,
                        struct inject_result *res, char *err, size_t errsize);

/* The arguments of memprof_inject_call_args()'s call: function(a0, a1), where a0 is the
 * address of a copy of `str` in the target when str is not NULL (at most 4095 bytes). */
struct inject_args {
    const char *str;
    long a0, a1;
};

/* As memprof_inject_call(), for `long function(long a0, long a1)` (only the low 32 bits of
 * its result are kept, sign-extended, as for an int): a libc function such as memfd_create()
 * or close() with library "libc.so.6", which dlopen() finds loaded. An empty `function` only
 * loads the library (res->value is then 0). */
int memprof_inject_call_args(pid_t pid, const char *library, const char *function,
                             const struct inject_args *args, struct inject_result *res, char *err,
                             size_t errsize);

#endif
