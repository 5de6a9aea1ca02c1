/* SPDX-License-Identifier: MIT */
/*
 * The Python frame source (memprof/runtime.h): when the sampler takes a sample on a thread that
 * runs Python code, capture() walks that thread's interpreter frames and turns each into an id;
 * at snapshot time resolve() turns an id back into function (co_qualname; co_name before 3.11),
 * file (co_filename) and line, and is_eval_frame() tells the resolver which native frames are
 * CPython's eval loop, to be replaced by these frames ("trim and sandwich").
 *
 * Why the interpreter's internal frames (reached through the thread state) and not
 * PyThreadState_GetFrame()/PyFrame_GetBack(): capture() runs inside an allocation (malloc, or
 * pymalloc through our PyMem hooks), and from 3.11 on the public calls *create* frame
 * objects for frames that have none. Creating an object there re-enters pymalloc (which may
 * be in the middle of allocating an arena when it called malloc) and can even start a
 * garbage collection that runs finalizers, i.e. arbitrary Python code, inside malloc. The
 * internal walk allocates nothing and takes no reference; it also gives the one fact the
 * public API hides: which frame is the first that each C-level call of
 * _PyEval_EvalFrameDefault runs, exactly MEMPROF_RUNTIME_FRAME_ENTRY (from 3.11 on,
 * Python-to-Python calls run inside the same C frame). The layouts differ between CPython
 * 3.10, 3.11, 3.12 and 3.13; frames_compat.h holds every such detail, and the extension is
 * built for one interpreter version (the ABI tag in its file name), so the layout it is
 * compiled against is the one it runs with.
 *
 * Which thread, and the GIL. capture() walks the frames of the *calling thread's own* thread
 * state (PyGILState_GetThisThreadState(), a thread-specific-data read), with or without the
 * GIL. Holding the GIL is not needed for that walk: a thread's frame chain, and the code
 * objects its frames hold references to, change only when that thread itself runs Python
 * code, which it cannot do while it is inside this allocation. This matters because C code
 * often allocates with the GIL released (numpy's calloc of large arrays, sqlite3 while it
 * runs a statement, compression libraries): those allocations still get their Python caller.
 * Nothing else of the interpreter is touched without the GIL; during interpreter
 * finalization (when thread states of daemon threads are freed) capture() returns nothing.
 *
 * Ids. A frame's id is (index << 1) | is_entry, where index names an interned (code object,
 * line) pair. Interning copies the code object's qualified name (co_name before 3.11) and file
 * name (as UTF-8, encoded here without allocating) into an arena of our own, so resolve() never
 * touches a Python object and works on any thread, with or without the GIL (the preload
 * plugin's dump thread and exit-time writer resolve too). Lookup tables map a code object's
 * address to its copied names (`struct code`), (code, instruction offset) to a pair (the
 * steady-state path: one probe, no line-table walk) and (code, line) to a pair. A code object's
 * address is a stable key only while the object lives, so a code record is *pinned* (a strong
 * reference to the code object, for the life of the process) whenever the capturing thread
 * holds the GIL, the only time its reference count may be touched. Records created without the
 * GIL are unpinned until a capture with the GIL sees them: until then a lookup checks that the
 * object at that address still matches the record (first line, line-table size, and the lengths
 * and hashes of both names) and starts a new record when it does not.
 *
 * Concurrency. Lookups and inserts run under one mutex, taken once per capture (not per
 * frame); nothing inside allocates (tables, pairs and strings live in mmap'ed memory), takes
 * another lock, or waits for the GIL, so an allocating thread cannot deadlock on it. Pairs
 * and their strings are published with release stores and are immutable afterwards, so
 * resolve() reads them without the lock.
 *
 * Corner case, documented rather than handled: while a frame is being cleared CPython drops
 * its reference to the code object last; if that drop frees the code object and a weakref
 * callback on it allocates, a sample taken then would read the freed code object. No
 * ordinary program keeps weak references to code objects with allocating callbacks.
 */
#include "binding.h"
#include "frames_compat.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>

