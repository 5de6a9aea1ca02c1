/* SPDX-License-Identifier: MIT */
/*
 * The C half of the Ruby binding, `require 'memprof/memprof_ext'`: thin wrappers over the
 * public libmemprof API (memprof.h) in `Memprof::Native`, and the `Memprof::Snapshot` class
 * wrapping an opaque memprof_snapshot (with the views of MEMPROF_1.2: peak, heap over time,
 * each view's ranked sites). lib/memprof.rb builds the documented Ruby API on top
 * (keyword arguments, exceptions, frames as structs, top_allocators): this file returns
 * plain integers, strings and arrays, and return codes where the Ruby side chooses the
 * exception. Everything here runs with the GVL held; nothing releases it, so the frame
 * source's resolve callback (frames.c), which creates Ruby strings, runs on a thread that
 * may do so. memprof_start() needs no LD_PRELOAD: the library patches the allocator slots of
 * every loaded object (libruby's included) at run time.
 */
#include "binding.h"

#include <errno.h>

static VALUE mMemprof, mNative, cSnapshot;

/* Raises the exception lib/memprof.rb maps `rc` to (Memprof.raise_error), with a context
 * string such as "Memprof.snapshot". */
static void mp_raise(int rc, const char *context) __attribute__((noreturn));
static void mp_raise(int rc, const char *context)
{
    ID raise_error = rb_intern("raise_error");
    if (rb_obj_respond_to(mMemprof, raise_error, TRUE)) /* private too */
        rb_funcall(mMemprof, raise_error, 2, INT2NUM(rc), rb_str_new_cstr(context));
    rb_raise(rb_eRuntimeError, "%s: %s (%d)", context, memprof_strerror(rc), rc);
}

/* ---- Memprof::Native: lifecycle and statistics ------------------------------------------- */

static VALUE native_init(VALUE self, VALUE rate)
{
    (void)self;
    return INT2NUM(memprof_init(NUM2ULL(rate)));
}

static VALUE native_start(VALUE self)
{
    (void)self;
    return INT2NUM(memprof_start());
}

static VALUE native_stop(VALUE self)
{
    (void)self;
    return INT2NUM(memprof_stop());
}

static VALUE native_shutdown(VALUE self)
{
    (void)self;
    mp_objects_disable();
    memprof_shutdown();
    return Qnil;
}

static VALUE native_strerror(VALUE self, VALUE rc)
{
    (void)self;
    return rb_str_new_cstr(memprof_strerror(NUM2INT(rc)));
}

static VALUE native_library_version(VALUE self)
{
    (void)self;
    return rb_str_new_cstr(memprof_version_string());
}

static VALUE state_symbol(uint32_t state)
{
    static const char *const names[] = {"uninitialized", "initialized", "active", "stopped",
                                        "shutdown"};
    return ID2SYM(rb_intern(state < 5 ? names[state] : "unknown"));
}

static VALUE native_state(VALUE self)
{
    (void)self;
    memprof_stats st = {.size = sizeof st};
    int rc = memprof_get_stats(&st);
    if (rc < 0)
        mp_raise(rc, "Memprof.state");
    return state_symbol(st.state);
}

#define SET(h, name, v) rb_hash_aset((h), ID2SYM(rb_intern(name)), ULL2NUM(v))

