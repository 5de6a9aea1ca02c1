/* SPDX-License-Identifier: MIT */
/*
 * The allocator entry points behave exactly as glibc's, with and without the profiler.
 * argv: BACKEND [ROUNDS] (prog.h: plain, preload or got; MEMPROF_RATE is the rate). Each
 * check compares the call the program makes (through the profiler's hook when profiled)
 * with glibc's own function, looked up in libc.so.6's handle (the "oracle"): same NULL or
 * not, same return code, same errno, and the block meets the C and glibc rules (alignment,
 * malloc_usable_size >= the request, zeroed calloc memory, untouched *memptr and old block
 * on failure, errno untouched by every successful call). The plain run proves that the
 * expectations are glibc's own; the profiled runs at rate 1 take the sampled path (stack
 * capture, interning, heap-map insert) on every call, including the first one of a new
 * thread and of a forked child, and check that each entry point is sampled exactly once
 * and each free takes its sample out. Built with -fno-builtin-malloc (and the other
 * allocator functions), so GCC neither elides nor fuses (malloc + memset = calloc) the
 * calls under test.
 */
#include "prog.h"

#include <malloc.h>
#include <pthread.h>
#include <stdalign.h>
#include <sys/wait.h>
#include <unistd.h>

#define S 4242 /* errno sentinel */

struct glibc {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void *(*reallocarray)(void *, size_t, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
};
static struct glibc g;
static size_t page;
static int rate1; /* profiled at MEMPROF_RATE=1: every allocation is sampled */
/* At rate 1 a block of s bytes is sampled with probability 1 - exp(-s): certain for the
 * sizes checked exactly (>= 200 B), not for tiny ones (a 0-byte block never is). */
static int exact;

/* Opaque to the optimiser, so GCC neither folds nor warns about the huge requests. */
static volatile size_t big_half = SIZE_MAX / 2 + 2;
static volatile size_t huge = (size_t)PTRDIFF_MAX + 4096;
static volatile size_t size_max = SIZE_MAX;

static void *libc_sym(void *libc, const char *name)
{
    void *f = dlsym(libc, name);
    CHECK(f != NULL, "dlsym(libc.so.6, %s): %s", name, dlerror());
    Dl_info info;
    CHECK(dladdr(f, &info) && strstr(info.dli_fname, "libc.so"), "the oracle %s is not libc's (%s)",
          name, info.dli_fname);
    return f;
}

/* glibc's reallocarray (malloc/reallocarray.c): the overflow check, then realloc. */
static void *oracle_reallocarray(void *p, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return g.realloc(p, total);
}

/* Under the preload plugin, libc's entries for free, realloc, reallocarray and
 * malloc_usable_size name the plugin's functions (preload_retarget.c), so the oracle takes
 * glibc's own __libc_free and __libc_realloc, the same code under names left alone. */
static void load_oracle(void)
{
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    CHECK(libc != NULL, "dlopen(libc.so.6, RTLD_NOLOAD): %s", dlerror());
    *(void **)&g.malloc = libc_sym(libc, "malloc");
    *(void **)&g.free = libc_sym(libc, "__libc_free");
    *(void **)&g.calloc = libc_sym(libc, "calloc");
    *(void **)&g.realloc = libc_sym(libc, "__libc_realloc");
    g.reallocarray = oracle_reallocarray;
    *(void **)&g.posix_memalign = libc_sym(libc, "posix_memalign");
    *(void **)&g.aligned_alloc = libc_sym(libc, "aligned_alloc");
    *(void **)&g.memalign = libc_sym(libc, "memalign");
    *(void **)&g.valloc = libc_sym(libc, "valloc");
    *(void **)&g.pvalloc = libc_sym(libc, "pvalloc");
}

static int is_aligned(const void *p, size_t a)
{
    return ((uintptr_t)p & (a - 1)) == 0;
}

/* The alignment a successful aligned request must at least have: the next power of two
 * (glibc rounds a non-power-of-two alignment up), and malloc's own 16 bytes. */
static size_t min_alignment(size_t a)
{
    size_t m = alignof(max_align_t);
    while (m < a && m <= SIZE_MAX / 2)
        m <<= 1;
    return m < a ? a : m;
}

#define KEPT(what) CHECK(errno == S, "%s changed errno to %d (%s)", what, errno, strerror(errno))

/* ---- sampling accounting (profiled at rate 1 only) ------------------------------------- */

static memprof_stats before;

static void mark(void)
{
    if (exact)
        before = prog_stats();
}

/* After `what`: `samples` new samples were taken and the live count moved by `live`. */
static void expect_samples(const char *what, uint64_t samples, int64_t live)
{
    if (!exact)
        return;
    int e = errno; /* get_stats must not be what a KEPT() check sees */
    memprof_stats s = prog_stats();
    CHECK(s.total_samples - before.total_samples == samples &&
              (int64_t)(s.live_samples - before.live_samples) == live,
          "%s: %" PRIu64 " samples taken (expected %" PRIu64 "), live samples moved by %" PRId64
          " (expected %" PRId64 ")",
          what, s.total_samples - before.total_samples, samples,
          (int64_t)(s.live_samples - before.live_samples), live);
    errno = e;
}

/* ---- the checks ------------------------------------------------------------------------ */

static const size_t sizes[] = {0,    1,    15,   16,    24,     100,     1000,
                               4095, 4096, 4097, 65536, 200000, 1 << 20, (3 << 20) + 7};
#define N_SIZES (sizeof sizes / sizeof *sizes)

static void fill(void *p, size_t n, unsigned char v)
{
    memset(p, v, n);
}

static void expect_filled(const void *p, size_t n, unsigned char v, const char *what)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        CHECK(b[i] == v, "%s: byte %zu of %zu is 0x%x, expected 0x%x", what, i, n, b[i], v);
}

