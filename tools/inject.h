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
 * the call on its own and resumes where it was (except for a window of one instruction
 * while the first call maps the code page, tools/inject.c). SIGINT, SIGTERM, SIGHUP and
 * SIGQUIT are blocked while the call runs. */
int memprof_inject_call(pid_t pid, const char *library, const char *function, const char *arg,
                        struct inject_result *res, char *err, size_t errsize);

#endif
