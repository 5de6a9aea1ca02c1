/* SPDX-License-Identifier: MIT */
/*
 * The mapping cache of procmaps.h. Only executable, file-backed mappings are kept: return
 * addresses point into code. Modules are remembered by path for the life of the session
 * (frames keep pointing at them after a dlclose); the build id and the load bias come from
 * the file itself (elfscan.h), opened as memprof__ebpf_open_path() finds it.
 */
#define _GNU_SOURCE
#include "procmaps.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "elfscan.h"

bool memprof__ebpf_open_path(pid_t pid, const char *path, uint64_t ino, uint64_t start,
                             uint64_t end, char *out, size_t size)
{
    struct stat st;
    int n = snprintf(out, size, "%s", path);
    if (n > 0 && (size_t)n < size && stat(out, &st) == 0 && (uint64_t)st.st_ino == ino)
        return true;
    n = snprintf(out, size, "/proc/%d/root%s", (int)pid, path);
    if (n > 0 && (size_t)n < size && stat(out, &st) == 0 && (uint64_t)st.st_ino == ino)
        return true;
    n = snprintf(out, size, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, (int)pid, start, end);
    return n > 0 && (size_t)n < size && stat(out, &st) == 0 && (uint64_t)st.st_ino == ino;
}

unsigned memprof__ebpf_mapped_files(pid_t pid, char (*paths)[PATH_MAX], unsigned max)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(p, "re");
    if (!f)
        return 0;
    unsigned count = 0;
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) > 0 && count < max) {
        uint64_t start, end, ino;
        char perms[8];
        int at = 0;
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %*s %*s %" SCNu64 " %n", &start, &end, perms,
                   &ino, &at) < 4 ||
            perms[2] != 'x' || !at || line[at] != '/')
            continue;
        char *path = line + at;
        path[strcspn(path, "\n")] = 0;
        char open_path[PATH_MAX];
        if (strstr(path, " (deleted)") ||
            !memprof__ebpf_open_path(pid, path, ino, start, end, open_path, sizeof open_path))
            continue;
        bool seen = false;
        for (unsigned i = 0; i < count && !seen; i++)
            seen = strcmp(paths[i], open_path) == 0;
        if (!seen)
            snprintf(paths[count++], PATH_MAX, "%s", open_path);
    }
    free(line);
    fclose(f);
    return count;
}

static long module_index(struct memprof_ebpf_maps *m, const char *path, uint64_t ino,
                         uint64_t start, uint64_t end)
{
    for (size_t i = 0; i < m->nmodules; i++)
        if (strcmp(m->modules[i].path, path) == 0)
            return (long)i;
    struct memprof_ebpf_module *nm = realloc(m->modules, (m->nmodules + 1) * sizeof *nm);
    if (!nm)
        return -1;
    m->modules = nm;
    struct memprof_ebpf_module *mod = &nm[m->nmodules];
    memset(mod, 0, sizeof *mod);
    mod->path = strdup(path);
    char buf[PATH_MAX + 64];
    mod->open = strdup(
        memprof__ebpf_open_path(m->pid, path, ino, start, end, buf, sizeof buf) ? buf : path);
    if (!mod->path || !mod->open) {
        free(mod->path);
        free(mod->open);
        return -1;
    }
    memprof__ebpf_elf_build_id(mod->open, mod->build_id);
    return (long)m->nmodules++;
}

int memprof__ebpf_maps_refresh(struct memprof_ebpf_maps *m)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/maps", (int)m->pid);
    FILE *f = fopen(p, "re");
    if (!f)
        return errno == ENOENT ? -ESRCH : -errno;
    char *line = NULL;
    size_t cap = 0;
    size_t n = 0;
    struct memprof_ebpf_mapping *maps = NULL;
    while (getline(&line, &cap, f) > 0) {
        uint64_t start, end, off, ino;
        char perms[8];
        int path_at = 0;
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %" SCNu64 " %n", &start, &end,
                   perms, &off, &ino, &path_at) < 5 ||
            perms[2] != 'x' || !path_at || line[path_at] != '/')
            continue;
        char *path = line + path_at;
        path[strcspn(path, "\n")] = 0;
        if (strstr(path, " (deleted)"))
            continue;
        long mod = module_index(m, path, ino, start, end);
        uint64_t vaddr;
        if (mod < 0 || !memprof__ebpf_elf_vaddr_of(m->modules[mod].open, off, &vaddr))
            continue;
        struct memprof_ebpf_mapping *nm = realloc(maps, (n + 1) * sizeof *nm);
        if (!nm)
            break;
        maps = nm;
        maps[n++] = (struct memprof_ebpf_mapping){start, end, off, start - vaddr, (size_t)mod};
    }
    free(line);
    fclose(f);
    free(m->maps);
    m->maps = maps;
    m->nmaps = n;
    return 0;
}

int memprof__ebpf_maps_init(struct memprof_ebpf_maps *m, pid_t pid)
{
    memset(m, 0, sizeof *m);
    m->pid = pid;
    return memprof__ebpf_maps_refresh(m);
}

static const struct memprof_ebpf_mapping *lookup(const struct memprof_ebpf_maps *m, uint64_t addr)
{
    for (size_t i = 0; i < m->nmaps; i++)
        if (addr >= m->maps[i].start && addr < m->maps[i].end)
            return &m->maps[i];
    return NULL;
}

const struct memprof_ebpf_mapping *memprof__ebpf_maps_find(struct memprof_ebpf_maps *m,
                                                           uint64_t addr)
{
    const struct memprof_ebpf_mapping *r = lookup(m, addr);
    if (r || memprof__ebpf_maps_refresh(m) != 0)
        return r;
    return lookup(m, addr);
}

void memprof__ebpf_maps_free(struct memprof_ebpf_maps *m)
{
    for (size_t i = 0; i < m->nmodules; i++) {
        free(m->modules[i].path);
        free(m->modules[i].open);
    }
    free(m->modules);
    free(m->maps);
    memset(m, 0, sizeof *m);
}
