/* SPDX-License-Identifier: MIT */
/*
 * The eBPF side of `memprof run --ebpf` and `memprof attach --ebpf`: uprobes on a process's
 * allocator entry points (libc's malloc family, the Rust allocator shims) that sample
 * allocations in the kernel as the library's sampler does in the process (sampler.h): a
 * per-thread countdown of bytes drawn as floor(Exp(R)) + 1, so an allocation of s bytes is
 * sampled with probability 1 - exp(-s/R) and the command can give it the library's weights.
 *
 * Only the outermost probed call of a thread counts: each probe with a return probe raises
 * the thread's depth on entry and lowers it on return, so malloc called by __rust_alloc (the
 * System allocator) or by realloc(NULL, n) inside glibc is not counted a second time. A
 * sampled allocation's stack is taken at the return probe, where the registers are the
 * caller's: at the entry the frame-pointer walk would skip the calling function. Samples
 * live in a map keyed by address, so a free costs one lookup; each sampled allocation and
 * each free of a sampled block is one record in a ring buffer. Nothing is lost silently:
 * every drop is counted (events.h).
 *
 * Sites the debug information found (dwarfscan.c: a Rust global allocator rustc inlined
 * into its callers, or left out of line with its arguments moved) share one program,
 * site_entry, which reads the size and the block's address where the site's descriptor
 * says (events.h).
 *
 * No kernel structure is read, so the program needs no BTF of the kernel (no CO-RE): the
 * registers come from the user-space view of pt_regs.
 */
#include <linux/bpf.h>
#include <linux/ptrace.h>

#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "events.h"

char LICENSE[] SEC("license") = "Dual MIT/GPL";

/* Set by the command before loading. */
const volatile __u32 target_tgid = 0;
const volatile __u64 ln2_rate = 0; /* R * ln 2, bytes */
/* R * ln(1 + i/1024), i = 0 .. 1024, bytes: the fractional part of -R ln(u). */
const volatile __u64 ln_table[MEMPROF_EBPF_LN_STEPS + 1] = {0};

enum call_kind { CALL_ALLOC, CALL_REALLOC, CALL_POSIX_MEMALIGN };

struct thread_state {
    __s64 countdown;
    __u32 depth;
    __u32 kind;
    __u64 size;
    __u64 old;    /* realloc: the block passed in */
    __u64 memptr; /* posix_memalign: where the block goes */
    /* realloc: the old block's sample, taken out of the live map at the entry (so that a
     * block reused by another thread before the return is not confused with it) and put
     * back if the realloc fails. */
    __u64 old_serial, old_size;
    __u32 old_tid, old_taken;
    /* A sample taken at an inlined allocation (site pending_site) whose block's address
     * its RESULT site will read. */
    __u64 pending_serial, pending_size;
    __u32 pending_site, pad2;
};

struct live_sample {
    __u64 serial;
    __u64 size;
    __u32 tid;
    __u32 pad;
};

struct {
    __uint(type, BPF_MAP_TYPE_LRU_HASH);
    __uint(max_entries, 65536);
    __type(key, __u32);
    __type(value, struct thread_state);
} threads SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 262144); /* the command sets it (--ebpf-map) */
    __type(key, __u64);
    __type(value, struct live_sample);
} live SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_RINGBUF);
    __uint(max_entries, 4 << 20);
} events SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
    __uint(max_entries, MEMPROF_EBPF_COUNTERS);
    __type(key, __u32);
    __type(value, __u64);
} counters SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, 1);
    __type(key, __u32);
    __type(value, __u64);
} serials SEC(".maps");

/* Descriptors of the probe sites the debug information found (dwarfscan.c), filled by the
 * command; a site's probe carries its index as the cookie. */
struct {
    __uint(type, BPF_MAP_TYPE_ARRAY);
    __uint(max_entries, MEMPROF_EBPF_MAX_SITES);
    __type(key, __u32);
    __type(value, struct memprof_ebpf_site);
} sites SEC(".maps");

static __always_inline void count(__u32 which)
{
    __u64 *c = bpf_map_lookup_elem(&counters, &which);
    if (c)
        (*c)++;
}

/* floor(R * -ln(u)) + 1 for u uniform in (0, 1): with u = 2^(m - 32) (1 + f), -ln u is
 * (32 - m) ln 2 - ln(1 + f), the second term from the table with linear interpolation
 * (error below 1e-7 R). */
