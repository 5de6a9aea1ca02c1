/* SPDX-License-Identifier: MIT */
/*
 * zlib loaded on first use (zlib_load.h).
 */
#define _GNU_SOURCE
#include "export/zlib_load.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>

/* zlib's soname since 1.1 (1998); ZLIB_VERNUM checks come with the version argument the
 * init functions get. */
#define ZLIB_SONAME "libz.so.1"

static struct memprof__zlib z;
static bool loaded;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
    void *h = dlopen(ZLIB_SONAME, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (!h)
        return;
    *(void **)&z.deflate_init2 = dlsym(h, "deflateInit2_");
    *(void **)&z.deflate = dlsym(h, "deflate");
    *(void **)&z.deflate_end = dlsym(h, "deflateEnd");
    *(void **)&z.inflate_init2 = dlsym(h, "inflateInit2_");
    *(void **)&z.inflate = dlsym(h, "inflate");
    *(void **)&z.inflate_reset = dlsym(h, "inflateReset");
    *(void **)&z.inflate_end = dlsym(h, "inflateEnd");
    loaded = z.deflate_init2 && z.deflate && z.deflate_end && z.inflate_init2 && z.inflate &&
             z.inflate_reset && z.inflate_end;
}

const struct memprof__zlib *memprof__zlib(void)
{
    pthread_once(&once, load);
    return loaded ? &z : NULL;
}
