/* SPDX-License-Identifier: MIT */
/*
 * Reading another process for `memprof attach` (target.c): its memory mappings, fields of
 * its /proc status, and the address of an exported symbol of one of its shared objects, read
 * from the object's file as the target sees it (through /proc/PID/root, so a target in
 * another mount namespace is read from its own files).
 */
#ifndef MEMPROF_TOOLS_TARGET_H
#define MEMPROF_TOOLS_TARGET_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One line of /proc/PID/maps. */
struct target_map {
    uintptr_t start, end;
    char perms[5];
    uint64_t offset;
    uint64_t inode;
    char path[PATH_MAX]; /* empty for anonymous mappings */
};

/* The mappings of pid, in address order (malloc'ed; free() them). Returns the count, or -1
 * with errno set. */
ssize_t memprof_target_maps(pid_t pid, struct target_map **out);

/* The file name of a mapping's path: after the last '/', and after "memfd:" for a memory
 * file (memprof attach names those after the soname they carry, handover.c). */
const char *memprof_target_file_name(const char *path);

/* The first object the loader mapped (one with code) whose file name (after the last '/')
 * starts with `prefix`, e.g. "libc.so.6". Sets *base to its load address (the start of its
 * mapping at file offset 0). Returns NULL if none is mapped. */
const struct target_map *memprof_target_object(const struct target_map *m, size_t n,
                                               const char *prefix, uintptr_t *base);

/* The mapping that contains addr, or NULL. */
const struct target_map *memprof_target_map_at(const struct target_map *m, size_t n,
                                               uintptr_t addr);

/* The address of the defined dynamic symbol `name` of the object at `path` (as the target
 * sees it) loaded at `base`; the default version when there are several. Returns 0 if the
 * file cannot be read or the symbol is not there. */
uintptr_t memprof_target_symbol(pid_t pid, const char *path, uintptr_t base, const char *name);

/* The unused end of the last page of an executable segment of the object at `path` (as the
 * target sees it) loaded at `base`: the bytes after the segment's last byte up to the end of
 * its page, mapped executable with it and used by nothing (the largest such tail when the
 * object has several executable segments). Returns its address and sets *len, or returns 0
 * (the file cannot be read, or no segment leaves room). */
uintptr_t memprof_target_code_slack(pid_t pid, const char *path, uintptr_t base, size_t *len);

/* Waits for the stop of a thread this process traces and has just interrupted
 * (PTRACE_INTERRUPT), polling every millisecond for at most `timeout_ms`: another thread's
 * exec() may release it without a word to its tracer, and a blocking waitpid() would then never
 * end. Returns true with the wait status in *st, else false (errno ETIMEDOUT, or waitpid()'s). */
bool memprof_target_wait_stop(pid_t pid, int *st, unsigned timeout_ms);

/* The value of `key` ("TracerPid", "State", "Uid") in /proc/PID/status, leading blanks
 * skipped. Returns false if the process or the key does not exist. */
bool memprof_target_status(pid_t pid, const char *key, char *value, size_t size);

/* The seccomp state of pid's main thread: 0 none, 1 strict mode, 2 filters; *forbidden is
 * whether they would kill the process for a system call the attached library makes there
 * (api/attach_check.h). Reading the filters takes a moment of ptrace
 * (PTRACE_SECCOMP_GET_FILTER, which needs CAP_SYS_ADMIN). Returns -1 with errno set if they
 * cannot be read. */
int memprof_target_seccomp(pid_t pid, bool *forbidden);

#endif