static __always_inline __s64 draw_countdown(void)
{
    __u32 u = bpf_get_prandom_u32();
    if (!u)
        u = 1;
    __u32 m = 0, x = u;
    if (x >= 1u << 16) {
        m += 16;
        x >>= 16;
    }
    if (x >= 1u << 8) {
        m += 8;
        x >>= 8;
    }
    if (x >= 1u << 4) {
        m += 4;
        x >>= 4;
    }
    if (x >= 1u << 2) {
        m += 2;
        x >>= 2;
    }
    if (x >= 2)
        m += 1;
    __u64 norm = (__u64)u << (31 - m); /* bit 31 set; bits 30..0 are f */
    __u32 i = (norm >> 21) & (MEMPROF_EBPF_LN_STEPS - 1);
    __u64 rem = (norm >> 5) & 0xffff;
    __u64 t0 = ln_table[i], t1 = ln_table[i + 1];
    __u64 frac = t0 + (((t1 - t0) * rem) >> 16);
    __u64 whole = (__u64)(32 - m) * ln2_rate;
    return (__s64)(whole > frac ? whole - frac : 0) + 1;
}

static __always_inline int is_target(void)
{
    return (bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

/* The target thread's state, made with a fresh countdown at its first probed call; NULL
 * when this is not the target (or the map is full). */
static __always_inline struct thread_state *target_thread(void)
{
    if (!is_target())
        return NULL;
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    struct thread_state *t = bpf_map_lookup_elem(&threads, &tid);
    if (!t) {
        struct thread_state fresh = {.countdown = draw_countdown()};
        bpf_map_update_elem(&threads, &tid, &fresh, BPF_NOEXIST);
        t = bpf_map_lookup_elem(&threads, &tid);
    }
    return t;
}

/* The thread's state with its depth raised; NULL when this call is nested in another
 * probed call (or not the target's), whose return does the work. */
static __always_inline struct thread_state *enter(void)
{
    struct thread_state *t = target_thread();
    if (!t)
        return NULL;
    if (t->depth++ > 0)
        return NULL;
    count(MEMPROF_EBPF_CALLS);
    return t;
}

/* The thread's state with its depth lowered; NULL unless this return ends the outermost
 * probed call (a return whose entry was never seen, as when the probes were attached
 * while the call ran, has depth 0 and is ignored). */
static __always_inline struct thread_state *leave(void)
{
    if (!is_target())
        return NULL;
    __u32 tid = (__u32)bpf_get_current_pid_tgid();
    struct thread_state *t = bpf_map_lookup_elem(&threads, &tid);
    if (!t || t->depth == 0)
        return NULL;
    if (--t->depth > 0)
        return NULL;
    return t;
}

static __always_inline void begin(struct thread_state *t, __u32 kind, __u64 size)
{
    t->kind = kind;
    t->size = size;
    t->old = 0;
    t->old_taken = 0;
}

static __always_inline void send_free(__u64 serial)
{
    struct memprof_ebpf_event *e = bpf_ringbuf_reserve(&events, sizeof *e, 0);
    if (!e) {
        count(MEMPROF_EBPF_FREE_LOST);
        return;
    }
    e->kind = MEMPROF_EBPF_FREE;
    e->tid = (__u32)bpf_get_current_pid_tgid();
    e->serial = serial;
    e->size = 0;
    e->time_ns = bpf_ktime_get_ns();
    e->nframes = 0;
    bpf_ringbuf_submit(e, 0);
}

/* A block is being freed: if it is a sample, out of the live map and reported. */
static __always_inline void free_block(__u64 ptr)
{
    if (!ptr)
        return;
    struct live_sample *s = bpf_map_lookup_elem(&live, &ptr);
    if (!s)
        return;
    __u64 serial = s->serial;
    if (bpf_map_delete_elem(&live, &ptr) == 0)
        send_free(serial);
}

/* The outermost call returned block `ptr` of `size` bytes: charge the countdown and, when
 * it runs out, record the sample with the stack as the caller sees it. With `known_ptr`
 * false (an inlined allocator: the block's address is never seen) the sample is recorded
 * but not put in the live map, so no free can end it. */
static __always_inline __u64 allocated_at(void *ctx, struct thread_state *t, __u64 ptr, __u64 size,
                                          int known_ptr)
{
    t->countdown -= (__s64)size;
    if (t->countdown > 0 || (known_ptr && !ptr) || !size)
        return 0;
    t->countdown = draw_countdown();
    count(MEMPROF_EBPF_SAMPLES);
    __u32 zero = 0;
    __u64 *next = bpf_map_lookup_elem(&serials, &zero);
    if (!next)
        return 0;
    __u64 serial = __sync_fetch_and_add(next, 1) + 1;
    struct memprof_ebpf_event *e = bpf_ringbuf_reserve(&events, sizeof *e, 0);
    if (!e) {
        count(MEMPROF_EBPF_DROP_RING_FULL);
        return 0;
    }
    e->kind = MEMPROF_EBPF_ALLOC;
    e->tid = (__u32)bpf_get_current_pid_tgid();
    e->serial = serial;
    e->size = size;
    e->time_ns = bpf_ktime_get_ns();
    e->pad = 0;
    long n = bpf_get_stack(ctx, e->frames, sizeof e->frames, BPF_F_USER_STACK);
    if (n < 0) {
        count(MEMPROF_EBPF_STACK_ERRORS);
        e->nframes = (__s32)n;
    } else {
        e->nframes = (__s32)(n / sizeof(__u64));
    }
    struct live_sample s = {.serial = serial, .size = size, .tid = e->tid};
    if (known_ptr && bpf_map_update_elem(&live, &ptr, &s, BPF_ANY) != 0) {
        count(MEMPROF_EBPF_DROP_MAP_FULL);
        bpf_ringbuf_discard(e, 0);
        return 0;
    }
    bpf_ringbuf_submit(e, 0);
    return serial;
}

static __always_inline void allocated(void *ctx, struct thread_state *t, __u64 ptr, __u64 size)
{
    allocated_at(ctx, t, ptr, size, 1);
}

/* ---- libc and the Rust shims: entries --------------------------------------------------- */

/* malloc, valloc, pvalloc, __rust_alloc, __rust_alloc_zeroed: the size is the first
 * argument. */
SEC("uprobe")
int BPF_KPROBE(size1_entry, __u64 size)
{
    struct thread_state *t = enter();
    if (t)
        begin(t, CALL_ALLOC, size);
    return 0;
}

SEC("uprobe")
int BPF_KPROBE(calloc_entry, __u64 n, __u64 size)
{
    struct thread_state *t = enter();
    if (t)
        begin(t, CALL_ALLOC, n * size);
    return 0;
}

/* aligned_alloc, memalign: (alignment, size). */
SEC("uprobe")
int BPF_KPROBE(size2_entry, __u64 align, __u64 size)
{
    struct thread_state *t = enter();
    if (t)
        begin(t, CALL_ALLOC, size);
    return 0;
}

SEC("uprobe")
int BPF_KPROBE(posix_memalign_entry, __u64 memptr, __u64 align, __u64 size)
{
    struct thread_state *t = enter();
    if (t) {
        begin(t, CALL_POSIX_MEMALIGN, size);
        t->memptr = memptr;
    }
    return 0;
}

/* The old block's sample leaves the live map now (see struct thread_state). */
static __always_inline void realloc_begin(struct thread_state *t, __u64 old, __u64 size)
{
    begin(t, CALL_REALLOC, size);
    t->old = old;
    if (!old)
        return;
    struct live_sample *s = bpf_map_lookup_elem(&live, &old);
    if (!s)
        return;
    __u64 serial = s->serial, osize = s->size;
    __u32 otid = s->tid;
    if (bpf_map_delete_elem(&live, &old) == 0) {
        t->old_serial = serial;
        t->old_size = osize;
        t->old_tid = otid;
        t->old_taken = 1;
    }
}

SEC("uprobe")
int BPF_KPROBE(realloc_entry, __u64 old, __u64 size)
{
    struct thread_state *t = enter();
    if (t)
        realloc_begin(t, old, size);
    return 0;
}

SEC("uprobe")
int BPF_KPROBE(reallocarray_entry, __u64 old, __u64 n, __u64 size)
{
    struct thread_state *t = enter();
    if (t)
        realloc_begin(t, old, n * size);
    return 0;
}

/* __rust_realloc(ptr, old_size, align, new_size). */
SEC("uprobe")
int BPF_KPROBE(rust_realloc_entry, __u64 old, __u64 old_size, __u64 align, __u64 size)
{
    struct thread_state *t = enter();
    if (t)
        realloc_begin(t, old, size);
    return 0;
}

/* Rust's Layout is two words, its alignment and its size, passed in two registers in the
 * order rustc lays the struct out (alignment first in the rustc versions that put the
 * largest niche first). An alignment is a power of two: when only one word is, that one is
 * the alignment; when both are, the probe's cookie says the order (elfscan.c reads the
 * rustc version). */
static __always_inline __u64 layout_size(void *ctx, __u64 a, __u64 b)
{
    int pa = a && !(a & (a - 1)), pb = b && !(b & (b - 1));
    if (pa != pb)
        return pa ? b : a;
    return bpf_get_attach_cookie(ctx) ? b : a;
}

/* <A as GlobalAlloc>::alloc and ::alloc_zeroed (&self, layout). */
SEC("uprobe")
int BPF_KPROBE(ga_alloc_entry, __u64 self, __u64 l1, __u64 l2)
{
    struct thread_state *t = enter();
    if (t)
        begin(t, CALL_ALLOC, layout_size(ctx, l1, l2));
    return 0;
}

/* <A as GlobalAlloc>::realloc(&self, ptr, layout, new_size). */
SEC("uprobe")
int BPF_KPROBE(ga_realloc_entry, __u64 self, __u64 old, __u64 l1, __u64 l2, __u64 size)
{
    struct thread_state *t = enter();
    if (t)
        realloc_begin(t, old, size);
    return 0;
}

/* <A as GlobalAlloc>::dealloc(&self, ptr, layout). */
SEC("uprobe")
int BPF_KPROBE(ga_dealloc_entry, __u64 self, __u64 ptr)
{
    if (is_target())
        free_block(ptr);
    return 0;
}

/* free and __rust_dealloc: no return probe, nothing they call is probed. A free inside a
 * probed call (realloc(p, 0), the System allocator's dealloc) finds the sample already
 * gone or never there: frees are idempotent here. */
SEC("uprobe")
int BPF_KPROBE(free_entry, __u64 ptr)
{
    if (is_target())
        free_block(ptr);
    return 0;
}

/* ---- sites the debug information found (dwarfscan.c) ------------------------------------ */

/* The user-space registers as a uprobe's context holds them. */
#if defined(__TARGET_ARCH_arm64)
typedef struct user_pt_regs user_regs;
#else
typedef struct pt_regs user_regs;
#endif

/* DWARF register `r` of the probed thread, from a copy of its registers (the verifier
 * refuses a context access at an offset chosen at run time). */
static __always_inline int read_reg(const user_regs *regs, __u32 r, __u64 *v)
{
#if defined(__TARGET_ARCH_x86)
    switch (r) {
    case 0:
        *v = regs->rax;
        return 0;
    case 1:
        *v = regs->rdx;
        return 0;
    case 2:
        *v = regs->rcx;
        return 0;
    case 3:
        *v = regs->rbx;
        return 0;
    case 4:
        *v = regs->rsi;
        return 0;
    case 5:
        *v = regs->rdi;
        return 0;
    case 6:
        *v = regs->rbp;
        return 0;
    case 7:
        *v = regs->rsp;
        return 0;
    case 8:
        *v = regs->r8;
        return 0;
    case 9:
        *v = regs->r9;
        return 0;
    case 10:
        *v = regs->r10;
        return 0;
    case 11:
        *v = regs->r11;
        return 0;
    case 12:
        *v = regs->r12;
        return 0;
    case 13:
        *v = regs->r13;
        return 0;
    case 14:
        *v = regs->r14;
        return 0;
    case 15:
        *v = regs->r15;
        return 0;
    }
#elif defined(__TARGET_ARCH_arm64)
    if (r < 31) {
        *v = regs->regs[r & 31];
        return 0;
    }
    if (r == 31) {
        *v = regs->sp;
        return 0;
    }
#endif
    return -1;
}

/* A value where the site's descriptor says it is; -1 when it cannot be read. */
static __always_inline int read_loc(const user_regs *regs, const struct memprof_ebpf_loc *l,
                                    __u64 *v)
{
    __u64 r;
    switch (l->kind) {
    case MEMPROF_EBPF_LOC_CONST:
        *v = (__u64)l->value;
        return 0;
    case MEMPROF_EBPF_LOC_REG:
        if (read_reg(regs, l->reg, &r))
            return -1;
        *v = r + (__u64)l->value;
        return 0;
    case MEMPROF_EBPF_LOC_MEM:
        if (read_reg(regs, l->reg, &r))
            return -1;
        return bpf_probe_read_user(v, sizeof *v, (void *)(r + (__u64)l->value)) ? -1 : 0;
    }
    return -1;
}

/* The thread's state when no probed call is running on it (an inlined site counts only
 * then: inside a probed function the outer call counts); NULL otherwise. The depth is not
 * raised: an inlined site has no return. */
static __always_inline struct thread_state *at_depth_zero(void)
{
    struct thread_state *t = target_thread();
    return t && t->depth == 0 ? t : NULL;
}

SEC("uprobe")
int site_entry(void *ctx)
{
    __u32 idx = (__u32)bpf_get_attach_cookie(ctx);
    struct memprof_ebpf_site *s = bpf_map_lookup_elem(&sites, &idx);
    if (!s)
        return 0;
    if (!is_target())
        return 0;
    user_regs regs;
    if (bpf_probe_read_kernel(&regs, sizeof regs, ctx))
        return 0;
    __u64 size = 0, ptr = 0;
    if (s->kind == MEMPROF_EBPF_SITE_RESULT) {
        __u32 tid = (__u32)bpf_get_current_pid_tgid();
        struct thread_state *t = bpf_map_lookup_elem(&threads, &tid);
        if (!t || !t->pending_serial || t->pending_site != s->entry)
            return 0;
        __u64 serial = t->pending_serial;
        t->pending_serial = 0;
        if (read_loc(&regs, &s->ptr, &ptr) || !ptr) {
            count(MEMPROF_EBPF_NO_ADDRESS);
            return 0;
        }
        struct live_sample ls = {.serial = serial, .size = t->pending_size, .tid = tid};
        if (bpf_map_update_elem(&live, &ptr, &ls, BPF_ANY) != 0)
            count(MEMPROF_EBPF_FREE_LOST);
        return 0;
    }
    if (s->kind == MEMPROF_EBPF_SITE_FREE) {
        if (read_loc(&regs, &s->ptr, &ptr) == 0)
            free_block(ptr);
        return 0;
    }
    if (read_loc(&regs, &s->size, &size))
        return 0;
    if (s->kind == MEMPROF_EBPF_SITE_REALLOC && read_loc(&regs, &s->ptr, &ptr))
        ptr = 0;
    if (!s->inlined) {
        /* Out of line: its return probe (alloc_return) finishes it. */
        struct thread_state *t = enter();
        if (!t)
            return 0;
        if (s->kind == MEMPROF_EBPF_SITE_REALLOC)
            realloc_begin(t, ptr, size);
        else
            begin(t, CALL_ALLOC, size);
        return 0;
    }
    struct thread_state *t = at_depth_zero();
    if (!t)
        return 0;
    count(MEMPROF_EBPF_CALLS);
    if (s->kind == MEMPROF_EBPF_SITE_REALLOC)
        free_block(ptr);
    __u64 serial = allocated_at(ctx, t, 0, size, 0);
    if (!serial)
        return 0;
    if (!s->has_result || t->pending_serial)
        count(MEMPROF_EBPF_NO_ADDRESS); /* this one, or the one whose result never came */
    if (s->has_result) {
        t->pending_serial = serial;
        t->pending_size = size;
        t->pending_site = idx;
    }
    return 0;
}

/* ---- returns -------------------------------------------------------------------------------- */

SEC("uretprobe")
int BPF_KRETPROBE(alloc_return, __u64 ret)
{
    struct thread_state *t = leave();
    if (!t)
        return 0;
    __u64 ptr = ret;
    if (t->kind == CALL_POSIX_MEMALIGN) {
        ptr = 0;
        if ((int)ret == 0 && bpf_probe_read_user(&ptr, sizeof ptr, (void *)t->memptr) != 0)
            ptr = 0;
    } else if (t->kind == CALL_REALLOC && t->old_taken) {
        t->old_taken = 0;
        if (ret || t->size == 0) {
            send_free(t->old_serial);
        } else {
            /* The realloc failed: the old block and its sample stay. */
            struct live_sample s = {
                .serial = t->old_serial, .size = t->old_size, .tid = t->old_tid};
            if (bpf_map_update_elem(&live, &t->old, &s, BPF_ANY) != 0)
                count(MEMPROF_EBPF_FREE_LOST);
        }
    }
    allocated(ctx, t, ptr, t->size);
    return 0;
}