/* Every entry point, every size: a usable, suitably aligned block; errno untouched; each
 * call sampled once and each free taking its sample out. */
static void entry_points(void)
{
    for (size_t i = 0; i < N_SIZES; i++) {
        size_t n = sizes[i];
        void *p;
        exact = rate1 && n >= 200;

        mark();
        errno = S;
        p = malloc(n);
        KEPT("malloc");
        CHECK(p && malloc_usable_size(p) >= n, "malloc(%zu)", n);
        CHECK(is_aligned(p, alignof(max_align_t)), "malloc(%zu) = %p misaligned", n, p);
        fill(p, n, 0x5a);
        expect_samples("malloc", 1, 1);
        free(p);
        KEPT("free");
        expect_samples("malloc + free", 1, 0);

        mark();
        p = calloc(1, n);
        KEPT("calloc");
        CHECK(p && malloc_usable_size(p) >= n, "calloc(1, %zu)", n);
        expect_filled(p, n, 0, "calloc");
        expect_samples("calloc", 1, 1);
        free(p);
        KEPT("free");

        mark();
        p = realloc(NULL, n);
        KEPT("realloc(NULL, n)");
        CHECK(p && malloc_usable_size(p) >= n, "realloc(NULL, %zu)", n);
        expect_samples("realloc(NULL, n)", 1, 1);
        fill(p, n, 0x11);
        /* grow then shrink: the contents move with the block; the old block's sample is
         * replaced by the new one's */
        mark();
        p = realloc(p, 2 * n + 1000);
        KEPT("realloc (grow)");
        CHECK(p && malloc_usable_size(p) >= 2 * n + 1000, "realloc grow from %zu", n);
        expect_filled(p, n, 0x11, "realloc (grow)");
        expect_samples("realloc (grow)", 1, 0);
        p = realloc(p, n / 2 + 1);
        KEPT("realloc (shrink)");
        CHECK(p && malloc_usable_size(p) >= n / 2 + 1, "realloc shrink to %zu", n / 2 + 1);
        expect_filled(p, n / 2, 0x11, "realloc (shrink)");
        expect_samples("realloc (grow, shrink)", 2, 0);
        free(p);

        mark();
        p = reallocarray(NULL, 3, n);
        KEPT("reallocarray(NULL, ...)");
        CHECK(p && malloc_usable_size(p) >= 3 * n, "reallocarray(NULL, 3, %zu)", n);
        fill(p, 3 * n, 0x22);
        p = reallocarray(p, 5, n + 1);
        KEPT("reallocarray (grow)");
        CHECK(p && malloc_usable_size(p) >= 5 * (n + 1), "reallocarray grow");
        expect_filled(p, 3 * n, 0x22, "reallocarray (grow)");
        expect_samples("reallocarray", 2, 1);
        free(p);

        static const size_t aligns[] = {8, 16, 32, 64, 256, 4096, 65536};
        for (size_t k = 0; k < sizeof aligns / sizeof *aligns; k++) {
            size_t a = aligns[k];
            mark();
            p = (void *)&sizes; /* posix_memalign overwrites it on success */
            int rc = posix_memalign(&p, a, n);
            KEPT("posix_memalign");
            CHECK(rc == 0 && p != (void *)&sizes && is_aligned(p, a) && malloc_usable_size(p) >= n,
                  "posix_memalign(%zu, %zu) = %d, %p", a, n, rc, p);
            fill(p, n, 1);
            free(p);
            p = aligned_alloc(a, n);
            KEPT("aligned_alloc");
            CHECK(p && is_aligned(p, a) && malloc_usable_size(p) >= n,
                  "aligned_alloc(%zu, %zu) = %p", a, n, p);
            fill(p, n, 2);
            free(p);
            p = memalign(a, n);
            KEPT("memalign");
            CHECK(p && is_aligned(p, a) && malloc_usable_size(p) >= n, "memalign(%zu, %zu) = %p", a,
                  n, p);
            fill(p, n, 3);
            free(p);
            KEPT("free");
            expect_samples("posix_memalign, aligned_alloc, memalign + free", 3, 0);
        }

        mark();
        p = valloc(n);
        KEPT("valloc");
        CHECK(p && is_aligned(p, page) && malloc_usable_size(p) >= n, "valloc(%zu) = %p", n, p);
        fill(p, n, 4);
        expect_samples("valloc", 1, 1);
        free(p);
        mark();
        p = pvalloc(n);
        KEPT("pvalloc");
        size_t whole = (n + page - 1) / page * page;
        CHECK(p && is_aligned(p, page) && malloc_usable_size(p) >= whole,
              "pvalloc(%zu) = %p (usable %zu, expected >= %zu)", n, p,
              p ? malloc_usable_size(p) : 0, whole);
        fill(p, whole, 5);
        expect_samples("pvalloc", 1, 1);
        free(p);
        KEPT("free");
        expect_samples("pvalloc + free", 1, 0);
    }
    free(NULL);
    KEPT("free(NULL)");
    exact = rate1;

    /* free_sized (C23) where the C library has it: a plain free for the profiler. */
    void (*free_sized)(void *, size_t);
    *(void **)&free_sized = dlsym(RTLD_DEFAULT, "free_sized");
    if (free_sized) {
        mark();
        void *p = malloc(1000);
        errno = S;
        free_sized(p, 1000);
        KEPT("free_sized");
        expect_samples("malloc + free_sized", 1, 0);
        exact = rate1;
    } else {
        printf("free_sized: not in this C library, skipped\n");
    }
}

