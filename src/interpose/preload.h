/* SPDX-License-Identifier: MIT */
/*
 * The preload backend's start-up and exit handling (preload_env.c), shared with the hook
 * definitions (preload.c).
 */
#ifndef MEMPROF_INTERPOSE_PRELOAD_H
#define MEMPROF_INTERPOSE_PRELOAD_H

#include <limits.h>
#include <stdbool.h>

#include "memprof/memprof.h"

/* Reads MEMPROF_* from the environment, initialises and starts the engine as configured,
 * and sets up the profile files. `sample_heap_ok`: the real allocator is glibc's and every
 * lookup of free can be made to find the plugin, which the sample heap needs. Called once
 * from the plugin's constructor. */
void memprof__preload_configure(bool sample_heap_ok);

/* The plugin's DT_FINI (linked with -fini): does nothing. */
void memprof__preload_fini(void);

/* Takes the plugin out of the environment this program's children inherit: its LD_PRELOAD
 * entry and every MEMPROF_* variable (MEMPROF_FOLLOW=0; preload_follow.c). Once, from the
 * plugin's constructor, after the configuration was read. */
void memprof__preload_unfollow(void);

/* Where, how and when profiles are written (preload_dump.c). */
struct memprof_dump_config {
    memprof_format format;
    unsigned interval_s; /* 0 = no periodic dumps */
    int signo;           /* 0 = no dump signal */
    /* false: a process that took no sample writes no exit-time profile (MEMPROF_WRITE_EMPTY),
     * except the one whose pid is write_empty_pid (memprof run's program). */
    bool write_empty;
    pid_t write_empty_pid;
    /* Last: every process sets it up, and only the string's own bytes are written (a copy
     * of the whole array would touch a page more of each copy). */
    char output[PATH_MAX]; /* template with %p; empty = write nothing */
};
void memprof__preload_dump_setup(const struct memprof_dump_config *cfg);

/* A libc symbol and the plugin function its entry should name. */
struct memprof_retarget {
    const char *name;
    void *fn;
    bool required; /* false: libc may not have it (cfree, free_sized) */
};
/* Whether the plugin defines dlopen, dlmopen, dlsym and dlvsym (preload_dl.c: where it has
 * their code, which must forward each call with the caller's own return address). */
#if defined(__x86_64__)
#define MEMPROF_PRELOAD_DL_HOOKS 1
#else
#define MEMPROF_PRELOAD_DL_HOOKS 0
#endif

/* Finds libc's dynamic-symbol entries for `targets` and the values that point them at the
 * given functions, so that lookups which end in libc's own table (RTLD_DEEPBIND libraries,
 * dlsym on libc's handle) will find the plugin's (preload_retarget.c). The entries are
 * written by the first memprof__preload_retarget_ready() (at once where the plugin has no
 * dlopen and dlsym of its own). Returns true if every required name was found (and, written
 * at once, written). Once, from the plugin's constructor. */
bool memprof__preload_retarget_prepare(const struct memprof_retarget *targets, size_t n);
/* Says that there is nothing to write (the allocator behind the plugin is not glibc's, or
 * the entries were not found). From the constructor. */
void memprof__preload_retarget_none(void);
/* Writes the prepared entries if nobody has (waiting while another thread of the process
 * does). Returns true once they are written (or there was nothing to write); false if they
 * could not be, or the caller interrupted their writing (a signal handler), or before the
 * constructor prepared them; then no block may come from the sample heap. Asked before the
 * first sampled block (wrappers.h: frees_reach_us). Thread-safe and async-signal-safe. */
bool memprof__preload_retarget_ready(void);
/* The state's low byte once written (preload_dl.c's fast path compares it). */
#define MEMPROF_RETARGET_DONE 3

/* The function `name` libc defines, found through its hash table (no loader lock), or NULL
 * (preload_retarget.c). */
void *memprof__preload_libc_function(const char *name);

/* libc's own dlsym() (not the plugin's, preload_dl.c, which forwards to it after work of its
 * own), found once; NULL if it cannot be. Called from the plugin, its RTLD_NEXT finds the
 * next definition after the plugin's. */
typedef void *memprof_dlsym_fn(void *handle, const char *name);
memprof_dlsym_fn *memprof__preload_libc_dlsym(void);

/* Whether the loaded object holding `addr` defines a symbol called `name` (of any type):
 * 1 if it does, 0 if it does not (it may import it: a program that is not position-independent
 * gives the functions whose address it takes its PLT stub as their address), -1 if no object
 * holds `addr` or it has no symbol hash table. Looked up through the object's hash table, not
 * dladdr1(), which scans every symbol of the object (preload_retarget.c). */
int memprof__preload_defines(const void *addr, const char *name);

/* One line on stderr, unless MEMPROF_QUIET=1 or descriptor 2 is no longer the stderr the
 * program started with (preload_env.c). */
void memprof__preload_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Stops the profile-writing thread (preload_dump.c), if one runs in this process, for a
 * call that needs the process single-threaded (preload_namespaces.c): waits for the dump in
 * progress, then until the kernel has let the thread go. Returns true if it stopped one;
 * then memprof__preload_writer_resume() must follow (it starts a new one). */
bool memprof__preload_writer_pause(void);
void memprof__preload_writer_resume(void);

/* Whether the calling thread is the profile writer with a descriptor table of its own
 * (preload_dump.c), where the program's descriptors are reached only through
 * memprof__preload_program_fd(). */
bool memprof__preload_private_fds(void);
/* A close-on-exec descriptor in the calling thread's table for the program's descriptor
 * `n` (the same open file, through pidfd_getfd()), or a negative errno. */
int memprof__preload_program_fd(int n);

#endif
