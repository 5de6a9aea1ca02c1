/* SPDX-License-Identifier: MIT */
/*
 * Stack resolution (stacks.h): native frames through the symbolizer, inlined frames
 * expanded, runtime frames merged, results cached per stack id.
 *
 * fork(). The resolver runs on whichever thread asks (the plugin's profile-writing thread,
 * a program's memprof_snapshot_write()), under two mutexes, this file's and the
 * symbolizer's (taken in that order), and inside them the dynamic loader's lock
 * (dl_iterate_phdr). A fork() while another thread held any of them would leave it held in
 * the child, whose exit-time profile or snapshot then waits for a thread that does not exist
 * there. So the fork waits for the resolver to finish what it is on (one address or one
 * stack), holding both mutexes across the fork; the child then starts with them free and
 * everything consistent. The wait is bounded (FORK_WAIT_S: the first address in a large
 * module may load its debug information for a while, and a fork() from a signal handler
 * that interrupted the resolver would otherwise wait for itself); past it the fork goes on
 * and the child forgets the resolver's state and starts afresh.
 */
#include "resolve/stacks.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/process_hooks.h"
#include "core/capture.h"
#include "core/sources.h"
#include "memprof/memprof.h"
#include "resolve/strpool.h"
#include "resolve/symbols.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct memprof_rstack **cache; /* indexed by stack id */
static size_t cache_cap;

/* A growable frame list. */
struct flist {
    struct memprof_rframe *f;
    unsigned n, cap;
    bool oom;
};

static void push(struct flist *l, const struct memprof_rframe *f)
{
    if (l->n == l->cap) {
        unsigned cap = l->cap ? l->cap * 2 : 64;
        struct memprof_rframe *nf = realloc(l->f, cap * sizeof *nf);
        if (!nf) {
            l->oom = true;
            return;
        }
        l->f = nf;
        l->cap = cap;
    }
    l->f[l->n++] = *f;
}

/* Interpreter frames of one sample, resolved, innermost first. */
struct rt_frames {
    struct memprof_rframe *f;
    uint32_t *rflags;
    unsigned n;
};

static void resolve_runtime(const memprof_frame_source *src, const uintptr_t *ids, unsigned n,
                            struct rt_frames *out)
{
    out->f = calloc(n ? n : 1, sizeof *out->f);
    out->rflags = calloc(n ? n : 1, sizeof *out->rflags);
    out->n = out->f && out->rflags ? n : 0;
    for (unsigned i = 0; i < out->n; i++) {
        memprof_runtime_frame rf = {.size = sizeof rf};
        struct memprof_rframe *f = &out->f[i];
        f->flags = MEMPROF_FRAME_RUNTIME;
        if (src->resolve(src->ctx, (uint64_t)ids[i], &rf) == 0 && rf.function) {
            f->function = memprof__strpool_intern(rf.function);
            f->file = memprof__strpool_intern(rf.file);
            f->line = rf.line;
            out->rflags[i] = rf.flags;
        } else {
            f->function = "[unknown runtime frame]";
            f->flags |= MEMPROF_FRAME_UNRESOLVED;
        }
    }
}

/* Appends the next group of interpreter frames (up to and including an ENTRY frame, or all
 * of them when the source sets no ENTRY flags). */
static void push_group(struct flist *l, const struct rt_frames *rt, unsigned *next, bool grouped)
{
    while (*next < rt->n) {
        unsigned i = (*next)++;
        push(l, &rt->f[i]);
        if (grouped && (rt->rflags[i] & MEMPROF_RUNTIME_FRAME_ENTRY))
            break;
    }
}

static struct memprof_rstack *build(struct memprof_stacktab *st, const struct memprof_stack *s)
{
    const uintptr_t *frames = memprof__st_frames(st, s);
    const memprof_frame_source *src = memprof__sources_get(s->source);
    struct rt_frames rt = {0};
    if (src)
        resolve_runtime(src, frames + s->native_depth, s->depth - s->native_depth, &rt);
    bool grouped = false;
    for (unsigned i = 0; i < rt.n; i++)
        grouped |= (rt.rflags[i] & MEMPROF_RUNTIME_FRAME_ENTRY) != 0;

