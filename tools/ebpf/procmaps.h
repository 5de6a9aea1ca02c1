/* SPDX-License-Identifier: MIT */
/*
 * A traced process's executable mappings (procmaps.c), read from /proc/PID/maps while it
 * runs, so that the return addresses of its samples become module, build id and load bias
 * (what the offline symbolizer takes) as they arrive: after the process exits its maps are
 * gone. A module of a process in another mount namespace is opened through
 * /proc/PID/root.
 */
#ifndef MEMPROF_TOOLS_EBPF_PROCMAPS_H
#define MEMPROF_TOOLS_EBPF_PROCMAPS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct memprof_ebpf_module {
    char *path; /* as the process names it */
    char *open; /* where this process opens it (path, or under /proc/PID/root) */
    char build_id[41];
};

struct memprof_ebpf_mapping {
    uint64_t start, end, offset, bias;
    size_t module;
};

struct memprof_ebpf_maps {
    pid_t pid;
    struct memprof_ebpf_mapping *maps;
    size_t nmaps;
    struct memprof_ebpf_module *modules; /* never removed: frames point at them */
    size_t nmodules;
};

/* Where this process opens file `path` of process `pid`'s maps (inode `ino`): the path
 * itself when it names that file here, else the same path under /proc/PID/root (a process
 * in another mount namespace or chroot), else /proc/PID/map_files/START-END. Returns
 * false when none names it. */
bool memprof__ebpf_open_path(pid_t pid, const char *path, uint64_t ino, uint64_t start,
                             uint64_t end, char *out, size_t size);

/* The files of process `pid`'s executable mappings, each once, as this process opens them
 * (memprof__ebpf_open_path()), into paths[max]. Returns how many, 0 when the maps cannot
 * be read. */
unsigned memprof__ebpf_mapped_files(pid_t pid, char (*paths)[PATH_MAX], unsigned max);

/* Starts the cache for `pid` and reads its maps. Returns 0 or a negative errno. */
int memprof__ebpf_maps_init(struct memprof_ebpf_maps *m, pid_t pid);
/* Re-reads the maps (after a dlopen, say). Returns 0 or a negative errno (-ESRCH: gone). */
int memprof__ebpf_maps_refresh(struct memprof_ebpf_maps *m);
/* The executable mapping holding `addr`, re-reading the maps once when none does; NULL
 * when the address is in no file's mapping (JIT code, the vDSO) or the process is gone. */
const struct memprof_ebpf_mapping *memprof__ebpf_maps_find(struct memprof_ebpf_maps *m,
                                                           uint64_t addr);
void memprof__ebpf_maps_free(struct memprof_ebpf_maps *m);

#endif
