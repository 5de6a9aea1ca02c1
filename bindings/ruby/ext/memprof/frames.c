/* SPDX-License-Identifier: MIT */
/*
 * The Ruby frame source: which Ruby methods, files and lines were running when an allocation
 * was sampled, merged by libmemprof in place of the VM's eval-loop C frames (runtime.h).
 *
 * Capture runs inside the allocation cold path, on the allocating thread, with the profiler's
 * re-entrancy guard set. It therefore calls nothing that can allocate a Ruby object or run
 * the GC: it checks that the thread is a Ruby thread holding its GVL
 * (ruby_thread_has_gvl_p(), thread-local reads only) and that no GC is running (a compacting
 * GC moves the iseqs the VM's frames point to), then reads the frames with
 * rb_profile_frames(), which in Ruby 3.1 only walks the thread's control frames and computes
 * line numbers from the iseqs' tables (no Ruby allocation, no malloc). The frame VALUEs
 * (method entries and iseqs) and their line numbers are interned into this file's table:
 * an id is the 1-based index of a (frame, line, entry flag) triple, stable for the life of the
 * process. The table pins every frame it holds (rb_gc_mark() from a marked holder object),
 * so an id's VALUE can neither be freed nor moved by GC.compact, and its address stays a
 * valid hash key. Names and files are produced only at resolution time (a snapshot or a
 * profile write, holding the GVL), where Ruby objects may be created, and cached as C
 * strings so that resolution also works without the GVL once a frame has been resolved.
 *
 * Concurrency: the table is append-only storage in fixed chunks that never move. Appends and
 * the dedup hash are serialized by a try-lock (captures are already serialized by the GVL;
 * the lock covers Ruby 3 ractors, each of which has its own GVL); a capture that finds the
 * lock taken records no Ruby frames instead of waiting. Readers (the GC mark function,
 * resolution) see entries through the published count (release/acquire).
 *
 * Trim and sandwich: Ruby-to-Ruby calls run inside one vm_exec_core() C frame; a C function
 * that calls back into Ruby (Array#each yielding, Kernel#require, ...) starts another. Ruby
 * 3.1's rb_profile_frames() lists C-method frames too (line 0), so a Ruby frame directly
 * called by a C-method frame is the first frame its eval-loop invocation ran and is flagged
 * MEMPROF_RUNTIME_FRAME_ENTRY, as is the outermost frame. The eval-loop frame is recognized
 * by address: vm_exec_core is a static function, so Debian's stripped libruby has no name for
 * it; at start-up the extension finds it as the callee of the exported rb_vm_exec() on its own
 * native stack (the extension is loaded from Ruby code) and takes the function's bounds from
 * the object's .eh_frame_hdr search table. If that fails, rb_vm_exec itself (one per
 * eval-loop invocation too) is the eval frame, recognized by name.
 *
 * End of the VM: ruby_vm_destruct() frees the main thread's state before anything else, and
 * a capture after that would read freed memory (ruby_thread_has_gvl_p() reads the thread
 * through a thread-local pointer). Ruby's last hook with a working VM is the finalizer phase
 * of exit (rb_objspace_call_finalizer(), after every end proc and at_exit block, after the
 * other threads were killed, before the VM is torn down): a finalizer on an object that
 * lives for the whole process stops capturing there and resolves every interned frame to C
 * strings, so exit-time profile dumps (the LD_PRELOAD plugin's) still show Ruby frames. An
 * end proc would be too early: at_exit blocks registered before the extension was loaded
 * (minitest's autorun, for one) run after it.
 */
#define _GNU_SOURCE
#include "binding.h"

#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <link.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <ruby/debug.h>

/* ---- the interned-frame table ----------------------------------------------------------- */

#define MP_CHUNK_BITS 12
#define MP_CHUNK      (1u << MP_CHUNK_BITS) /* entries per chunk */
#define MP_MAX_CHUNKS 256u                  /* at most 1,048,576 distinct (frame, line) pairs */

struct mp_entry {
    VALUE frame;         /* method entry or iseq from rb_profile_frames(); pinned */
    int32_t line;        /* 0 for C-method frames */
    uint32_t flags;      /* MEMPROF_RUNTIME_FRAME_ENTRY */
    char *label;         /* set once resolved (malloc'ed, never freed) */
    char *file;          /* NULL for C methods */
    atomic_int resolved; /* 1 once label/file are set (release) */
};