/* malloc(0) and friends give distinct, freeable blocks; realloc(p, 0) frees p and returns
 * NULL (glibc's REALLOC_ZERO_BYTES_FREES), as does reallocarray(p, 0, n). */
static void zero_sizes(void)
{
    void *a = malloc(0), *b = malloc(0), *c = calloc(0, 8), *d = calloc(8, 0);
    CHECK(a && b && c && d && a != b, "malloc(0)/calloc(0, n) gave NULL or the same block");
    void *ga = g.malloc(0);
    CHECK(ga != NULL, "glibc's malloc(0) is NULL");
    g.free(ga);
    free(a), free(b), free(c), free(d);

    for (int k = 0; k < 2; k++) {
        void *p = malloc(100), *q = g.malloc(100);
        CHECK(p && q, "malloc failed");
        mark();
        errno = S;
        void *r = k ? reallocarray(p, 0, 10) : realloc(p, 0);
        int e = errno;
        errno = S;
        void *gr = k ? g.reallocarray(q, 0, 10) : g.realloc(q, 0);
        CHECK(r == NULL && gr == NULL && e == errno,
              "%s(p, 0) = %p errno %d; glibc's = %p errno %d", k ? "reallocarray" : "realloc", r, e,
              gr, errno);
        expect_samples("realloc(p, 0)", 0, -1); /* p's sample left with the block */
    }
}