    struct flist l = {0};
    unsigned next_rt = 0;
    unsigned after_last_eval = 0; /* position just past the outermost eval frame's group */
    bool eval_seen = false;
    for (unsigned i = 0; i < s->native_depth; i++) {
        /* A binding's hook between the program and the allocator it forwards to (capture.h)
         * is not the program's: never a frame. */
        if (memprof__capture_is_hook(frames[i]))
            continue;
        /* A frame source tells its interpreter's eval loop by the function's name, so its
         * stacks are named even when the profile is written raw (MEMPROF_SYMBOLIZE=0). */
        const struct memprof_sym *sym = memprof__sym_get(frames[i], src != NULL);
        for (unsigned j = 0; j < sym->nframes; j++) {
            const struct memprof_sym_frame *sf = &sym->frames[j];
            if (src && src->is_eval_frame(src->ctx, sf->function, sym->module, frames[i])) {
                /* Sandwich: this eval frame becomes its group of interpreter frames; without
                 * groups the first eval frame takes them all and later ones are trimmed. */
                push_group(&l, &rt, &next_rt, grouped);
                eval_seen = true;
                after_last_eval = l.n;
                continue;
            }
            struct memprof_rframe f = {
                .function = sf->function,
                .file = sf->file,
                .line = sf->line,
                .module = sym->module,
                .build_id = sym->build_id,
                .address = frames[i],
                .load_bias = sym->load_bias,
                .sym_offset = j + 1 == sym->nframes ? sym->sym_offset : 0,
                .map_start = sym->map_start,
                .map_limit = sym->map_limit,
                .map_offset = sym->map_offset,
                .system_name = sf->system_name,
                .flags = (sf->inlined ? MEMPROF_FRAME_INLINED : 0) |
                         (sf->function ? 0 : MEMPROF_FRAME_UNRESOLVED),
            };
            push(&l, &f);
        }
    }
    /* Interpreter frames not placed yet: the outer groups go right after the outermost eval
     * frame's group; with no eval frame at all they are the callers of the whole native
     * stack. */
    unsigned at = eval_seen ? after_last_eval : l.n, extra = rt.n - next_rt;
    for (unsigned k = 0; k < extra; k++)
        push(&l, &rt.f[0]); /* make room */
    if (!l.oom && extra) {
        memmove(&l.f[at + extra], &l.f[at], (l.n - extra - at) * sizeof *l.f);
        memcpy(&l.f[at], &rt.f[next_rt], extra * sizeof *l.f);
    }
    if (l.n && (s->flags & MEMPROF_STACK_TRUNCATED))
        l.f[l.n - 1].flags |= MEMPROF_FRAME_TRUNCATED;
    free(rt.f);
    free(rt.rflags);
    struct memprof_rstack *r = l.oom ? NULL : malloc(sizeof *r + l.n * sizeof *l.f);
    if (r) {
        r->n = l.n;
        if (l.n)
            memcpy(r->frames, l.f, l.n * sizeof *l.f);
    }
    free(l.f);
    return r;
}

const struct memprof_rstack *memprof__resolve_stack(struct memprof_stacktab *st, uint32_t id)
{
    struct memprof_stack *s = memprof__st_get(st, id);
    if (!s)
        return NULL;
    pthread_mutex_lock(&lock);
    struct memprof_rstack *r = NULL;
    if (id >= cache_cap) {
        size_t cap = cache_cap ? cache_cap : 1024;
        while (cap <= id)
            cap *= 2;
        struct memprof_rstack **nc = realloc(cache, cap * sizeof *nc);
        if (!nc)
            goto out;
        memset(nc + cache_cap, 0, (cap - cache_cap) * sizeof *nc);
        cache = nc;
        cache_cap = cap;
    }
    if (!cache[id])
        cache[id] = build(st, s);
    r = cache[id];
out:
    pthread_mutex_unlock(&lock);
    return r;
}

/* ---- fork ----------------------------------------------------------------------------- */

#define FORK_WAIT_S 1

/* Whether prepare got each lock: set before the fork, read after it in the parent and in the
 * child, all on the forking thread (fork() runs the three handlers in one thread). */
static bool held_stacks, held_symbols;

static void fork_prepare(void)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += FORK_WAIT_S;
    held_stacks = pthread_mutex_timedlock(&lock, &until) == 0;
    held_symbols = memprof__sym_fork_prepare(&until);
}

static void fork_parent(void)
{
    memprof__sym_fork_parent(held_symbols);
    if (held_stacks)
        pthread_mutex_unlock(&lock);
}

static void fork_child(void)
{
    /* The symbolizer's half-changed state is forgotten whenever either wait ran out: a
     * stack being built may have been inside it without holding its lock at that moment. */
    memprof__sym_fork_child(held_symbols && held_stacks);
    if (!held_stacks) {
        cache = NULL; /* may be half grown; the stacks it held stay valid */
        cache_cap = 0;
    }
    pthread_mutex_init(&lock, NULL);
}

/* At load, before any thread of the program can use the resolver. */
__attribute__((constructor)) static void register_fork_handlers(void)
{
    memprof_atfork(fork_prepare, fork_parent, fork_child);
}
