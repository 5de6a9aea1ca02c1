/* SPDX-License-Identifier: MIT */
/*
 * Libraries loaded and unloaded under the profiler. argv: BACKEND CYCLES CYCLE_LIB DEEP_LIB
 * (prog.h); PROG_DIR names a directory for the profiles written on the way. Phases:
 *
 *   cycles    CYCLES x dlopen + dlclose of CYCLE_LIB (cycle_lib.c). In each cycle the
 *             library allocates blocks that outlive it (the program frees them cycles
 *             later, after the library is gone), strdup()s through libc, frees a block the
 *             program allocated, and allocates and frees in its constructor and destructor.
 *             At rate 1 the library's allocation is sampled in every cycle (under the GOT
 *             start: every new copy of the library is patched). dlclose really unloads it
 *             (the profiler holds no reference). Every 50 cycles, with the library
 *             unloaded, a snapshot is taken, symbolized, walked and written as text and
 *             pprof (stacks point into unmapped code: no crash, no hang).
 *   deepbind  DEEP_LIB (deep_lib.c) loaded with RTLD_DEEPBIND: under the plugin its malloc
 *             binds to libc's directly (unseen), while its free and realloc reach the
 *             plugin through libc's own symbol entries, which the plugin retargets (a
 *             sample-heap block would otherwise abort glibc's free); under the GOT start
 *             its patched slots reach the profiler. Blocks cross the boundary both ways
 *             (allocated on one side, reallocated or freed on the other) with their contents
 *             checked: no crash, no corruption, and with every free seen the live samples
 *             return to the baseline.
 *
 *   dlopen    dlopen's own behaviour is glibc's under every backend (the GOT start hooks
 *             dlopen to patch new libraries): a bare name is found through the program's
 *             RUNPATH ($ORIGIN) with no error left in dlerror(), a missing library fails with
 *             glibc's message naming it, RTLD_NOLOAD finds a loaded library and not an
 *             unloaded one, dlopen(NULL) is the program.
 *
 * At the end every block is freed, and no samples stay live.
 */
#include "prog.h"

#include <sys/stat.h>

enum { RING = 64 };

static const char *out_dir;
static int rate1;

struct cycle_fns {
    void *(*alloc)(size_t);
    char *(*dup)(const char *);
    void (*free)(void *);
};

static void *sym(void *h, const char *name)
{
    void *f = dlsym(h, name);
    CHECK(f != NULL, "dlsym(%s): %s", name, dlerror());
    return f;
}

/* A snapshot of everything, symbolized, walked frame by frame and written in two formats. */
static void snapshot_and_write(int cycle)
{
    memprof_snapshot *s = NULL;
    int rc = memprof_get_snapshot(&s);
    CHECK(rc == 0, "memprof_get_snapshot: %s", memprof_strerror(rc));
    rc = memprof_resolve_symbols(); /* the number of addresses newly resolved */
    CHECK(rc >= 0, "memprof_resolve_symbols: %s", memprof_strerror(rc));
    size_t frames = 0, named = 0;
    for (size_t i = 0; i < memprof_snapshot_site_count(s); i++) {
        memprof_site_info si = {.size = sizeof si};
        CHECK(memprof_snapshot_site(s, i, &si) == 0, "memprof_snapshot_site");
        int depth = memprof_snapshot_stack_depth(s, si.stack_id);
        CHECK(depth >= 0, "memprof_snapshot_stack_depth: %d", depth);
        for (int d = 0; d < depth; d++) {
            memprof_frame f = {.size = sizeof f};
            CHECK(memprof_snapshot_frame(s, si.stack_id, (uint32_t)d, &f) == 0,
                  "memprof_snapshot_frame");
            frames++;
            named += f.function && f.function[0];
        }
    }
    static const char *exts[] = {"txt", "pb.gz"};
    for (int k = 0; k < 2; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/cycle-%d.%s", out_dir, cycle, exts[k]);
        rc = memprof_snapshot_write(s, path, MEMPROF_FORMAT_AUTO);
        CHECK(rc == 0, "memprof_snapshot_write(%s): %s", path, memprof_strerror(rc));
        struct stat st;
        CHECK(stat(path, &st) == 0 && st.st_size > 0, "%s is missing or empty", path);
    }
    CHECK(frames == 0 || named > 0, "none of %zu frames has a name", frames);
    memprof_free_snapshot(s);
}

