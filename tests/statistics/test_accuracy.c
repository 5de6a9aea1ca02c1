/* SPDX-License-Identifier: MIT */
/*
 * Accuracy of the live-heap estimates through the whole engine: workloads with a known truth
 * (64 B blocks; blocks of 32x the rate and more; a heavy-tailed mix from 16 B to 256 MiB; 50
 * call sites, each with its own size distribution and count; churn around a stable live
 * set) are fed to memprof__on_alloc()/memprof__on_free() with fake block addresses, from
 * real, distinct call stacks (site k's allocations run below a chain of calls that spells k
 * in binary), and measured with memprof_get_snapshot() while live. Every seed runs on a
 * fresh thread of one engine with a fixed seed, so each thread samples its own deterministic
 * stream and a run is reproducible; each workload is its own process (test case).
 *
 * Checks, over all seeds: the mean whole-heap estimate of bytes and of allocations within
 * 1 % of the truth, each site's mean within 3 %; seed 0 within 5 % (with at least 1000 live
 * samples, and enough that 5 % is 4.5 of its standard deviations: 1000 samples of small
 * blocks alone would miss 5 % about one time in ten); the reported 95 % intervals of bytes and
 * allocations covering the truth in a number of seeds inside the binomial band that a
 * correct 95 % interval misses with probability 1e-4; the sites' intervals, pooled over
 * sites and seeds, covering it 94-96 % of the time up to binomial noise. Means are held to Z_MEAN
 * times the estimator's exact standard error (its variance is known for a known population) and
 * each check verifies that its tolerance is at least that wide, so a correct engine fails with
 * probability well under 1e-4, and a bias well inside the tolerance (a 1 % error in the
 * sampling rate) still fails. One more case checks that the profiler's own allocations do
 * not bias the sampling of the user's next one.
 *
 * `test-accuracy [case]` is the CI variant (400 seeds: coverage band 90-98.75 %);
 * `test-accuracy --long [case]` runs 2000 seeds (band 93-97 %) and ends with a Markdown table.
 */
#include <math.h>
#include <pthread.h>
#include <sys/mman.h>

#include "config.h"
#include "core/engine.h"
#include "common/estimate.h"
#include "memprof/memprof.h"
#include "test.h"
#include "../keep_frame.h"

#define KIB ((uint64_t)1024)
#define MIB (KIB * KIB)

enum {
    SITE_BITS = 6,
    MAX_SITES = 1 << SITE_BITS,
    STRIDE = 16,
};

/* Chance that a correct engine fails one test case (a workload), split over its checks. */
#define ALPHA 1e-4
/* Checks of a mean use this many standard errors: P(|N(0,1)| > 5) = 5.7e-7 each. */
#define Z_MEAN 5.0

static unsigned n_seeds = 400;
static bool long_run;
/* Where table rows go: stdout, or with --long a file the forked cases append to and the
 * parent prints as one table at the end. */
static FILE *table;

/* ---- statistics ---------------------------------------------------------------------------- */

/* One estimate of one seed: the truth, the engine's estimate and 95 % interval, and the
 * estimator's exact variance for this population (sum s^2 (1 - p) / p, or (1 - p) / p for
 * counts, over the live blocks). */
struct est_result {
    double truth, est, lo, hi, var;
    uint64_t samples;
    bool has_interval;
};

/* An estimate over all seeds. */
struct tally {
    uint64_t n, covered, within5, samples, with_interval;
    double sum, sum2, var_sum; /* of est / truth and its exact variance */
    double first_err;          /* seed 0: est / truth - 1 */
    double first_sd;           /* seed 0: exact relative standard deviation */
    double round_sum;          /* of 0.5 / truth: the API's estimates are whole numbers */
    uint64_t first_samples;
};

static void tally_add(struct tally *t, const struct est_result *r)
{
    if (r->truth <= 0)
        return;
    double q = r->est / r->truth;
    if (t->n == 0) {
        t->first_err = q - 1;
        t->first_sd = sqrt(r->var) / r->truth;
        t->first_samples = r->samples;
    }
    t->n++;
    t->sum += q;
    t->sum2 += q * q;
    t->var_sum += r->var / (r->truth * r->truth);
    t->round_sum += 0.5 / r->truth;
    t->samples += r->samples;
    t->within5 += fabs(q - 1) <= 0.05;
    if (r->has_interval) {
        t->with_interval++;
        t->covered += r->lo <= r->truth && r->truth <= r->hi;
    }
}

static double tally_mean(const struct tally *t)
{
    return t->n ? t->sum / (double)t->n : 0;
}

/* Exact standard error of the mean of est / truth (seeds are independent). */
static double tally_se(const struct tally *t)
{
    return t->n ? sqrt(t->var_sum) / (double)t->n : 0;
}

/* Standard error measured from the spread between seeds (for the report). */
static double tally_se_measured(const struct tally *t)
{
    if (t->n < 2)
        return 0;
    double m = tally_mean(t), v = (t->sum2 - (double)t->n * m * m) / (double)(t->n - 1);
    return sqrt(v > 0 ? v : 0) / sqrt((double)t->n);
}

