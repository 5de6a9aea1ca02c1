/* SPDX-License-Identifier: MIT */
/*
 * Separate debug files found on this machine (debugfind.h). The build id decides: a debug
 * file of another build of the same program would give wrong names and lines, which is
 * worse than none, so every candidate's build id is compared with the module's whenever the
 * module has one.
 */
#define _GNU_SOURCE
#include "resolve/debugfind.h"

#if HAVE_LIBDW
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <elfutils/libdwelf.h>

#define SYSTEM_DEBUG_DIR "/usr/lib/debug"

int memprof__debug_build_id_matches(int fd, const unsigned char *bits, size_t len)
{
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!elf)
        return 0;
    const void *id = NULL;
    ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
    int same = n > 0 && (size_t)n == len && memcmp(id, bits, len) == 0;
    elf_end(elf);
    return same;
}

/* Opens `path` when it is a file other than the module's own with the wanted build id (any
 * when the module has none). */
static int try_open(const char *path, const char *file_name, const unsigned char *bits, size_t len,
                    char **out)
{
    if (file_name && !strcmp(path, file_name))
        return -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    if (len && !memprof__debug_build_id_matches(fd, bits, len)) {
        close(fd);
        return -1;
    }
    if (!(*out = strdup(path))) {
        close(fd);
        return -1;
    }
    return fd;
}

static int by_build_id(const char *dir, const char *file_name, const unsigned char *bits,
                       size_t len, char **out)
{
    if (len < 2)
        return -1;
    char path[4096];
    int k = snprintf(path, sizeof path, "%s/.build-id/%02x/", dir, bits[0]);
    for (size_t i = 1; i < len && k > 0 && (size_t)k + 3 < sizeof path; i++)
        k += snprintf(path + k, sizeof path - (size_t)k, "%02x", bits[i]);
    if (k <= 0 || (size_t)k + 7 >= sizeof path)
        return -1;
    strcpy(path + k, ".debug");
    return try_open(path, file_name, bits, len, out);
}

int memprof__debug_find(Dwfl_Module *mod, const char *file_name, const char *debuglink,
                        const char *const *dirs, size_t ndirs, char **out)
{
    const unsigned char *bits = NULL;
    GElf_Addr vaddr;
    int n = mod ? dwfl_module_build_id(mod, &bits, &vaddr) : 0;
    size_t len = n > 0 ? (size_t)n : 0;
    char dir[4096] = ".", path[4096];
    const char *slash = file_name ? strrchr(file_name, '/') : NULL;
    if (slash)
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - file_name), file_name);
    if (debuglink && strchr(debuglink, '/')) {
        /* A dwz alternate file (.gnu_debugaltlink): a path, absolute or relative to the
         * debug file; its build id is its own, not the module's. */
        if (debuglink[0] == '/')
            snprintf(path, sizeof path, "%s", debuglink);
        else
            snprintf(path, sizeof path, "%s/%s", dir, debuglink);
        return try_open(path, NULL, NULL, 0, out);
    }
    int fd = -1;
    for (size_t i = 0; i < ndirs && fd < 0; i++)
        fd = by_build_id(dirs[i], file_name, bits, len, out);
    if (fd < 0)
        fd = by_build_id(SYSTEM_DEBUG_DIR, file_name, bits, len, out);
    const char *base = slash ? slash + 1 : file_name;
    for (size_t i = 0; i < ndirs && fd < 0; i++) {
        if (debuglink && *debuglink) {
            snprintf(path, sizeof path, "%s/%s", dirs[i], debuglink);
            fd = try_open(path, file_name, bits, len, out);
        }
        if (fd < 0 && base && *base) {
            snprintf(path, sizeof path, "%s/%s.debug", dirs[i], base);
            fd = try_open(path, file_name, bits, len, out);
        }
    }
    if (fd < 0 && debuglink && *debuglink) {
        /* Where gdb and libdw look for a debug link. */
        const char *where[][2] = {{dir, ""}, {dir, "/.debug"}, {SYSTEM_DEBUG_DIR, dir}};
        for (size_t i = 0; i < sizeof where / sizeof *where && fd < 0; i++) {
            snprintf(path, sizeof path, "%s%s/%s", where[i][0], where[i][1], debuglink);
            fd = try_open(path, file_name, bits, len, out);
        }
    }
    return fd;
}
#endif
