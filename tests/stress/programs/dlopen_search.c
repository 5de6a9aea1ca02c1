/* SPDX-License-Identifier: MIT */
/*
 * What dlopen() finds must not depend on the profiler. glibc searches a bare name with the
 * paths of the object that called dlopen(): here a library with a DT_RUNPATH
 * (dlopen_search_loader.c), for which the program's DT_RPATH does not count. Under the GOT
 * start the call goes through the profiler's dlopen hook, which must keep the caller's
 * identity: a library found only through the program's DT_RPATH must not be found, one in
 * the loader's DT_RUNPATH must be, both as without the profiler. argv: BACKEND (prog.h);
 * the program is linked with DT_RPATH naming the directory of libdlopen-search-rpath.so, the
 * loader with DT_RUNPATH naming the directory of libdlopen-search-runpath.so.
 *
 * The library found allocates in its constructor, inside dlopen(). Under the GOT start at
 * rate 1 that block is sampled, and its stack must go on past dlopen() to the loader's
 * function that called it: the frame the hook gives glibc's dlopen() (a return address in
 * the caller's code) must not end or derail the walk.
 */
#include "prog.h"

#include <dlfcn.h>
#include <stdbool.h>

void *dlopen_search_open(const char *name);

/* Whether a live sample's stack has a frame `inner` with a frame `outer` further out. */
static bool stack_has(const memprof_snapshot *s, const char *inner, const char *outer)
{
    for (size_t i = 0; i < memprof_snapshot_site_count(s); i++) {
        memprof_site_info si = {.size = sizeof si};
        if (memprof_snapshot_site(s, i, &si) != 0)
            continue;
        int depth = memprof_snapshot_stack_depth(s, si.stack_id);
        bool seen_inner = false;
        for (int k = 0; k < depth; k++) {
            memprof_frame f = {.size = sizeof f};
            if (memprof_snapshot_frame(s, si.stack_id, (uint32_t)k, &f) != 0 || !f.function)
                continue;
            if (seen_inner && strcmp(f.function, outer) == 0)
                return true;
            seen_inner |= strcmp(f.function, inner) == 0;
        }
    }
    return false;
}

int main(int argc, char **argv)
{
    CHECK(argc >= 2, "usage: %s BACKEND", argv[0]);
    prog_setup(argv[1]);
    void *h = dlopen_search_open("libdlopen-search-rpath.so");
    CHECK(!h, "a library in the program's DT_RPATH was found for a loader with a DT_RUNPATH, "
              "which glibc does not search there");
    printf("not found, as without the profiler: %s\n", dlerror());
    h = dlopen_search_open("libdlopen-search-runpath.so");
    CHECK(h, "the library in the loader's DT_RUNPATH was not found: %s", dlerror());
    int (*f)(void) = (int (*)(void))dlsym(h, "dlopen_search_target");
    CHECK(f && f() == 42, "dlsym in the library found through the loader's DT_RUNPATH");
    if (prog_backend == PROG_GOT && prog_rate() == 1) {
        memprof_snapshot *snap = NULL;
        CHECK(memprof_get_snapshot(&snap) == 0, "memprof_get_snapshot");
        bool through = stack_has(snap, "allocate_while_loaded", "dlopen_search_open");
        memprof_free_snapshot(snap);
        CHECK(through, "no stack of the constructor's block reaches dlopen()'s caller");
        printf("the constructor's sample is unwound through dlopen() to its caller\n");
    }
    dlclose(h);
    printf("the library in the loader's DT_RUNPATH was found\n");
    return 0;
}