static double log_binomial_pmf(uint64_t n, uint64_t k, double p)
{
    return lgamma((double)n + 1) - lgamma((double)k + 1) - lgamma((double)(n - k) + 1) +
           (double)k * log(p) + (double)(n - k) * log1p(-p);
}

/* The acceptance band [lo, hi] for X ~ Binomial(n, p): P(X < lo) <= a and P(X > hi) <= a. */
static void binomial_band(uint64_t n, double p, double a, uint64_t *lo, uint64_t *hi)
{
    double cdf = 0;
    *lo = 0;
    for (uint64_t k = 0; k <= n; k++) {
        cdf += exp(log_binomial_pmf(n, k, p));
        if (cdf > a) {
            *lo = k;
            break;
        }
    }
    double tail = 0;
    *hi = n;
    for (uint64_t k = n + 1; k-- > 0;) {
        tail += exp(log_binomial_pmf(n, k, p));
        if (tail > a) {
            *hi = k;
            break;
        }
    }
}

/* ---- reporting ----------------------------------------------------------------------------- */

static void table_header(void)
{
    fprintf(table, "| workload | estimate | rate | seeds | live samples/seed | mean est/truth | "
                   "SE (exact) | SE (measured) | seed 0 | seeds within 5 %% | 95 %% CI coverage | "
                   "accepted |\n");
    fprintf(table, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
}

static void table_row(const char *workload, const char *what, uint64_t rate, const struct tally *t,
                      const char *band)
{
    char cov[32] = "n/a";
    if (t->with_interval)
        snprintf(cov, sizeof cov, "%.2f %%", 100.0 * (double)t->covered / (double)t->with_interval);
    fprintf(table,
            "| %s | %s | %" PRIu64 " | %" PRIu64 " | %.0f | %.5f | %.5f | %.5f | %+.2f %% | "
            "%.1f %% | %s | %s |\n",
            workload, what, rate, t->n, (double)t->samples / (double)(t->n ? t->n : 1),
            tally_mean(t), tally_se(t), tally_se_measured(t), 100 * t->first_err,
            100.0 * (double)t->within5 / (double)(t->n ? t->n : 1), cov, band);
    fflush(table);
}

/* ---- driving the engine -------------------------------------------------------------------- */

/* An allocation (size > 0) or free (size 0) of a block slot by a site. */
struct op {
    uint32_t slot, site;
    uint64_t size;
};

struct seed_ctx {
    uint64_t index; /* seed number */
    double scale;   /* of the workload's block counts (seed 0 may be larger) */
    uint64_t data;  /* test-data generator */
    char *base;     /* fake block addresses, STRIDE bytes apart; never touched */
    uint64_t nslots;
    uint64_t *live_size; /* per slot; 0 = free */
    uint8_t *live_site;
    /* The workload is generated first, then executed from one place (execute()), so all
     * allocations of a site have one stack however the generator is written. */
    struct op *ops;
    size_t nops, cap, run_begin, run_end;
    /* results */
    struct est_result bytes, count, site_bytes[MAX_SITES], site_count[MAX_SITES];
    unsigned split_sites;   /* sites whose live samples came from more than one stack */
    unsigned foreign_sites; /* live samples from a stack that is none of the sites */
    uint64_t live_after_free;
};

/* The leaf of every site's call chain: performs a run of one site's operations as the hooks
 * would. */
TEST_KEEP_FRAME static void apply_ops(struct seed_ctx *c)
{
    for (size_t i = c->run_begin; i < c->run_end; i++) {
        const struct op *o = &c->ops[i];
        void *p = c->base + (uint64_t)o->slot * STRIDE;
        if (o->size == 0) {
            memprof__on_free(p);
            c->live_size[o->slot] = 0;
        } else {
            memprof__on_alloc(p, o->size);
            c->live_size[o->slot] = o->size;
            c->live_site[o->slot] = (uint8_t)o->site;
        }
    }
    __asm__ volatile("" ::: "memory");
}

static void chain(struct seed_ctx *c, unsigned site, unsigned level);

/* One level of the chain for a 0 or 1 bit of the site number: distinct return addresses,
 * so each site's allocations have their own stack. */
TEST_KEEP_FRAME static void via_bit0(struct seed_ctx *c, unsigned site, unsigned level)
{
    chain(c, site, level + 1);
    __asm__ volatile("" ::: "memory");
}

TEST_KEEP_FRAME static void via_bit1(struct seed_ctx *c, unsigned site, unsigned level)
{
    chain(c, site, level + 1);
    __asm__ volatile("" ::: "memory");
}

TEST_KEEP_FRAME static void chain(struct seed_ctx *c, unsigned site, unsigned level)
{
    if (level == SITE_BITS)
        apply_ops(c);
    else if ((site >> level) & 1)
        via_bit1(c, site, level);
    else
        via_bit0(c, site, level);
    __asm__ volatile("" ::: "memory");
}

/* Runs the generated operations, each run of one site's through that site's chain. */
TEST_KEEP_FRAME static void execute(struct seed_ctx *c)
{
    for (size_t i = 0; i < c->nops;) {
        size_t j = i + 1;
        while (j < c->nops && c->ops[j].site == c->ops[i].site)
            j++;
        c->run_begin = i;
        c->run_end = j;
        chain(c, c->ops[i].site, 0);
        i = j;
    }
    c->nops = 0;
}

static void emit(struct seed_ctx *c, unsigned site, uint32_t slot, uint64_t size)
{
    if (c->nops == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 65536;
        c->ops = realloc(c->ops, c->cap * sizeof *c->ops);
        if (!c->ops)
            abort();
    }
    c->ops[c->nops++] = (struct op){.slot = slot, .site = site, .size = size};
}

static void emit_alloc(struct seed_ctx *c, unsigned site, uint32_t slot, uint64_t size)
{
    emit(c, site, slot, size);
}

/* A free needs no stack: it joins the current run. */
static void emit_free(struct seed_ctx *c, uint32_t slot)
{
    emit(c, c->nops ? c->ops[c->nops - 1].site : 0, slot, 0);
}

/* Site number of a stack, decoded from the chain's frames (leaf first: apply_ops, chain,
 * then via_bitN for bit 5 down to bit 0); -1 if it is not a site's stack. */
static int decode_site(const memprof_snapshot *s, uint32_t stack_id)
{
    int depth = memprof_snapshot_stack_depth(s, stack_id);
    unsigned site = 0, level = SITE_BITS;
    bool leaf = false;
    for (int i = 0; i < depth; i++) {
        memprof_frame f = {.size = sizeof f};
        if (memprof_snapshot_frame(s, stack_id, (size_t)i, &f) != 0 || !f.function)
            continue;
        if (strncmp(f.function, "memprof__", 9) == 0 && (f.flags & MEMPROF_FRAME_INLINED)) {
            continue; /* the hook's fast path, inlined into the leaf */
        } else if (strncmp(f.function, "apply_ops", 9) == 0) {
            leaf = true; /* also its cold part, apply_ops.cold */
        } else if (strncmp(f.function, "via_bit", 7) == 0 && level > 0) {
            level--;
            site |= (unsigned)(f.function[7] == '1') << level;
        }
    }
    return leaf && level == 0 ? (int)site : -1;
}

/* Stack id -> site + 2 (0 = not decoded yet, 1 = none); stack ids are stable. */
static uint8_t *site_of_stack;
static size_t site_of_stack_cap;

static int site_of(const memprof_snapshot *s, uint32_t stack_id)
{
    if (stack_id >= site_of_stack_cap) {
        size_t cap = site_of_stack_cap ? site_of_stack_cap : 1024;
        while (cap <= stack_id)
            cap *= 2;
        site_of_stack = realloc(site_of_stack, cap);
        memset(site_of_stack + site_of_stack_cap, 0, cap - site_of_stack_cap);
        site_of_stack_cap = cap;
    }
    if (!site_of_stack[stack_id])
        site_of_stack[stack_id] = (uint8_t)(decode_site(s, stack_id) + 2);
    return site_of_stack[stack_id] - 2;
}

/* Takes a snapshot of the live blocks and records the truth, the estimates and the exact
 * variances, then frees every block. */
static void measure_and_free(struct seed_ctx *c, uint64_t rate)
{
    struct est_result *b = &c->bytes, *n = &c->count;
    uint64_t last_size = 0;
    double last_p = 0;
    for (uint64_t i = 0; i < c->nslots; i++) {
        uint64_t size = c->live_size[i];
        if (!size)
            continue;
        unsigned site = c->live_site[i];
        if (size != last_size) { /* many equal sizes in a row: spare the expm1() */
            last_size = size;
            last_p = memprof__est_prob(size, rate);
        }
        double p = last_p, q = (1 - p) / p, s = (double)size;
        b->truth += s;
        b->var += s * s * q;
        n->truth += 1;
        n->var += q;
        c->site_bytes[site].truth += s;
        c->site_bytes[site].var += s * s * q;
        c->site_count[site].truth += 1;
        c->site_count[site].var += q;
    }
    memprof_snapshot *snap = NULL;
    if (EXPECT_EQ(memprof_get_snapshot(&snap), 0)) {
        memprof_estimate e = {.size = sizeof e};
        EXPECT_EQ(memprof_snapshot_estimate(snap, &e), 0);
        *b = (struct est_result){b->truth,
                                 (double)e.bytes,
                                 (double)e.bytes_low,
                                 (double)e.bytes_high,
                                 b->var,
                                 e.live_samples,
                                 true};
        *n = (struct est_result){n->truth,
                                 (double)e.count,
                                 (double)e.count_low,
                                 (double)e.count_high,
                                 n->var,
                                 e.live_samples,
                                 true};
        for (size_t i = 0; i < memprof_snapshot_site_count(snap); i++) {
            memprof_site_info si = {.size = sizeof si};
            EXPECT_EQ(memprof_snapshot_site(snap, i, &si), 0);
            if (si.live_samples == 0)
                continue;
            int k = site_of(snap, si.stack_id);
            if (k < 0) {
                c->foreign_sites++;
                continue;
            }
            struct est_result *sb = &c->site_bytes[k], *sc = &c->site_count[k];
            c->split_sites += sb->samples != 0;
            sb->est += (double)si.live_bytes;
            sb->lo = (double)si.live_bytes_low;
            sb->hi = (double)si.live_bytes_high;
            sb->samples += si.live_samples;
            sb->has_interval = true;
            sc->est += (double)si.live_count;
            sc->samples += si.live_samples;
        }
        memprof_free_snapshot(snap);
    }
    /* A site with no live samples estimates zero; its "interval" [0, 0] misses the truth. */
    for (unsigned k = 0; k < MAX_SITES; k++)
        c->site_bytes[k].has_interval = c->site_bytes[k].truth > 0;
    for (uint64_t i = 0; i < c->nslots; i++)
        if (c->live_size[i])
            emit_free(c, (uint32_t)i);
    execute(c);
    memprof_stats st = {.size = sizeof st};
    memprof_get_stats(&st);
    c->live_after_free = st.live_samples;
}

/* ---- workloads ----------------------------------------------------------------------------- */

struct workload {
    const char *name;
    uint64_t rate;
    unsigned nsites;
    uint64_t nslots;                 /* blocks live at once, at most (at scale 1) */
    double first_scale;              /* seed 0's scale (0 = 1) */
    void (*run)(struct seed_ctx *c); /* allocates; the driver measures and frees */
    const char *const *site_names;   /* NULL: "site k" */
};

static double rand_normal(uint64_t *data)
{
    double u = test_rand_unit(data), v = test_rand_unit(data);
    return sqrt(-2.0 * log1p(-u)) * cos(6.283185307179586 * v);
}

static uint64_t log_uniform(uint64_t *data, double lo, double hi)
{
    return (uint64_t)(lo * exp(log(hi / lo) * test_rand_unit(data)));
}

/* Pareto with index alpha from xm, truncated at cap: infinite variance for alpha < 2. */
static uint64_t pareto(uint64_t *data, double xm, double alpha, double cap)
{
    double x = xm * pow(1.0 - test_rand_unit(data), -1.0 / alpha);
    return (uint64_t)(x < cap ? x : cap);
}

/* 64 B blocks at 4 KiB: p = 0.0155, ~1080 live samples; seed 0 has 9x as many (~9800),
 * so that 5 % is 4.5 standard deviations of its estimate. */
enum { FIXED_N = 70000, FIXED_FIRST_SCALE = 9 };
static void run_fixed(struct seed_ctx *c)
{
    for (uint32_t i = 0; i < (uint32_t)(FIXED_N * c->scale); i++)
        emit_alloc(c, 0, i, 64);
}

/* 32x to 512x the rate (2 to 32 MiB at 64 KiB), the first block exactly 32x: every block
 * is sampled with p >= 1 - e^-32 and the estimate is exact. */
enum { LARGE_N = 1000 };
static void run_large(struct seed_ctx *c)
{
    const uint64_t rate = 64 * KIB;
    for (uint32_t i = 0; i < LARGE_N; i++)
        emit_alloc(c, 0, i, i == 0 ? 32 * rate : 32 * rate + test_rand_below(&c->data, 480 * rate));
}

/* A heavy-tailed mix at 4 KiB: 96.5 % log-normal around 200 B (16 B and up), 3 %
 * log-uniform 1 KiB..1 MiB, 0.5 % Pareto (alpha 1.2) from 256 KiB to 256 MiB. The tail
 * holds most bytes, the small blocks most allocations (and most of the count's variance),
 * the middle most of the bytes' variance. Each class is a site. */
enum { HEAVY_N = 30000 };
static const uint64_t HEAVY_RATE = 4 * KIB;
static const char *const heavy_sites[] = {"heavy: log-normal 16 B+", "heavy: 1 KiB-1 MiB",
                                          "heavy: Pareto tail"};
static void run_heavy(struct seed_ctx *c)
{
    for (uint32_t i = 0; i < HEAVY_N; i++) {
        double u = test_rand_unit(&c->data);
        if (u < 0.965) {
            double s = exp(log(200.0) + 1.2 * rand_normal(&c->data));
            emit_alloc(c, 0, i, s < 16 ? 16 : (uint64_t)s);
        } else if (u < 0.995) {
            emit_alloc(c, 1, i, log_uniform(&c->data, 1024, 1024 * 1024));
        } else {
            emit_alloc(c, 2, i, pareto(&c->data, 256.0 * 1024, 1.2, 256.0 * 1024 * 1024));
        }
    }
}

/* 50 sites at 4 KiB, site k of typical size 32 B * 2^(14k/49) (32 B to 512 KiB), by k mod
 * 4 fixed, uniform (0.5x-1.5x), log-uniform (0.25x-4x) or Pareto (alpha 1.5, 0.5x-64x),
 * each with its own count: 20 + k / 2 blocks plus enough for a relative variance of 1 %
 * per seed, 100 (1 - p) / p (about 100 samples where p is small). */
enum { SITES = 50 };
static const uint64_t SITES_RATE = 4 * KIB;

static double site_scale(unsigned k)
{
    return 32.0 * exp2(14.0 * k / (SITES - 1));
}

static uint64_t site_blocks(unsigned k)
{
    double p = memprof__est_prob((uint64_t)site_scale(k), SITES_RATE);
    return 20 + k / 2 + (uint64_t)(100 * (1 - p) / p);
}

static uint64_t site_size(uint64_t *data, unsigned k)
{
    double x = site_scale(k);
    switch (k % 4) {
    case 0:
        return (uint64_t)x;
    case 1:
        return (uint64_t)(x * (0.5 + test_rand_unit(data)));
    case 2:
        return log_uniform(data, x / 4, 4 * x);
    default:
        return pareto(data, x / 2, 1.5, 64 * x);
    }
}

static uint64_t sites_slots(void)
{
    uint64_t n = 0;
    for (unsigned k = 0; k < SITES; k++)
        n += site_blocks(k);
    return n;
}

static void run_sites(struct seed_ctx *c)
{
    uint32_t slot = 0;
    for (unsigned k = 0; k < SITES; k++)
        for (uint64_t i = 0, n = site_blocks(k); i < n; i++)
            emit_alloc(c, k, slot++, site_size(&c->data, k));
}

/* Churn at 4 KiB: a live set of 13500 blocks (site 0: 12000 of 64 B-2 KiB, site 1: 1500
 * of 2 KiB-256 KiB, log-uniform) in which 6750 random blocks are freed and replaced by new
 * ones of the same site; the truth is the live set at the snapshot. Addresses are reused,
 * as malloc does. */
enum { CHURN_LIVE = 13500, CHURN_STEPS = 6750 };
static const char *const churn_sites[] = {"churn: 64 B-2 KiB", "churn: 2 KiB-256 KiB"};

static uint64_t churn_size(uint64_t *data, unsigned site)
{
    return site ? log_uniform(data, 2048, 256 * 1024) : log_uniform(data, 64, 2048);
}

static void run_churn(struct seed_ctx *c)
{
    for (uint32_t i = 0; i < CHURN_LIVE; i++)
        emit_alloc(c, i % 9 == 0, i, churn_size(&c->data, i % 9 == 0));
    for (uint32_t t = 0; t < CHURN_STEPS; t++) {
        uint32_t i = (uint32_t)test_rand_below(&c->data, CHURN_LIVE);
        emit_free(c, i);
        emit_alloc(c, i % 9 == 0, i, churn_size(&c->data, i % 9 == 0));
    }
}

/* ---- running a workload over many seeds ---------------------------------------------------- */

struct run_results {
    struct tally bytes, count, site_bytes[MAX_SITES], site_count[MAX_SITES];
    uint64_t site_covered, site_trials; /* per-site intervals, pooled over sites and seeds */
    unsigned split_sites, foreign_sites, leftover_seeds;
};

struct thread_arg {
    const struct workload *w;
    struct seed_ctx *c;
};

static void *seed_thread(void *arg)
{
    struct thread_arg *a = arg;
    a->w->run(a->c);
    execute(a->c);
    measure_and_free(a->c, a->w->rate);
    return NULL;
}

static int start_engine(uint64_t rate, uint64_t seed, uint64_t capacity)
{
    memprof_config cfg;
    memprof_config_init(&cfg);
    cfg.sampling_rate = rate;
    cfg.seed = seed;
    cfg.heap_map_capacity = capacity;
    cfg.unwinder = MEMPROF_UNWIND_FP; /* fast; the test is built with frame pointers */
    int rc = memprof_init_config(&cfg);
    if (rc == 0) {
        memprof__backend_register();
        rc = memprof_start();
    }
    return rc;
}

static void run_workload(const struct workload *w, uint64_t engine_seed, struct run_results *r)
{
    memset(r, 0, sizeof *r);
    CHECK_EQ(start_engine(w->rate, engine_seed, (uint64_t)1 << 16), 0);
    struct seed_ctx *c = calloc(1, sizeof *c);
    double first_scale = w->first_scale > 1 ? w->first_scale : 1;
    c->nslots = (uint64_t)ceil((double)w->nslots * first_scale);
    c->base = mmap(NULL, c->nslots * STRIDE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    c->live_size = calloc(c->nslots, sizeof *c->live_size);
    c->live_site = calloc(c->nslots, 1);
    CHECK(c->base != MAP_FAILED && c->live_size && c->live_site);
    for (uint64_t s = 0; s < n_seeds; s++) {
        memset(c->live_site, 0, c->nslots);
        size_t keep = offsetof(struct seed_ctx, bytes);
        memset((char *)c + keep, 0, sizeof *c - keep);
        c->index = s;
        c->scale = s == 0 ? first_scale : 1;
        c->data = engine_seed * 0x100000001b3ull + s;
        pthread_t th;
        struct thread_arg a = {w, c};
        CHECK_EQ(pthread_create(&th, NULL, seed_thread, &a), 0);
        pthread_join(th, NULL);
        tally_add(&r->bytes, &c->bytes);
        tally_add(&r->count, &c->count);
        for (unsigned k = 0; k < w->nsites; k++) {
            tally_add(&r->site_bytes[k], &c->site_bytes[k]);
            tally_add(&r->site_count[k], &c->site_count[k]);
            const struct est_result *sb = &c->site_bytes[k];
            /* Sites estimated exactly (all blocks >= 32x the rate) say nothing about coverage. */
            if (sb->has_interval && sqrt(sb->var) > 1e-6 * sb->truth) {
                r->site_trials++;
                r->site_covered += sb->lo <= sb->truth && sb->truth <= sb->hi;
            }
        }
        r->split_sites += c->split_sites;
        r->foreign_sites += c->foreign_sites;
        r->leftover_seeds += c->live_after_free != 0;
    }
    munmap(c->base, c->nslots * STRIDE);
    free(c->live_size);
    free(c->live_site);
    free(c->ops);
    free(c);
    memprof_stats st = {.size = sizeof st};
    EXPECT_EQ(memprof_get_stats(&st), 0);
    EXPECT_EQ_U(st.heap_map_full_drops, 0);
    EXPECT_EQ_U(st.stack_table_overflows, 0);
    EXPECT_EQ_U(r->split_sites, 0);
    EXPECT_EQ_U(r->foreign_sites, 0);
    EXPECT_EQ_U(r->leftover_seeds, 0);
}

/* ---- checks -------------------------------------------------------------------------------- */

/* The mean of est / truth is within `tol` of 1 and within Z_MEAN exact standard errors, and
 * tol is at least Z_MEAN of them wide (else the check could fail a correct engine). The
 * engine reports whole bytes and allocations: rounding to the nearest may shift a mean by up
 * to half a unit (noticeable for a site's count of ~100 blocks that are nearly all sampled,
 * where sum 1/p is a little over the number of samples and rounds down), so that much is
 * allowed beyond the Z_MEAN standard errors. */
static void expect_mean(const char *what, const struct tally *t, double tol)
{
    double mean = tally_mean(t), se = tally_se(t);
    printf("  %s: mean est/truth %.5f over %" PRIu64 " seeds, exact SE %.5f (measured %.5f); "
           "off by %.1f SE, tolerance %.2f %% = %.1f SE\n",
           what, mean, t->n, se, tally_se_measured(t), se > 0 ? fabs(mean - 1) / se : 0.0,
           100 * tol, se > 0 ? tol / se : INFINITY);
    EXPECT(t->n == n_seeds);
    EXPECT(Z_MEAN * se <= tol);
    EXPECT(fabs(mean - 1) <= tol);
    EXPECT(fabs(mean - 1) <= Z_MEAN * se + t->round_sum / (double)t->n);
}

/* Seed 0 alone is within 5 %, from at least 1000 live samples, where 5 % is at least 4.5 of
 * its exact standard deviations (a correct engine misses with probability < 7e-6). */
static void expect_first_seed(const char *what, const struct tally *t)
{
    printf("  %s, seed 0: %" PRIu64 " live samples, est/truth - 1 = %+.3f %% (sd %.3f %%); "
           "%" PRIu64 " of %" PRIu64 " seeds within 5 %%\n",
           what, t->first_samples, 100 * t->first_err, 100 * t->first_sd, t->within5, t->n);
    EXPECT(t->first_samples >= 1000);
    EXPECT(4.5 * t->first_sd <= 0.05);
    EXPECT(fabs(t->first_err) <= 0.05);
}

/* The 95 % intervals covered the truth in a number of seeds a correct interval gives with
 * probability >= 1 - 2a. Writes the band as text for the table. */
static void expect_coverage(const char *what, uint64_t covered, uint64_t n, double a, char *band,
                            size_t len)
{
    uint64_t lo, hi;
    binomial_band(n, 0.95, a, &lo, &hi);
    double flo = (double)lo / (double)n, fhi = (double)hi / (double)n;
    printf("  %s: %" PRIu64 " of %" PRIu64 " intervals cover the truth (%.2f %%); accepted "
           "%" PRIu64 "-%" PRIu64 " (%.2f-%.2f %%)\n",
           what, covered, n, 100.0 * (double)covered / (double)n, lo, hi, 100 * flo, 100 * fhi);
    snprintf(band, len, "%.1f-%.1f %%", 100 * flo, 100 * fhi);
    EXPECT(n == n_seeds);
    /* The band must mean something: within 93-97 % in the long run, 89.5-99 % in CI (so
     * it rejects intervals that are 1.65 or 2.6 sd wide, i.e. 90 % or 99 % ones, in the long
     * run, and grossly wrong ones in CI). */
    EXPECT(flo >= (long_run ? 0.925 : 0.895));
    EXPECT(fhi <= (long_run ? 0.975 : 0.99));
    EXPECT(covered >= lo && covered <= hi);
}

static const char *site_name(const struct workload *w, unsigned k, char *buf, size_t len)
{
    if (w->site_names)
        return w->site_names[k];
    snprintf(buf, len, "site %u (%s, ~%.0f B, %" PRIu64 " blocks)", k,
             (const char *[]){"fixed", "uniform", "log-uniform", "Pareto"}[k % 4], site_scale(k),
             site_blocks(k));
    return buf;
}

/* The whole-heap checks, and per site: the mean estimate of bytes and of allocations within
 * `site_tol`, and the coverage of the sites' intervals pooled over sites and seeds. */
static void check_workload(const struct workload *w, const struct run_results *r, double site_tol,
                           bool coverage_checks)
{
    const double a = ALPHA / 2 / 2; /* each tail of the two coverage checks */
    char bb[64] = "exact", cb[64] = "exact";
    expect_mean("live bytes", &r->bytes, 0.01);
    expect_mean("live allocations", &r->count, 0.01);
    expect_first_seed("live bytes", &r->bytes);
    if (coverage_checks) {
        expect_coverage("bytes", r->bytes.covered, r->bytes.with_interval, a, bb, sizeof bb);
        expect_coverage("allocations", r->count.covered, r->count.with_interval, a, cb, sizeof cb);
    }
    table_row(w->name, "live bytes", w->rate, &r->bytes, bb);
    table_row(w->name, "live allocations", w->rate, &r->count, cb);
    if (w->nsites < 2)
        return;
    double worst = 0;
    for (unsigned k = 0; k < w->nsites; k++) {
        char buf[96], what[160];
        const char *name = site_name(w, k, buf, sizeof buf);
        snprintf(what, sizeof what, "%s bytes", name);
        expect_mean(what, &r->site_bytes[k], site_tol);
        if (long_run)
            table_row(w->name, what, w->rate, &r->site_bytes[k], "-");
        snprintf(what, sizeof what, "%s allocations", name);
        expect_mean(what, &r->site_count[k], site_tol);
        if (long_run)
            table_row(w->name, what, w->rate, &r->site_count[k], "-");
        worst = fmax(worst, fmax(fabs(tally_mean(&r->site_bytes[k]) - 1),
                                 fabs(tally_mean(&r->site_count[k]) - 1)));
    }
    printf("  worst per-site mean deviation: %.2f %% (tolerance %.0f %%)\n", 100 * worst,
           100 * site_tol);
    /* Pooled over sites and seeds, the trials are many (up to ~87,000). The site intervals
     * (export/interval.h) guarantee 95 % also where whole blocks of a few times the rate go
     * unsampled, which makes them conservative for such sites (they cover ~99 % there,
     * doc/statistics.md): the band allows a true coverage anywhere in 94-98 % plus the
     * binomial noise around it, and still fails an interval that under-covers. */
    uint64_t n = r->site_trials, lo, hi, unused;
    binomial_band(n, 0.94, ALPHA / 4, &lo, &unused);
    binomial_band(n, 0.98, ALPHA / 4, &unused, &hi);
    double cov = (double)r->site_covered / (double)(n ? n : 1);
    double flo = (double)lo / (double)(n ? n : 1), fhi = (double)hi / (double)(n ? n : 1);
    printf("  per-site bytes: %" PRIu64 " of %" PRIu64 " site intervals cover the truth "
           "(%.2f %%); accepted %.2f-%.2f %%\n",
           r->site_covered, n, 100 * cov, 100 * flo, 100 * fhi);
    EXPECT(n >= 2 * (uint64_t)n_seeds);
    /* The lower end is what matters (an interval that under-covers); with a few hundred
     * trials in CI the upper end of the band nears 100 %. */
    EXPECT(flo >= 0.90 && fhi <= 0.999);
    EXPECT(r->site_covered >= lo && r->site_covered <= hi);
    fprintf(table,
            "| %s | per-site bytes and allocations (%u sites) | %" PRIu64 " | %u | | worst "
            "site mean off by %.2f %% | | | | | %.2f %% (pooled) | %.1f-%.1f %% |\n",
            w->name, w->nsites, w->rate, n_seeds, 100 * worst, 100 * cov, 100 * flo, 100 * fhi);
    fflush(table); /* a forked case ends with _exit() */
}

/* ---- test cases ---------------------------------------------------------------------------- */

static void test_64_byte_blocks_are_estimated_accurately(void)
{
    const struct workload w = {"64 B blocks",     4 * KIB,   1,   FIXED_N,
                               FIXED_FIRST_SCALE, run_fixed, NULL};
    struct run_results *r = calloc(1, sizeof *r);
    run_workload(&w, 101, r);
    check_workload(&w, r, 0.03, true);
    free(r);
}

static void test_blocks_of_32x_the_rate_and_more_are_exact(void)
{
    const struct workload w = {"32x-512x the rate", 64 * KIB, 1, LARGE_N, 1, run_large, NULL};
    struct run_results *r = calloc(1, sizeof *r);
    run_workload(&w, 202, r);
    /* Every block is sampled: exact to the byte, every seed, intervals included. */
    EXPECT(r->bytes.sum2 == (double)r->bytes.n && r->bytes.sum == (double)r->bytes.n);
    EXPECT(r->count.sum == (double)r->count.n && r->count.sum2 == (double)r->count.n);
    EXPECT_EQ_U(r->bytes.covered, r->bytes.n);
    EXPECT_EQ_U(r->count.covered, r->count.n);
    EXPECT_EQ_U(r->bytes.samples, (uint64_t)LARGE_N * r->bytes.n);
    check_workload(&w, r, 0.03, false);
    free(r);
}

static void test_a_heavy_tailed_mix_is_estimated_accurately(void)
{
    const struct workload w = {"heavy-tailed mix", HEAVY_RATE, 3, HEAVY_N, 1,
                               run_heavy,          heavy_sites};
    struct run_results *r = calloc(1, sizeof *r);
    run_workload(&w, 303, r);
    check_workload(&w, r, 0.03, true);
    free(r);
}

static void test_fifty_sites_are_each_estimated_accurately(void)
{
    const struct workload w = {"50 sites", SITES_RATE, SITES, sites_slots(), 1, run_sites, NULL};
    struct run_results *r = calloc(1, sizeof *r);
    run_workload(&w, 404, r);
    check_workload(&w, r, 0.03, true);
    free(r);
}

static void test_churn_leaves_an_accurate_live_estimate(void)
{
    const struct workload w = {"churn", 4 * KIB, 2, CHURN_LIVE, 1, run_churn, churn_sites};
    struct run_results *r = calloc(1, sizeof *r);
    run_workload(&w, 505, r);
    check_workload(&w, r, 0.03, true);
    free(r);
}

/* The profiler's own allocations on a user thread (made under the re-entrancy guard, e.g.
 * while a snapshot is written or symbols are resolved) reach the hooks and may use up the
 * thread's sample point; they are never sampled, and the user's next allocation must still
 * be sampled with probability p(size), not for certain: else every snapshot write would add
 * a phantom sample weighing about the rate to whatever the thread allocates next. */
static void *guarded_then_small(void *arg)
{
    char *base = arg;
    for (uint32_t i = 0; i < 20000; i++) {
        uint8_t g = memprof__guard_enter();
        memprof__on_alloc(base, MIB); /* the profiler's own block: never recorded */
        memprof__guard_leave(g);
        memprof__on_alloc(base + (i + 1) * STRIDE, 64);
    }
    for (uint32_t i = 0; i < 20000; i++)
        memprof__on_free(base + (i + 1) * STRIDE);
    return NULL;
}

static void test_profiler_allocations_do_not_bias_the_next_sample(void)
{
    CHECK_EQ(start_engine(16 * KIB, 606, (uint64_t)1 << 16), 0);
    char *base =
        mmap(NULL, 20001 * STRIDE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(base != MAP_FAILED);
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, guarded_then_small, base), 0);
    pthread_join(th, NULL);
    memprof_stats st = {.size = sizeof st};
    CHECK_EQ(memprof_get_stats(&st), 0);
    /* 20000 blocks of 64 B at 16 KiB: 78 samples expected (sd 8.8); accept 5 sd. */
    double expect = 20000 * memprof__est_prob(64, 16 * KIB), sd = sqrt(expect);
    printf("  %" PRIu64 " of 20000 small blocks sampled after a guarded 1 MiB allocation "
           "each (expected %.0f +- %.0f), %" PRIu64 " guarded allocations skipped\n",
           st.total_samples, expect, sd, st.reentrant_skips);
    EXPECT(st.reentrant_skips > 19000);
    EXPECT(fabs((double)st.total_samples - expect) <= 5 * sd);
    munmap(base, 20001 * STRIDE);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_64_byte_blocks_are_estimated_accurately),
        TEST_CASE(test_blocks_of_32x_the_rate_and_more_are_exact),
        TEST_CASE(test_a_heavy_tailed_mix_is_estimated_accurately),
        TEST_CASE(test_fifty_sites_are_each_estimated_accurately),
        TEST_CASE(test_churn_leaves_an_accurate_live_estimate),
        TEST_CASE(test_profiler_allocations_do_not_bias_the_next_sample),
    };
    if (argc > 1 && strcmp(argv[1], "--long") == 0) {
        long_run = true;
        n_seeds = 2000;
        argv[1] = argv[0];
        argv++;
        argc--;
        table = tmpfile();
        if (!table)
            return 1;
    } else {
        table = stdout;
    }
    int rc = TEST_MAIN(cases, true);
    if (long_run) {
        printf("\n## Estimator accuracy: %u seeds per workload\n\n", n_seeds);
        fflush(stdout);
        FILE *rows = table;
        table = stdout;
        table_header();
        rewind(rows);
        char line[1024];
        while (fgets(line, sizeof line, rows))
            fputs(line, stdout);
        fclose(rows);
    }
    return rc;
}
