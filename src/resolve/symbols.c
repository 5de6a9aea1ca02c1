/* SPDX-License-Identifier: MIT */
/*
 * Native symbolization with dladdr(), cached per address in a small open-addressing table.
 * The cache and the strings it holds live for the life of the process (a profile may be
 * exported many times); one mutex serialises lookups, which only run at export time.
 */
#define _GNU_SOURCE
#include "resolve/symbols.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"

struct cache_slot {
    uintptr_t pc; /* 0 = empty */
    struct memprof_frame_info info;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct cache_slot *cache;
static size_t cache_cap, cache_used;

/* Interned copies of module and symbol names: dladdr's strings can disappear on dlclose. */
static const char *intern(const char *s)
{
    static struct {
        char **v;
        size_t n, cap;
    } pool;
    if (!s)
        return NULL;
    for (size_t i = pool.n; i-- > 0;)
        if (strcmp(pool.v[i], s) == 0)
            return pool.v[i];
    if (pool.n == pool.cap) {
        size_t cap = pool.cap ? pool.cap * 2 : 256;
        char **v = realloc(pool.v, cap * sizeof *v);
        if (!v)
            return NULL;
        pool.v = v;
        pool.cap = cap;
    }
    char *copy = strdup(s);
    if (copy)
        pool.v[pool.n++] = copy;
    return copy;
}

static struct cache_slot *find_slot(uintptr_t pc)
{
    size_t mask = cache_cap - 1;
    for (size_t i = memprof__mix64(pc) & mask;; i = (i + 1) & mask)
        if (cache[i].pc == pc || cache[i].pc == 0)
            return &cache[i];
}

static int grow_cache(void)
{
    size_t cap = cache_cap ? cache_cap * 2 : 4096;
    struct cache_slot *old = cache, *fresh = calloc(cap, sizeof *fresh);
    if (!fresh)
        return -1;
    size_t old_cap = cache_cap;
    cache = fresh;
    cache_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].pc)
            *find_slot(old[i].pc) = old[i];
    free(old);
    return 0;
}

static void resolve(uintptr_t pc, struct memprof_frame_info *fi)
{
    *fi = (struct memprof_frame_info){.pc = pc};
    Dl_info dl;
    /* A return address points after the call; pc - 1 is inside the calling instruction
     * and so inside the caller's function even when the call was its last instruction. */
    if (!dladdr((void *)(pc - 1), &dl))
        return;
    fi->module = intern(dl.dli_fname);
    fi->module_offset = pc - (uintptr_t)dl.dli_fbase;
    if (dl.dli_sname && dl.dli_saddr) {
        fi->function = intern(dl.dli_sname);
        fi->sym_offset = pc - (uintptr_t)dl.dli_saddr;
    }
}

int memprof__sym_lookup(uintptr_t pc, struct memprof_frame_info *out)
{
    int fresh = 0;
    pthread_mutex_lock(&lock);
    if ((cache_used + 1) * 2 > cache_cap && grow_cache() != 0) {
        pthread_mutex_unlock(&lock);
        resolve(pc, out); /* out of memory: resolve without caching */
        return 1;
    }
    struct cache_slot *slot = find_slot(pc);
    if (slot->pc != pc) {
        resolve(pc, &slot->info);
        slot->pc = pc;
        cache_used++;
        fresh = 1;
    }
    *out = slot->info;
    pthread_mutex_unlock(&lock);
    return fresh;
}

const char *memprof__sym_label(const struct memprof_frame_info *fi, char *buf, unsigned size)
{
    if (fi->function) {
        snprintf(buf, size, "%s", fi->function);
    } else if (fi->module) {
        const char *base = strrchr(fi->module, '/');
        snprintf(buf, size, "%s+0x%lx", base ? base + 1 : fi->module,
                 (unsigned long)fi->module_offset);
    } else {
        snprintf(buf, size, "0x%lx", (unsigned long)fi->pc);
    }
    return buf;
}