static void *map_zeroed(size_t bytes)
{
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* everything below but resolve() */

/* ---- the string arena --------------------------------------------------------------------- */

#define ARENA_CHUNK (256u << 10)
#define MAX_NAME    1024u /* longer names are cut (at a character boundary) */

static char *arena_next, *arena_end;

static char *arena_alloc(size_t n)
{
    if ((size_t)(arena_end - arena_next) < n) {
        char *c = map_zeroed(ARENA_CHUNK);
        if (!c)
            return NULL;
        arena_next = c;
        arena_end = c + ARENA_CHUNK;
    }
    char *p = arena_next;
    arena_next += n;
    return p;
}

/* Encodes a str as UTF-8 into buf (NUL-terminated, cut at cap - 1 bytes) without allocating.
 * Lone surrogates become U+FFFD. Returns the length, or 0 for anything but a ready str. */
static size_t utf8_encode(PyObject *s, char *buf, size_t cap)
{
    buf[0] = '\0';
    if (!s || !PyUnicode_Check(s) || !PyUnicode_IS_READY(s))
        return 0;
    int kind = PyUnicode_KIND(s);
    const void *data = PyUnicode_DATA(s);
    Py_ssize_t n = PyUnicode_GET_LENGTH(s);
    size_t o = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_UCS4 c = PyUnicode_READ(kind, data, i);
        char b[4];
        size_t len;
        if (c >= 0xD800 && c <= 0xDFFF)
            c = 0xFFFD;
        if (c < 0x80) {
            b[0] = (char)c;
            len = 1;
        } else if (c < 0x800) {
            b[0] = (char)(0xC0 | (c >> 6));
            b[1] = (char)(0x80 | (c & 0x3F));
            len = 2;
        } else if (c < 0x10000) {
            b[0] = (char)(0xE0 | (c >> 12));
            b[1] = (char)(0x80 | ((c >> 6) & 0x3F));
            b[2] = (char)(0x80 | (c & 0x3F));
            len = 3;
        } else {
            b[0] = (char)(0xF0 | (c >> 18));
            b[1] = (char)(0x80 | ((c >> 12) & 0x3F));
            b[2] = (char)(0x80 | ((c >> 6) & 0x3F));
            b[3] = (char)(0x80 | (c & 0x3F));
            len = 4;
        }
        if (o + len >= cap)
            break;
        memcpy(buf + o, b, len);
        o += len;
    }
    buf[o] = '\0';
    return o;
}

static const char *arena_copy(PyObject *s)
{
    char buf[MAX_NAME];
    size_t n = utf8_encode(s, buf, sizeof buf);
    if (n == 0)
        return NULL;
    char *p = arena_alloc(n + 1);
    if (p)
        memcpy(p, buf, n + 1);
    return p;
}

/* ---- code records and (code, line) pairs -------------------------------------------------- */

struct code {
    uintptr_t addr;       /* the code object's address: a key, never dereferenced here */
    const char *function; /* mp_code_name(), UTF-8 in the arena (NULL if not a str) */
    const char *file;     /* co_filename, likewise */
    bool pinned;          /* we hold a strong reference to the code object */
    bool shim;            /* an interpreter shim (mp_code_is_shim()): its frames are skipped */
    /* what a lookup of an unpinned record checks against the object now at addr */
    int firstlineno;
    Py_ssize_t linetable_size, name_len, file_len;
    Py_hash_t name_hash, file_hash;
};

struct pair {
    const struct code *code;
    uint32_t line;
};

#define CHUNK_BITS   12u
#define CHUNK_SIZE   (1u << CHUNK_BITS)
#define MAX_CHUNKS   4096u      /* 16 M pairs */
#define UNKNOWN_PAIR 0u         /* index 0: "[python frame]", used when a table cannot grow */
#define SHIM_PAIR    UINT32_MAX /* not a pair: intern()'s answer for a shim's frame */

static _Atomic(struct pair *) chunks[MAX_CHUNKS];
static _Atomic uint32_t npairs = 1; /* index 0 is reserved */
static _Atomic uint64_t eval_matches;

static struct code *code_chunk;
static size_t code_chunk_left;

static struct pair *pair_at(uint32_t index)
{
    struct pair *c = atomic_load_explicit(&chunks[index >> CHUNK_BITS], memory_order_acquire);
    return c ? &c[index & (CHUNK_SIZE - 1)] : NULL;
}

static Py_ssize_t str_len(PyObject *s)
{
    return s && PyUnicode_Check(s) && PyUnicode_IS_READY(s) ? PyUnicode_GET_LENGTH(s) : -1;
}

static Py_hash_t str_hash(PyObject *s)
{
    return s && PyUnicode_Check(s) ? ((PyASCIIObject *)s)->hash : -1;
}

