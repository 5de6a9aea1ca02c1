/* SPDX-License-Identifier: MIT */
/*
 * The public snapshot API: taking and freeing snapshots, their accessors, symbol
 * resolution, and writing a snapshot to a file in one of the export formats (api/output.c:
 * a temporary file in the target directory renamed into place, or a device, FIFO, socket
 * or descriptor written in place).
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/output.h"
#include "api/snapshot_profile.h"
#include "api/values.h"
#include "core/engine.h"
#include "core/sandbox.h"
#include "core/snapshot.h"
#include "export/export.h"
#include "export/interval.h"
#include "export/pprof.h"
#include "memprof/memprof.h"
#include "resolve/stacks.h"
#include "resolve/symbols.h"

#define FIELD_END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

int memprof_get_snapshot(memprof_snapshot **out)
{
    if (!out)
        return -EINVAL;
    uint8_t g = memprof__guard_enter();
    int rc = memprof__snapshot_take(out);
    memprof__guard_leave(g);
    return rc;
}

void memprof_free_snapshot(memprof_snapshot *snapshot)
{
    memprof__snapshot_free(snapshot);
}

size_t memprof_snapshot_live_samples(const memprof_snapshot *snapshot)
{
    return snapshot ? snapshot->nsamples : 0;
}

uint64_t memprof_snapshot_estimated_bytes(const memprof_snapshot *snapshot)
{
    return snapshot ? memprof__est_round(snapshot->total.bytes) : 0;
}

int memprof_snapshot_estimate(const memprof_snapshot *snapshot, memprof_estimate *out)
{
    if (!snapshot || !out || out->size < FIELD_END(memprof_estimate, bytes))
        return -EINVAL;
    const struct memprof_est *t = &snapshot->total;
    memprof_estimate e = {.size = out->size,
                          .live_samples = snapshot->nsamples,
                          .bytes = memprof__est_round(t->bytes),
                          .count = memprof__est_round(t->count),
                          .sampling_rate = snapshot->rate,
                          .timestamp_ns = snapshot->timestamp_ns};
    /* Exact Poisson intervals of the effective sample count (export/interval.h), which hold
     * at any number of samples: bytes with the rate, which separates what the samples prove
     * from the Poisson part; counts without it (a count's weight 1/p has no common scale). */
    struct memprof_interval iv;
    memprof__interval_at_rate(t->bytes, t->bytes_var, t->samples, snapshot->rate, &iv);
    e.bytes_low = iv.lo;
    e.bytes_high = iv.hi;
    e.low_confidence = iv.low_information != 0; /* keyed on information, not on a count */
    memprof__interval(t->count, t->count_var, t->samples, &iv);
    e.count_low = iv.lo;
    e.count_high = iv.hi;
    memcpy(out, &e, out->size < sizeof e ? out->size : sizeof e);
    return 0;
}

int memprof_resolve_symbols(void)
{
    int rc = memprof__engine_readable();
    if (rc)
        return rc;
    uint8_t g = memprof__guard_enter();
    uint64_t before, after, unresolved;
    memprof__sym_counts(&before, &unresolved);
    struct memprof_stacktab *st = &memprof__engine.st;
    uint64_t n = memprof__st_nids(st);
    for (uint64_t id = 0; id < n; id++)
        memprof__resolve_stack(st, (uint32_t)id);
    memprof__sym_counts(&after, &unresolved);
    memprof__guard_leave(g);
    return after - before > INT32_MAX ? INT32_MAX : (int)(after - before);
}

int memprof_snapshot_sample(const memprof_snapshot *snapshot, size_t index,
                            memprof_sample_info *out)
{
    if (!snapshot || !out || out->size < FIELD_END(memprof_sample_info, bytes) ||
        index >= snapshot->nsamples)
        return -EINVAL;
    const struct memprof_snap_sample *smp = &snapshot->samples[index];
    double p = memprof__est_prob(smp->size, snapshot->rate);
    memprof_sample_info info = {
        .size = out->size,
        .bytes = smp->size,
        .estimated_bytes = memprof__est_round((double)smp->size / p),
        .estimated_count = 1.0 / p,
        .timestamp_ns = smp->ts,
        .stack_id = smp->stack_id,
    };
    memcpy(out, &info, out->size < sizeof info ? out->size : sizeof info);
    return 0;
}

size_t memprof_snapshot_site_count(const memprof_snapshot *snapshot)
{
    return snapshot ? snapshot->nsites : 0;
}

int memprof_snapshot_site(const memprof_snapshot *snapshot, size_t index, memprof_site_info *out)
{
    if (!snapshot || !out || out->size < FIELD_END(memprof_site_info, stack_id) ||
        index >= snapshot->nsites)
        return -EINVAL;
    const struct memprof_snap_site *site = &snapshot->sites[index];
    memprof_site_info info = {
        .size = out->size,
        .stack_id = site->stack_id,
        .live_samples = site->live.samples,
        .live_bytes = memprof__est_round(site->live.bytes),
        .live_count = memprof__est_round(site->live.count),
        .alloc_samples = site->alloc_samples,
        .alloc_bytes = site->alloc_est_bytes,
        .alloc_count = site->alloc_est_count,
    };
    struct memprof_interval iv;
    memprof__interval_at_rate(site->live.bytes, site->live.bytes_var, site->live.samples,
                              snapshot->rate, &iv);
    info.live_bytes_low = iv.lo;
    info.live_bytes_high = iv.hi;
    memcpy(out, &info, out->size < sizeof info ? out->size : sizeof info);
    return 0;
}