static VALUE native_stats(VALUE self)
{
    (void)self;
    memprof_stats st = {.size = sizeof st};
    int rc = memprof_get_stats(&st);
    if (rc < 0)
        mp_raise(rc, "Memprof.stats");
    VALUE h = rb_hash_new();
    rb_hash_aset(h, ID2SYM(rb_intern("state")), state_symbol(st.state));
    SET(h, "sampling_rate", st.sampling_rate);
    SET(h, "total_samples", st.total_samples);
    SET(h, "live_samples", st.live_samples);
    SET(h, "freed_samples", st.freed_samples);
    SET(h, "unique_stacks", st.unique_stacks);
    SET(h, "estimated_live_bytes", st.estimated_live_bytes);
    SET(h, "heap_map_capacity", st.heap_map_capacity);
    SET(h, "heap_map_used", st.heap_map_used);
    SET(h, "heap_map_full_drops", st.heap_map_full_drops);
    SET(h, "stack_table_capacity", st.stack_table_capacity);
    SET(h, "stack_table_overflows", st.stack_table_overflows);
    SET(h, "bloom_rebuilds", st.bloom_rebuilds);
    SET(h, "bloom_fill_permille", st.bloom_fill_permille);
    SET(h, "death_during_birth", st.death_during_birth);
    SET(h, "tombstones_reused", st.tombstones_reused);
    SET(h, "reentrant_skips", st.reentrant_skips);
    SET(h, "truncated_stacks", st.truncated_stacks);
    SET(h, "profiler_bytes", st.profiler_bytes);
    rb_hash_aset(h, ID2SYM(rb_intern("unwinder")),
                 ID2SYM(rb_intern(st.unwinder == MEMPROF_UNWIND_FP      ? "fp"
                                  : st.unwinder == MEMPROF_UNWIND_DWARF ? "dwarf"
                                                                        : "default")));
    SET(h, "stack_depth_min", st.stack_depth_min);
    SET(h, "stack_depth_total", st.stack_depth_total);
    SET(h, "shallow_stacks", st.shallow_stacks);
    SET(h, "unwind_confidence_permille", st.unwind_confidence_permille);
    SET(h, "resolved_addresses", st.resolved_addresses);
    SET(h, "unresolved_addresses", st.unresolved_addresses);
    SET(h, "write_failures", st.write_failures);
    mp_frames_stats(h);
    rb_hash_aset(h, ID2SYM(rb_intern("ruby_objects")), mp_objects_enabled() ? Qtrue : Qfalse);
    return h;
}

/* memprof_set_temporary_threshold(); returns the library's return code (lib/memprof.rb
 * validates the value and raises). */
static VALUE native_set_temporary_threshold(VALUE self, VALUE ns)
{
    (void)self;
    return INT2NUM(memprof_set_temporary_threshold(NUM2ULL(ns)));
}

static VALUE native_objects_enable(VALUE self, VALUE slot_size)
{
    (void)self;
    mp_objects_enable(NUM2SIZET(slot_size));
    return Qnil;
}

static VALUE native_objects_pause(VALUE self)
{
    (void)self;
    mp_objects_pause();
    return Qnil;
}

static VALUE native_objects_enabled(VALUE self)
{
    (void)self;
    return mp_objects_enabled() ? Qtrue : Qfalse;
}

/* ---- Memprof::Snapshot ------------------------------------------------------------------ */

struct mp_snapshot {
    memprof_snapshot *snap; /* NULL once released */
    memprof_estimate est;
};

static void snapshot_free(void *ptr)
{
    struct mp_snapshot *s = ptr;
    memprof_free_snapshot(s->snap);
    ruby_xfree(s);
}

static size_t snapshot_memsize(const void *ptr)
{
    const struct mp_snapshot *s = ptr;
    /* The snapshot's own memory is mmap'ed by the library and not measurable through the
     * API; count a sample record per live sample as a lower bound. */
    return sizeof *s + (s->snap ? s->est.live_samples * sizeof(memprof_sample_info) : 0);
}

static const rb_data_type_t snapshot_type = {
    .wrap_struct_name = "Memprof::Snapshot",
    .function = {.dmark = NULL, .dfree = snapshot_free, .dsize = snapshot_memsize},
    .flags = RUBY_TYPED_FREE_IMMEDIATELY,
};

static VALUE snapshot_alloc(VALUE klass)
{
    struct mp_snapshot *s;
    return TypedData_Make_Struct(klass, struct mp_snapshot, &snapshot_type, s);
}

/* The live handle, or a Memprof::StateError if the snapshot was released. */
static struct mp_snapshot *get_snapshot(VALUE self)
{
    struct mp_snapshot *s;
    TypedData_Get_Struct(self, struct mp_snapshot, &snapshot_type, s);
    if (!s->snap) {
        /* The binding's own state, not a library error: no errno. */
        VALUE klass = rb_const_defined(mMemprof, rb_intern("StateError"))
                          ? rb_const_get(mMemprof, rb_intern("StateError"))
                          : rb_eRuntimeError;
        rb_raise(klass, "Memprof::Snapshot: this snapshot was released (Snapshot#release)");
    }
    return s;
}

