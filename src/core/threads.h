/* SPDX-License-Identifier: MIT */
/*
 * The threads that took samples: a small append-only registry of (thread id, name), so each
 * sample's stack can carry the thread that allocated it (the stack table interns the thread
 * index with the frames: a site allocated by two threads is two stacks, one per thread, and
 * writers merge them where they show sites).
 *
 * A thread registers at its first sample, in the cold path, with two system calls made once
 * per thread (gettid, prctl(PR_GET_NAME)), each skipped under a seccomp filter that forbids
 * it (sandbox.h: the thread then has id 0 or no name); its index lives in its TLS. Slots are claimed with
 * a fetch-add and published with a release store of `ready`, never reused: at most
 * MEMPROF_MAX_THREADS threads get a slot of their own, later ones share index 0 ("other
 * threads"), which bounds how many stacks threads can multiply a site into. A thread that
 * names itself after its first sample is seen under its new name at the next snapshot, which
 * re-reads the names of threads still alive (memprof__threads_refresh()).
 */
#ifndef MEMPROF_CORE_THREADS_H
#define MEMPROF_CORE_THREADS_H

#include <stdatomic.h>
#include <stdint.h>

#define MEMPROF_MAX_THREADS    255u
#define MEMPROF_THREAD_NAME    16u /* the kernel's TASK_COMM_LEN */
#define MEMPROF_THREAD_UNKNOWN 0u  /* index of "other threads" */

struct memprof_thread_slot {
    _Atomic uint64_t tid;
    _Atomic uint32_t ready;
    char name[MEMPROF_THREAD_NAME];
};

struct memprof_threads {
    _Atomic uint32_t n; /* slots claimed (may exceed the capacity: those threads got 0) */
    struct memprof_thread_slot slots[MEMPROF_MAX_THREADS];
};

/* The calling thread's index (1 .. MEMPROF_MAX_THREADS), registering it on its first call;
 * MEMPROF_THREAD_UNKNOWN when the registry is full. From the cold path, under the guard. */
unsigned memprof__threads_self(struct memprof_threads *t);
/* Slots claimed so far (index i + 1 is slots[i]), and one slot's thread id and name (NULL
 * while its thread is still registering). The name stays valid for the process's life. */
unsigned memprof__threads_count(struct memprof_threads *t);
const char *memprof__threads_get(struct memprof_threads *t, unsigned i, uint64_t *tid);
/* Re-reads the names of registered threads that are still alive (/proc/self/task). From a
 * user thread (a snapshot), never from a hook. */
void memprof__threads_refresh(struct memprof_threads *t);
/* In a fork child: the surviving thread has a new thread id, so it registers again. */
void memprof__threads_after_fork(void);

#endif
