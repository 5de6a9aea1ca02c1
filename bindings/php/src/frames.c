/* SPDX-License-Identifier: MIT */
/*
 * The PHP frame source: which PHP functions, files and lines were running when an
 * allocation was sampled, merged by libmemprof in place of the VM's execute_ex() C frames
 * (runtime.h, "trim and sandwich").
 *
 * Capture runs in the allocation cold path, on the allocating thread, with the profiler's
 * re-entrancy guard set. It walks EG(current_execute_data) (the chain of the executor's
 * frames, innermost first) only on the thread that runs PHP (the NTS executor's globals
 * belong to it; any other thread gets no PHP frames), and never allocates from the Zend heap.
 * A frame is named "function", "Class::method", "{main}" for a script's top level,
 * "{include}" for an included file's and "{eval}" for eval()'d code; user frames carry their
 * file and the line of the opcode being run. Those strings belong to the request (a function
 * compiled without opcache is freed at its end), and a profile may be written after it, so
 * the frame's text is copied at capture time and interned by content: an id is the 1-based
 * index of a (name, file, line, entry flag) entry, valid for the life of the process. That
 * costs a hash of a few hundred bytes per sample, once per sampling interval of allocation.
 *
 * The table is append-only storage in fixed chunks that never move, filled by the one
 * capturing thread and published through its count (release/acquire), so resolution
 * (snapshot time, any thread) reads it without a lock.
 *
 * Trim and sandwich: user functions calling user functions run in one execute_ex()
 * invocation; an internal function that calls back into PHP (array_map, usort, include's
 * compilation never does) starts another, and so do zend_execute() for the script and each
 * generator resumption. The executor marks the first frame of each invocation with
 * ZEND_CALL_TOP, which becomes MEMPROF_RUNTIME_FRAME_ENTRY. Internal functions' frames
 * (str_repeat, array_fill) are kept, without a file: they run in their caller's invocation.
 * execute_ex is exported by the php binary; its bounds come from its dynamic symbol.
 */
#define _GNU_SOURCE
#include "binding.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zend_compile.h>

#define CHUNK_BITS 12
#define CHUNK      (1u << CHUNK_BITS)
#define MAX_CHUNKS 256u /* at most 1,048,576 distinct frames */

struct entry {
    uint64_t hash;
    char *function; /* malloc'ed, never freed */
    char *file;     /* NULL for internal functions */
    uint32_t line;
    uint32_t flags;
};

static struct entry *chunks[MAX_CHUNKS];
static atomic_uint entry_count;

/* Dedup hash over entry index + 1 (0 = empty); capture only. Grown at half load. */
static uint32_t *hash_slots;
static uint32_t hash_cap;

static pthread_t php_thread;
static atomic_int open_for_capture;
static int source_id = -1;

static inline struct entry *entry_at(uint32_t index)
{
    return &chunks[index >> CHUNK_BITS][index & (CHUNK - 1)];
}

static uint64_t fnv(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static bool hash_grow(void)
{
    uint32_t cap = hash_cap ? hash_cap * 2 : 4096;
    uint32_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return false;
    uint32_t n = atomic_load_explicit(&entry_count, memory_order_relaxed);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t at = (uint32_t)entry_at(i)->hash & (cap - 1);
        while (slots[at])
            at = (at + 1) & (cap - 1);
        slots[at] = i + 1;
    }
    free(hash_slots);
    hash_slots = slots;
    hash_cap = cap;
    return true;
}

static bool same_text(const char *kept, const char *s, size_t n)
{
    if (!kept)
        return s == NULL;
    return s && strncmp(kept, s, n) == 0 && kept[n] == '\0';
}

/* The id of a frame's text, added if new; 0 when the table is full or memory ran out. */
static uint32_t intern(const char *function, size_t function_len, const char *file, size_t file_len,
                       uint32_t line, uint32_t flags)
{
    uint64_t h = fnv(0xcbf29ce484222325ull, function, function_len);
    h = fnv(h ^ 0xff, file ? file : "", file ? file_len : 0);
    h = (h ^ line) * 0x100000001b3ull;
    h = (h ^ flags) * 0x100000001b3ull;
    h ^= h >> 29;
    uint32_t n = atomic_load_explicit(&entry_count, memory_order_relaxed);
    if ((uint64_t)(n + 1) * 2 > hash_cap && !hash_grow())
        return 0;
    uint32_t at = (uint32_t)h & (hash_cap - 1);
    for (; hash_slots[at]; at = (at + 1) & (hash_cap - 1)) {
        const struct entry *e = entry_at(hash_slots[at] - 1);
        if (e->hash == h && e->line == line && e->flags == flags &&
            same_text(e->function, function, function_len) && same_text(e->file, file, file_len))
            return hash_slots[at];
    }
    if (n >= CHUNK * MAX_CHUNKS)
        return 0;
    if (!chunks[n >> CHUNK_BITS]) {
        struct entry *c = calloc(CHUNK, sizeof *c);
        if (!c)
            return 0;
        chunks[n >> CHUNK_BITS] = c;
    }
    struct entry *e = entry_at(n);
    e->function = strndup(function, function_len);
    e->file = file ? strndup(file, file_len) : NULL;
    if (!e->function || (file && !e->file)) {
        free(e->function);
        free(e->file);
        return 0;
    }
    e->hash = h;
    e->line = line;
    e->flags = flags;
    atomic_store_explicit(&entry_count, n + 1, memory_order_release);
    hash_slots[at] = n + 1;
    return n + 1;
}

