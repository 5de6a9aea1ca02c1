/* SPDX-License-Identifier: MIT */
/*
 * bench_fastpath: what the preload plugin adds to a malloc+free pair.
 *
 * The same workload runs in child processes of this program, alternately without (A) and
 * with (B) LD_PRELOAD of libmemprof-preload.so (A B A B ..., --pairs pairs), and the table
 * shows medians over the pairs: CPU nanoseconds per malloc+free pair without and with the
 * profiler, and each pair's difference and ratio. Alternating in one run cancels most drift
 * (frequency scaling, other load on the machine); the median drops outliers.
 *
 * Workloads (every thread runs its own copy; sizes are drawn log-uniformly from 16 B to
 * 4 KiB, mean ~740 B, or uniformly with --sizes uniform, mean ~2 KiB; each step picks its
 * size from the thread's table of 4,096 at random. Walking the table in order made the
 * sequence periodic, and on some seeds glibc settled into a cycle at ~14 ns a pair that
 * one extra allocation anywhere broke for the rest of the run: the one sample the
 * profiler took, or one leaked block without any profiler, cost ~10 ns a pair there.
 * Thread 4 had such a seed, so the four-thread row measured that, not threads):
 *   churn   a small live set: each thread cycles through 64 slots, freeing the block in
 *           a slot and allocating a new one of a random size (allocator caches stay hot)
 *   live1m  about 1M live blocks over all threads; each step frees the block in a random
 *           slot and allocates a new one (cache misses in the allocator and in the
 *           profiler's Bloom filter)
 * Each thread first runs half its steps untimed (warm-up). Time is each thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID) over its loop divided by its pairs, averaged over threads: so
 * 8 threads on 2 cores measure contention (shared cache lines show up as CPU time) rather
 * than the oversubscription of the machine.
 *
 * With the plugin, MEMPROF_RATE is set to each rate asked for (default 512 KiB and 64 KiB)
 * and MEMPROF_START=1; nothing is written. Rate 0 means "hooks only": the plugin is loaded
 * with MEMPROF_START=0, so the row shows the cost of interposition alone. Each run does
 * --ops pairs in total (default 1M, 4M without --quick; 500k and 2M for live1m), split
 * evenly over its threads. The child reports the profiler's sample count
 * (memprof_get_stats through dlsym), so the table also says how many pairs took the cold
 * path.
 *
 * Usage: bench_fastpath [--quick] [--pairs N] [--threads 1,2,4,8] [--rates 0,512K,64K]
 *                       [--workloads churn,live1m] [--ops N] [--sizes log|uniform]
 *                       [--preload PATH]
 * Prints a Markdown table on stdout and progress on stderr. This is a benchmark, not a
 * test: it asserts nothing (bench/README.md lists the targets).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <memprof/memprof.h>

#ifndef MEMPROF_PRELOAD_PATH
#define MEMPROF_PRELOAD_PATH ""
#endif

#define MAX_LIST 16

enum workload { WL_CHURN, WL_LIVE1M };
static const char *const workload_names[] = {"churn", "live1m"};

struct options {
    int quick;
    int pairs;
    unsigned threads[MAX_LIST];
    int nthreads;
    uint64_t rates[MAX_LIST];
    int nrates;
    int workloads[MAX_LIST];
    int nworkloads;
    uint64_t ops; /* pairs per thread; 0 = per-workload default */
    int uniform_sizes;
    const char *preload;
};

/* ---- the child: runs one workload and prints its result ------------------------------- */

#define SIZE_TABLE  4096u /* precomputed sizes per thread (a power of two) */
#define CHURN_SLOTS 64u
#define LIVE_TOTAL  (1u << 20)

struct worker {
    pthread_t tid;
    enum workload wl;
    uint64_t ops;
    size_t nslots;
    void **slots;
    uint32_t *sizes;
    uint64_t seed;
    double ns_per_pair;
    pthread_barrier_t *barrier;
};

static uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static int uniform_sizes;