/* One aligned request, through the hook and through glibc: same outcome and errno. */
static void compare_aligned(const char *fn, size_t a, size_t n)
{
    void *p = NULL, *q = NULL;
    int rp = 0, rq = 0, ep, eq;
    void *const untouched = (void *)&g;
    errno = S;
    if (!strcmp(fn, "posix_memalign")) {
        p = untouched;
        rp = posix_memalign(&p, a, n);
        ep = errno;
        q = untouched;
        errno = S;
        rq = g.posix_memalign(&q, a, n);
        eq = errno;
        CHECK(rp == rq, "posix_memalign(%zu, %zu) = %d, glibc's = %d", a, n, rp, rq);
        if (rp) {
            CHECK(p == untouched, "a failed posix_memalign(%zu, %zu) wrote *memptr", a, n);
            p = q = NULL;
        }
    } else {
        int aligned = !strcmp(fn, "aligned_alloc");
        p = aligned ? aligned_alloc(a, n) : memalign(a, n);
        ep = errno;
        errno = S;
        q = aligned ? g.aligned_alloc(a, n) : g.memalign(a, n);
        eq = errno;
        CHECK(!p == !q, "%s(%zu, %zu) = %p, glibc's = %p", fn, a, n, p, q);
    }
    CHECK(ep == eq, "%s(%zu, %zu): errno %d, glibc's %d", fn, a, n, ep, eq);
    if (p) {
        size_t m = min_alignment(a);
        CHECK(is_aligned(p, m) && is_aligned(q, m),
              "%s(%zu, %zu): %p or glibc's %p not %zu-aligned", fn, a, n, p, q, m);
        CHECK(malloc_usable_size(p) >= n && malloc_usable_size(q) >= n, "%s: usable size", fn);
        CHECK(ep == S, "a successful %s(%zu, %zu) changed errno to %d", fn, a, n, ep);
    }
    free(p);
    g.free(q);
}

/* Alignment rules and their errors, as glibc 2.36 has them (posix_memalign: EINVAL unless
 * a power of two multiple of sizeof(void *), *memptr untouched; aligned_alloc and memalign
 * round other alignments up, EINVAL above SIZE_MAX / 2 + 1, ENOMEM for impossible sizes). */
static void alignment_rules(void)
{
    static const size_t bad[] = {0, 1, 2, 3, 4, 12, 24, 48, 1000, 4097};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        void *p = (void *)&bad;
        errno = S;
        int rc = posix_memalign(&p, bad[i], 100);
        KEPT("a posix_memalign failing with EINVAL");
        CHECK(rc == EINVAL && p == (void *)&bad, "posix_memalign(%zu, 100) = %d, *memptr %s",
              bad[i], rc, p == (void *)&bad ? "untouched" : "written");
    }
    const size_t aligns[] = {1,
                             2,
                             3,
                             4,
                             8,
                             16,
                             24,
                             48,
                             64,
                             100,
                             4096,
                             12288,
                             1 << 20,
                             SIZE_MAX / 2 + 1,
                             SIZE_MAX / 2 + 2,
                             size_max};
    const size_t lens[] = {0, 1, 100, 4097, 1 << 20, huge, size_max};
    static const char *fns[] = {"posix_memalign", "aligned_alloc", "memalign"};
    for (size_t f = 0; f < 3; f++)
        for (size_t i = 0; i < sizeof aligns / sizeof *aligns; i++)
            for (size_t j = 0; j < sizeof lens / sizeof *lens; j++)
                compare_aligned(fns[f], aligns[i], lens[j]);
}

/* Overflowing and impossible requests: NULL (or the error code) with glibc's errno, and
 * the old block of a failed realloc intact and still sampled. */
