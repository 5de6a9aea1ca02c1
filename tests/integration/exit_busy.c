/* SPDX-License-Identifier: MIT */
/*
 * Process exit while other threads are still allocating: main starts four threads that
 * malloc and free in a loop, waits until each has done 2000 iterations, lets them run
 * 20 ms more, and returns without stopping them, so
 * the plugin's exit-time handler takes its snapshot, symbolizes and writes the profile
 * while the hooks keep running in those threads (which also sample: run it at a low
 * MEMPROF_RATE). The process must still exit with status 0 and leave a complete profile.
 * It does not link libmemprof: it is profiled only through LD_PRELOAD.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "itest.h"

void *itest_busy_thread(void *arg);

static atomic_uint started; /* threads that have done their first 2000 iterations */

__attribute__((noinline)) void *itest_busy_thread(void *arg)
{
    unsigned i = (unsigned)(uintptr_t)arg;
    void *keep[256] = {0};
    for (unsigned n = 0;; i++) {
        unsigned k = (i * 2654435761u) >> 24;
        free(keep[k]);
        keep[k] = malloc(16 + i % 20000);
        itest_touch(keep[k], (unsigned char)i);
        if (++n == 2000)
            atomic_fetch_add(&started, 1);
    }
    return NULL;
}

int main(void)
{
    for (uintptr_t t = 0; t < 4; t++) {
        pthread_t tid;
        CHECK(pthread_create(&tid, NULL, itest_busy_thread, (void *)(t << 20)) == 0,
              "pthread_create failed");
    }
    /* Wait until every thread is well into its loop (on a loaded machine a fixed sleep
     * may end before they ran at all), then a little longer. */
    struct timespec ts = {0, 1000 * 1000};
    for (int ms = 0; atomic_load(&started) < 4 && ms < 20000; ms++)
        nanosleep(&ts, NULL);
    CHECK(atomic_load(&started) == 4, "the threads did not start within 20 s");
    ts.tv_nsec = 20 * 1000 * 1000;
    nanosleep(&ts, NULL);
    return 0; /* exit() with the threads still allocating */
}
