/* SPDX-License-Identifier: MIT */
/*
 * The Python frame source (memprof/runtime.h): when the sampler takes a sample on a thread
 * that holds the GIL, capture() walks that thread's interpreter frames and turns each into
 * an id; at snapshot time resolve() turns an id back into function (co_qualname), file
 * (co_filename) and line, and is_eval_frame() tells the resolver which native frames are
 * CPython's eval loop, to be replaced by these frames ("trim and sandwich").
 *
 * Why the interpreter's internal frame structs (Python 3.11's _PyInterpreterFrame, reached
 * through the public PyThreadState::cframe) and not PyThreadState_GetFrame()/PyFrame_GetBack():
 * capture() runs inside an allocation (malloc, or pymalloc through our PyMem hooks), and the
 * public calls *create* frame objects for frames that have none. Creating an object there
 * re-enters pymalloc (which may be in the middle of allocating an arena when it called
 * malloc) and in 3.11 can even start a garbage collection that runs finalizers, i.e.
 * arbitrary Python code, inside malloc. The internal walk allocates nothing and takes no
 * reference; it also gives the one fact the public API hides: `is_entry`, set on the first
 * frame that each C-level call of _PyEval_EvalFrameDefault runs, which is exactly
 * MEMPROF_RUNTIME_FRAME_ENTRY (Python-to-Python calls run inside the same C frame in 3.11).
 * The extension is built for one interpreter version (the ABI tag in its file name), so the
 * struct layout it is compiled against is the one it runs with; other versions are refused
 * at compile time below.
 *
 * Ids. A frame's id is (index << 1) | is_entry, where index names an interned (code object,
 * line) pair. Two open-addressing tables map (code, instruction offset) -> pair and
 * (code, line) -> pair, so a capture in the steady state costs one probe per frame and no
 * line-table walk. The pairs hold a strong reference to their code object for the life of
 * the process (code objects are small and their number is bounded by the program's source),
 * so ids stay resolvable and code pointers are never reused while interned. All tables live
 * in mmap'ed memory: capture() never calls malloc or the Python allocator.
 *
 * Threads. capture() and the interning tables run only on the thread holding the GIL, which
 * serializes them. resolve() may run on any thread without the GIL (the preload plugin's
 * dump thread or exit-time writer): it reads only published pairs (an append-only chunked
 * array, published with release stores) and strings that the code objects keep alive. The
 * UTF-8 names are read without allocating when the strings are compact ASCII (almost always);
 * other names are converted the first time resolve() runs with the GIL held (memprof.*
 * always holds it), and a resolve without the GIL before that shows "[python frame]" (the
 * library caches resolved stacks, so that label then sticks for that stack).
 *
 * Corner case, documented rather than handled: while a frame is being cleared CPython drops
 * its reference to the code object last; if that drop frees the code object and a weakref
 * callback on it allocates, a sample taken then would read the freed code object. No
 * ordinary program keeps weak references to code objects with allocating callbacks.
 */
#include "binding.h"

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030C0000
#error "the Python frame source is written for CPython 3.11's frame layout"
#endif

#ifndef Py_BUILD_CORE
#define Py_BUILD_CORE 1
#endif
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>

/* ---- interned (code, line) pairs ---------------------------------------------------------- */

struct pair {
    PyCodeObject *code;            /* strong reference, never released */
    uint32_t line;
    uint32_t reserved;
    _Atomic(const char *) function; /* UTF-8 co_qualname, NULL until known */
    _Atomic(const char *) file;     /* UTF-8 co_filename, NULL until known */
};

#define CHUNK_BITS 12u
#define CHUNK_SIZE (1u << CHUNK_BITS)
#define MAX_CHUNKS 4096u /* 16 M pairs */
#define UNKNOWN_PAIR 0u  /* index 0: "[python frame]", used when a table cannot grow */

static _Atomic(struct pair *) chunks[MAX_CHUNKS];
static _Atomic uint32_t npairs = 1; /* index 0 is reserved */
static _Atomic uint64_t eval_matches;

