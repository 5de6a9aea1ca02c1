/* SPDX-License-Identifier: MIT */
/*
 * Everything the Python frame source (frames.c) knows about one CPython version's private
 * frame layout, for CPython 3.10 to 3.13: where a thread's innermost interpreter frame is,
 * how to step to its caller, which code object and instruction a frame is at, whether it is
 * the first frame its eval-loop invocation runs, and how to ask whether the thread holds the
 * GIL. frames.c is written once against these inline functions; each extension is compiled
 * against the headers of the interpreter it is built for (the ABI tag in its file name), so
 * the branch taken here is the layout it runs with. The differences, and why they matter:
 *
 * - 3.10: the frames are PyFrameObjects (ts->frame, f_back, f_code, f_lasti in code units,
 *   -1 before the first instruction), public struct fields. Every Python call runs its own
 *   C call of _PyEval_EvalFrameDefault, so every frame is an entry frame. Code objects have
 *   no co_qualname yet: the function is named by co_name.
 * - 3.11: _PyInterpreterFrame (internal), reached through ts->cframe->current_frame;
 *   Python-to-Python calls stay in one eval-loop invocation, whose first frame has is_entry
 *   set; prev_instr is the last instruction started.
 * - 3.12: is_entry is gone: each eval-loop invocation links a "shim" frame owned by the C
 *   stack (FRAME_OWNED_BY_CSTACK, running the interpreter's trampoline code) below its first
 *   frame, so a frame is an entry frame when its caller is such a shim, and shims are not
 *   reported.
 * - 3.13: the frame holds f_executable (a code object, or None in the C-stack shims) instead
 *   of f_code, instr_ptr (the instruction executing or about to) instead of prev_instr, and
 *   the thread state holds current_frame itself (no cframe). A specialized call of a Python
 *   class (CALL_ALLOC_AND_ENTER_INIT) runs its __init__ above another shim, the static code
 *   object _Py_InitCleanup (file and name "__init__", line 0), which is not exported:
 *   frames.c recognises it by its file name when it first records the code object.
 *
 * The GIL test is one expression everywhere, with two meanings: before 3.12
 * _PyThreadState_UncheckedGet() is the process-wide GIL holder, from 3.12 it is the calling
 * thread's attached thread state (a thread detaches whenever it releases the GIL). Either
 * way it equals the thread's own state exactly when the thread holds the GIL. Free-threaded
 * builds (3.13t) have no GIL to rely on and are refused.
 */
#ifndef MEMPROF_PY_FRAMES_COMPAT_H
#define MEMPROF_PY_FRAMES_COMPAT_H

#include "binding.h"

#include <stdbool.h>
#include <string.h>

#if PY_VERSION_HEX < 0x030A0000 || PY_VERSION_HEX >= 0x030E0000
#error "the Python frame source knows the frame layouts of CPython 3.10 to 3.13"
#endif
#ifdef Py_GIL_DISABLED
#error "the Python frame source needs the GIL: free-threaded CPython is not supported"
#endif

#if PY_VERSION_HEX >= 0x030B0000
#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1
#endif
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE
typedef _PyInterpreterFrame mp_pyframe;
#else
#include <frameobject.h>
typedef PyFrameObject mp_pyframe;
#endif

/* The calling thread's innermost frame, or NULL. */
static inline mp_pyframe *mp_frame_current(PyThreadState *ts)
{
#if PY_VERSION_HEX >= 0x030D0000
    return ts->current_frame;
#elif PY_VERSION_HEX >= 0x030B0000
    return ts->cframe ? ts->cframe->current_frame : NULL;
#else
    return ts->frame;
#endif
}

static inline mp_pyframe *mp_frame_previous(const mp_pyframe *f)
{
#if PY_VERSION_HEX >= 0x030B0000
    return f->previous;
#else
    return f->f_back;
#endif
}

/* The frame's code object, or NULL for a frame that runs no code of the program (the C-stack
 * shims of 3.12 and later). */
static inline PyCodeObject *mp_frame_code(const mp_pyframe *f)
{
#if PY_VERSION_HEX >= 0x030D0000
    if (f->owner == FRAME_OWNED_BY_CSTACK || !f->f_executable || !PyCode_Check(f->f_executable))
        return NULL;
    return (PyCodeObject *)f->f_executable;
#elif PY_VERSION_HEX >= 0x030C0000
    return f->owner == FRAME_OWNED_BY_CSTACK ? NULL : f->f_code;
#else
    return f->f_code;
#endif
}

/* The instruction the frame is at, in code units from the start of co's bytecode; negative
 * for a frame that has not started its first instruction. */
static inline int mp_frame_lasti(const mp_pyframe *f, PyCodeObject *co)
{
#if PY_VERSION_HEX >= 0x030D0000
    return (int)(f->instr_ptr - _PyCode_CODE(co));
#elif PY_VERSION_HEX >= 0x030B0000
    return (int)(f->prev_instr - _PyCode_CODE(co));
#else
    (void)co;
    return f->f_lasti;
#endif
}

/* Whether f is the first frame its C call of _PyEval_EvalFrameDefault runs
 * (MEMPROF_RUNTIME_FRAME_ENTRY). */
static inline bool mp_frame_is_entry(const mp_pyframe *f)
{
#if PY_VERSION_HEX >= 0x030C0000
    return f->previous && f->previous->owner == FRAME_OWNED_BY_CSTACK;
#elif PY_VERSION_HEX >= 0x030B0000
    return f->is_entry;
#else
    (void)f;
    return true;
#endif
}

/* The name a frame of co is reported under. */
static inline PyObject *mp_code_name(const PyCodeObject *co)
{
#if PY_VERSION_HEX >= 0x030B0000
    return co->co_qualname;
#else
    return co->co_name;
#endif
}

/* Whether co is an interpreter-made shim that stands for no code of the program, given its
 * file name as copied (UTF-8; NULL if it is not a str). Asked once per code object. */
static inline bool mp_code_is_shim(const char *file)
{
#if PY_VERSION_HEX >= 0x030D0000
    return file && strcmp(file, "__init__") == 0; /* _Py_InitCleanup */
#else
    (void)file;
    return false;
#endif
}

/* Whether the calling thread, whose own thread state is ts, holds the GIL. */
static inline bool mp_holds_gil(PyThreadState *ts)
{
    return _PyThreadState_UncheckedGet() == ts;
}

static inline bool mp_finalizing(void)
{
#if PY_VERSION_HEX >= 0x030D0000
    return Py_IsFinalizing();
#else
    return _Py_IsFinalizing();
#endif
}

#endif /* MEMPROF_PY_FRAMES_COMPAT_H */