static VALUE native_snapshot(VALUE self)
{
    (void)self;
    memprof_snapshot *snap = NULL;
    int rc = memprof_get_snapshot(&snap);
    if (rc < 0)
        mp_raise(rc, "Memprof.snapshot");
    VALUE obj = snapshot_alloc(cSnapshot);
    struct mp_snapshot *s = DATA_PTR(obj);
    s->snap = snap;
    s->est.size = sizeof s->est;
    rc = memprof_snapshot_estimate(snap, &s->est);
    if (rc < 0)
        mp_raise(rc, "Memprof.snapshot (estimate)");
    return obj;
}

/* Estimate accessors: values were read once, when the snapshot was taken. */
#define EST_READER(name, field)                                                                    \
    static VALUE snapshot_##name(VALUE self)                                                       \
    {                                                                                              \
        return ULL2NUM(get_snapshot(self)->est.field);                                             \
    }
EST_READER(live_samples, live_samples)
EST_READER(estimated_heap_bytes, bytes)
EST_READER(estimated_heap_bytes_low, bytes_low)
EST_READER(estimated_heap_bytes_high, bytes_high)
EST_READER(estimated_count, count)
EST_READER(estimated_count_low, count_low)
EST_READER(estimated_count_high, count_high)
EST_READER(sampling_rate, sampling_rate)
EST_READER(timestamp_ns, timestamp_ns)

static VALUE snapshot_low_confidence_p(VALUE self)
{
    return get_snapshot(self)->est.low_confidence ? Qtrue : Qfalse;
}

static VALUE snapshot_sample_raw(VALUE self, VALUE index)
{
    struct mp_snapshot *s = get_snapshot(self);
    memprof_sample_info si = {.size = sizeof si};
    int rc = memprof_snapshot_sample(s->snap, NUM2SIZET(index), &si);
    if (rc < 0)
        mp_raise(rc, "Memprof::Snapshot#samples");
    return rb_ary_new_from_args(5, ULL2NUM(si.bytes), ULL2NUM(si.estimated_bytes),
                                DBL2NUM(si.estimated_count), ULL2NUM(si.timestamp_ns),
                                UINT2NUM(si.stack_id));
}

static VALUE snapshot_site_count(VALUE self)
{
    return SIZET2NUM(memprof_snapshot_site_count(get_snapshot(self)->snap));
}

static VALUE snapshot_site_raw(VALUE self, VALUE index)
{
    struct mp_snapshot *s = get_snapshot(self);
    memprof_site_info si = {.size = sizeof si};
    int rc = memprof_snapshot_site(s->snap, NUM2SIZET(index), &si);
    if (rc < 0)
        mp_raise(rc, "Memprof::Snapshot#sites");
    VALUE a = rb_ary_new_capa(9);
    rb_ary_push(a, UINT2NUM(si.stack_id));
    rb_ary_push(a, ULL2NUM(si.live_samples));
    rb_ary_push(a, ULL2NUM(si.live_bytes));
    rb_ary_push(a, ULL2NUM(si.live_bytes_low));
    rb_ary_push(a, ULL2NUM(si.live_bytes_high));
    rb_ary_push(a, ULL2NUM(si.live_count));
    rb_ary_push(a, ULL2NUM(si.alloc_samples));
    rb_ary_push(a, ULL2NUM(si.alloc_bytes));
    rb_ary_push(a, ULL2NUM(si.alloc_count));
    return a;
}

static VALUE str_or_nil(const char *s)
{
    return s ? rb_str_new_cstr(s) : Qnil;
}

/* A stack, leaf first, as [function, file, line, flags, module, address, build_id] arrays. */
static VALUE snapshot_stack_raw(VALUE self, VALUE stack_id)
{
    struct mp_snapshot *s = get_snapshot(self);
    uint32_t id = NUM2UINT(stack_id);
    int depth = memprof_snapshot_stack_depth(s->snap, id);
    if (depth < 0)
        mp_raise(depth, "Memprof::Snapshot#stack");
    VALUE frames = rb_ary_new_capa(depth);
    for (int i = 0; i < depth; i++) {
        memprof_frame f = {.size = sizeof f};
        int rc = memprof_snapshot_frame(s->snap, id, (size_t)i, &f);
        if (rc < 0)
            mp_raise(rc, "Memprof::Snapshot#stack");
        VALUE a = rb_ary_new_capa(7);
        rb_ary_push(a, str_or_nil(f.function));
        rb_ary_push(a, str_or_nil(f.file));
        rb_ary_push(a, UINT2NUM(f.line));
        rb_ary_push(a, UINT2NUM(f.flags));
        rb_ary_push(a, str_or_nil(f.module));
        rb_ary_push(a, ULL2NUM(f.address));
        rb_ary_push(a, str_or_nil(f.build_id));
        rb_ary_push(frames, a);
    }
    return frames;
}