static uint32_t random_size(uint64_t *s)
{
    if (uniform_sizes)
        return 16 + (uint32_t)(xorshift(s) % (4096 - 16 + 1));
    /* log-uniform on [16, 4096]: 2^(4 + 8u) */
    double u = (double)(xorshift(s) >> 11) * 0x1.0p-53;
    return (uint32_t)exp2(4.0 + 8.0 * u);
}

static double thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    uint64_t rng = w->seed;
    w->sizes = malloc(SIZE_TABLE * sizeof *w->sizes);
    w->slots = calloc(w->nslots, sizeof *w->slots);
    if (!w->sizes || !w->slots) {
        fprintf(stderr, "bench_fastpath: out of memory\n");
        exit(1);
    }
    for (unsigned i = 0; i < SIZE_TABLE; i++)
        w->sizes[i] = random_size(&rng);
    for (size_t i = 0; i < w->nslots; i++) {
        w->slots[i] = malloc(w->sizes[i & (SIZE_TABLE - 1)]);
        *(volatile char *)w->slots[i] = 1;
    }
    pthread_barrier_wait(w->barrier);

    /* An untimed warm-up of half the steps brings the heap to its steady size, so the
     * timed loop does not pay for growing it (page faults, sbrk). */
    double t0 = 0;
    uint64_t total = w->ops + w->ops / 2;
    if (w->wl == WL_CHURN) {
        for (uint64_t i = 0; i < total; i++) {
            if (i == w->ops / 2)
                t0 = thread_cpu_ns();
            size_t slot = i & (CHURN_SLOTS - 1);
            free(w->slots[slot]);
            char *p = malloc(w->sizes[(xorshift(&rng) >> 52) & (SIZE_TABLE - 1)]);
            *(volatile char *)p = (char)i;
            w->slots[slot] = p;
        }
    } else {
        for (uint64_t i = 0; i < total; i++) {
            if (i == w->ops / 2)
                t0 = thread_cpu_ns();
            uint64_t r = xorshift(&rng);
            size_t slot = (size_t)(r % w->nslots);
            free(w->slots[slot]);
            char *p = malloc(w->sizes[(r >> 52) & (SIZE_TABLE - 1)]);
            *(volatile char *)p = (char)i;
            w->slots[slot] = p;
        }
    }
    double t1 = thread_cpu_ns();
    w->ns_per_pair = (t1 - t0) / (double)w->ops;

    pthread_barrier_wait(w->barrier); /* keep every block live until all threads are done */
    for (size_t i = 0; i < w->nslots; i++)
        free(w->slots[i]);
    free(w->slots);
    free(w->sizes);
    return NULL;
}

/* Child mode: bench_fastpath --child WORKLOAD THREADS OPS SIZES. Prints
 * "ns=<mean CPU ns per pair> samples=<profiler samples or -1>". */
static int child_main(int argc, char **argv)
{
    if (argc != 6)
        return 2;
    enum workload wl = strcmp(argv[2], "live1m") == 0 ? WL_LIVE1M : WL_CHURN;
    unsigned nthreads = (unsigned)strtoul(argv[3], NULL, 10);
    uint64_t ops = strtoull(argv[4], NULL, 10);
    uniform_sizes = strcmp(argv[5], "uniform") == 0;
    if (nthreads < 1 || nthreads > 1024 || ops < 1)
        return 2;

    struct worker *w = calloc(nthreads, sizeof *w);
    pthread_barrier_t barrier;
    if (!w || pthread_barrier_init(&barrier, NULL, nthreads) != 0)
        return 1;
    for (unsigned i = 0; i < nthreads; i++) {
        w[i].wl = wl;
        w[i].ops = ops;
        w[i].nslots = wl == WL_CHURN ? CHURN_SLOTS : LIVE_TOTAL / nthreads;
        w[i].seed = 0x243F6A8885A308D3ull * (i + 1);
        w[i].barrier = &barrier;
        if (pthread_create(&w[i].tid, NULL, worker_main, &w[i]) != 0) {
            fprintf(stderr, "bench_fastpath: pthread_create failed\n");
            return 1;
        }
    }
    double sum = 0;
    for (unsigned i = 0; i < nthreads; i++) {
        pthread_join(w[i].tid, NULL);
        sum += w[i].ns_per_pair;
    }

    /* Only present when the plugin (and so libmemprof.so.1) is loaded. */
    long long samples = -1;
    int (*get_stats)(memprof_stats *) =
        (int (*)(memprof_stats *))dlsym(RTLD_DEFAULT, "memprof_get_stats");
    memprof_stats st = {.size = sizeof st};
    if (get_stats && get_stats(&st) == 0)
        samples = (long long)st.total_samples;
    printf("ns=%.4f samples=%lld\n", sum / nthreads, samples);
    free(w);
    return 0;
}

