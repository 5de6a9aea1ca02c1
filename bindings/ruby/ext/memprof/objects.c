/* SPDX-License-Identifier: MIT */
/*
 * Ruby objects as allocations (`Memprof.start(objects: true)`).
 *
 * Ruby 3.1 takes its object heap pages from mmap (16 KiB pages, carved out of 32 KiB
 * anonymous mappings), not from malloc, so the allocator hooks never see them: without this
 * file a profile shows the malloc'ed parts of objects (long strings, arrays, hash tables)
 * but not the 40-byte slots. With it, each new object is reported to the sampler as a
 * 40-byte allocation keyed by its address (memprof_report_alloc(); ids live apart from
 * malloc addresses), and each swept object as its free, through the VM's internal NEWOBJ and
 * FREEOBJ tracepoint events. Sampling is the engine's: an object costs one countdown
 * decrement in memprof_report_alloc() unless it is sampled, and then the sample carries the
 * Ruby stack of the code that created it.
 *
 * The cost is the VM's, not ours: with a NEWOBJ hook enabled, every object allocation
 * takes the VM's slow path and calls the hook (measured in bench/ruby_overhead.rb), which
 * is why this is opt-in. Limits: GC.compact moves objects without an event, so a sampled
 * object that moves stays "live" under its old address until the end of the process; and
 * objects whose slots were allocated before Memprof.start are not reported (their frees
 * are looked up and ignored).
 *
 * Hooks run inside object allocation and GC sweep: they must not allocate Ruby objects,
 * and they call only the two reporting functions (which allocate nothing unless they
 * sample; a sample runs the frame source's capture, which is safe there).
 */
#include "binding.h"

#include <ruby/debug.h>

static VALUE tp_new = Qnil, tp_free = Qnil; /* registered with the GC in mp_objects_enable */
static size_t slot_bytes = 40;

static void on_newobj(VALUE tpval, void *data)
{
    (void)data;
    rb_trace_arg_t *ta = rb_tracearg_from_tracepoint(tpval);
    memprof_report_alloc((uint64_t)rb_tracearg_object(ta), slot_bytes);
}

static void on_freeobj(VALUE tpval, void *data)
{
    (void)data;
    rb_trace_arg_t *ta = rb_tracearg_from_tracepoint(tpval);
    memprof_report_free((uint64_t)rb_tracearg_object(ta));
}

void mp_objects_enable(size_t slot_size)
{
    if (NIL_P(tp_new)) {
        rb_gc_register_address(&tp_new);
        rb_gc_register_address(&tp_free);
        tp_new = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_NEWOBJ, on_newobj, NULL);
        tp_free = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_FREEOBJ, on_freeobj, NULL);
    }
    if (slot_size)
        slot_bytes = slot_size;
    /* Frees first, so no reported object can be freed unseen. */
    if (!RTEST(rb_tracepoint_enabled_p(tp_free)))
        rb_tracepoint_enable(tp_free);
    if (!RTEST(rb_tracepoint_enabled_p(tp_new)))
        rb_tracepoint_enable(tp_new);
}

void mp_objects_pause(void)
{
    if (!NIL_P(tp_new) && RTEST(rb_tracepoint_enabled_p(tp_new)))
        rb_tracepoint_disable(tp_new);
}

void mp_objects_disable(void)
{
    mp_objects_pause();
    if (!NIL_P(tp_free) && RTEST(rb_tracepoint_enabled_p(tp_free)))
        rb_tracepoint_disable(tp_free);
}

int mp_objects_enabled(void)
{
    return !NIL_P(tp_new) && RTEST(rb_tracepoint_enabled_p(tp_new));
}