/* Chunk pointers are written before the count that covers them is published. */
static struct mp_entry *chunks[MP_MAX_CHUNKS];
static atomic_uint entry_count;

/* Dedup hash: open addressing over entry indices + 1 (0 = empty), only used by capture under
 * the try-lock. Grown at 50 % load. */
static uint32_t *hash_slots;
static uint32_t hash_cap;

static atomic_flag table_lock = ATOMIC_FLAG_INIT;

/* Counters (relaxed; read for Memprof.stats). */
static atomic_ullong n_captures, n_no_gvl, n_in_gc, n_busy, n_after_vm, n_table_full;

static atomic_int vm_gone; /* set by the exit finalizer: no more captures */

static inline struct mp_entry *entry_at(uint32_t index)
{
    return &chunks[index >> MP_CHUNK_BITS][index & (MP_CHUNK - 1)];
}

static inline uint64_t key_hash(VALUE frame, int32_t line, uint32_t flags)
{
    uint64_t h = ((uint64_t)frame >> 3) * 0x9e3779b97f4a7c15ull;
    h ^= ((uint64_t)(uint32_t)line << 1 | flags) * 0xc2b2ae3d27d4eb4full;
    return h ^ (h >> 29);
}

/* Rebuilds the hash with twice the capacity. Called under the lock; allocates through malloc,
 * which the re-entrancy guard passes straight to the real allocator. */
static bool hash_grow(void)
{
    uint32_t cap = hash_cap ? hash_cap * 2 : 4096;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return false;
    uint32_t n = atomic_load_explicit(&entry_count, memory_order_relaxed);
    for (uint32_t i = 0; i < n; i++) {
        const struct mp_entry *e = entry_at(i);
        uint32_t at = (uint32_t)key_hash(e->frame, e->line, e->flags) & (cap - 1);
        while (slots[at])
            at = (at + 1) & (cap - 1);
        slots[at] = i + 1;
    }
    free(hash_slots);
    hash_slots = slots;
    hash_cap = cap;
    return true;
}

/* Returns the id of (frame, line, flags), adding it if new; 0 if the table is full or memory
 * ran out. Called under the lock. */
static uint32_t intern(VALUE frame, int32_t line, uint32_t flags)
{
    uint32_t n = atomic_load_explicit(&entry_count, memory_order_relaxed);
    if ((uint64_t)(n + 1) * 2 > hash_cap && !hash_grow())
        return 0;
    uint32_t at = (uint32_t)key_hash(frame, line, flags) & (hash_cap - 1);
    for (; hash_slots[at]; at = (at + 1) & (hash_cap - 1)) {
        const struct mp_entry *e = entry_at(hash_slots[at] - 1);
        if (e->frame == frame && e->line == line && e->flags == flags)
            return hash_slots[at];
    }
    if (n >= MP_CHUNK * MP_MAX_CHUNKS)
        return 0;
    if (!chunks[n >> MP_CHUNK_BITS]) {
        struct mp_entry *c = calloc(MP_CHUNK, sizeof *c);
        if (!c)
            return 0;
        chunks[n >> MP_CHUNK_BITS] = c;
    }
    struct mp_entry *e = entry_at(n);
    e->frame = frame;
    e->line = line;
    e->flags = flags;
    /* Publish the entry (and its chunk) before anyone can see the count that covers it. */
    atomic_store_explicit(&entry_count, n + 1, memory_order_release);
    hash_slots[at] = n + 1;
    return n + 1;
}

/* The holder: a Ruby object whose mark function pins every interned frame. */
static void holder_mark(void *ptr)
{
    (void)ptr;
    uint32_t n = atomic_load_explicit(&entry_count, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++)
        rb_gc_mark(entry_at(i)->frame); /* rb_gc_mark pins: compaction leaves it in place */
}

static size_t holder_memsize(const void *ptr)
{
    (void)ptr;
    uint32_t n = atomic_load_explicit(&entry_count, memory_order_relaxed);
    return ((n + MP_CHUNK - 1) / MP_CHUNK) * MP_CHUNK * sizeof(struct mp_entry) +
           (size_t)hash_cap * sizeof(uint32_t);
}