/* Writes the snapshot; returns the library's return code (lib/memprof.rb raises). */
static VALUE snapshot_write_raw(VALUE self, VALUE path, VALUE format)
{
    struct mp_snapshot *s = get_snapshot(self);
    const char *p = StringValueCStr(path);
    return INT2NUM(memprof_snapshot_write(s->snap, p, (memprof_format)NUM2INT(format)));
}

/* ---- views (MEMPROF_1.2): peak, heap over time, ranked sites ----------------------------- */

/* The peak as [bytes, bytes_low, bytes_high, count, samples, time_ns, duration_ns,
 * allocated_bytes, temporary_threshold_ns]; lib/memprof/snapshot.rb makes a Memprof::Peak. */
static VALUE snapshot_peak_raw(VALUE self)
{
    struct mp_snapshot *s = get_snapshot(self);
    memprof_peak_info p = {.size = sizeof p};
    int rc = memprof_snapshot_peak(s->snap, &p);
    if (rc < 0)
        mp_raise(rc, "Memprof::Snapshot#peak");
    VALUE a = rb_ary_new_capa(9);
    rb_ary_push(a, ULL2NUM(p.bytes));
    rb_ary_push(a, ULL2NUM(p.bytes_low));
    rb_ary_push(a, ULL2NUM(p.bytes_high));
    rb_ary_push(a, ULL2NUM(p.count));
    rb_ary_push(a, ULL2NUM(p.samples));
    rb_ary_push(a, ULL2NUM(p.time_ns));
    rb_ary_push(a, ULL2NUM(p.duration_ns));
    rb_ary_push(a, ULL2NUM(p.allocated_bytes));
    rb_ary_push(a, ULL2NUM(p.temporary_threshold_ns));
    return a;
}

/* The heap over time, oldest first, as [time_ns, live_bytes, allocated_bytes] arrays. */
static VALUE snapshot_series_raw(VALUE self)
{
    struct mp_snapshot *s = get_snapshot(self);
    /* A snapshot is immutable, so the count asked for first is the count copied. */
    size_t n = memprof_snapshot_series(s->snap, NULL, 0);
    memprof_heap_point *pts = n ? ruby_xcalloc(n, sizeof *pts) : NULL;
    if (n)
        n = memprof_snapshot_series(s->snap, pts, n);
    VALUE points = rb_ary_new_capa((long)n);
    for (size_t i = 0; i < n; i++)
        rb_ary_push(points,
                    rb_ary_new_from_args(3, ULL2NUM(pts[i].time_ns), ULL2NUM(pts[i].live_bytes),
                                         ULL2NUM(pts[i].allocated_bytes)));
    ruby_xfree(pts);
    return points;
}

/* The number of sites a view (a Native::VIEW_* value) ranks. */
static VALUE snapshot_view_site_count(VALUE self, VALUE view)
{
    return SIZET2NUM(
        memprof_snapshot_view_site_count(get_snapshot(self)->snap, (memprof_view)NUM2INT(view)));
}

/* A view's site as [stack_id, flags, bytes, bytes_low, bytes_high, count, samples,
 * lifetime_p50_ns, lifetime_p90_ns, leak_rate]. */
