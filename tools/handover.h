/* SPDX-License-Identifier: MIT */
/*
 * Handing files over to a process in another mount namespace (a container) for `memprof
 * attach` (handover.c): libmemprof.so.1 and the libraries it needs go in as memory files
 * (memfd) created in the process and loaded from /proc/self/fd/N there, and the profile
 * comes back out of one, so neither needs a path both sides see.
 */
#ifndef MEMPROF_TOOLS_HANDOVER_H
#define MEMPROF_TOOLS_HANDOVER_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>

#include "inject.h"
#include "target.h"

/* One shared object to hand over: its soname and its file here. */
struct handover_object {
    char soname[256];
    char path[PATH_MAX];
};

/* The objects `library` needs that process pid does not have loaded, dependencies before
 * what needs them, `library` last; glibc's own libraries (libc, libm, the loader...) are
 * never among them: the process's glibc must serve. Found with this system's dynamic loader
 * (`ld.so --list`). Returns the count (malloc'ed array in *out), or -1 with a reason in err. */
ssize_t memprof_handover_list(pid_t pid, const char *library, struct handover_object **out,
                              char *err, size_t errsize);

/* Loads objs[0..n-1] in that order into pid, each through a memory file, and calls
 * function(arg) from the last; closes the memory files again. Returns as
 * memprof_inject_call(), with res the last call's. */
int memprof_handover_call(pid_t pid, const struct handover_object *objs, size_t n,
                          const char *function, const char *arg, struct inject_result *res,
                          char *err, size_t errsize);

/* Creates an empty memory file named `name` in pid; *fd is its descriptor there. */
int memprof_handover_memfd(pid_t pid, const char *name, int *fd, char *err, size_t errsize);

/* Closes descriptor fd of pid (an injected close()). */
int memprof_handover_close(pid_t pid, int fd, char *err, size_t errsize);

/* Copies what pid's descriptor fd holds (from its start) to `path` here, as this process's
 * user. Returns 0 or a negative errno. */
int memprof_handover_fetch(pid_t pid, int fd, const char *path);

/* Whether pid runs in another mount namespace than this process. */
bool memprof_handover_needed(pid_t pid);

/* Whether pid's root has a proc file system at /proc (loading from /proc/self/fd/N needs it). */
bool memprof_handover_has_proc(pid_t pid);

#endif