static void overflow(void)
{
    struct {
        const char *what;
        size_t a, b;
    } cal[] = {{"calloc(SIZE_MAX/2+2, 2)", big_half, 2},
               {"calloc(2, SIZE_MAX/2+2)", 2, big_half},
               {"calloc(SIZE_MAX, SIZE_MAX)", size_max, size_max},
               {"calloc(1, > PTRDIFF_MAX)", 1, huge}};
    for (size_t i = 0; i < sizeof cal / sizeof *cal; i++) {
        errno = S;
        void *p = calloc(cal[i].a, cal[i].b);
        int e = errno;
        errno = S;
        void *q = g.calloc(cal[i].a, cal[i].b);
        CHECK(!p && !q && e == ENOMEM && errno == ENOMEM, "%s = %p errno %d; glibc's %p errno %d",
              cal[i].what, p, e, q, errno);
        errno = S;
        p = reallocarray(NULL, cal[i].a, cal[i].b);
        CHECK(!p && errno == ENOMEM, "reallocarray(NULL, ...) like %s = %p errno %d", cal[i].what,
              p, errno);
    }
    struct {
        const char *what;
        void *(*mine)(size_t), *(*glibc)(size_t);
    } one[] = {{"malloc", malloc, g.malloc},
               {"valloc", valloc, g.valloc},
               {"pvalloc", pvalloc, g.pvalloc}};
    const size_t lens[] = {huge, size_max, size_max - 4095};
    for (size_t i = 0; i < sizeof one / sizeof *one; i++)
        for (size_t j = 0; j < 3; j++) {
            errno = S;
            void *p = one[i].mine(lens[j]);
            int e = errno;
            errno = S;
            void *q = one[i].glibc(lens[j]);
            CHECK(!p && !q && e == errno && e == ENOMEM,
                  "%s(%zu) = %p errno %d; glibc's %p errno %d", one[i].what, lens[j], p, e, q,
                  errno);
        }

    for (int k = 0; k < 2; k++) {
        char *old = malloc(1000);
        CHECK(old != NULL, "malloc failed");
        fill(old, 1000, 'x');
        mark();
        errno = S;
        void *p = k ? reallocarray(old, 3, big_half) : realloc(old, huge);
        CHECK(p == NULL && errno == ENOMEM, "%s = %p errno %d",
              k ? "reallocarray(p, overflow)" : "realloc(p, > PTRDIFF_MAX)", p, errno);
        expect_filled(old, 1000, 'x', "the old block of a failed realloc");
        expect_samples("a failed realloc", 0, 0);
        mark();
        free(old);
        expect_samples("free after a failed realloc", 0, -1);
    }
}

/* calloc returns zeroed memory even where the previous block of that size was dirtied:
 * dirty a block, free it, calloc the same size (glibc hands the same chunk back). */
static void calloc_zeroes_recycled(int rounds)
{
    static const size_t cs[] = {8, 24, 100, 1000, 5000, 40000, 140000, 1 << 20};
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
        for (int r = 0; r < rounds; r++) {
            unsigned char *d = malloc(cs[i]);
            CHECK(d != NULL, "malloc(%zu)", cs[i]);
            fill(d, malloc_usable_size(d), 0xee);
            free(d);
            errno = S;
            unsigned char *z = (r & 1) ? calloc(cs[i] / 8, 8) : calloc(cs[i], 1);
            KEPT("calloc");
            CHECK(z != NULL, "calloc(%zu)", cs[i]);
            expect_filled(z, cs[i], 0, "calloc of a recycled block");
            free(z);
        }
}

/* The first allocation of a new thread (thread-local profiler state is set up, the PRNG
 * seeded) and of a forked child (reseeded) keeps errno. */
/* Under the preload plugin, lookups that end in libc's own symbol table (dlsym on libc's
 * handle, as ctypes.CDLL("libc.so.6") does; RTLD_DEEPBIND libraries) find the plugin's free,
 * realloc, reallocarray and malloc_usable_size, so a block libc allocated (through the plugin's
 * malloc: strdup) and freed through them is seen and never reaches glibc's free behind the
 * plugin's back (a block of the sample heap there would abort the program). */