static VALUE snapshot_view_site_raw(VALUE self, VALUE view, VALUE index)
{
    struct mp_snapshot *s = get_snapshot(self);
    memprof_view_site vs = {.size = sizeof vs};
    int rc =
        memprof_snapshot_view_site(s->snap, (memprof_view)NUM2INT(view), NUM2SIZET(index), &vs);
    if (rc < 0)
        mp_raise(rc, "Memprof::Snapshot#sites");
    VALUE a = rb_ary_new_capa(10);
    rb_ary_push(a, UINT2NUM(vs.stack_id));
    rb_ary_push(a, UINT2NUM(vs.flags));
    rb_ary_push(a, ULL2NUM(vs.bytes));
    rb_ary_push(a, ULL2NUM(vs.bytes_low));
    rb_ary_push(a, ULL2NUM(vs.bytes_high));
    rb_ary_push(a, ULL2NUM(vs.count));
    rb_ary_push(a, ULL2NUM(vs.samples));
    rb_ary_push(a, ULL2NUM(vs.lifetime_p50_ns));
    rb_ary_push(a, ULL2NUM(vs.lifetime_p90_ns));
    rb_ary_push(a, DBL2NUM(vs.leak_rate));
    return a;
}

static VALUE snapshot_release(VALUE self)
{
    struct mp_snapshot *s;
    TypedData_Get_Struct(self, struct mp_snapshot, &snapshot_type, s);
    memprof_free_snapshot(s->snap);
    s->snap = NULL;
    return Qnil;
}

static VALUE snapshot_released_p(VALUE self)
{
    struct mp_snapshot *s;
    TypedData_Get_Struct(self, struct mp_snapshot, &snapshot_type, s);
    return s->snap ? Qfalse : Qtrue;
}

/* ---- entry point ------------------------------------------------------------------------- */

/* Whether a function is an allocator or an allocator wrapper (the library's list and
 * MEMPROF_WRAPPERS): never the frame that names a site. */
static VALUE native_allocator_function_p(VALUE self, VALUE name)
{
    (void)self;
    return memprof_is_allocator_function(StringValueCStr(name)) == 1 ? Qtrue : Qfalse;
}