/* ---- the parent: runs children alternately and prints the table ----------------------- */

struct result {
    double ns;
    long long samples;
};

static int run_child(const struct options *o, int wl, unsigned threads, uint64_t ops, int with,
                     uint64_t rate, struct result *out)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
        unsetenv("LD_PRELOAD");
        unsetenv("MEMPROF_OUTPUT");
        if (with) {
            char r[32];
            snprintf(r, sizeof r, "%" PRIu64, rate ? rate : 524288);
            setenv("LD_PRELOAD", o->preload, 1);
            setenv("MEMPROF_RATE", r, 1);
            setenv("MEMPROF_START", rate ? "1" : "0", 1);
        }
        char t[16], n[32];
        snprintf(t, sizeof t, "%u", threads);
        snprintf(n, sizeof n, "%" PRIu64, ops);
        execl("/proc/self/exe", "bench_fastpath", "--child", workload_names[wl], t, n,
              o->uniform_sizes ? "uniform" : "log", (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    char buf[256];
    size_t len = 0;
    ssize_t r;
    while (len < sizeof buf - 1 && (r = read(fds[0], buf + len, sizeof buf - 1 - len)) != 0) {
        if (r < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        len += (size_t)r;
    }
    buf[len] = '\0';
    close(fds[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
        sscanf(buf, "ns=%lf samples=%lld", &out->ns, &out->samples) != 2) {
        fprintf(stderr, "bench_fastpath: child (%s, %u threads, %s) failed\n", workload_names[wl],
                threads, with ? "with the profiler" : "without");
        return -1;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static const char *rate_label(uint64_t rate, char *buf, size_t size)
{
    if (rate == 0)
        snprintf(buf, size, "hooks only");
    else if (rate % (1024 * 1024) == 0)
        snprintf(buf, size, "%" PRIu64 " MiB", rate / (1024 * 1024));
    else if (rate % 1024 == 0)
        snprintf(buf, size, "%" PRIu64 " KiB", rate / 1024);
    else
        snprintf(buf, size, "%" PRIu64 " B", rate);
    return buf;
}

static int parse_list(const char *arg, uint64_t *out, int max)
{
    int n = 0;
    const char *p = arg;
    while (*p && n < max) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (errno || end == p)
            return -1;
        if (*end == 'K' || *end == 'k')
            v <<= 10, end++;
        else if (*end == 'M' || *end == 'm')
            v <<= 20, end++;
        out[n++] = v;
        if (*end == ',')
            end++;
        else if (*end)
            return -1;
        p = end;
    }
    return n;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_fastpath [--quick] [--pairs N] [--threads 1,2,4,8]\n"
            "                      [--rates 0,512K,64K] [--workloads churn,live1m] [--ops N]\n"
            "                      [--sizes log|uniform] [--preload PATH]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--child") == 0)
        return child_main(argc, argv);

    struct options o = {
        .pairs = 0,
        .threads = {1, 2, 4, 8},
        .nthreads = 4,
        .rates = {512 * 1024, 64 * 1024},
        .nrates = 2,
        .workloads = {WL_CHURN, WL_LIVE1M},
        .nworkloads = 2,
        .preload = getenv("MEMPROF_PRELOAD") ? getenv("MEMPROF_PRELOAD") : MEMPROF_PRELOAD_PATH,
    };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t list[MAX_LIST];
        int n;
        if (!strcmp(a, "--quick")) {
            o.quick = 1;
        } else if (!strcmp(a, "--pairs") && v) {
            o.pairs = atoi(v), i++;
            if (o.pairs < 1)
                usage();
        } else if (!strcmp(a, "--threads") && v) {
            if ((n = parse_list(v, list, MAX_LIST)) <= 0)
                usage();
            for (int k = 0; k < n; k++)
                o.threads[k] = (unsigned)list[k];
            o.nthreads = n, i++;
        } else if (!strcmp(a, "--rates") && v) {
            if ((n = parse_list(v, o.rates, MAX_LIST)) <= 0)
                usage();
            o.nrates = n, i++;
        } else if (!strcmp(a, "--workloads") && v) {
            o.nworkloads = 0;
            char *copy = strdup(v), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (!strcmp(t, "churn"))
                    o.workloads[o.nworkloads++] = WL_CHURN;
                else if (!strcmp(t, "live1m"))
                    o.workloads[o.nworkloads++] = WL_LIVE1M;
                else
                    usage();
            }
            free(copy);
            i++;
        } else if (!strcmp(a, "--ops") && v) {
            o.ops = strtoull(v, NULL, 10), i++;
        } else if (!strcmp(a, "--sizes") && v) {
            if (strcmp(v, "log") && strcmp(v, "uniform"))
                usage();
            o.uniform_sizes = !strcmp(v, "uniform"), i++;
        } else if (!strcmp(a, "--preload") && v) {
            o.preload = v, i++;
        } else {
            usage();
        }
    }
    if (!o.pairs)
        o.pairs = o.quick ? 5 : 9;
    if (!o.preload[0] || access(o.preload, R_OK) != 0) {
        fprintf(stderr, "bench_fastpath: preload plugin '%s' not found (use --preload PATH)\n",
                o.preload);
        return 1;
    }

    printf("| workload | threads | rate | without (ns/pair) | with (ns/pair) | added (ns) "
           "| ratio | samples per run |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|\n");
    fflush(stdout);
    int failed = 0;
    for (int wi = 0; wi < o.nworkloads; wi++) {
        int wl = o.workloads[wi];
        for (int ri = 0; ri < o.nrates; ri++) {
            for (int ti = 0; ti < o.nthreads; ti++) {
                unsigned threads = o.threads[ti];
                uint64_t ops = o.ops;
                if (!ops)
                    ops = wl == WL_CHURN ? (o.quick ? 1000000 : 4000000)
                                         : (o.quick ? 500000 : 2000000);
                ops = ops / threads ? ops / threads : 1; /* per thread */
                double a[64], b[64], added[64], ratio[64];
                long long samples = 0;
                int pairs = o.pairs > 64 ? 64 : o.pairs, ok = 1;
                char rl[32];
                rate_label(o.rates[ri], rl, sizeof rl);
                fprintf(stderr, "bench_fastpath: %s, %u thread(s), %s: %d A/B pairs...\n",
                        workload_names[wl], threads, rl, pairs);
                for (int p = 0; p < pairs && ok; p++) {
                    struct result ra, rb;
                    if (run_child(&o, wl, threads, ops, 0, 0, &ra) != 0 ||
                        run_child(&o, wl, threads, ops, 1, o.rates[ri], &rb) != 0) {
                        ok = 0;
                        break;
                    }
                    a[p] = ra.ns;
                    b[p] = rb.ns;
                    added[p] = rb.ns - ra.ns;
                    ratio[p] = rb.ns / ra.ns;
                    samples += rb.samples > 0 ? rb.samples : 0;
                }
                if (!ok) {
                    failed = 1;
                    printf("| %s | %u | %s | failed | | | | |\n", workload_names[wl], threads, rl);
                    continue;
                }
                /* The added cost and the ratio are medians over the pairs: each pair's
                 * two runs are back to back, so drift longer than a pair cancels. */
                double ma = median(a, pairs), mb = median(b, pairs);
                double md = median(added, pairs), mr = median(ratio, pairs);
                /* Per child: the set-up allocations (live1m's 1M blocks) included. */
                double per_run = (double)samples / pairs;
                printf("| %s | %u | %s | %.2f | %.2f | %+.2f | %.3f | %.0f |\n", workload_names[wl],
                       threads, rl, ma, mb, md, mr, per_run);
                fflush(stdout);
            }
        }
    }
    return failed;
}