static const rb_data_type_t holder_type = {
    .wrap_struct_name = "memprof/ruby-frames",
    .function = {.dmark = holder_mark, .dfree = NULL, .dsize = holder_memsize},
    .flags = RUBY_TYPED_FREE_IMMEDIATELY,
};
static VALUE holder = Qnil;

/* ---- capture (allocation cold path) ------------------------------------------------------ */

static unsigned mp_capture(void *ctx, uint64_t *ids, unsigned max)
{
    (void)ctx;
    atomic_fetch_add_explicit(&n_captures, 1, memory_order_relaxed);
    if (atomic_load_explicit(&vm_gone, memory_order_acquire)) {
        atomic_fetch_add_explicit(&n_after_vm, 1, memory_order_relaxed);
        return 0;
    }
    /* Not a Ruby thread, or a Ruby thread in a blocking region (GVL released): its frames
     * may be changing under us, or it has none. */
    if (!ruby_thread_has_gvl_p()) {
        atomic_fetch_add_explicit(&n_no_gvl, 1, memory_order_relaxed);
        return 0;
    }
    /* A GC's own allocations: during compaction the frames may point at moved objects. */
    if (rb_during_gc()) {
        atomic_fetch_add_explicit(&n_in_gc, 1, memory_order_relaxed);
        return 0;
    }
    VALUE frames[MEMPROF_MAX_RUNTIME_FRAMES];
    int lines[MEMPROF_MAX_RUNTIME_FRAMES];
    if (max > MEMPROF_MAX_RUNTIME_FRAMES)
        max = MEMPROF_MAX_RUNTIME_FRAMES;
    int n = rb_profile_frames(0, (int)max, frames, lines);
    if (n <= 0)
        return 0;
    if (atomic_flag_test_and_set_explicit(&table_lock, memory_order_acquire)) {
        atomic_fetch_add_explicit(&n_busy, 1, memory_order_relaxed);
        return 0;
    }
    unsigned out = 0;
    for (int i = 0; i < n; i++) {
        /* A Ruby frame (line > 0) called by a C-method frame (line 0), or the outermost frame
         * of a complete stack, was the first frame of its eval-loop invocation. */
        bool outermost = i + 1 == n && (unsigned)n < max;
        uint32_t flags = lines[i] > 0 && (outermost || (i + 1 < n && lines[i + 1] == 0))
                             ? MEMPROF_RUNTIME_FRAME_ENTRY
                             : 0;
        uint32_t id = intern(frames[i], lines[i], flags);
        if (!id) {
            atomic_fetch_add_explicit(&n_table_full, 1, memory_order_relaxed);
            break;
        }
        ids[out++] = id;
    }
    atomic_flag_clear_explicit(&table_lock, memory_order_release);
    return out;
}

/* ---- resolution (snapshot time) ---------------------------------------------------------- */

static char *dup_rstring(VALUE s)
{
    if (!RB_TYPE_P(s, T_STRING))
        return NULL;
    return strndup(RSTRING_PTR(s), (size_t)RSTRING_LEN(s));
}

static VALUE resolve_body(VALUE arg)
{
    struct mp_entry *e = (struct mp_entry *)arg;
    VALUE label = rb_profile_frame_full_label(e->frame);
    VALUE path = rb_profile_frame_path(e->frame);
    char *l = dup_rstring(label);
    e->file = dup_rstring(path);
    e->label = l ? l : strdup("<unknown>");
    return Qnil;
}

/* Produces an entry's C strings with the Ruby API. Needs the GVL. */
static void resolve_entry(struct mp_entry *e)
{
    if (atomic_load_explicit(&e->resolved, memory_order_acquire))
        return;
    int state = 0;
    rb_protect(resolve_body, (VALUE)e, &state);
    if (state)
        rb_set_errinfo(Qnil); /* never propagate out of a library callback */
    if (e->label)
        atomic_store_explicit(&e->resolved, 1, memory_order_release);
}

static int mp_resolve(void *ctx, uint64_t id, memprof_runtime_frame *out)
{
    (void)ctx;
    uint32_t n = atomic_load_explicit(&entry_count, memory_order_acquire);
    if (id == 0 || id > n)
        return -1;
    struct mp_entry *e = entry_at((uint32_t)(id - 1));
    if (!atomic_load_explicit(&e->resolved, memory_order_acquire)) {
        /* Only a GVL holder outside GC may create Ruby objects. */
        if (atomic_load_explicit(&vm_gone, memory_order_acquire) || !ruby_thread_has_gvl_p() ||
            rb_during_gc())
            return -1;
        resolve_entry(e);
        if (!atomic_load_explicit(&e->resolved, memory_order_acquire))
            return -1;
    }
    out->function = e->label;
    out->file = e->file;
    out->line = e->line > 0 ? (uint32_t)e->line : 0;
    out->flags = e->flags;
    return 0;
}

