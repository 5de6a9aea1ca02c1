/* SPDX-License-Identifier: MIT */
/*
 * The extension module `memprof._memprof`: a thin, low-level layer over libmemprof's public
 * C API (memprof.h, runtime.h) for the Python package `memprof`, which builds the user-facing
 * API (start/stop/get_snapshot/..., dataclasses) on top of it.
 *
 * It provides the engine lifecycle (init, start, stop, shutdown), the statistics as a dict,
 * the installation of the Python frame source and the PyMem hooks (frames.c, pymem.c), and a
 * `Snapshot` type that owns a memprof_snapshot handle and reads it through the accessors
 * (whole-heap estimate, live samples, call sites, resolved stacks, file output, and the views
 * of MEMPROF_1.2: the peak, the heap over time and each view's ranked sites).
 *
 * Errors: every libmemprof error code becomes a Python exception with the library's message
 * (memprof_strerror) and the context of the call: RuntimeError for a call in the wrong state
 * (-EBUSY, -ENOTCONN, -ESHUTDOWN, -EALREADY), NotImplementedError (a RuntimeError) for
 * -ENOTSUP, ValueError for -EINVAL, MemoryError for -ENOMEM, and OSError with the errno for
 * everything else (file-system errors when writing).
 *
 * The GIL stays held across calls into the library: they are short, the frame source's
 * resolve callback uses the GIL when it has it, and nothing in the library waits for it.
 */
#include "binding.h"

#include <errno.h>
#include <string.h>

/* ---- errors ------------------------------------------------------------------------------- */

