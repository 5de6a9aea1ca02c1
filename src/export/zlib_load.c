/* SPDX-License-Identifier: MIT */
/*
 * zlib loaded on first use (zlib_load.h), and fork() kept out of that load: a child forked
 * while another thread (the plugin's writer) was inside dlopen() would inherit the loader's
 * half-changed lists, and its own first profile would then load zlib over them (the loader
 * ends such a process with status 127, or it crashes). fork() waits for a load under way, as
 * it waits for the resolver (resolve/stacks.c).
 */
#define _GNU_SOURCE
#include "export/zlib_load.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include "common/atomic.h"
#include "common/process_hooks.h"

/* zlib's soname since 1.1 (1998); ZLIB_VERNUM checks come with the version argument the
 * init functions get. */
#define ZLIB_SONAME "libz.so.1"

static struct memprof__zlib z;
static bool loaded;
static _Atomic bool tried; /* set, with `loaded`, under `lock` */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

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
    if (!memprof_atomic_load_acquire(&tried)) {
        pthread_mutex_lock(&lock);
        if (!memprof_atomic_load_relaxed(&tried)) {
            load();
            memprof_atomic_store_release(&tried, true);
        }
        pthread_mutex_unlock(&lock);
    }
    return loaded ? &z : NULL;
}

/* A load takes milliseconds; a wait that runs out (a stopped writer) lets fork() go on as it
 * would without the profiler, with the hazard above. Whether prepare got the lock is read
 * after fork() on the same thread (fork() runs the three handlers in the forking thread). */
#define FORK_WAIT_S 1
static bool held;

static void fork_prepare(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += FORK_WAIT_S;
    held = pthread_mutex_timedlock(&lock, &until) == 0;
}

static void fork_parent(void)
{
    if (held)
        pthread_mutex_unlock(&lock);
}

static void fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
}

/* At load, before any thread of the program can write a profile. */
__attribute__((constructor)) static void register_fork_handlers(void)
{
    memprof_atfork(fork_prepare, fork_parent, fork_child);
}
