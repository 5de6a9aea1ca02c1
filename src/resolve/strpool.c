/* SPDX-License-Identifier: MIT */
/*
 * Interned strings (strpool.h): an open-addressing set of heap copies, grown by doubling.
 */
#include "resolve/strpool.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char **set;
static size_t cap, used;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static char **find(char **tab, size_t n, const char *s)
{
    for (size_t i = hash_str(s) & (n - 1);; i = (i + 1) & (n - 1))
        if (!tab[i] || strcmp(tab[i], s) == 0)
            return &tab[i];
}

const char *memprof__strpool_intern(const char *s)
{
    if (!s)
        return NULL;
    if ((used + 1) * 2 > cap) {
        size_t ncap = cap ? cap * 2 : 1024;
        char **ntab = calloc(ncap, sizeof *ntab);
        if (!ntab)
            return NULL;
        for (size_t i = 0; i < cap; i++)
            if (set[i])
                *find(ntab, ncap, set[i]) = set[i];
        free(set);
        set = ntab;
        cap = ncap;
    }
    char **slot = find(set, cap, s);
    if (!*slot) {
        if (!(*slot = strdup(s)))
            return NULL;
        used++;
    }
    return *slot;
}

void memprof__strpool_forget(void)
{
    set = NULL;
    cap = used = 0;
}