static void *map_zeroed(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static struct pair *pair_at(uint32_t index)
{
    struct pair *c = atomic_load_explicit(&chunks[index >> CHUNK_BITS], memory_order_acquire);
    return c ? &c[index & (CHUNK_SIZE - 1)] : NULL;
}

/* The UTF-8 text of a str object without allocating, or NULL: compact ASCII strings store
 * it inline; others only once something has asked for (and cached) their UTF-8 form. */
static const char *utf8_noalloc(PyObject *s)
{
    if (!s || !PyUnicode_Check(s) || !PyUnicode_IS_READY(s))
        return NULL;
    if (PyUnicode_IS_COMPACT_ASCII(s))
        return (const char *)PyUnicode_DATA(s);
    if (PyUnicode_IS_COMPACT(s))
        return ((PyCompactUnicodeObject *)s)->utf8;
    return NULL;
}

/* Appends a pair (GIL held). Returns its index or UNKNOWN_PAIR. */
static uint32_t pair_add(PyCodeObject *code, int line)
{
    uint32_t index = atomic_load_explicit(&npairs, memory_order_relaxed);
    uint32_t c = index >> CHUNK_BITS;
    if (c >= MAX_CHUNKS)
        return UNKNOWN_PAIR;
    struct pair *chunk = atomic_load_explicit(&chunks[c], memory_order_relaxed);
    if (!chunk) {
        chunk = map_zeroed(CHUNK_SIZE * sizeof(struct pair));
        if (!chunk)
            return UNKNOWN_PAIR;
        atomic_store_explicit(&chunks[c], chunk, memory_order_release);
    }
    struct pair *p = &chunk[index & (CHUNK_SIZE - 1)];
    Py_INCREF(code);
    p->code = code;
    p->line = line > 0 ? (uint32_t)line : 0;
    atomic_store_explicit(&p->function, utf8_noalloc(code->co_qualname), memory_order_relaxed);
    atomic_store_explicit(&p->file, utf8_noalloc(code->co_filename), memory_order_relaxed);
    atomic_store_explicit(&npairs, index + 1, memory_order_release);
    return index;
}

/* ---- lookup tables (GIL held) ------------------------------------------------------------- */

struct slot {
    uintptr_t code; /* 0 = empty */
    int32_t key2;   /* instruction offset or line */
    uint32_t index; /* the pair */
};

struct table {
    struct slot *slots;
    size_t mask; /* capacity - 1, or 0 before the first use */
    size_t used;
};

static struct table by_offset; /* (code, instruction offset) -> pair */
static struct table by_line;   /* (code, line) -> pair */

static size_t hash2(uintptr_t code, int32_t key2)
{
    uint64_t h = (uint64_t)code * 0x9E3779B97F4A7C15ull ^ (uint64_t)(uint32_t)key2;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return (size_t)h;
}

static struct slot *table_find(struct table *t, uintptr_t code, int32_t key2)
{
    for (size_t i = hash2(code, key2) & t->mask;; i = (i + 1) & t->mask) {
        struct slot *s = &t->slots[i];
        if (s->code == 0 || (s->code == code && s->key2 == key2))
            return s;
    }
}

/* Makes room for one more entry: grows at half full. False if memory cannot be mapped. */
static bool table_reserve(struct table *t)
{
    if (t->mask && (t->used + 1) * 2 <= t->mask + 1)
        return true;
    size_t cap = t->mask ? (t->mask + 1) * 2 : 1024;
    struct slot *slots = map_zeroed(cap * sizeof *slots);
    if (!slots)
        return false;
    struct table n = {slots, cap - 1, 0};
    for (size_t i = 0; t->mask && i <= t->mask; i++) {
        const struct slot *s = &t->slots[i];
        if (s->code) {
            *table_find(&n, s->code, s->key2) = *s;
            n.used++;
        }
    }
    if (t->mask)
        munmap(t->slots, (t->mask + 1) * sizeof *t->slots);
    *t = n;
    return true;
}

/* The pair of (code, instruction offset): one probe when seen before. */
static uint32_t intern(PyCodeObject *code, int lasti)
{
    uintptr_t key = (uintptr_t)code;
    if (by_offset.mask) {
        struct slot *s = table_find(&by_offset, key, lasti);
        if (s->code)
            return s->index;
    }
    if (!table_reserve(&by_offset) || !table_reserve(&by_line))
        return UNKNOWN_PAIR;
    /* PyCode_Addr2Line walks the line table without allocating; a negative offset (a frame
     * that has not run its first instruction) gives co_firstlineno. */
    int line = PyCode_Addr2Line(code, lasti < 0 ? -1 : lasti * (int)sizeof(_Py_CODEUNIT));
    struct slot *ls = table_find(&by_line, key, line);
    if (!ls->code) {
        uint32_t index = pair_add(code, line);
        if (index == UNKNOWN_PAIR)
            return UNKNOWN_PAIR;
        *ls = (struct slot){key, line, index};
        by_line.used++;
    }
    struct slot *os = table_find(&by_offset, key, lasti);
    *os = (struct slot){key, lasti, ls->index};
    by_offset.used++;
    return ls->index;
}

/* ---- the callbacks ------------------------------------------------------------------------ */

/* True if the calling thread holds the GIL: the interpreter's current thread state (the GIL
 * holder's, a process-wide value in 3.11) is this thread's own. Neither call allocates.
 * (PyGILState_Check() is not enough: it answers 1 whenever its check is disabled.) */
static bool holds_gil(void)
{
    PyThreadState *current = _PyThreadState_UncheckedGet();
    return current && current == PyGILState_GetThisThreadState();
}

static unsigned capture(void *ctx, uint64_t *ids, unsigned max)
{
    (void)ctx;
    if (!holds_gil())
        return 0;
    PyThreadState *ts = _PyThreadState_UncheckedGet();
    _PyInterpreterFrame *f = ts->cframe ? ts->cframe->current_frame : NULL;
    unsigned n = 0;
    for (; f && n < max; f = f->previous) {
        PyCodeObject *code = f->f_code;
        if (!code)
            continue;
        int lasti = (int)(f->prev_instr - _PyCode_CODE(code));
        ids[n++] = ((uint64_t)intern(code, lasti) << 1) | (f->is_entry ? 1u : 0u);
    }
    return n;
}

/* The UTF-8 text of a str, allocating if needed (GIL held); never leaves an exception. */
static const char *utf8_with_gil(PyObject *s)
{
    const char *text = utf8_noalloc(s);
    if (text || !s || !PyUnicode_Check(s))
        return text;
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    text = PyUnicode_AsUTF8(s);
    if (!text)
        PyErr_Clear();
    PyErr_Restore(type, value, tb);
    return text;
}

static int resolve(void *ctx, uint64_t id, memprof_runtime_frame *out)
{
    (void)ctx;
    uint64_t index = id >> 1;
    if (index >= atomic_load_explicit(&npairs, memory_order_acquire))
        return -1;
    struct pair *p = index == UNKNOWN_PAIR ? NULL : pair_at((uint32_t)index);
    const char *function = NULL, *file = NULL;
    uint32_t line = 0;
    if (p) {
        function = atomic_load_explicit(&p->function, memory_order_relaxed);
        file = atomic_load_explicit(&p->file, memory_order_relaxed);
        if ((!function || !file) && holds_gil()) {
            if (!function) {
                function = utf8_with_gil(p->code->co_qualname);
                atomic_store_explicit(&p->function, function, memory_order_relaxed);
            }
            if (!file) {
                file = utf8_with_gil(p->code->co_filename);
                atomic_store_explicit(&p->file, file, memory_order_relaxed);
            }
        }
        line = p->line;
    }
    out->function = function ? function : "[python frame]";
    out->file = file;
    out->line = line;
    out->flags = (id & 1) ? MEMPROF_RUNTIME_FRAME_ENTRY : 0;
    return 0;
}

/* The eval loop: _PyEval_EvalFrameDefault, and the ".cold" part GCC may split off it. Not
 * _PyEval_Vector, PyEval_EvalCode or the call helpers: they call the eval loop but run no
 * Python frame themselves, so they stay as native frames. */
static int is_eval_frame(void *ctx, const char *function, const char *module, uint64_t pc)
{
    (void)ctx, (void)module, (void)pc;
    static const char name[] = "_PyEval_EvalFrameDefault";
    if (!function || strncmp(function, name, sizeof name - 1) != 0)
        return 0;
    char next = function[sizeof name - 1];
    if (next != '\0' && next != '.')
        return 0;
    atomic_fetch_add_explicit(&eval_matches, 1, memory_order_relaxed);
    return 1;
}

static int source_id = -1;

int mp_frames_register(void)
{
    if (source_id >= 0)
        return source_id;
    /* Reserve the first tables now, outside any allocation hook. */
    if (!table_reserve(&by_offset) || !table_reserve(&by_line))
        return -ENOMEM;
    memprof_frame_source src = {
        .size = sizeof src,
        .name = "python",
        .capture = capture,
        .resolve = resolve,
        .is_eval_frame = is_eval_frame,
        .ctx = NULL,
    };
    int rc = memprof_register_frame_source(&src);
    if (rc >= 0)
        source_id = rc;
    return rc;
}

uint64_t mp_frames_interned(void)
{
    return atomic_load_explicit(&npairs, memory_order_acquire) - 1;
}

uint64_t mp_frames_eval_matches(void)
{
    return atomic_load_explicit(&eval_matches, memory_order_relaxed);
}