static void cycles(int n, const char *lib)
{
    void *ring[RING] = {0};
    for (int c = 0; c < n; c++) {
        void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
        CHECK(h != NULL, "dlopen(%s) in cycle %d: %s", lib, c, dlerror());
        struct cycle_fns f;
        *(void **)&f.alloc = sym(h, "hardening_cycle_alloc");
        *(void **)&f.dup = sym(h, "hardening_cycle_strdup");
        *(void **)&f.free = sym(h, "hardening_cycle_free");

        /* The first call touches the library's thread-local variable: the loader then
         * allocates its dynamic TLS block (through the plugin's malloc, a sample of its own). */
        free(f.alloc(200));
        memprof_stats before = {0};
        if (rate1)
            before = prog_stats();
        void *p = f.alloc(1000);
        CHECK(p != NULL, "the library's malloc failed");
        if (rate1) {
            memprof_stats after = prog_stats();
            CHECK(after.total_samples == before.total_samples + 1,
                  "cycle %d: the library's 1000-byte malloc took %" PRIu64
                  " samples at rate 1 (expected 1)",
                  c, after.total_samples - before.total_samples);
        }
        /* A block from a copy of the library that is gone by now. */
        free(ring[c % RING]);
        ring[c % RING] = p;
        char *d = f.dup("a string strdup'ed by the library");
        CHECK(d && !strcmp(d, "a string strdup'ed by the library"), "strdup in the library");
        void *mine = malloc(500);
        CHECK(mine != NULL, "malloc");
        prog_touch(mine, 1);
        f.free(mine); /* the library frees the program's block */
        free(d);

        CHECK(dlclose(h) == 0, "dlclose: %s", dlerror());
        void *again = dlopen(lib, RTLD_NOW | RTLD_NOLOAD);
        CHECK(again == NULL, "cycle %d: the library is still loaded after dlclose", c);
        if (prog_profiled() && c % 50 == 0)
            snapshot_and_write(c);
    }
    const unsigned char *last = ring[(n - 1) % RING];
    CHECK(n == 0 || last[999] == last[0], "a block of an unloaded library was overwritten");
    for (int i = 0; i < RING; i++)
        free(ring[i]);
}

/* A block of either side: tag (the fill byte) and size, then the payload. */
struct block {
    size_t size;
    unsigned char tag;
};

static void fill_block(struct block *b, size_t size, unsigned char tag)
{
    b->size = size;
    b->tag = tag;
    memset(b + 1, tag, size - sizeof *b);
}

/* Checks the payload's first `size` bytes (all of it if `size` is larger). */
static void check_block(const struct block *b, size_t size, const char *what)
{
    const unsigned char *p = (const unsigned char *)(b + 1);
    size = (size < b->size ? size : b->size) - sizeof *b;
    for (size_t i = 0; i < size; i += 61)
        CHECK(p[i] == b->tag, "%s: block %p corrupted at %zu", what, (const void *)b, i);
}

static uint64_t deepbind(int iterations, const char *lib)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    CHECK(h != NULL, "dlopen(%s, RTLD_DEEPBIND): %s", lib, dlerror());
    void *(*d_alloc)(size_t), *(*d_calloc)(size_t), *(*d_realloc)(void *, size_t);
    char *(*d_strdup)(const char *);
    void (*d_free)(void *);
    *(void **)&d_alloc = sym(h, "hardening_deep_alloc");
    *(void **)&d_calloc = sym(h, "hardening_deep_calloc");
    *(void **)&d_realloc = sym(h, "hardening_deep_realloc");
    *(void **)&d_strdup = sym(h, "hardening_deep_strdup");
    *(void **)&d_free = sym(h, "hardening_deep_free");

    /* Blocks the program sampled and the library freed behind the plugin's back. */
    uint64_t blind_frees = 0;
    struct block *slot[256] = {0};
    int by_program[256] = {0};
    uint64_t seed = 0x9e3779b97f4a7c15u;
    for (int i = 0; i < iterations; i++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        unsigned k = (unsigned)(seed % 256), op = (unsigned)(seed >> 16) % 8;
        size_t size = sizeof(struct block) + 200 + (seed >> 24) % 3000;
        unsigned char tag = (unsigned char)(seed >> 40);
        struct block *b = slot[k];
        if (b) {
            check_block(b, SIZE_MAX, "before free or realloc");
            if (op < 3) {
                free(b);
            } else if (op < 6) {
                d_free(b);
                blind_frees += by_program[k];
            } else {
                /* realloc on the other side of the boundary from the one that allocated */
                b = op == 6 ? realloc(b, size) : d_realloc(b, size);
                CHECK(b != NULL, "realloc");
                blind_frees += op == 7 && by_program[k];
                by_program[k] = op == 6;
                check_block(b, size, "realloc kept the contents");
                fill_block(b, size, tag);
                slot[k] = b;
                continue;
            }
            slot[k] = NULL;
            continue;
        }
        switch (op % 4) {
        case 0:
            b = malloc(size);
            break;
        case 1:
            b = d_alloc(size);
            break;
        case 2:
            b = d_calloc(size);
            CHECK(b != NULL, "calloc in the library");
            for (size_t j = 0; j < size; j += 97)
                CHECK(((unsigned char *)b)[j] == 0, "calloc in the library: not zeroed");
            break;
        default: {
            char text[64];
            snprintf(text, sizeof text, "%0*d", 40, i);
            char *s = d_strdup(text);
            CHECK(s && !strcmp(s, text), "strdup in the library");
            free(s);
            continue;
        }
        }
        CHECK(b != NULL, "allocation of %zu B", size);
        fill_block(b, size, tag);
        slot[k] = b;
        by_program[k] = op % 4 == 0;
    }
    for (int k = 0; k < 256; k++)
        if (slot[k]) {
            check_block(slot[k], SIZE_MAX, "at the end");
            free(slot[k]);
        }
    CHECK(dlclose(h) == 0, "dlclose: %s", dlerror());
    return blind_frees;
}

