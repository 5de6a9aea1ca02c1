/* SPDX-License-Identifier: MIT */
/*
 * libmemprof-got-shim.so: a tiny LD_PRELOAD library that starts libmemprof through its
 * run-time (GOT patching) path, so bench_programs.py can measure that path on unmodified
 * programs. It defines no allocator symbol: it links libmemprof.so.1 and calls
 * memprof_init(rate) and memprof_start() from a constructor, and the engine, finding no
 * preload backend, rewrites the GOT slots of every loaded object instead -- what a language
 * binding or a program linking -lmemprof gets. Environment:
 *   MEMPROF_SHIM_RATE   sampling rate in bytes (default 524288)
 *   MEMPROF_SHIM_STATS  when set, a destructor prints "memprof-shim: samples=N live=N
 *                       state=N" on stderr, so the benchmark can check that the hooks
 *                       really engaged (a GOT path that patched nothing takes no samples).
 *   MEMPROF_SHIM_INIT=0 report only: neither init nor start (used beside the preload
 *                       plugin, which owns the engine, to read its sample count).
 * A benchmark helper, not installed.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <memprof/memprof.h>

__attribute__((constructor)) static void shim_start(void)
{
    const char *init = getenv("MEMPROF_SHIM_INIT");
    if (init && strcmp(init, "0") == 0)
        return;
    uint64_t rate = 524288;
    const char *r = getenv("MEMPROF_SHIM_RATE");
    if (r && *r)
        rate = strtoull(r, NULL, 10);
    int rc = memprof_init(rate);
    if (rc == 0)
        rc = memprof_start();
    if (rc != 0) {
        /* Say it even without MEMPROF_SHIM_STATS: a run that silently profiles nothing
         * would make the benchmark measure the wrong thing. */
        char msg[160];
        int n = snprintf(msg, sizeof msg, "memprof-shim: cannot start: %s\n", memprof_strerror(rc));
        if (n > 0 && write(STDERR_FILENO, msg, (size_t)n) < 0) {
        }
    }
}

__attribute__((destructor)) static void shim_report(void)
{
    if (!getenv("MEMPROF_SHIM_STATS"))
        return;
    memprof_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    if (memprof_get_stats(&st) != 0)
        return;
    /* One write(2), no stdio: stdout/stderr may already be closed or redirected. */
    char msg[160];
    int n = snprintf(msg, sizeof msg,
                     "memprof-shim: samples=%" PRIu64 " live=%" PRIu64 " state=%" PRIu32 "\n",
                     st.total_samples, st.live_samples, st.state);
    if (n > 0 && write(STDERR_FILENO, msg, (size_t)n) < 0) {
    }
}