/* ---- the eval loop: where vm_exec_core is ------------------------------------------------ */

static uintptr_t eval_lo, eval_hi; /* [lo, hi): vm_exec_core's code; 0 = unknown */
static const char *eval_how = "not probed";

struct fde_query {
    uintptr_t pc;
    uintptr_t lo, hi;
    bool found;
};

/* Finds the bounds of the function containing q->pc in the binary-search table of the
 * object's PT_GNU_EH_FRAME segment (.eh_frame_hdr): the function starts at the table entry
 * at or below pc and ends at most where the next one starts. Only the encodings every
 * GNU toolchain emits are understood (fde_count udata4, table datarel|sdata4). */
static int fde_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct fde_query *q = data;
    const ElfW(Phdr) *eh = NULL;
    uintptr_t seg_end = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_LOAD) {
            uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
            if (q->pc >= lo && q->pc < lo + ph->p_memsz)
                seg_end = lo + ph->p_memsz;
        } else if (ph->p_type == PT_GNU_EH_FRAME) {
            eh = ph;
        }
    }
    if (!seg_end)
        return 0; /* not this object */
    if (!eh)
        return 1;
    const uint8_t *hdr = (const uint8_t *)(info->dlpi_addr + eh->p_vaddr);
    size_t off = 4;
    switch (hdr[1] & 0x0f) { /* skip eh_frame_ptr, whatever its size */
    case 0x03:               /* udata4 */
    case 0x0b:               /* sdata4 */
        off += 4;
        break;
    case 0x00: /* absptr */
    case 0x04: /* udata8 */
    case 0x0c: /* sdata8 */
        off += 8;
        break;
    default:
        return 1;
    }
    if (hdr[0] != 1 || hdr[2] != 0x03 || hdr[3] != 0x3b)
        return 1;
    uint32_t count;
    memcpy(&count, hdr + off, sizeof count);
    const uint8_t *table = hdr + off + 4; /* count pairs of int32 (initial_loc, fde) */
    uint32_t lo = 0, hi = count;
    while (lo < hi) { /* first entry whose start is above pc */
        uint32_t mid = lo + (hi - lo) / 2;
        int32_t loc;
        memcpy(&loc, table + (size_t)mid * 8, sizeof loc);
        if ((uintptr_t)hdr + (intptr_t)loc <= q->pc)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return 1;
    int32_t start, next;
    memcpy(&start, table + (size_t)(lo - 1) * 8, sizeof start);
    q->lo = (uintptr_t)hdr + (intptr_t)start;
    if (lo < count) {
        memcpy(&next, table + (size_t)lo * 8, sizeof next);
        q->hi = (uintptr_t)hdr + (intptr_t)next;
    } else {
        q->hi = seg_end;
    }
    q->found = true;
    return 1;
}

/* Called while Ruby code is requiring the extension: the native stack runs through
 * rb_vm_exec() -> vm_exec_core() -> ... -> here. */
static void probe_eval_loop(void)
{
    Dl_info info;
    if (!dladdr((void *)(uintptr_t)&rb_profile_frames, &info) || !info.dli_fname) {
        eval_how = "libruby not found";
        return;
    }
    void *lib = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    void *exec = lib ? dlsym(lib, "rb_vm_exec") : NULL;
    const ElfW(Sym) *sym = NULL;
    Dl_info einfo;
    if (!exec || !dladdr1(exec, &einfo, (void **)&sym, RTLD_DL_SYMENT) || !sym || !sym->st_size) {
        if (lib)
            dlclose(lib);
        eval_how = "rb_vm_exec not found";
        return;
    }
    dlclose(lib);
    uintptr_t exec_lo = (uintptr_t)exec, exec_hi = exec_lo + sym->st_size;
    void *bt[128];
    int n = backtrace(bt, 128);
    for (int i = 1; i < n; i++) {
        uintptr_t pc = (uintptr_t)bt[i];
        if (pc <= exec_lo || pc > exec_hi)
            continue;
        /* bt[i - 1] is a return address in the function rb_vm_exec called: the eval loop. */
        struct fde_query q = {.pc = (uintptr_t)bt[i - 1] - 1};
        dl_iterate_phdr(fde_cb, &q);
        Dl_info cinfo;
        if (q.found && q.hi - q.lo >= 4096 && dladdr(bt[i - 1], &cinfo) &&
            cinfo.dli_fbase == einfo.dli_fbase) {
            eval_lo = q.lo;
            eval_hi = q.hi;
            eval_how = "callee of rb_vm_exec";
        } else {
            eval_how = "callee of rb_vm_exec not understood";
        }
        return;
    }
    eval_how = "rb_vm_exec not on the stack";
}

