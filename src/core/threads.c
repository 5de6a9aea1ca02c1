/* SPDX-License-Identifier: MIT */
/*
 * The registry of sampling threads: registration at a thread's first sample, and the
 * snapshot's refresh of their names (threads.h).
 */
#define _GNU_SOURCE
#include "core/threads.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "common/atomic.h"
#include "core/platform.h"
#include "core/sandbox.h"
#include "core/sampler.h"

unsigned memprof__threads_self(struct memprof_threads *t)
{
    unsigned idx = memprof__tls.thread;
    if (idx)
        return idx == UINT16_MAX ? MEMPROF_THREAD_UNKNOWN : idx;
    uint32_t i = memprof_atomic_add_relaxed(&t->n, 1);
    if (i >= MEMPROF_MAX_THREADS) {
        memprof__tls.thread = UINT16_MAX;
        return MEMPROF_THREAD_UNKNOWN;
    }
    struct memprof_thread_slot *s = &t->slots[i];
    memprof_atomic_store_relaxed(&s->tid, memprof__pf_thread_id()); /* 0: forbidden */
    char name[MEMPROF_THREAD_NAME] = "";
    /* A thread registering under a seccomp filter that forbids asking stays unnamed. */
    if (!memprof__sys_allowed(MEMPROF_SYS_THREAD_NAME) || prctl(PR_GET_NAME, name) != 0)
        name[0] = '\0';
    memcpy(s->name, name, sizeof name);
    s->name[MEMPROF_THREAD_NAME - 1] = '\0';
    memprof_atomic_store_release(&s->ready, 1);
    memprof__tls.thread = (uint16_t)(i + 1);
    return i + 1;
}

unsigned memprof__threads_count(struct memprof_threads *t)
{
    uint32_t n = memprof_atomic_load_relaxed(&t->n);
    return n < MEMPROF_MAX_THREADS ? n : MEMPROF_MAX_THREADS;
}

const char *memprof__threads_get(struct memprof_threads *t, unsigned i, uint64_t *tid)
{
    if (i >= memprof__threads_count(t) || !memprof_atomic_load_acquire(&t->slots[i].ready))
        return NULL; /* claimed, not yet filled in */
    *tid = memprof_atomic_load_relaxed(&t->slots[i].tid);
    return t->slots[i].name;
}

void memprof__threads_refresh(struct memprof_threads *t)
{
    /* Snapshots on two threads would write the same names at once: one refreshes, the
     * other keeps what is there. A try-lock, so a fork child never waits on it. Nothing is
     * read under a seccomp filter that forbids it (sandbox.h). */
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    if (!memprof__sys_allowed(MEMPROF_SYS_PROC) || pthread_mutex_trylock(&lock) != 0)
        return;
    unsigned n = memprof__threads_count(t);
    for (unsigned i = 0; i < n; i++) {
        uint64_t tid;
        if (!memprof__threads_get(t, i, &tid))
            continue;
        char path[64], name[MEMPROF_THREAD_NAME + 1];
        snprintf(path, sizeof path, "/proc/self/task/%llu/comm", (unsigned long long)tid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue; /* the thread has exited: keep the name it had */
        ssize_t len = read(fd, name, MEMPROF_THREAD_NAME);
        close(fd);
        if (len <= 0)
            continue;
        if (name[len - 1] == '\n')
            len--;
        name[len] = '\0';
        memcpy(t->slots[i].name, name, (size_t)len + 1);
    }
    pthread_mutex_unlock(&lock);
}

void memprof__threads_after_fork(void)
{
    memprof__tls.thread = 0;
}