/* Raises the exception for a libmemprof error code: "<what>: <strerror>[ (<hint>)]". */
static PyObject *raise_rc(int rc, const char *what, const char *hint)
{
    int err = rc < 0 ? -rc : rc;
    const char *msg = memprof_strerror(rc);
    PyObject *type;
    switch (err) {
    case EBUSY:
    case ENOTCONN:
    case ESHUTDOWN:
    case EALREADY:
        type = PyExc_RuntimeError;
        break;
    case ENOTSUP:
        type = PyExc_NotImplementedError;
        break;
    case EINVAL:
        type = PyExc_ValueError;
        break;
    case ENOMEM:
        type = PyExc_MemoryError;
        break;
    default: {
        PyObject *args = hint ? PyUnicode_FromFormat("%s: %s (%s)", what, msg, hint)
                              : PyUnicode_FromFormat("%s: %s", what, msg);
        PyObject *exc = args ? Py_BuildValue("(iO)", err, args) : NULL;
        if (exc)
            PyErr_SetObject(PyExc_OSError, exc);
        Py_XDECREF(exc);
        Py_XDECREF(args);
        return NULL;
    }
    }
    if (hint)
        PyErr_Format(type, "%s: %s (%s)", what, msg, hint);
    else
        PyErr_Format(type, "%s: %s", what, msg);
    return NULL;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

PyDoc_STRVAR(install_doc, "install() -> None\n\n"
                          "Registers the Python frame source and hooks the PyMem domains "
                          "(once per process; idempotent).");

static PyObject *mp_install(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    int rc = mp_frames_register();
    if (rc < 0)
        return raise_rc(rc, "memprof: cannot register the Python frame source", NULL);
    if (mp_pymem_install() < 0)
        return NULL;
    Py_RETURN_NONE;
}

PyDoc_STRVAR(init_doc,
             "init(rate_bytes, max_frames=0, unwinder=0) -> int\n\n"
             "memprof_init_config(): 0 if this call initialised the engine, JOINED if the "
             "engine is the preload plugin's or memprof attach's (the configuration is "
             "ignored), -errno.EALREADY if something else in the process initialised it.");

static PyObject *mp_init(PyObject *self, PyObject *args)
{
    (void)self;
    unsigned long long rate;
    unsigned int max_frames = 0, unwinder = 0;
    if (!PyArg_ParseTuple(args, "K|II:init", &rate, &max_frames, &unwinder))
        return NULL;
    memprof_config cfg;
    memprof_config_init(&cfg);
    cfg.sampling_rate = (uint64_t)rate;
    cfg.max_frames = max_frames;
    cfg.unwinder = unwinder;
    int rc = memprof_init_config(&cfg);
    if (rc == 0 || rc == MEMPROF_JOINED || rc == -EALREADY)
        return PyLong_FromLong(rc);
    if (rc == -ESHUTDOWN)
        return raise_rc(rc, "memprof: cannot start",
                        "memprof.shutdown() was called; profiling cannot be restarted in this "
                        "process");
    if (rc == -ENOTSUP)
        return raise_rc(rc, "memprof: cannot initialise the profiler",
                        "this build of libmemprof has no DWARF unwinder");
    return raise_rc(rc, "memprof: cannot initialise the profiler", NULL);
}

PyDoc_STRVAR(start_doc, "start() -> bool\n\n"
                        "memprof_start(): INITIALIZED or STOPPED -> ACTIVE. True when it joined "
                        "the profile of the preload plugin or memprof attach (MEMPROF_JOINED), "
                        "whose sampling goes on; the PyMem hooks are on in both cases.");

static PyObject *mp_start(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    int rc = memprof_start();
    /* Hooks on while the engine samples (also when something else started it). */
    mp_pymem_set_active(rc == 0 || rc == MEMPROF_JOINED || rc == -EBUSY);
    switch (rc) {
    case 0:
        Py_RETURN_FALSE;
    case MEMPROF_JOINED:
        Py_RETURN_TRUE;
    case -EBUSY:
        return raise_rc(rc, "memprof.start()",
                        "profiling is already active: started earlier, or by another user of "
                        "libmemprof in this process");
    case -ESHUTDOWN:
        return raise_rc(rc, "memprof.start()",
                        "memprof.shutdown() was called; profiling cannot be restarted in this "
                        "process");
    case -ENOTSUP:
        return raise_rc(rc, "memprof.start()",
                        "no allocator interposition backend is available in this process");
    default:
        return raise_rc(rc, "memprof.start()", NULL);
    }
}

PyDoc_STRVAR(stop_doc, "stop() -> bool\n\nmemprof_stop(): ACTIVE -> STOPPED (frees stay tracked). "
                       "True when the profile is the preload plugin's or memprof attach's "
                       "(MEMPROF_JOINED): it goes on, and so do the PyMem hooks.");

static PyObject *mp_stop(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    int rc = memprof_stop();
    switch (rc) {
    case 0:
        mp_pymem_set_active(0);
        Py_RETURN_FALSE;
    case MEMPROF_JOINED:
        Py_RETURN_TRUE;
    case -EBUSY:
        return raise_rc(rc, "memprof.stop()", "profiling is not running");
    case -ENOTCONN:
        return raise_rc(rc, "memprof.stop()", "profiling was never started");
    case -ESHUTDOWN:
        return raise_rc(rc, "memprof.stop()", "memprof.shutdown() was called");
    default:
        return raise_rc(rc, "memprof.stop()", NULL);
    }
}

PyDoc_STRVAR(shutdown_doc, "shutdown() -> None\n\nmemprof_shutdown(): one-way; nothing when "
                           "the profile is the preload plugin's or memprof attach's.");

/* The engine's state (MEMPROF_STATE_*). */
static uint32_t engine_state(void)
{
    memprof_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    return memprof_get_stats(&s) < 0 ? MEMPROF_STATE_UNINITIALIZED : s.state;
}

static PyObject *mp_shutdown(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    memprof_shutdown();
    /* A joined profile goes on (memprof_shutdown() does nothing then): so do the hooks. */
    if (engine_state() != MEMPROF_STATE_ACTIVE)
        mp_pymem_set_active(0);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(write_exit_profile_doc,
             "write_exit_profile() -> int\n\nmemprof_write_exit_profile(): the launcher's "
             "exit-time profile, now (0, or a negative errno: -ENOTSUP without one, -EALREADY "
             "when written).");

static PyObject *mp_write_exit_profile(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    /* The writing thread does not need the GIL; other threads may run meanwhile. */
    PyThreadState *ts = PyEval_SaveThread();
    int rc = memprof_write_exit_profile();
    PyEval_RestoreThread(ts);
    return PyLong_FromLong(rc);
}

PyDoc_STRVAR(strerror_doc, "strerror(code) -> str\n\nmemprof_strerror().");

static PyObject *mp_strerror(PyObject *self, PyObject *arg)
{
    (void)self;
    int overflow = 0;
    long code = PyLong_AsLongAndOverflow(arg, &overflow);
    if (code == -1 && PyErr_Occurred())
        return NULL;
    if (overflow || code < INT32_MIN || code > INT32_MAX)
        code = INT32_MIN;
    return PyUnicode_FromString(memprof_strerror((int)code));
}

/* ---- statistics --------------------------------------------------------------------------- */

static int set_u64(PyObject *d, const char *key, uint64_t v)
{
    PyObject *o = PyLong_FromUnsignedLongLong(v);
    int rc = o ? PyDict_SetItemString(d, key, o) : -1;
    Py_XDECREF(o);
    return rc;
}

static int set_str(PyObject *d, const char *key, const char *v)
{
    PyObject *o = PyUnicode_FromString(v);
    int rc = o ? PyDict_SetItemString(d, key, o) : -1;
    Py_XDECREF(o);
    return rc;
}

PyDoc_STRVAR(stats_doc, "stats() -> dict\n\nmemprof_get_stats() as a dict, plus the binding's "
                        "own counters (python_*, pymem_*).");

static PyObject *mp_stats(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    memprof_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    int rc = memprof_get_stats(&s);
    if (rc < 0)
        return raise_rc(rc, "memprof.get_stats()", NULL);
    PyObject *d = PyDict_New();
    if (!d)
        return NULL;
#define U(field) set_u64(d, #field, s.field)
    if (U(state) || U(sampling_rate) || U(total_samples) || U(live_samples) || U(freed_samples) ||
        U(unique_stacks) || U(estimated_live_bytes) || U(heap_map_capacity) || U(heap_map_used) ||
        U(heap_map_full_drops) || U(stack_table_capacity) || U(stack_table_overflows) ||
        U(bloom_rebuilds) || U(bloom_fill_permille) || U(death_during_birth) ||
        U(tombstones_reused) || U(reentrant_skips) || U(truncated_stacks) || U(profiler_bytes) ||
        U(unwinder) || U(stack_depth_min) || U(stack_depth_total) || U(shallow_stacks) ||
        U(unwind_confidence_permille) || U(resolved_addresses) || U(unresolved_addresses) ||
        set_u64(d, "python_frames_interned", mp_frames_interned()) ||
        set_u64(d, "python_eval_frames_replaced", mp_frames_eval_matches()) ||
        set_u64(d, "pymem_samples", mp_pymem_sampled()) ||
        set_u64(d, "pymem_relocated_live", mp_pymem_relocated_live()) ||
        set_u64(d, "pymem_dropped", mp_pymem_dropped()) ||
        set_str(d, "pymem_obj_mode", mp_pymem_mode_name(mp_pymem_mode(PYMEM_DOMAIN_OBJ))) ||
        set_str(d, "pymem_mem_mode", mp_pymem_mode_name(mp_pymem_mode(PYMEM_DOMAIN_MEM))) ||
        set_u64(d, "pymem_hooks_outermost", (uint64_t)mp_pymem_outermost())) {
        Py_DECREF(d);
        return NULL;
    }
#undef U
    return d;
}

/* ---- Snapshot ----------------------------------------------------------------------------- */

typedef struct {
    PyObject_HEAD memprof_snapshot *snap;
} SnapshotObject;

static void snapshot_dealloc(SnapshotObject *self)
{
    memprof_free_snapshot(self->snap);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

PyDoc_STRVAR(estimate_doc, "estimate() -> dict\n\nmemprof_snapshot_estimate().");

static PyObject *snapshot_estimate(SnapshotObject *self, PyObject *unused)
{
    (void)unused;
    memprof_estimate e;
    memset(&e, 0, sizeof e);
    e.size = sizeof e;
    int rc = memprof_snapshot_estimate(self->snap, &e);
    if (rc < 0)
        return raise_rc(rc, "memprof: reading the snapshot's estimate", NULL);
    return Py_BuildValue(
        "{sKsKsKsKsKsKsKsKsKsO}", "live_samples", (unsigned long long)e.live_samples, "bytes",
        (unsigned long long)e.bytes, "bytes_low", (unsigned long long)e.bytes_low, "bytes_high",
        (unsigned long long)e.bytes_high, "count", (unsigned long long)e.count, "count_low",
        (unsigned long long)e.count_low, "count_high", (unsigned long long)e.count_high,
        "sampling_rate", (unsigned long long)e.sampling_rate, "timestamp_ns",
        (unsigned long long)e.timestamp_ns, "low_confidence",
        e.low_confidence ? Py_True : Py_False);
}

PyDoc_STRVAR(samples_doc,
             "samples() -> list of (bytes, estimated_bytes, estimated_count, timestamp_ns, "
             "stack_id)\n\nEvery live sample (memprof_snapshot_sample()).");

static PyObject *snapshot_samples(SnapshotObject *self, PyObject *unused)
{
    (void)unused;
    size_t n = memprof_snapshot_live_samples(self->snap);
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        memprof_sample_info si;
        memset(&si, 0, sizeof si);
        si.size = sizeof si;
        int rc = memprof_snapshot_sample(self->snap, i, &si);
        if (rc < 0) {
            Py_DECREF(list);
            return raise_rc(rc, "memprof: reading a snapshot sample", NULL);
        }
        PyObject *t = Py_BuildValue("(KKdKI)", (unsigned long long)si.bytes,
                                    (unsigned long long)si.estimated_bytes, si.estimated_count,
                                    (unsigned long long)si.timestamp_ns, (unsigned)si.stack_id);
        if (!t) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

PyDoc_STRVAR(sites_doc, "sites() -> list of (stack_id, live_samples, live_bytes, live_bytes_low, "
                        "live_bytes_high, live_count, alloc_samples, alloc_bytes, alloc_count)\n\n"
                        "Every call site, largest live bytes first (memprof_snapshot_site()).");

static PyObject *snapshot_sites(SnapshotObject *self, PyObject *unused)
{
    (void)unused;
    size_t n = memprof_snapshot_site_count(self->snap);
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        memprof_site_info si;
        memset(&si, 0, sizeof si);
        si.size = sizeof si;
        int rc = memprof_snapshot_site(self->snap, i, &si);
        if (rc < 0) {
            Py_DECREF(list);
            return raise_rc(rc, "memprof: reading a snapshot site", NULL);
        }
        PyObject *t =
            Py_BuildValue("(IKKKKKKKK)", (unsigned)si.stack_id, (unsigned long long)si.live_samples,
                          (unsigned long long)si.live_bytes, (unsigned long long)si.live_bytes_low,
                          (unsigned long long)si.live_bytes_high, (unsigned long long)si.live_count,
                          (unsigned long long)si.alloc_samples, (unsigned long long)si.alloc_bytes,
                          (unsigned long long)si.alloc_count);
        if (!t) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

/* A C string as a str (NULL -> None); file names may hold undecodable bytes. */
static PyObject *str_or_none(const char *s)
{
    if (!s)
        Py_RETURN_NONE;
    return PyUnicode_DecodeFSDefault(s);
}

PyDoc_STRVAR(stack_doc,
             "stack(stack_id) -> tuple of (function, file, line, flags, module, address, "
             "load_bias)\n\n"
             "A resolved stack, leaf first (memprof_snapshot_frame()).");

static PyObject *snapshot_stack(SnapshotObject *self, PyObject *arg)
{
    unsigned long id = PyLong_AsUnsignedLong(arg);
    if (id == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    if (id > UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "memprof: stack id out of range");
        return NULL;
    }
    int depth = memprof_snapshot_stack_depth(self->snap, (uint32_t)id);
    if (depth < 0)
        return raise_rc(depth, "memprof: resolving a stack", NULL);
    PyObject *t = PyTuple_New(depth);
    if (!t)
        return NULL;
    for (int i = 0; i < depth; i++) {
        memprof_frame f;
        memset(&f, 0, sizeof f);
        f.size = sizeof f;
        int rc = memprof_snapshot_frame(self->snap, (uint32_t)id, (size_t)i, &f);
        if (rc < 0) {
            Py_DECREF(t);
            return raise_rc(rc, "memprof: reading a stack frame", NULL);
        }
        PyObject *fn = str_or_none(f.function), *file = str_or_none(f.file),
                 *module = str_or_none(f.module);
        PyObject *frame =
            fn && file && module
                ? Py_BuildValue("(OOIIOKK)", fn, file, (unsigned)f.line, (unsigned)f.flags, module,
                                (unsigned long long)f.address, (unsigned long long)f.load_bias)
                : NULL;
        Py_XDECREF(fn);
        Py_XDECREF(file);
        Py_XDECREF(module);
        if (!frame) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, frame);
    }
    return t;
}

PyDoc_STRVAR(write_doc, "write(path, format) -> None\n\nmemprof_snapshot_write(); format is a "
                        "FORMAT_* constant (FORMAT_AUTO picks one from the extension).");

static PyObject *snapshot_write(SnapshotObject *self, PyObject *args)
{
    PyObject *path = NULL;
    int format = 0;
    if (!PyArg_ParseTuple(args, "O&i:write", PyUnicode_FSConverter, &path, &format))
        return NULL;
    const char *p = PyBytes_AS_STRING(path);
    int rc = memprof_snapshot_write(self->snap, p, (memprof_format)format);
    if (rc < 0) {
        int err = -rc;
        if (err == ENOTSUP) {
            PyErr_Format(PyExc_NotImplementedError,
                         "memprof: cannot write %s: %s (this build of libmemprof has no writer "
                         "for that format yet)",
                         p, memprof_strerror(rc));
        } else if (err == EINVAL) {
            PyErr_Format(PyExc_ValueError, "memprof: cannot write %s: %s", p, memprof_strerror(rc));
        } else if (err == ENOMEM) {
            PyErr_NoMemory();
        } else {
            PyObject *a = Py_BuildValue("(isO)", err, memprof_strerror(rc), path);
            if (a) {
                PyErr_SetObject(PyExc_OSError, a);
                Py_DECREF(a);
            }
        }
        Py_DECREF(path);
        return NULL;
    }
    Py_DECREF(path);
    Py_RETURN_NONE;
}

/* ---- views (MEMPROF_1.2): peak, heap over time, ranked sites ---------------------------- */

PyDoc_STRVAR(peak_doc,
             "peak() -> dict\n\n"
             "memprof_snapshot_peak(): bytes, bytes_low, bytes_high, count, samples, time_ns, "
             "duration_ns, allocated_bytes, temporary_threshold_ns.");

static PyObject *snapshot_peak(SnapshotObject *self, PyObject *unused)
{
    (void)unused;
    memprof_peak_info p;
    memset(&p, 0, sizeof p);
    p.size = sizeof p;
    int rc = memprof_snapshot_peak(self->snap, &p);
    if (rc < 0)
        return raise_rc(rc, "memprof: reading the snapshot's peak", NULL);
    return Py_BuildValue(
        "{sKsKsKsKsKsKsKsKsK}", "bytes", (unsigned long long)p.bytes, "bytes_low",
        (unsigned long long)p.bytes_low, "bytes_high", (unsigned long long)p.bytes_high, "count",
        (unsigned long long)p.count, "samples", (unsigned long long)p.samples, "time_ns",
        (unsigned long long)p.time_ns, "duration_ns", (unsigned long long)p.duration_ns,
        "allocated_bytes", (unsigned long long)p.allocated_bytes, "temporary_threshold_ns",
        (unsigned long long)p.temporary_threshold_ns);
}

PyDoc_STRVAR(series_doc, "series() -> list of (time_ns, live_bytes, allocated_bytes)\n\n"
                         "The heap over time, oldest point first (memprof_snapshot_series()).");

static PyObject *snapshot_series(SnapshotObject *self, PyObject *unused)
{
    (void)unused;
    /* A snapshot is immutable, so the count asked for first is the count copied. */
    size_t n = memprof_snapshot_series(self->snap, NULL, 0);
    memprof_heap_point *pts = n ? PyMem_Calloc(n, sizeof *pts) : NULL;
    if (n && !pts)
        return PyErr_NoMemory();
    if (n)
        n = memprof_snapshot_series(self->snap, pts, n);
    PyObject *list = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; list && i < n; i++) {
        PyObject *t = Py_BuildValue("(KKK)", (unsigned long long)pts[i].time_ns,
                                    (unsigned long long)pts[i].live_bytes,
                                    (unsigned long long)pts[i].allocated_bytes);
        if (!t)
            Py_CLEAR(list);
        else
            PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    PyMem_Free(pts);
    return list;
}

PyDoc_STRVAR(view_sites_doc,
             "view_sites(view, max=-1) -> list of (stack_id, flags, bytes, bytes_low, "
             "bytes_high, count, samples, lifetime_p50_ns, lifetime_p90_ns, leak_rate)\n\n"
             "The sites a view (a VIEW_* constant) ranks, largest first, at most `max` of them "
             "(-1: all; memprof_snapshot_view_site()).");

static PyObject *snapshot_view_sites(SnapshotObject *self, PyObject *args)
{
    int view;
    Py_ssize_t max = -1;
    if (!PyArg_ParseTuple(args, "i|n:view_sites", &view, &max))
        return NULL;
    /* The library answers 0 sites for an unknown view; say so instead of an empty list. */
    if (view < MEMPROF_VIEW_LIVE || view > MEMPROF_VIEW_LEAKS) {
        PyErr_Format(PyExc_ValueError, "memprof: unknown view %d", view);
        return NULL;
    }
    size_t n = memprof_snapshot_view_site_count(self->snap, (memprof_view)view);
    if (max >= 0 && (size_t)max < n)
        n = (size_t)max;
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        memprof_view_site vs;
        memset(&vs, 0, sizeof vs);
        vs.size = sizeof vs;
        int rc = memprof_snapshot_view_site(self->snap, (memprof_view)view, i, &vs);
        if (rc < 0) {
            Py_DECREF(list);
            return raise_rc(rc, "memprof: reading a view's site", NULL);
        }
        PyObject *t =
            Py_BuildValue("(IIKKKKKKKd)", (unsigned)vs.stack_id, (unsigned)vs.flags,
                          (unsigned long long)vs.bytes, (unsigned long long)vs.bytes_low,
                          (unsigned long long)vs.bytes_high, (unsigned long long)vs.count,
                          (unsigned long long)vs.samples, (unsigned long long)vs.lifetime_p50_ns,
                          (unsigned long long)vs.lifetime_p90_ns, vs.leak_rate);
        if (!t) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

static PyMethodDef snapshot_methods[] = {
    {"estimate", (PyCFunction)snapshot_estimate, METH_NOARGS, estimate_doc},
    {"samples", (PyCFunction)snapshot_samples, METH_NOARGS, samples_doc},
    {"sites", (PyCFunction)snapshot_sites, METH_NOARGS, sites_doc},
    {"stack", (PyCFunction)snapshot_stack, METH_O, stack_doc},
    {"peak", (PyCFunction)snapshot_peak, METH_NOARGS, peak_doc},
    {"series", (PyCFunction)snapshot_series, METH_NOARGS, series_doc},
    {"view_sites", (PyCFunction)snapshot_view_sites, METH_VARARGS, view_sites_doc},
    {"write", (PyCFunction)snapshot_write, METH_VARARGS, write_doc},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject SnapshotType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "memprof._memprof.Snapshot",
    .tp_basicsize = sizeof(SnapshotObject),
    .tp_dealloc = (destructor)snapshot_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "An immutable libmemprof snapshot (memprof_snapshot); freed with the object.",
    .tp_methods = snapshot_methods,
};

PyDoc_STRVAR(snapshot_doc, "snapshot() -> Snapshot\n\nmemprof_get_snapshot().");

static PyObject *mp_snapshot(PyObject *self, PyObject *unused)
{
    (void)self, (void)unused;
    memprof_snapshot *snap = NULL;
    int rc = memprof_get_snapshot(&snap);
    switch (rc) {
    case 0:
        break;
    case -ENOTCONN:
        return raise_rc(rc, "memprof.get_snapshot()",
                        "profiling was never started: call memprof.start() first");
    case -ESHUTDOWN:
        return raise_rc(rc, "memprof.get_snapshot()", "memprof.shutdown() was called");
    default:
        return raise_rc(rc, "memprof.get_snapshot()", NULL);
    }
    SnapshotObject *o = PyObject_New(SnapshotObject, &SnapshotType);
    if (!o) {
        memprof_free_snapshot(snap);
        return NULL;
    }
    o->snap = snap;
    return (PyObject *)o;
}

PyDoc_STRVAR(set_temporary_threshold_doc,
             "set_temporary_threshold(ns) -> None\n\n"
             "memprof_set_temporary_threshold(): frees from now on of allocations younger than "
             "`ns` nanoseconds count as temporary; 0 restores the default (1 ms).");

static PyObject *mp_set_temporary_threshold(PyObject *self, PyObject *arg)
{
    (void)self;
    unsigned long long ns = PyLong_AsUnsignedLongLong(arg);
    if (ns == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    int rc = memprof_set_temporary_threshold((uint64_t)ns);
    if (rc < 0)
        return raise_rc(rc, "memprof.set_temporary_threshold()", NULL);
    Py_RETURN_NONE;
}

PyDoc_STRVAR(parse_rate_doc,
             "parse_rate(text) -> int\n\n"
             "memprof_parse_rate(): a sampling rate as `memprof run -r` reads it ('524288', "
             "'512K', '64KiB', '1M'), in bytes; ValueError if it is not one.");

static PyObject *mp_parse_rate(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *text = PyUnicode_AsUTF8(arg);
    if (!text)
        return NULL;
    uint64_t bytes;
    if (memprof_parse_rate(text, &bytes) < 0)
        return PyErr_Format(PyExc_ValueError,
                            "invalid rate %R: expected digits with an optional K, M or G suffix "
                            "(KiB, MiB, GiB), 1 to 2^40 bytes",
                            arg);
    return PyLong_FromUnsignedLongLong(bytes);
}

PyDoc_STRVAR(format_from_path_doc,
             "format_from_path(path) -> int\n\n"
             "memprof_format_from_path(): the format a file name's extension names, or "
             "FORMAT_AUTO (0) for none.");

static PyObject *mp_format_from_path(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *path = PyUnicode_AsUTF8(arg);
    if (!path)
        return NULL;
    return PyLong_FromLong(memprof_format_from_path(path));
}

PyDoc_STRVAR(is_allocator_function_doc,
             "is_allocator_function(name) -> bool\n\n"
             "memprof_is_allocator_function(): whether a function is an allocator or an "
             "allocator wrapper (the library's list and MEMPROF_WRAPPERS), which never names a "
             "site.");

static PyObject *mp_is_allocator_function(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name)
        return NULL;
    return PyBool_FromLong(memprof_is_allocator_function(name) == 1);
}

/* FORMATS {name: code} and EXTENSIONS {name: extension}, from the library's one table. */
static int add_format_tables(PyObject *m)
{
    PyObject *formats = PyDict_New(), *extensions = PyDict_New();
    int ok = formats && extensions;
    for (int f = 1; ok && memprof_format_name((memprof_format)f); f++) {
        PyObject *code = PyLong_FromLong(f);
        PyObject *ext = PyUnicode_FromString(memprof_format_extension((memprof_format)f));
        const char *name = memprof_format_name((memprof_format)f);
        ok = code && ext && PyDict_SetItemString(formats, name, code) == 0 &&
             PyDict_SetItemString(extensions, name, ext) == 0;
        Py_XDECREF(code);
        Py_XDECREF(ext);
    }
    if (ok && PyModule_AddObject(m, "FORMATS", formats) == 0) {
        formats = NULL;
        if (PyModule_AddObject(m, "EXTENSIONS", extensions) == 0)
            return 0;
    }
    Py_XDECREF(formats);
    Py_XDECREF(extensions);
    return -1;
}

/* ---- the module --------------------------------------------------------------------------- */

static PyMethodDef module_methods[] = {
    {"install", mp_install, METH_NOARGS, install_doc},
    {"init", mp_init, METH_VARARGS, init_doc},
    {"start", mp_start, METH_NOARGS, start_doc},
    {"stop", mp_stop, METH_NOARGS, stop_doc},
    {"shutdown", mp_shutdown, METH_NOARGS, shutdown_doc},
    {"write_exit_profile", mp_write_exit_profile, METH_NOARGS, write_exit_profile_doc},
    {"strerror", mp_strerror, METH_O, strerror_doc},
    {"stats", mp_stats, METH_NOARGS, stats_doc},
    {"snapshot", mp_snapshot, METH_NOARGS, snapshot_doc},
    {"set_temporary_threshold", mp_set_temporary_threshold, METH_O, set_temporary_threshold_doc},
    {"parse_rate", mp_parse_rate, METH_O, parse_rate_doc},
    {"format_from_path", mp_format_from_path, METH_O, format_from_path_doc},
    {"is_allocator_function", mp_is_allocator_function, METH_O, is_allocator_function_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "memprof._memprof",
    .m_doc = "Low-level binding of libmemprof; use the memprof package instead.",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__memprof(void);

PyMODINIT_FUNC PyInit__memprof(void)
{
    if (PyType_Ready(&SnapshotType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return NULL;
    Py_INCREF(&SnapshotType);
    if (PyModule_AddObject(m, "Snapshot", (PyObject *)&SnapshotType) < 0) {
        Py_DECREF(&SnapshotType);
        Py_DECREF(m);
        return NULL;
    }
    struct {
        const char *name;
        long value;
    } constants[] = {
        {"DEFAULT_SAMPLING_RATE", MEMPROF_DEFAULT_SAMPLING_RATE},
        {"FORMAT_AUTO", MEMPROF_FORMAT_AUTO},
        {"FORMAT_PPROF", MEMPROF_FORMAT_PPROF},
        {"FORMAT_SPEEDSCOPE", MEMPROF_FORMAT_SPEEDSCOPE},
        {"FORMAT_COLLAPSED", MEMPROF_FORMAT_COLLAPSED},
        {"FORMAT_TEXT", MEMPROF_FORMAT_TEXT},
        {"FORMAT_HTML", MEMPROF_FORMAT_HTML},
        {"FRAME_INLINED", MEMPROF_FRAME_INLINED},
        {"FRAME_RUNTIME", MEMPROF_FRAME_RUNTIME},
        {"FRAME_UNRESOLVED", MEMPROF_FRAME_UNRESOLVED},
        {"FRAME_TRUNCATED", MEMPROF_FRAME_TRUNCATED},
        {"STATE_UNINITIALIZED", MEMPROF_STATE_UNINITIALIZED},
        {"STATE_INITIALIZED", MEMPROF_STATE_INITIALIZED},
        {"STATE_ACTIVE", MEMPROF_STATE_ACTIVE},
        {"STATE_STOPPED", MEMPROF_STATE_STOPPED},
        {"STATE_SHUTDOWN", MEMPROF_STATE_SHUTDOWN},
        {"UNWIND_FP", MEMPROF_UNWIND_FP},
        {"UNWIND_DWARF", MEMPROF_UNWIND_DWARF},
        {"VIEW_LIVE", MEMPROF_VIEW_LIVE},
        {"VIEW_ALLOC", MEMPROF_VIEW_ALLOC},
        {"VIEW_PEAK", MEMPROF_VIEW_PEAK},
        {"VIEW_TEMPORARY", MEMPROF_VIEW_TEMPORARY},
        {"VIEW_LEAKS", MEMPROF_VIEW_LEAKS},
        {"SITE_LOW_INFORMATION", MEMPROF_SITE_LOW_INFORMATION},
        {"SITE_LEAK_SUSPECT", MEMPROF_SITE_LEAK_SUSPECT},
        {"MAX_RATE_BYTES", 1l << 40},
        {"JOINED", MEMPROF_JOINED},
    };
    for (size_t i = 0; i < sizeof constants / sizeof *constants; i++) {
        if (PyModule_AddIntConstant(m, constants[i].name, (long)constants[i].value) < 0) {
            Py_DECREF(m);
            return NULL;
        }
    }
    if (add_format_tables(m) < 0 ||
        PyModule_AddStringConstant(m, "LIBRARY_VERSION", memprof_version_string()) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