void Init_memprof_ext(void)
{
    mMemprof = rb_define_module("Memprof");
    mNative = rb_define_module_under(mMemprof, "Native");
    rb_define_module_function(mNative, "init", native_init, 1);
    rb_define_module_function(mNative, "start", native_start, 0);
    rb_define_module_function(mNative, "stop", native_stop, 0);
    rb_define_module_function(mNative, "shutdown", native_shutdown, 0);
    rb_define_module_function(mNative, "state", native_state, 0);
    rb_define_module_function(mNative, "allocator_function?", native_allocator_function_p, 1);
    rb_define_module_function(mNative, "stats", native_stats, 0);
    rb_define_module_function(mNative, "snapshot", native_snapshot, 0);
    rb_define_module_function(mNative, "strerror", native_strerror, 1);
    rb_define_module_function(mNative, "library_version", native_library_version, 0);
    rb_define_module_function(mNative, "objects_enable", native_objects_enable, 1);
    rb_define_module_function(mNative, "objects_pause", native_objects_pause, 0);
    rb_define_module_function(mNative, "objects_enabled?", native_objects_enabled, 0);
    rb_define_module_function(mNative, "set_temporary_threshold", native_set_temporary_threshold,
                              1);
    rb_define_const(mNative, "FORMAT_AUTO", INT2NUM(MEMPROF_FORMAT_AUTO));
    rb_define_const(mNative, "FORMAT_PPROF", INT2NUM(MEMPROF_FORMAT_PPROF));
    rb_define_const(mNative, "FORMAT_SPEEDSCOPE", INT2NUM(MEMPROF_FORMAT_SPEEDSCOPE));
    rb_define_const(mNative, "FORMAT_COLLAPSED", INT2NUM(MEMPROF_FORMAT_COLLAPSED));
    rb_define_const(mNative, "FORMAT_TEXT", INT2NUM(MEMPROF_FORMAT_TEXT));
    rb_define_const(mNative, "FORMAT_HTML", INT2NUM(MEMPROF_FORMAT_HTML));
    /* Every format by name, from the library's one table (memprof_format_name()). */
    VALUE formats = rb_hash_new();
    for (int f = 1; memprof_format_name((memprof_format)f); f++)
        rb_hash_aset(formats, ID2SYM(rb_intern(memprof_format_name((memprof_format)f))),
                     INT2NUM(f));
    rb_define_const(mNative, "FORMATS", rb_obj_freeze(formats));
    rb_define_const(mNative, "FRAME_INLINED", UINT2NUM(MEMPROF_FRAME_INLINED));
    rb_define_const(mNative, "FRAME_RUNTIME", UINT2NUM(MEMPROF_FRAME_RUNTIME));
    rb_define_const(mNative, "FRAME_UNRESOLVED", UINT2NUM(MEMPROF_FRAME_UNRESOLVED));
    rb_define_const(mNative, "FRAME_TRUNCATED", UINT2NUM(MEMPROF_FRAME_TRUNCATED));
    rb_define_const(mNative, "DEFAULT_SAMPLING_RATE", UINT2NUM(MEMPROF_DEFAULT_SAMPLING_RATE));
    rb_define_const(mNative, "JOINED", INT2NUM(MEMPROF_JOINED));
    rb_define_const(mNative, "VIEW_LIVE", INT2NUM(MEMPROF_VIEW_LIVE));
    rb_define_const(mNative, "VIEW_ALLOC", INT2NUM(MEMPROF_VIEW_ALLOC));
    rb_define_const(mNative, "VIEW_PEAK", INT2NUM(MEMPROF_VIEW_PEAK));
    rb_define_const(mNative, "VIEW_TEMPORARY", INT2NUM(MEMPROF_VIEW_TEMPORARY));
    rb_define_const(mNative, "VIEW_LEAKS", INT2NUM(MEMPROF_VIEW_LEAKS));
    rb_define_const(mNative, "SITE_LOW_INFORMATION", UINT2NUM(MEMPROF_SITE_LOW_INFORMATION));
    rb_define_const(mNative, "SITE_LEAK_SUSPECT", UINT2NUM(MEMPROF_SITE_LEAK_SUSPECT));

    cSnapshot = rb_define_class_under(mMemprof, "Snapshot", rb_cObject);
    rb_undef_alloc_func(cSnapshot); /* only Memprof.snapshot makes them */
    rb_define_method(cSnapshot, "live_samples", snapshot_live_samples, 0);
    rb_define_method(cSnapshot, "estimated_heap_bytes", snapshot_estimated_heap_bytes, 0);
    rb_define_method(cSnapshot, "estimated_heap_bytes_low", snapshot_estimated_heap_bytes_low, 0);
    rb_define_method(cSnapshot, "estimated_heap_bytes_high", snapshot_estimated_heap_bytes_high, 0);
    rb_define_method(cSnapshot, "estimated_count", snapshot_estimated_count, 0);
    rb_define_method(cSnapshot, "estimated_count_low", snapshot_estimated_count_low, 0);
    rb_define_method(cSnapshot, "estimated_count_high", snapshot_estimated_count_high, 0);
    rb_define_method(cSnapshot, "sampling_rate", snapshot_sampling_rate, 0);
    rb_define_method(cSnapshot, "timestamp_ns", snapshot_timestamp_ns, 0);
    rb_define_method(cSnapshot, "low_confidence?", snapshot_low_confidence_p, 0);
    rb_define_method(cSnapshot, "site_count", snapshot_site_count, 0);
    rb_define_private_method(cSnapshot, "sample_raw", snapshot_sample_raw, 1);
    rb_define_private_method(cSnapshot, "site_raw", snapshot_site_raw, 1);
    rb_define_private_method(cSnapshot, "stack_raw", snapshot_stack_raw, 1);
    rb_define_private_method(cSnapshot, "write_raw", snapshot_write_raw, 2);
    rb_define_private_method(cSnapshot, "peak_raw", snapshot_peak_raw, 0);
    rb_define_private_method(cSnapshot, "series_raw", snapshot_series_raw, 0);
    rb_define_private_method(cSnapshot, "view_site_count", snapshot_view_site_count, 1);
    rb_define_private_method(cSnapshot, "view_site_raw", snapshot_view_site_raw, 2);
    rb_define_method(cSnapshot, "release", snapshot_release, 0);
    rb_define_method(cSnapshot, "released?", snapshot_released_p, 0);

    /* Ruby frames for every sample from now on, also when the engine was started by
     * someone else (the LD_PRELOAD plugin, another library). */
    int rc = mp_frames_init();
    if (rc < 0)
        rb_warn("memprof: no Ruby frames in profiles: %s", memprof_strerror(rc));
}