/* The line being run in a user frame: its opline's, when the opline lies in its op_array
 * (the VM keeps the innermost frame's opline in a register and saves it before anything
 * that can allocate or throw, so the saved one is at worst an opcode behind). */
static uint32_t user_line(const zend_execute_data *ex)
{
    const zend_op_array *op = &ex->func->op_array;
    if (ex->opline >= op->opcodes && ex->opline < op->opcodes + op->last)
        return ex->opline->lineno;
    return op->line_start;
}

static uint32_t frame_id(const zend_execute_data *ex)
{
    const zend_function *f = ex->func;
    char name[512];
    int len;
    const zend_string *fn = f->common.function_name;
    const char *file = NULL;
    size_t file_len = 0;
    uint32_t line = 0, flags = 0;
    if (ZEND_USER_CODE(f->type)) {
        file = ZSTR_VAL(f->op_array.filename);
        file_len = ZSTR_LEN(f->op_array.filename);
        line = user_line(ex);
        if (ZEND_CALL_INFO(ex) & ZEND_CALL_TOP)
            flags = MEMPROF_RUNTIME_FRAME_ENTRY;
    }
    if (!fn) { /* user code outside any function: a file's top level or eval()'d code */
        const char *what = ex->prev_execute_data == NULL ? "{main}" : "{include}";
        if (f->op_array.type == ZEND_EVAL_CODE)
            what = "{eval}";
        len = snprintf(name, sizeof name, "%s", what);
    } else if (f->common.scope) {
        len = snprintf(name, sizeof name, "%.*s::%.*s", (int)ZSTR_LEN(f->common.scope->name),
                       ZSTR_VAL(f->common.scope->name), (int)ZSTR_LEN(fn), ZSTR_VAL(fn));
    } else {
        len = snprintf(name, sizeof name, "%.*s", (int)ZSTR_LEN(fn), ZSTR_VAL(fn));
    }
    if (len < 0)
        return 0;
    if ((size_t)len >= sizeof name)
        len = sizeof name - 1;
    return intern(name, (size_t)len, file, file_len, line, flags);
}

static unsigned capture(void *ctx, uint64_t *ids, unsigned max)
{
    (void)ctx;
    if (!atomic_load_explicit(&open_for_capture, memory_order_acquire) ||
        !pthread_equal(pthread_self(), php_thread))
        return 0;
    unsigned n = 0;
    for (const zend_execute_data *ex = EG(current_execute_data); ex && n < max;
         ex = ex->prev_execute_data) {
        /* No function, or an internal one without a name: the executor's dummy frames (a
         * fiber's bottom frame, for one), which name nothing a user wrote. */
        if (!ex->func || (!ZEND_USER_CODE(ex->func->type) && !ex->func->common.function_name))
            continue;
        uint32_t id = frame_id(ex);
        if (!id)
            break;
        ids[n++] = id;
    }
    return n;
}

static int resolve(void *ctx, uint64_t id, memprof_runtime_frame *out)
{
    (void)ctx;
    uint32_t n = atomic_load_explicit(&entry_count, memory_order_acquire);
    if (id == 0 || id > n)
        return -1;
    const struct entry *e = entry_at((uint32_t)(id - 1));
    out->function = e->function;
    out->file = e->file;
    out->line = e->line;
    out->flags = e->flags;
    return 0;
}

static uintptr_t eval_lo, eval_hi; /* execute_ex's code, (lo, hi] as return addresses */

static int is_eval_frame(void *ctx, const char *function, const char *module, uint64_t pc)
{
    (void)ctx, (void)module;
    if (eval_hi)
        return pc > eval_lo && pc <= eval_hi;
    return function && strcmp(function, "execute_ex") == 0;
}

/* execute_ex's bounds from its dynamic symbol (the php binary exports it for extensions). */
static void find_eval_loop(void)
{
    void *sym_addr = (void *)(uintptr_t)&execute_ex;
    Dl_info info;
    const ElfW(Sym) *sym = NULL;
    if (dladdr1(sym_addr, &info, (void **)&sym, RTLD_DL_SYMENT) && sym && sym->st_size &&
        info.dli_saddr == sym_addr) {
        eval_lo = (uintptr_t)sym_addr;
        eval_hi = eval_lo + sym->st_size;
    }
}

int mpphp_frames_register(void)
{
    if (source_id >= 0)
        return source_id;
    php_thread = pthread_self();
    find_eval_loop();
    memprof_frame_source src = {
        .size = sizeof src,
        .name = "php",
        .capture = capture,
        .resolve = resolve,
        .is_eval_frame = is_eval_frame,
        .ctx = NULL,
    };
    /* Its allocation hooks are the profiler's own: stacks start at their caller (runtime.h). */
    memprof_register_hook_code((const void *)(uintptr_t)&mpphp_frames_register);
    int rc = memprof_register_frame_source(&src);
    if (rc >= 0) {
        source_id = rc;
        atomic_store_explicit(&open_for_capture, 1, memory_order_release);
    }
    return rc;
}

void mpphp_frames_close(void)
{
    atomic_store_explicit(&open_for_capture, 0, memory_order_release);
}