/* Resolves a stack of the snapshot under the caller's re-entrancy guard. */
static const struct memprof_rstack *snapshot_stack(const memprof_snapshot *snapshot,
                                                   uint32_t stack_id)
{
    uint8_t g = memprof__guard_enter();
    const struct memprof_rstack *r = memprof__resolve_stack(snapshot->stacks, stack_id);
    memprof__guard_leave(g);
    return r;
}

int memprof_snapshot_stack_depth(const memprof_snapshot *snapshot, uint32_t stack_id)
{
    if (!snapshot || !memprof__st_get(snapshot->stacks, stack_id))
        return -EINVAL;
    const struct memprof_rstack *r = snapshot_stack(snapshot, stack_id);
    return r ? (int)r->n : -ENOMEM;
}

int memprof_snapshot_frame(const memprof_snapshot *snapshot, uint32_t stack_id, size_t index,
                           memprof_frame *out)
{
    if (!snapshot || !out || out->size < FIELD_END(memprof_frame, function) ||
        !memprof__st_get(snapshot->stacks, stack_id))
        return -EINVAL;
    const struct memprof_rstack *r = snapshot_stack(snapshot, stack_id);
    if (!r)
        return -ENOMEM;
    if (index >= r->n)
        return -EINVAL;
    const struct memprof_rframe *f = &r->frames[index];
    memprof_frame fr = {
        .size = out->size,
        .function = f->function,
        .file = f->file,
        .line = f->line,
        .flags = f->flags,
        .module = f->module,
        .address = f->address,
        .load_bias = f->load_bias,
        .build_id = f->build_id,
    };
    memcpy(out, &fr, out->size < sizeof fr ? out->size : sizeof fr);
    return 0;
}

/* ---- writing ------------------------------------------------------------------------------- */

static int write_format(const memprof_snapshot *s, memprof_format format, FILE *out)
{
    struct memprof_profile *p;
    int rc = memprof__profile_from_snapshot(s, &p);
    if (rc)
        return rc;
    switch (format) {
    case MEMPROF_FORMAT_TEXT:
        rc = memprof__export_text(p, out, MEMPROF_VIEW_LIVE, 20);
        break;
    case MEMPROF_FORMAT_COLLAPSED:
        rc = memprof__export_collapsed(p, out, MEMPROF_VIEW_LIVE, false, false);
        break;
    case MEMPROF_FORMAT_PPROF:
        rc = memprof__export_pprof(p, out);
        break;
    case MEMPROF_FORMAT_SPEEDSCOPE:
        rc = memprof__export_speedscope(p, out, MEMPROF_VIEW_LIVE);
        break;
    case MEMPROF_FORMAT_HTML:
        rc = memprof__export_html(p, out, MEMPROF_VIEW_LIVE);
        break;
    default:
        rc = -EINVAL;
        break;
    }
    memprof__profile_free(p);
    return rc;
}

struct write_job {
    const memprof_snapshot *snapshot;
    memprof_format format;
};

static int fill_profile(FILE *out, void *ctx)
{
    const struct write_job *job = ctx;
    return write_format(job->snapshot, job->format, out);
}

int memprof_snapshot_write(const memprof_snapshot *snapshot, const char *path,
                           memprof_format format)
{
    return memprof__snapshot_write_how(snapshot, path, format, NULL);
}

MEMPROF_START_TEXT void memprof__snapshot_write_names(bool on)
{
    memprof__sym_set_symbolize(on);
}

int memprof__snapshot_write_how(const memprof_snapshot *snapshot, const char *path,
                                memprof_format format, const struct memprof_output *how)
{
    if (!snapshot || !path || !*path || (unsigned)format > MEMPROF_FORMAT_HTML)
        return -EINVAL;
    if (format == MEMPROF_FORMAT_AUTO) /* an extension naming no format: text */
        format = memprof__format_by_path(path);
    if (format == MEMPROF_FORMAT_AUTO)
        format = MEMPROF_FORMAT_TEXT;
    /* The program installed a seccomp filter that would kill it for a call writing takes. */
    if (!memprof__sys_allowed(MEMPROF_SYS_WRITE)) {
        memprof__engine_count_write_failure();
        return -EPERM;
    }
    uint8_t g = memprof__guard_enter();
    /* A regular file is replaced atomically (temporary file + rename), anything else
     * (device, FIFO, socket, /dev/stdout and the like) written in place: api/output.c. */
    struct write_job job = {snapshot, format};
    int rc = memprof__output_write(path, fill_profile, &job, how);
    if (rc != 0)
        memprof__engine_count_write_failure();
    memprof__guard_leave(g);
    return rc;
}
