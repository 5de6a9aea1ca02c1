/* SPDX-License-Identifier: MIT */
/*
 * The shared library's way to the symbolizer (symbolizer.h): dlopen() of
 * libmemprof-symbolize.so at the first lookup, from <dir>/memprof/ beside the library
 * (<libdir>/memprof, the preload plugin's directory) or, in a build tree, from <dir> itself.
 * Never linked: libdw and its libraries would otherwise be mapped into every process at
 * start. RTLD_LOCAL keeps libdw's symbols out of the program's lookups.
 */
#define _GNU_SOURCE
#include "config.h"
#include "resolve/symbolizer.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "core/sandbox.h"
#include "resolve/strpool.h"

static const struct memprof__symbolizer_host host = {
    .abi = MEMPROF_SYMBOLIZER_ABI,
    .intern = memprof__strpool_intern,
};

static void *open_module(void)
{
    Dl_info self;
    if (!dladdr((void *)open_module, &self) || !self.dli_fname)
        return NULL;
    const char *slash = strrchr(self.dli_fname, '/');
    int dirlen = slash ? (int)(slash - self.dli_fname) : 1;
    const char *dir = slash ? self.dli_fname : ".";
    static const char *const where[] = {"/memprof/", "/"};
    for (size_t i = 0; i < sizeof where / sizeof *where; i++) {
        char path[PATH_MAX];
        int n = snprintf(path, sizeof path, "%.*s%s%s", dirlen, dir, where[i],
                         MEMPROF_SYMBOLIZER_MODULE);
        if (n <= 0 || (size_t)n >= sizeof path)
            continue;
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (h)
            return h;
    }
    return NULL;
}

const struct memprof__symbolizer *memprof__symbolizer_get(void)
{
    static const struct memprof__symbolizer *table;
    static bool tried;
    /* Opening files under a seccomp filter that forbids it would kill the process. */
    if (tried || !memprof__sys_allowed(MEMPROF_SYS_WRITE))
        return table;
    tried = true;
    void *h = open_module();
    const struct memprof__symbolizer *(*open)(const struct memprof__symbolizer_host *) =
        h ? (const struct memprof__symbolizer *(*)(const struct memprof__symbolizer_host *))dlsym(
                h, MEMPROF_SYMBOLIZER_ENTRY)
          : NULL;
    table = open ? open(&host) : NULL;
    return table;
}