int main(int argc, char **argv);

static void dlopen_semantics(const char *lib)
{
    const char *bare = strrchr(lib, '/') ? strrchr(lib, '/') + 1 : lib;
    dlerror();
    void *h = dlopen(bare, RTLD_NOW | RTLD_LOCAL);
    const char *err = dlerror();
    CHECK(h != NULL && err == NULL, "dlopen(%s) by bare name (RUNPATH $ORIGIN): %p, %s", bare, h,
          err ? err : "no error");
    void *again = dlopen(bare, RTLD_NOW | RTLD_NOLOAD);
    CHECK(again == h, "dlopen(%s, RTLD_NOLOAD) of a loaded library = %p, not %p", bare, again, h);
    CHECK(dlclose(again) == 0 && dlclose(h) == 0, "dlclose: %s", dlerror());
    again = dlopen(bare, RTLD_NOW | RTLD_NOLOAD);
    CHECK(again == NULL, "dlopen(%s, RTLD_NOLOAD) found an unloaded library", bare);

    static const char missing[] = "libhardening-no-such-library.so";
    void *none = dlopen(missing, RTLD_NOW);
    err = dlerror();
    CHECK(none == NULL && err && strstr(err, missing) && strstr(err, "No such file"),
          "dlopen(%s) = %p, dlerror %s", missing, none, err ? err : "(none)");
    CHECK(dlerror() == NULL, "dlerror() is not cleared by reading it");

    void *self = dlopen(NULL, RTLD_NOW);
    CHECK(self != NULL && dlsym(self, "main") == (void *)main, "dlopen(NULL) is not the program");
    dlclose(self);
}

int main(int argc, char **argv)
{
    CHECK(argc == 5, "usage: %s plain|preload|got CYCLES CYCLE_LIB DEEP_LIB", argv[0]);
    prog_setup(argv[1]);
    int n = atoi(argv[2]);
    out_dir = getenv("PROG_DIR");
    CHECK(out_dir != NULL, "set PROG_DIR to a directory for profiles");
    CHECK(mkdir(out_dir, 0700) == 0 || errno == EEXIST, "mkdir(%s): %s", out_dir, strerror(errno));
    rate1 = prog_profiled() && prog_rate() == 1;
    memprof_stats s0 = {0};
    if (prog_profiled())
        s0 = prog_stats();

    cycles(n, argv[3]);
    memprof_stats s1 = {0};
    if (prog_profiled()) {
        s1 = prog_stats();
        printf("%d dlopen/dlclose cycles: %" PRIu64 " samples taken, live %" PRIu64 " -> %" PRIu64
               "\n",
               n, s1.total_samples - s0.total_samples, s0.live_samples, s1.live_samples);
        fflush(stdout);
        s1 = prog_stats(); /* stdout's buffer is one more block */
        CHECK(s1.live_samples <= s0.live_samples + 8,
              "after the cycles the live samples grew from %" PRIu64 " to %" PRIu64,
              s0.live_samples, s1.live_samples);
    }

    dlopen_semantics(argv[3]);
    uint64_t blind = deepbind(20 * n, argv[4]);
    if (prog_profiled()) {
        memprof_stats s2 = prog_stats();
        printf("RTLD_DEEPBIND: %" PRIu64 " sampled-side blocks freed inside the library, live "
               "samples %" PRIu64 " -> %" PRIu64 "\n",
               blind, s1.live_samples, s2.live_samples);
        CHECK(s2.live_samples <= s1.live_samples + 8,
              "after the DEEPBIND phase the live samples grew from %" PRIu64 " to %" PRIu64,
              s1.live_samples, s2.live_samples);
    }
    printf("libraries ok (%s)\n", argv[1]);
    return 0;
}
