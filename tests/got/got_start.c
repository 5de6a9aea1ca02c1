/* SPDX-License-Identifier: MIT */
/*
 * memprof_start() in a program linked with -lmemprof and run without LD_PRELOAD (the GOT
 * backend): blocks from the program's own code, from libc's strdup (libc's internal call
 * to malloc), and from a library dlopen()ed by bare name after starting -- found through
 * the program's RUNPATH=$ORIGIN, which a dlopen hook must not break -- are each estimated
 * within 12 % of the bytes requested from glibc; after stop, frees still remove them.
 * Self-checking: exit 0 on success.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memprof/memprof.h>
#include "../keep_frame.h"
#include "../check.h"

#define N_OWN    1500
#define OWN_SIZE 40000
#define N_DUP    20000
#define DUP_LEN  1500
#define N_DSO    1000
#define DSO_SIZE 30000

TEST_KEEP_FRAME static void *own_alloc(size_t n)
{
    void *p = malloc(n);
    memset(p, 1, n);
    __asm__ volatile("" ::: "memory");
    return p;
}

/* Estimated live bytes of the sites whose leaf frame is `fn`. */
static double site_bytes(const memprof_snapshot *s, const char *fn)
{
    double total = 0;
    for (size_t i = 0; i < memprof_snapshot_site_count(s); i++) {
        memprof_site_info si = {.size = sizeof si};
        memprof_frame f = {.size = sizeof f};
        if (memprof_snapshot_site(s, i, &si) == 0 &&
            memprof_snapshot_frame(s, si.stack_id, 0, &f) == 0 && f.function &&
            strcmp(f.function, fn) == 0)
            total += (double)si.live_bytes;
    }
    return total;
}

static void expect_close(const char *what, double est, double truth)
{
    printf("%-10s estimated %10.0f, requested %10.0f (%+.1f %%)\n", what, est, truth,
           100.0 * (est - truth) / truth);
    CHECK(est > truth * 0.88 && est < truth * 1.12);
}

int main(void)
{
    if (getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "memprof")) {
        fprintf(stderr, "this test must run without the preload plugin\n");
        return 77;
    }
    CHECK(memprof_init(16384) == 0);
    CHECK(memprof_start() == 0);

    static void *own[N_OWN], *dsob[N_DSO];
    static char *dups[N_DUP];
    size_t usable_own = 0, usable_dup = 0, usable_dso = 0;
    for (int i = 0; i < N_OWN; i++) {
        own[i] = own_alloc(OWN_SIZE);
        usable_own += OWN_SIZE;
    }
    char text[DUP_LEN];
    memset(text, 'x', sizeof text - 1);
    text[DUP_LEN - 1] = 0;
    for (int i = 0; i < N_DUP; i++) {
        dups[i] = strdup(text);
        usable_dup += DUP_LEN;
    }
    /* Bare name: found only through this program's RUNPATH ($ORIGIN). */
    void *h = dlopen("libgot_dso.so", RTLD_NOW);
    if (!h)
        fprintf(stderr, "dlopen: %s\n", dlerror());
    CHECK(h != NULL);
    void *(*dso_alloc)(size_t) = h ? (void *(*)(size_t))dlsym(h, "dso_alloc") : NULL;
    CHECK(dso_alloc != NULL);
    for (int i = 0; dso_alloc && i < N_DSO; i++) {
        dsob[i] = dso_alloc(DSO_SIZE);
        usable_dso += DSO_SIZE;
    }

    memprof_snapshot *s = NULL;
    CHECK(memprof_get_snapshot(&s) == 0);
    expect_close("own code", site_bytes(s, "own_alloc"), (double)usable_own);
    expect_close("strdup", site_bytes(s, "strdup"), (double)usable_dup);
    expect_close("dlopened", site_bytes(s, "dso_alloc"), (double)usable_dso);
    memprof_free_snapshot(s);

    CHECK(memprof_stop() == 0);
    for (int i = 0; i < N_OWN; i++)
        free(own[i]);
    for (int i = 0; i < N_DUP; i++)
        free(dups[i]);
    for (int i = 0; i < N_DSO && dso_alloc; i++)
        free(dsob[i]);
    memprof_stats st = {.size = sizeof st};
    memprof_get_stats(&st);
    printf("after stop and free: %lu live samples\n", (unsigned long)st.live_samples);
    CHECK(st.live_samples < 10);
    return failures ? 1 : 0;
}
