/* SPDX-License-Identifier: MIT */
/*
 * Keeping the programs this one starts out of the profile (MEMPROF_FOLLOW=0, `memprof run
 * --no-follow`): at start-up the plugin takes itself out of the environment the program's
 * children inherit, its entry in LD_PRELOAD and every MEMPROF_* variable, before the
 * program's own code has read or copied the environment. A child it forks without exec is
 * the same program, already holding the plugin, and is profiled as before.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "interpose/preload.h"

/* Whether a LD_PRELOAD entry names this plugin: the path it was loaded by, or another path
 * to a file of the same name (a relative or relocated spelling of it). */
static bool is_self(const char *entry, size_t n, const char *self)
{
    const char *base = strrchr(self, '/');
    base = base ? base + 1 : self;
    const char *ebase = entry + n;
    while (ebase > entry && ebase[-1] != '/')
        ebase--;
    return (strlen(self) == n && !memcmp(entry, self, n)) ||
           (strlen(base) == (size_t)(entry + n - ebase) && !memcmp(ebase, base, strlen(base)));
}

/* Rewrites the value of LD_PRELOAD (separated by spaces or colons, as the loader reads it)
 * in place without this plugin's entries. Returns whether anything is left. In place: the
 * string is the environment's own (the initial stack or setenv's copy), the result is never
 * longer, and nothing may be allocated this early. */
static bool drop_self(char *list, const char *self)
{
    char *out = list;
    for (char *p = list; *p;) {
        size_t n = strcspn(p, " :");
        if (n && !is_self(p, n, self)) {
            if (out != list)
                *out++ = ':';
            memmove(out, p, n);
            out += n;
        }
        p += n;
        p += strspn(p, " :");
    }
    *out = 0;
    return out != list;
}

void memprof__preload_unfollow(void)
{
    Dl_info self;
    char *preload = getenv("LD_PRELOAD");
    if (preload && dladdr((void *)memprof__preload_unfollow, &self) && self.dli_fname &&
        !drop_self(preload, self.dli_fname))
        unsetenv("LD_PRELOAD");
    /* unsetenv() moves the entries after the one it removes: look again from the start. */
    for (bool removed = true; removed;) {
        removed = false;
        for (char **e = environ; e && *e; e++) {
            char name[128];
            size_t n = strcspn(*e, "=");
            if (strncmp(*e, "MEMPROF_", 8) || n >= sizeof name)
                continue;
            memcpy(name, *e, n);
            name[n] = 0;
            unsetenv(name);
            removed = true;
            break;
        }
    }
}