static void libc_handle_lookups(void)
{
    if (prog_backend != PROG_PRELOAD) {
        printf("lookups through libc's handle: only the preload plugin retargets them\n");
        return;
    }
    void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
    CHECK(libc != NULL, "dlopen(libc.so.6, RTLD_NOLOAD): %s", dlerror());
    const char *names[] = {"free", "realloc", "reallocarray", "malloc_usable_size"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        void *f = dlsym(libc, names[i]);
        CHECK(f != NULL && f == dlsym(RTLD_DEFAULT, names[i]),
              "dlsym(libc.so.6, %s) = %p is not the plugin's %p", names[i], f,
              dlsym(RTLD_DEFAULT, names[i]));
    }
    void (*libc_free)(void *);
    void *(*libc_realloc)(void *, size_t);
    *(void **)&libc_free = dlsym(libc, "free");
    *(void **)&libc_realloc = dlsym(libc, "realloc");
    char text[600];
    memset(text, 'x', sizeof text - 1);
    text[sizeof text - 1] = 0;
    for (int i = 0; i < 200; i++) {
        mark();
        char *s = strdup(text);
        CHECK(s && strlen(s) == sizeof text - 1, "strdup");
        expect_samples("strdup", 1, 1);
        s = libc_realloc(s, 900);
        CHECK(s && s[598] == 'x', "realloc through libc's handle lost the contents");
        expect_samples("strdup + realloc through libc's handle", 2, 1);
        libc_free(s);
        expect_samples("strdup + realloc + free through libc's handle", 2, 0);
    }
    dlclose(libc);
}

/* dlsym() answers for its caller, also when the plugin defines it (to forward each call):
 * RTLD_NEXT from the program finds the next definition after the program's, which under
 * the plugin is the plugin's, and without the profiler (or under the GOT start) glibc's. */
static void rtld_next_from_the_program(void)
{
    void *next = dlsym(RTLD_NEXT, "malloc");
    CHECK(next != NULL && next == dlsym(RTLD_DEFAULT, "malloc"),
          "dlsym(RTLD_NEXT, malloc) from the program = %p, the global malloc is %p", next,
          dlsym(RTLD_DEFAULT, "malloc"));
    printf("dlsym(RTLD_NEXT) from the program: the global malloc, as without the profiler\n");
}

static void *first_in_thread(void *arg)
{
    int which = (int)(intptr_t)arg;
    void *p = NULL;
    errno = S;
    switch (which) {
    case 0:
        p = malloc(3000);
        break;
    case 1:
        p = calloc(30, 100);
        break;
    case 2:
        p = realloc(NULL, 3000);
        break;
    case 3:
        p = aligned_alloc(64, 3000);
        break;
    case 4:
        p = memalign(64, 3000);
        break;
    case 5:
        p = valloc(3000);
        break;
    default:
        (void)!posix_memalign(&p, 64, 3000);
        break;
    }
    int e = errno;
    free(p);
    return (void *)(intptr_t)(p != NULL && e == S && errno == S);
}

static void first_call_of_thread_and_child(void)
{
    for (int k = 0; k < 7; k++) {
        pthread_t t;
        void *ok;
        CHECK(pthread_create(&t, NULL, first_in_thread, (void *)(intptr_t)k) == 0,
              "pthread_create");
        CHECK(pthread_join(t, &ok) == 0 && ok,
              "a new thread's first allocation (%d) failed or "
              "changed errno",
              k);
    }
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0)
        _exit(first_in_thread(0) && first_in_thread((void *)3) ? 0 : 1);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "a forked child's first allocation failed or changed errno (status 0x%x)", st);
}

int main(int argc, char **argv)
{
    CHECK(argc >= 2, "usage: %s plain|preload|got [ROUNDS]", argv[0]);
    prog_setup(argv[1]);
    int rounds = argc > 2 ? atoi(argv[2]) : 50;
    page = (size_t)sysconf(_SC_PAGESIZE);
    rate1 = prog_profiled() && prog_rate() == 1;
    load_oracle();

    /* Before anything prints: at rate 1 stdout's buffer would be one more sample. */
    entry_points();
    zero_sizes();
    alignment_rules();
    overflow();
    calloc_zeroes_recycled(rounds);
    first_call_of_thread_and_child();
    libc_handle_lookups();
    rtld_next_from_the_program();
    if (prog_profiled()) {
        memprof_stats s = prog_stats();
        printf("%" PRIu64 " samples taken, %" PRIu64 " live\n", s.total_samples, s.live_samples);
        if (rate1)
            CHECK(s.total_samples > 1000, "only %" PRIu64 " samples at rate 1", s.total_samples);
    }
    printf("semantics identical to glibc (%s)\n", argv[1]);
    return 0;
}