/* Whether the code object now at rec->addr is (as far as we can tell) the one recorded. */
static bool code_matches(const struct code *rec, PyCodeObject *co)
{
    if (rec->pinned)
        return true;
    if (rec->firstlineno != co->co_firstlineno ||
        rec->linetable_size != PyBytes_GET_SIZE(co->co_linetable) ||
        rec->name_len != str_len(mp_code_name(co)) || rec->file_len != str_len(co->co_filename))
        return false;
    Py_hash_t h = str_hash(mp_code_name(co));
    if (h != -1 && rec->name_hash != -1 && h != rec->name_hash)
        return false;
    h = str_hash(co->co_filename);
    return h == -1 || rec->file_hash == -1 || h == rec->file_hash;
}

static struct code *code_new(PyCodeObject *co, bool gil)
{
    if (code_chunk_left == 0) {
        code_chunk = map_zeroed(CHUNK_SIZE * sizeof *code_chunk);
        if (!code_chunk)
            return NULL;
        code_chunk_left = CHUNK_SIZE;
    }
    struct code *rec = code_chunk++;
    code_chunk_left--;
    rec->addr = (uintptr_t)co;
    rec->function = arena_copy(mp_code_name(co));
    rec->file = arena_copy(co->co_filename);
    rec->shim = mp_code_is_shim(rec->file);
    rec->firstlineno = co->co_firstlineno;
    rec->linetable_size = PyBytes_GET_SIZE(co->co_linetable);
    rec->name_len = str_len(mp_code_name(co));
    rec->file_len = str_len(co->co_filename);
    rec->name_hash = str_hash(mp_code_name(co));
    rec->file_hash = str_hash(co->co_filename);
    if (gil) {
        Py_INCREF(co);
        rec->pinned = true;
    }
    return rec;
}

/* Appends a pair. Returns its index or UNKNOWN_PAIR. */
static uint32_t pair_add(const struct code *rec, int line)
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
    p->code = rec;
    p->line = line > 0 ? (uint32_t)line : 0;
    atomic_store_explicit(&npairs, index + 1, memory_order_release);
    return index;
}

/* ---- lookup tables ------------------------------------------------------------------------ */

struct slot {
    uintptr_t key1; /* 0 = empty */
    intptr_t key2;
    uintptr_t value;
};

struct table {
    struct slot *slots;
    size_t mask; /* capacity - 1, or 0 before the first use */
    size_t used;
};

static struct table by_code;   /* code address -> struct code * */
static struct table by_offset; /* (code address, instruction offset) -> pair index */
static struct table by_line;   /* (struct code *, line) -> pair index */

static size_t hash2(uintptr_t key1, intptr_t key2)
{
    uint64_t h = (uint64_t)key1 * 0x9E3779B97F4A7C15ull ^ (uint64_t)key2;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 32;
    return (size_t)h;
}

static struct slot *table_find(struct table *t, uintptr_t key1, intptr_t key2)
{
    for (size_t i = hash2(key1, key2) & t->mask;; i = (i + 1) & t->mask) {
        struct slot *s = &t->slots[i];
        if (s->key1 == 0 || (s->key1 == key1 && s->key2 == key2))
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
        if (s->key1) {
            *table_find(&n, s->key1, s->key2) = *s;
            n.used++;
        }
    }
    if (t->mask)
        munmap(t->slots, (t->mask + 1) * sizeof *t->slots);
    *t = n;
    return true;
}

/* The record of a code object, checked or created (lock held). */
static const struct code *code_of(PyCodeObject *co, bool gil)
{
    uintptr_t key = (uintptr_t)co;
    struct slot *s = table_find(&by_code, key, 0);
    if (s->key1) {
        struct code *rec = (struct code *)s->value;
        if (code_matches(rec, co)) {
            if (!rec->pinned && gil) {
                Py_INCREF(co);
                rec->pinned = true;
            }
            return rec;
        }
        /* A different code object now lives at this address: a new record replaces the
         * slot's value (the old one stays valid for ids that already use it). */
        struct code *fresh = code_new(co, gil);
        if (fresh)
            s->value = (uintptr_t)fresh;
        return fresh;
    }
    if (!table_reserve(&by_code))
        return NULL;
    struct code *rec = code_new(co, gil);
    if (rec) {
        *table_find(&by_code, key, 0) = (struct slot){key, 0, (uintptr_t)rec};
        by_code.used++;
    }
    return rec;
}

