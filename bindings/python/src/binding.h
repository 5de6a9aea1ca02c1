/* SPDX-License-Identifier: MIT */
/*
 * Internal interface between the translation units of the Python extension `memprof._memprof`:
 * the module and snapshot type (module.c), the Python frame source (frames.c) and the PyMem
 * domain hooks (pymem.c). Only the installed headers of libmemprof are used (memprof.h,
 * runtime.h); nothing here is exported besides PyInit__memprof.
 */
#ifndef MEMPROF_PY_BINDING_H
#define MEMPROF_PY_BINDING_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>

#include <memprof/memprof.h>
#include <memprof/runtime.h>

/* ---- frames.c: the Python frame source ---- */

/* Registers the frame source once per process (idempotent). Needs the GIL.
 * Returns the source id (>= 0) or a negative errno value. */
int mp_frames_register(void);

/* Number of distinct (code object, line) pairs interned so far. */
uint64_t mp_frames_interned(void);

/* Eval-loop frames recognized by name so far (diagnostics for tests). */
uint64_t mp_frames_eval_matches(void);

/* ---- pymem.c: PyMem domain hooks ---- */

/* How a PyMem domain is reported (mp_pymem_mode()). */
enum mp_pymem_mode {
    MP_PYMEM_NOT_INSTALLED = 0, /* hooks not installed yet */
    MP_PYMEM_RELOCATE = 1,      /* plain pymalloc: small requests are sampled before they are
                                   served, and sampled blocks are relocated to our own arena */
    MP_PYMEM_WATCH = 2,         /* pymalloc under another layer (debug hooks, tracemalloc): each
                                   request is classified by watching for a forward to RAW */
    MP_PYMEM_OFF = 3            /* the domain reaches malloc itself (PYTHONMALLOC=malloc, ...):
                                   the malloc hooks see its blocks, nothing is reported */
};

/* Installs the hooks on PYMEM_DOMAIN_MEM and PYMEM_DOMAIN_OBJ once per process (idempotent;
 * they are never removed). Needs the GIL. Returns 0 or -1 with a Python exception set. */
int mp_pymem_install(void);

/* Sampling on or off (start/stop/shutdown): in RELOCATE mode the OBJ and MEM domains get
 * their original allocator back while off, so a stopped profiler costs them nothing. GIL. */
void mp_pymem_set_active(int on);

/* The mode chosen for a domain (PYMEM_DOMAIN_MEM or PYMEM_DOMAIN_OBJ). */
enum mp_pymem_mode mp_pymem_mode(PyMemAllocatorDomain domain);

/* Human-readable name of a mode. */
const char *mp_pymem_mode_name(enum mp_pymem_mode mode);

/* Whether our wrappers are the hooked domains' current allocators: false when another hook
 * (tracemalloc started later) wraps them, or when something put back an older allocator. */
int mp_pymem_outermost(void);

/* Blocks reported by the hooks that were sampled, ever. */
uint64_t mp_pymem_sampled(void);

/* Sampled blocks living in the relocation arena now (RELOCATE mode). */
uint64_t mp_pymem_relocated_live(void);

/* Samples dropped because the relocation arena could not serve them. */
uint64_t mp_pymem_dropped(void);

#endif /* MEMPROF_PY_BINDING_H */
