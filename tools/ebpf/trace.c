/* SPDX-License-Identifier: MIT */
/*
 * One eBPF trace (trace.h): session.c in the kernel, procmaps.c and record.c here, and the
 * command's own symbolizer, writers and summary at the end (cli.h), so a profile of this
 * mode is written, read back and compared like any other. The maps of the process are read
 * when its first record arrives, not at the start: `run --ebpf` starts tracing before the
 * exec, when the process is still a copy of this one.
 */
#define _GNU_SOURCE
#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/values.h"
#include "cli.h"
#include "dwarfscan.h"
#include "ebpf_cli.h"
#include "elfscan.h"
#include "offline/symbolize.h"
#include "procmaps.h"
#include "record.h"
#include "session.h"

#define LIVE_ENTRIES 262144 /* live samples the kernel map holds: 128 GiB at 512 KiB */
#define MAX_SEEN     1024   /* files scanned for entry points */
#define MAX_RESCAN   512    /* mapped files one rescan looks at */
#define TEXT_TOP     20

struct memprof_ebpf_trace {
    struct memprof_ebpf_session *session;
    struct memprof_ebpf_maps maps;
    bool maps_ready;
    struct memprof_ebpf_record *record;
    pid_t pid;
    uint64_t rate, start_ns;
    int record_err;
    unsigned libc_probes, rust_probes;
    char libc_where[256], rust_where[256];
    /* Sites from the debug information (dwarfscan.h): how many, how many inlined, how
     * many found but unreadable or over the budget; Rust files without debug info. */
    unsigned dw_sites, dw_inlined, dw_skipped;
    char dw_where[256];
    char inlined_where[256]; /* Rust files whose inlined allocator nothing shows */
    /* Files scanned (by device and inode), so a rescan of the maps probes only new ones;
     * the rescan's list of mapped files. */
    struct seen_file {
        dev_t dev;
        ino_t ino;
    } seen[MAX_SEEN];
    unsigned nseen;
    char (*paths)[PATH_MAX];
    char no_free_where[256]; /* files with a GlobalAlloc::alloc but no ::dealloc */
    /* The functions that called the allocator (each stack's first), checked for frame
     * pointers at the end: how many, how many lack them, the one of those with the most
     * sampled bytes, and the share of the sampled bytes their stacks hold. */
    unsigned fp_checked, fp_missing;
    char fp_example[128];
    double fp_missing_share;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static void note_where(char *buf, size_t size, const char *path)
{
    size_t len = strlen(buf);
    if (len + 1 < size)
        snprintf(buf + len, size - len, "%s%s", len ? ", " : "", base_name(path));
}

/* Each probe is a file descriptor, and a Rust program whose allocator was inlined may
 * have thousands of sites: the soft limit goes up to the hard one. */
static void raise_file_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* The Rust allocator entry points only the debug information of `path` knows: rustc
 * inlined the global allocator into its callers, or left its methods as local functions
 * whose arguments it may have moved. */
static int attach_dwarf_sites(struct memprof_ebpf_trace *t, const char *path,
                              const struct memprof_ebpf_elf *elf)
{
    struct memprof_ebpf_dwarf dw;
    if (memprof__ebpf_dwarf_scan(path, elf, MEMPROF_EBPF_MAX_SITES - t->dw_sites, &dw) != 0)
        return 0;
    t->dw_skipped += (unsigned)(dw.unreadable + dw.over_budget);
    const char *debug = getenv("MEMPROF_EBPF_DEBUG");
    for (size_t i = 0; debug && *debug == '1' && i < dw.nsites; i++) {
        const struct memprof_ebpf_site *d = &dw.sites[i].desc;
        fprintf(stderr,
                "memprof: %s: site %zu at file offset %#" PRIx64 ": kind %u%s%s (entry %u), "
                "size loc %u/%u/%" PRId64 ", ptr loc %u/%u/%" PRId64 "\n",
                base_name(path), i, dw.sites[i].offset, d->kind, d->inlined ? " inlined" : "",
                d->has_result ? " with result" : "", d->entry, d->size.kind, d->size.reg,
                (int64_t)d->size.value, d->ptr.kind, d->ptr.reg, (int64_t)d->ptr.value);
    }
    int n = dw.nsites ? memprof__ebpf_session_attach_sites(t->session, path, &dw) : 0;
    /* Inlined allocations and no free to probe: a dealloc with an empty body (a bump
     * allocator's) leaves no code, so the debug information has no copy of it either. */
    bool frees = false;
    for (size_t i = 0; i < dw.nsites; i++)
        frees |= dw.sites[i].desc.kind == MEMPROF_EBPF_SITE_FREE;
    for (size_t i = 0; i < elf->nprobes; i++)
        frees |= elf->probes[i].kind == MEMPROF_EBPF_PROBE_GA_DEALLOC;
    if (dw.frees_unseen || (dw.inlined && !frees))
        note_where(t->no_free_where, sizeof t->no_free_where, path);
    /* The shims without System's __rdl_* behind them and without a GlobalAlloc method to
     * probe: the global allocator is one rustc inlined, seen only through the debug
     * information. */
    bool shim = false, system = false, method = false;
    for (size_t i = 0; i < elf->nprobes; i++) {
        shim |= strcmp(elf->probes[i].name, "__rust_alloc") == 0;
        system |= strncmp(elf->probes[i].name, "__rdl_", 6) == 0;
        method |= elf->probes[i].kind == MEMPROF_EBPF_PROBE_GA_ALLOC;
    }
    if (shim && !system && !method && !dw.nsites)
        note_where(t->inlined_where, sizeof t->inlined_where, path);
    if (n > 0) {
        t->dw_sites += (unsigned)n;
        t->dw_inlined += (unsigned)dw.inlined;
        note_where(t->dw_where, sizeof t->dw_where, path);
    }
    memprof__ebpf_dwarf_free(&dw);
    return n;
}

/* Whether file `path` was scanned already (by device and inode: the process may name it
 * otherwise than this command did); remembers it when not. */
static bool seen_before(struct memprof_ebpf_trace *t, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return false;
    for (unsigned i = 0; i < t->nseen; i++)
        if (t->seen[i].dev == st.st_dev && t->seen[i].ino == st.st_ino)
            return true;
    if (t->nseen < MAX_SEEN)
        t->seen[t->nseen++] = (struct seen_file){st.st_dev, st.st_ino};
    return false;
}

/* Scans `path` and attaches the probes of its entry points. Returns how many. */
static int probe_file(struct memprof_ebpf_trace *t, const char *path, bool libc_family)
{
    struct memprof_ebpf_elf elf;
    if (seen_before(t, path) || memprof__ebpf_elf_scan(path, libc_family, &elf) != 0)
        return 0;
    int dw = elf.rustc ? attach_dwarf_sites(t, path, &elf) : 0;
    int n = memprof__ebpf_session_attach(t->session, path, &elf);
    if (n <= 0)
        return dw > 0 ? dw : 0;
    unsigned libc = 0, rust = 0, ga_alloc = 0, ga_free = 0;
    for (size_t k = 0; k < elf.nprobes; k++) {
        elf.probes[k].rust ? rust++ : libc++;
        ga_alloc += elf.probes[k].kind == MEMPROF_EBPF_PROBE_GA_ALLOC;
        ga_free += elf.probes[k].kind == MEMPROF_EBPF_PROBE_GA_DEALLOC;
    }
    if (ga_alloc && !ga_free && !strstr(t->no_free_where, base_name(path)))
        note_where(t->no_free_where, sizeof t->no_free_where, path);
    if (libc) {
        t->libc_probes += libc;
        note_where(t->libc_where, sizeof t->libc_where, path);
    }
    if (rust) {
        t->rust_probes += rust;
        note_where(t->rust_where, sizeof t->rust_where, path);
    }
    return n + (dw > 0 ? dw : 0);
}

int memprof__ebpf_trace_rescan(struct memprof_ebpf_trace *t, bool quiet)
{
    if (!t->paths && !(t->paths = malloc(MAX_RESCAN * sizeof *t->paths)))
        return 0;
    unsigned n = memprof__ebpf_mapped_files(t->pid, t->paths, MAX_RESCAN), added = 0;
    for (unsigned i = 0; i < n; i++) {
        if (probe_file(t, t->paths[i], true) <= 0)
            continue;
        added++;
        if (!quiet)
            memprof_cli_error("eBPF probes added in %s (mapped after the start)",
                              base_name(t->paths[i]));
    }
    return (int)added;
}

int memprof__ebpf_trace_start(const char *cmd, pid_t pid, uint64_t rate,
                              const struct memprof_ebpf_file *files, unsigned nfiles,
                              struct memprof_ebpf_trace **out)
{
    *out = NULL;
    struct memprof_ebpf_trace *t = calloc(1, sizeof *t);
    if (!t) {
        memprof_cli_error("%s: out of memory", cmd);
        return CLI_EXIT_FAILURE;
    }
    t->pid = pid;
    t->rate = rate;
    /* MEMPROF_EBPF_LIVE_MAP: another size of the kernel's live map (tests fill it). */
    const char *live_env = getenv("MEMPROF_EBPF_LIVE_MAP");
    unsigned long live = LIVE_ENTRIES;
    if (live_env && (!memprof_cli_parse_uint(live_env, 1ul << 24, &live) || live == 0)) {
        memprof_cli_error("MEMPROF_EBPF_LIVE_MAP='%s': expected entries from 1 to 2^24", live_env);
        free(t);
        return CLI_EXIT_USAGE;
    }
    int err = memprof__ebpf_session_open(pid, rate, (uint32_t)live, &t->session);
    if (err == -EPERM || err == -ENOSYS || err == -EINVAL) {
        memprof_cli_error("%s --ebpf: this process may not load BPF programs (%s): run it as "
                          "root, or with CAP_BPF and CAP_PERFMON",
                          cmd, strerror(-err));
        free(t);
        return CLI_EXIT_NO_BPF;
    }
    if (err) {
        memprof_cli_error("%s --ebpf: cannot load the BPF program: %s", cmd, strerror(-err));
        free(t);
        return CLI_EXIT_FAILURE;
    }
    raise_file_limit();
    for (unsigned i = 0; i < nfiles; i++)
        probe_file(t, files[i].path, files[i].libc);
    if (!t->libc_probes && !t->rust_probes && !t->dw_sites) {
        memprof_cli_error("%s --ebpf: found no allocator entry point to probe (malloc & co. or "
                          "the Rust allocator shims) in %s%s",
                          cmd, nfiles ? files[0].path : "the process",
                          nfiles > 1 ? " or its C library" : "");
        memprof__ebpf_session_close(t->session);
        free(t);
        return CLI_EXIT_FAILURE;
    }
    t->start_ns = now_ns();
    *out = t;
    return 0;
}

static int on_event(void *ctx, const struct memprof_ebpf_event *e)
{
    struct memprof_ebpf_trace *t = ctx;
    if (!t->maps_ready) {
        if (memprof__ebpf_maps_init(&t->maps, t->pid) != 0)
            t->maps.pid = t->pid; /* gone: frames stay addresses */
        t->maps_ready = true;
        if (!(t->record = memprof__ebpf_record_new(&t->maps, t->rate, t->start_ns)))
            return t->record_err = -ENOMEM;
    }
    int err = memprof__ebpf_record_event(t->record, e);
    if (err)
        t->record_err = err;
    return err;
}

int memprof__ebpf_trace_poll(struct memprof_ebpf_trace *t, int timeout_ms)
{
    int n = memprof__ebpf_session_poll(t->session, timeout_ms, on_event, t);
    return n < 0 ? n : t->record_err;
}

void memprof__ebpf_trace_drain(struct memprof_ebpf_trace *t)
{
    while (memprof__ebpf_session_poll(t->session, 0, on_event, t) > 0)
        ;
}

/* Whether the functions that called the allocator keep frame pointers: the first native
 * frame of each stack, judged from its file's call frame information at the call, or without
 * it from the function's first bytes (at most FP_CHECKS functions), weighed by the bytes its
 * stacks sampled. */
#define FP_CHECKS 64
/* The share of the sampled bytes whose stacks lack frame pointers from which the summary
 * says so. */
#define FP_NOTE_SHARE 0.05
static void check_frame_pointers(struct memprof_ebpf_trace *t, const struct memprof_profile *p)
{
    uint64_t seen[FP_CHECKS], missing_bytes[FP_CHECKS];
    bool has_fp[FP_CHECKS];
    uint64_t total = 0, missing = 0, example = 0;
    for (size_t s = 0; s < p->nstacks; s++) {
        const struct memprof_pstack *st = &p->stacks[s];
        total += st->alloc_space;
        const struct memprof_pframe *f = NULL;
        for (uint32_t j = 0; j < st->nframes && !f; j++)
            if (!(p->frames[st->frames[j]].flags & MEMPROF_FRAME_INLINED))
                f = &p->frames[st->frames[j]];
        if (!f || !f->module || !f->function || f->address < f->load_bias + f->sym_offset)
            continue;
        uint64_t start = f->address - f->load_bias - f->sym_offset;
        uint64_t key = start ^ (uint64_t)(uintptr_t)f->module;
        unsigned k = 0;
        while (k < t->fp_checked && seen[k] != key)
            k++;
        if (k == t->fp_checked) {
            if (k == FP_CHECKS)
                continue;
            /* The call frame information at the call, else the function's first bytes. */
            int fp = memprof__ebpf_dwarf_fp_at(f->module, f->address - f->load_bias - 1);
            if (fp < 0)
                fp = memprof__ebpf_elf_fp_prologue(f->module, start);
            if (fp < 0)
                continue;
            seen[k] = key;
            has_fp[k] = fp;
            missing_bytes[k] = 0;
            t->fp_checked++;
            t->fp_missing += !fp;
        }
        if (has_fp[k])
            continue;
        missing += st->alloc_space;
        if ((missing_bytes[k] += st->alloc_space) >= example) {
            example = missing_bytes[k];
            snprintf(t->fp_example, sizeof t->fp_example, "%s", f->function);
        }
    }
    t->fp_missing_share = total ? (double)missing / (double)total : 0;
}

struct write_job {
    const struct memprof_profile *p;
    memprof_format format;
};

static int fill(FILE *out, void *ctx)
{
    const struct write_job *j = ctx;
    return memprof_cli_export(j->p, j->format, out, TEXT_TOP, MEMPROF_VIEW_LIVE, false, false);
}

/* The lines only this mode prints, before the summary. */
static void notes(const struct memprof_ebpf_trace *t, const struct memprof_ebpf_output *o,
                  const uint64_t c[MEMPROF_EBPF_COUNTERS], FILE *out)
{
    fprintf(out, "eBPF probes:");
    if (t->libc_probes)
        fprintf(out, " %u malloc-family entry points (%s)", t->libc_probes, t->libc_where);
    if (t->rust_probes)
        fprintf(out, "%s %u Rust allocator entry points (%s)", t->libc_probes ? ";" : "",
                t->rust_probes, t->rust_where);
    if (t->dw_sites)
        fprintf(out, "%s %u Rust allocator sites from debug information (%s)",
                t->libc_probes || t->rust_probes ? ";" : "", t->dw_sites, t->dw_where);
    fprintf(out, "; %" PRIu64 " allocator calls seen, %" PRIu64 " sampled\n", c[MEMPROF_EBPF_CALLS],
            c[MEMPROF_EBPF_SAMPLES]);
    if (c[MEMPROF_EBPF_NO_ADDRESS])
        fprintf(out,
                "Rust blocks without an address: %" PRIu64 " samples were taken where rustc "
                "inlined the global allocator and the debug information does not say where the "
                "block's address went: they count as live until the end (the allocated view is "
                "right; the live and leak views overstate them). An allocator whose methods are "
                "#[inline(never)] is seen whole.\n",
                c[MEMPROF_EBPF_NO_ADDRESS]);
    if (t->dw_skipped)
        fprintf(out,
                "Rust allocator sites skipped: %u found in the debug information where it does "
                "not say where the size is (or beyond %u sites): allocations there are not "
                "counted.\n",
                t->dw_skipped, MEMPROF_EBPF_MAX_SITES);
    if (t->no_free_where[0])
        fprintf(out,
                "Rust frees unseen: in %s, the debug information shows no block address at "
                "some or all of the places where rustc inlined the global allocator's dealloc "
                "(all of them for an allocator that ignores it, as a bump allocator does): "
                "sampled blocks freed there count as live until the end.\n",
                t->no_free_where);
    if (t->inlined_where[0])
        fprintf(out,
                "Rust allocations unseen: in %s, rustc inlined the global allocator into its "
                "callers (an allocator of the program's own crate, or with #[inline] methods), "
                "which only debug information shows, and there is none about it: build with "
                "-g (-C debuginfo=2).\n",
                t->inlined_where);
    if (o->attached)
        fprintf(out, "Allocations made before the probes were attached are unknown: they are "
                     "not in this profile and their frees are ignored.\n");
    uint64_t map_full = c[MEMPROF_EBPF_DROP_MAP_FULL], ring_full = c[MEMPROF_EBPF_DROP_RING_FULL];
    if (map_full || ring_full || c[MEMPROF_EBPF_STACK_ERRORS] || c[MEMPROF_EBPF_FREE_LOST])
        fprintf(out,
                "eBPF drops: %" PRIu64 " samples lost (live map full %" PRIu64
                ", ring buffer full %" PRIu64 "), %" PRIu64 " samples without a stack, %" PRIu64
                " frees of samples lost (those stay live)\n",
                map_full + ring_full, map_full, ring_full, c[MEMPROF_EBPF_STACK_ERRORS],
                c[MEMPROF_EBPF_FREE_LOST]);
    /* A few allocations from code built without them (libc's own, in a static program) leave
     * the profile's stacks as they are: said when they carry a share of it worth acting on. */
    if (t->fp_missing && t->fp_missing_share >= FP_NOTE_SHARE)
        fprintf(out,
                "Frame pointers: %u of the %u functions that called the allocator (%s...), "
                "with %.0f %% of the sampled bytes, set none up: their own frame (each stack's "
                "first) is right, the callers above them may be missing or wrong. Build with "
                "-fno-omit-frame-pointer (C, C++) or -C force-frame-pointers=yes (Rust).\n",
                t->fp_missing, t->fp_checked, t->fp_example, 100.0 * t->fp_missing_share);
}

int memprof__ebpf_trace_finish(struct memprof_ebpf_trace *t, const struct memprof_ebpf_output *o)
{
    memprof__ebpf_trace_drain(t);
    uint64_t c[MEMPROF_EBPF_COUNTERS];
    memprof__ebpf_session_counters(t->session, c);
    struct memprof_ebpf_health h = {
        .dropped = c[MEMPROF_EBPF_DROP_MAP_FULL] + c[MEMPROF_EBPF_DROP_RING_FULL],
        .stack_errors = c[MEMPROF_EBPF_STACK_ERRORS],
        .free_lost = c[MEMPROF_EBPF_FREE_LOST],
    };
    if (!t->record && !(t->record = memprof__ebpf_record_new(&t->maps, t->rate, t->start_ns))) {
        memprof_cli_error("out of memory");
        return CLI_EXIT_FAILURE;
    }
    struct memprof_profile *raw = NULL, *named = NULL;
    if (t->record_err || memprof__ebpf_record_profile(t->record, now_ns(), &h, &raw) != 0) {
        memprof_cli_error("out of memory while recording samples");
        return CLI_EXIT_FAILURE;
    }
    struct memprof_cli_symbolize s = {.quiet = o->quiet, .format = o->format};
    const struct memprof_profile *p = raw;
    if (memprof_cli_symbolize(raw, &s, &named) == 0 && named)
        p = named;
    check_frame_pointers(t, p);
    struct write_job job = {p, o->format};
    int rc = memprof_cli_write_atomic(o->path, fill, &job) == 0 ? 0 : CLI_EXIT_FAILURE;
    if (rc == 0) {
        char *text = NULL;
        size_t len = 0;
        FILE *mem = open_memstream(&text, &len);
        if (mem) {
            if (!o->quiet) {
                notes(t, o, c, mem);
                memprof_cli_write_summary(p, mem, 5);
            }
            fclose(mem);
        }
        memprof_cli_error("profile of %s (pid %d) written to %s", o->program, (int)t->pid, o->path);
        if (text)
            fwrite(text, 1, len, stderr);
        free(text);
    }
    if (named)
        memprof__profile_symbolized_free(named);
    memprof_cli_symbolize_end(&s);
    memprof__profile_free(raw);
    return rc;
}

void memprof__ebpf_trace_free(struct memprof_ebpf_trace *t)
{
    if (!t)
        return;
    memprof__ebpf_session_close(t->session);
    memprof__ebpf_record_free(t->record);
    memprof__ebpf_maps_free(&t->maps);
    free(t->paths);
    free(t);
}

bool memprof__ebpf_output_path(const char *tmpl, const char *name, memprof_format format, pid_t pid,
                               char *out)
{
    char def[PATH_MAX], expanded[PATH_MAX], cwd[PATH_MAX];
    if (!tmpl) {
        int n = snprintf(def, sizeof def, "memprof.%.200s.%%p%s", name,
                         memprof__format_extension(format));
        if (n < 0 || (size_t)n >= sizeof def)
            return false;
        tmpl = def;
    }
    if (!memprof__expand_path(tmpl, pid, expanded, sizeof expanded, NULL))
        return false;
    if (expanded[0] == '/') {
        memcpy(out, expanded, strlen(expanded) + 1);
        return true;
    }
    if (!getcwd(cwd, sizeof cwd))
        return false;
    int n = snprintf(out, PATH_MAX, "%s/%s", cwd, expanded);
    return n > 0 && n < PATH_MAX;
}