/* The pair of (code, instruction offset) (lock held): two probes when seen before.
 * SHIM_PAIR for a frame of a shim. */
static uint32_t intern(PyCodeObject *co, int lasti, bool gil)
{
    const struct code *rec = code_of(co, gil);
    if (!rec)
        return UNKNOWN_PAIR;
    if (rec->shim)
        return SHIM_PAIR;
    uintptr_t key = (uintptr_t)co;
    if (by_offset.mask) {
        struct slot *s = table_find(&by_offset, key, lasti);
        if (s->key1) {
            struct pair *p = pair_at((uint32_t)s->value);
            if (p && p->code == rec)
                return (uint32_t)s->value;
        }
    }
    if (!table_reserve(&by_offset) || !table_reserve(&by_line))
        return UNKNOWN_PAIR;
    /* PyCode_Addr2Line walks the line table without allocating; a negative offset (a frame
     * that has not run its first instruction) gives co_firstlineno. */
    int line = PyCode_Addr2Line(co, lasti < 0 ? -1 : lasti * (int)sizeof(_Py_CODEUNIT));
    struct slot *ls = table_find(&by_line, (uintptr_t)rec, line);
    if (!ls->key1) {
        uint32_t index = pair_add(rec, line);
        if (index == UNKNOWN_PAIR)
            return UNKNOWN_PAIR;
        *ls = (struct slot){(uintptr_t)rec, line, index};
        by_line.used++;
    }
    struct slot *os = table_find(&by_offset, key, lasti);
    if (!os->key1)
        by_offset.used++;
    *os = (struct slot){key, lasti, ls->value};
    return (uint32_t)ls->value;
}

/* ---- the callbacks ------------------------------------------------------------------------ */

static unsigned capture(void *ctx, uint64_t *ids, unsigned max)
{
    (void)ctx;
    PyThreadState *ts = PyGILState_GetThisThreadState();
    if (!ts || mp_finalizing())
        return 0;
    /* Only a thread that holds the GIL may touch reference counts (pinning). */
    bool gil = mp_holds_gil(ts);
    mp_pyframe *f = mp_frame_current(ts);
    if (!f)
        return 0;
    unsigned n = 0;
    pthread_mutex_lock(&lock);
    for (; f && n < max; f = mp_frame_previous(f)) {
        PyCodeObject *co = mp_frame_code(f);
        if (!co)
            continue;
        uint32_t index = intern(co, mp_frame_lasti(f, co), gil);
        if (index == SHIM_PAIR)
            continue;
        ids[n++] = ((uint64_t)index << 1) | (mp_frame_is_entry(f) ? 1u : 0u);
    }
    pthread_mutex_unlock(&lock);
    return n;
}

static int resolve(void *ctx, uint64_t id, memprof_runtime_frame *out)
{
    (void)ctx;
    uint64_t index = id >> 1;
    if (index >= atomic_load_explicit(&npairs, memory_order_acquire))
        return -1;
    const struct pair *p = index == UNKNOWN_PAIR ? NULL : pair_at((uint32_t)index);
    out->function = p && p->code->function ? p->code->function : "[python frame]";
    out->file = p ? p->code->file : NULL;
    out->line = p ? p->line : 0;
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

/* fork(): a thread of the parent may hold the lock in the middle of a capture; the child
 * would inherit it locked and hang at its first sample. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&lock);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&lock);
}

static void fork_child(void)
{
    pthread_mutex_init(&lock, NULL);
}

int mp_frames_register(void)
{
    if (source_id >= 0)
        return source_id;
    static bool atfork;
    if (!atfork && pthread_atfork(fork_prepare, fork_parent, fork_child) == 0)
        atfork = true;
    /* Map the first tables now, outside any allocation hook. */
    pthread_mutex_lock(&lock);
    bool ok = table_reserve(&by_code) && table_reserve(&by_offset) && table_reserve(&by_line);
    pthread_mutex_unlock(&lock);
    if (!ok)
        return -ENOMEM;
    memprof_frame_source src = {
        .size = sizeof src,
        .name = "python",
        .capture = capture,
        .resolve = resolve,
        .is_eval_frame = is_eval_frame,
        .ctx = NULL,
    };
    /* Its allocation hooks are the profiler's own: stacks start at their caller (runtime.h). */
    memprof_register_hook_code((const void *)(uintptr_t)&mp_frames_register);
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