static int mp_is_eval_frame(void *ctx, const char *function, const char *module, uint64_t pc)
{
    (void)ctx, (void)module;
    if (eval_hi)
        return pc > eval_lo && pc <= eval_hi; /* pc is a return address */
    return function && (strcmp(function, "rb_vm_exec") == 0 || strcmp(function, "vm_exec") == 0);
}

/* ---- registration, end of VM, stats ------------------------------------------------------ */

/* The exit finalizer (see the top of the file). Runs with the GVL, VM intact. */
static VALUE vm_exit_finalizer(RB_BLOCK_CALL_FUNC_ARGLIST(yielded, arg))
{
    (void)yielded, (void)arg, (void)argc, (void)argv, (void)blockarg;
    atomic_store_explicit(&vm_gone, 1, memory_order_release);
    uint32_t n = atomic_load_explicit(&entry_count, memory_order_acquire);
    for (uint32_t i = 0; i < n; i++)
        resolve_entry(entry_at(i));
    return Qnil;
}

static VALUE exit_sentinel = Qnil; /* never collected: its finalizer runs at exit */

static int source_id = -1;

int mp_frames_init(void)
{
    if (source_id >= 0)
        return source_id;
    /* Registered before it is set: registering allocates, which may run the GC. The data
     * pointer is never used, but must not be NULL or the GC skips the mark function. */
    rb_gc_register_address(&holder);
    holder = TypedData_Wrap_Struct(rb_cObject, &holder_type, (void *)&entry_count);
    probe_eval_loop();
    memprof_frame_source src = {
        .size = sizeof src,
        .name = "ruby",
        .capture = mp_capture,
        .resolve = mp_resolve,
        .is_eval_frame = mp_is_eval_frame,
        .ctx = NULL,
    };
    /* Its allocation hooks are the profiler's own: stacks start at their caller (runtime.h). */
    memprof_register_hook_code((const void *)(uintptr_t)&mp_frames_init);
    int rc = memprof_register_frame_source(&src);
    if (rc >= 0) {
        source_id = rc;
        rb_gc_register_address(&exit_sentinel);
        exit_sentinel = rb_obj_alloc(rb_cObject);
        rb_define_finalizer(exit_sentinel, rb_proc_new(vm_exit_finalizer, Qnil));
    }
    return rc;
}

static void set_u64(VALUE hash, const char *key, unsigned long long v)
{
    rb_hash_aset(hash, ID2SYM(rb_intern(key)), ULL2NUM(v));
}

/* The statistics' counters, each read alone: nothing is ordered with them. */
#define COUNT(counter) atomic_load_explicit(&(counter), memory_order_relaxed)

void mp_frames_stats(VALUE hash)
{
    set_u64(hash, "ruby_frames_interned", COUNT(entry_count));
    set_u64(hash, "ruby_captures", COUNT(n_captures));
    set_u64(hash, "ruby_captures_without_gvl", COUNT(n_no_gvl));
    set_u64(hash, "ruby_captures_in_gc", COUNT(n_in_gc));
    set_u64(hash, "ruby_captures_busy", COUNT(n_busy));
    set_u64(hash, "ruby_captures_after_vm_end", COUNT(n_after_vm));
    set_u64(hash, "ruby_frame_table_full", COUNT(n_table_full));
    rb_hash_aset(hash, ID2SYM(rb_intern("ruby_eval_loop")), rb_str_new_cstr(eval_how));
    rb_hash_aset(hash, ID2SYM(rb_intern("ruby_frame_source")), INT2NUM(source_id));
}
