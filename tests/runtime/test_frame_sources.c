/* SPDX-License-Identifier: MIT */
/*
 * The runtime frame-source API (memprof/runtime.h) with a small fake interpreter: its
 * "eval loop" is a native function that runs interpreted frames kept on a thread-local
 * frame stack, and interpreted code allocates through the custom-allocator reports. The
 * resolved stacks must show the interpreted frames in place of the eval loop (trim and
 * sandwich), innermost first, with their function, file and line.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memprof/memprof.h>
#include <memprof/runtime.h>

#include "core/engine.h"
#include "resolve/symbols.h"
#include "../keep_frame.h"
#include "../check.h"

/* ---- the fake interpreter ----------------------------------------------------------------- */

#define ENTRY_BIT 0x1000u /* ids with this bit start an eval-loop invocation */

static __thread uint64_t frame_stack[64]; /* outermost first */
static __thread unsigned frame_depth;
static int captures;

static unsigned fake_capture(void *ctx, uint64_t *ids, unsigned max)
{
    (void)ctx;
    captures++;
    unsigned n = 0;
    for (unsigned i = frame_depth; i-- > 0 && n < max;)
        ids[n++] = frame_stack[i];
    return n;
}

static int fake_resolve(void *ctx, uint64_t id, memprof_runtime_frame *out)
{
    (void)ctx;
    static char names[64][32];
    unsigned k = (unsigned)(id & 63);
    snprintf(names[k], sizeof names[k], "script_fn_%u", (unsigned)(id & 0xfff));
    out->function = names[k];
    out->file = "script.fake";
    out->line = (uint32_t)(id & 0xfff) * 10;
    out->flags = (id & ENTRY_BIT) ? MEMPROF_RUNTIME_FRAME_ENTRY : 0;
    return 0;
}

static int fake_is_eval(void *ctx, const char *function, const char *module, uint64_t pc)
{
    (void)ctx, (void)module, (void)pc;
    return function && strcmp(function, "fake_eval_loop") == 0;
}

static uint64_t next_block = 1;

/* Native code called by interpreted code: allocates through the custom allocator API. */
TEST_KEEP_FRAME static void native_alloc(size_t n)
{
    int rc = memprof_report_alloc(next_block++, n);
    CHECK(rc == 1); /* at rate 1 a 64 KiB block is always sampled */
    __asm__ volatile("" ::: "memory");
}

typedef void (*native_fn)(void);

/* Runs `count` interpreted frames (ids first..first+count-1, the first one an entry), then
 * calls into native code. */
TEST_KEEP_FRAME static void fake_eval_loop(uint64_t first, unsigned count, native_fn then)
{
    for (unsigned i = 0; i < count; i++)
        frame_stack[frame_depth++] = (first + i) | (i == 0 ? ENTRY_BIT : 0);
    then();
    frame_depth -= count;
    __asm__ volatile("" ::: "memory");
}

TEST_KEEP_FRAME static void alloc_once(void)
{
    native_alloc(65536);
    __asm__ volatile("" ::: "memory");
}

/* A native extension function that calls back into the interpreter. */
TEST_KEEP_FRAME static void native_callback(void)
{
    fake_eval_loop(20, 2, alloc_once);
    __asm__ volatile("" ::: "memory");
}

TEST_KEEP_FRAME static void run_flat(void)
{
    fake_eval_loop(1, 3, alloc_once);
    __asm__ volatile("" ::: "memory");
}

TEST_KEEP_FRAME static void run_nested(void)
{
    fake_eval_loop(10, 2, native_callback);
    __asm__ volatile("" ::: "memory");
}

TEST_KEEP_FRAME static void run_before_reuse(void)
{
    fake_eval_loop(30, 2, alloc_once);
    __asm__ volatile("" ::: "memory");
}

/* A second runtime that names every frame its own way. */
static int impostor_resolve(void *ctx, uint64_t id, memprof_runtime_frame *out)
{
    (void)ctx, (void)id;
    out->function = "impostor_frame";
    out->file = "impostor.fake";
    out->line = 1;
    return 0;
}

/* ---- checks ------------------------------------------------------------------------------- */

/* Index of the first frame named `fn` in stack, or -1. */
static int find_frame(const memprof_snapshot *s, uint32_t stack, const char *fn)
{
    int depth = memprof_snapshot_stack_depth(s, stack);
    for (int i = 0; i < depth; i++) {
        memprof_frame f = {.size = sizeof f};
        if (memprof_snapshot_frame(s, stack, (size_t)i, &f) == 0 && f.function &&
            strcmp(f.function, fn) == 0)
            return i;
    }
    return -1;
}

/* The stack of the site whose stack contains `fn`. */
static int stack_with(const memprof_snapshot *s, const char *fn, uint32_t *out)
{
    for (size_t i = 0; i < memprof_snapshot_site_count(s); i++) {
        memprof_site_info si = {.size = sizeof si};
        memprof_snapshot_site(s, i, &si);
        if (find_frame(s, si.stack_id, fn) >= 0) {
            *out = si.stack_id;
            return 0;
        }
    }
    return -1;
}

static void expect_frame(const memprof_snapshot *s, uint32_t stack, int index, const char *fn,
                         bool runtime)
{
    memprof_frame f = {.size = sizeof f};
    CHECK(memprof_snapshot_frame(s, stack, (size_t)index, &f) == 0);
    if (!f.function || strcmp(f.function, fn) != 0) {
        fprintf(stderr, "frame %d: expected %s, got %s\n", index, fn,
                f.function ? f.function : "(null)");
        failures++;
        return;
    }
    CHECK(!!(f.flags & MEMPROF_FRAME_RUNTIME) == runtime);
    if (runtime) {
        CHECK(f.file && strcmp(f.file, "script.fake") == 0);
        CHECK(f.line > 0);
        CHECK(f.address == 0);
    }
}

static void test_interpreter_frames_replace_the_eval_loop(const memprof_snapshot *s)
{
    uint32_t stack;
    CHECK(stack_with(s, "run_flat", &stack) == 0);
    int at = find_frame(s, stack, "native_alloc");
    CHECK(at >= 0);
    /* Leaf first: native_alloc, alloc_once, then the 3 interpreted frames innermost first,
     * then run_flat. fake_eval_loop itself is gone. */
    expect_frame(s, stack, at + 1, "alloc_once", false);
    expect_frame(s, stack, at + 2, "script_fn_3", true);
    expect_frame(s, stack, at + 3, "script_fn_2", true);
    expect_frame(s, stack, at + 4, "script_fn_1", true);
    expect_frame(s, stack, at + 5, "run_flat", false);
    CHECK(find_frame(s, stack, "fake_eval_loop") < 0);
}

static void test_nested_eval_loops_get_their_own_frames(const memprof_snapshot *s)
{
    uint32_t stack;
    CHECK(stack_with(s, "run_nested", &stack) == 0);
    int at = find_frame(s, stack, "alloc_once");
    CHECK(at >= 0);
    /* The inner eval loop ran frames 20, 21; the outer one 10, 11. */
    expect_frame(s, stack, at + 1, "script_fn_21", true);
    expect_frame(s, stack, at + 2, "script_fn_20", true);
    expect_frame(s, stack, at + 3, "native_callback", false);
    expect_frame(s, stack, at + 4, "script_fn_11", true);
    expect_frame(s, stack, at + 5, "script_fn_10", true);
    expect_frame(s, stack, at + 6, "run_nested", false);
}

static void test_reported_blocks_are_freed(void)
{
    memprof_stats st = {.size = sizeof st};
    memprof_get_stats(&st);
    uint64_t live = st.live_samples;
    CHECK(memprof_report_free(1) == 1);
    CHECK(memprof_report_free(1) == 0); /* already gone */
    CHECK(memprof_report_free(999999) == 0);
    memprof_get_stats(&st);
    CHECK(st.live_samples == live - 1);
    CHECK(memprof_report_alloc(UINT64_C(1) << 63, 10) == -EINVAL);
    CHECK(memprof_report_free(UINT64_C(1) << 63) == -EINVAL);
}

static void test_registration_is_validated(void)
{
    memprof_frame_source bad = {.size = sizeof bad};
    CHECK(memprof_register_frame_source(NULL) == -EINVAL);
    CHECK(memprof_register_frame_source(&bad) == -EINVAL);
    CHECK(memprof_unregister_frame_source(-1) == -EINVAL);
    CHECK(memprof_unregister_frame_source(MEMPROF_MAX_FRAME_SOURCES) == -EINVAL);
}

/* A binding built against a newer header passes a larger struct: accepted while the fields
 * this library does not know are unset, refused when one is set; a struct smaller than the
 * first version's is refused. */
static void test_struct_sizes_of_other_headers(void)
{
    struct {
        memprof_frame_source src;
        void *newer_callback;
    } big = {.src = {.size = sizeof big,
                     .capture = fake_capture,
                     .resolve = impostor_resolve,
                     .is_eval_frame = fake_is_eval}};
    int id = memprof_register_frame_source(&big.src);
    CHECK(id >= 0);
    CHECK(memprof_unregister_frame_source(id) == 0);
    big.newer_callback = &big;
    CHECK(memprof_register_frame_source(&big.src) == -EINVAL);
    memprof_frame_source small = big.src;
    small.size = sizeof small - 1;
    CHECK(memprof_register_frame_source(&small) == -EINVAL);
}

/* Stacks captured under a source that was unregistered never resolve through a source
 * registered later in its place: they lose their interpreter frames, not gain foreign ones. */
static void test_stacks_of_a_gone_source_do_not_resolve_through_its_successor(int id)
{
    run_before_reuse(); /* captured under `id`, not resolved yet */
    CHECK(memprof_unregister_frame_source(id) == 0);
    memprof_frame_source other = {.size = sizeof other,
                                  .name = "other",
                                  .capture = fake_capture,
                                  .resolve = impostor_resolve,
                                  .is_eval_frame = fake_is_eval};
    int other_id = memprof_register_frame_source(&other);
    CHECK(other_id >= 0 && other_id != id);
    memprof_snapshot *s = NULL;
    CHECK(memprof_get_snapshot(&s) == 0);
    uint32_t stack;
    CHECK(stack_with(s, "run_before_reuse", &stack) == 0);
    CHECK(find_frame(s, stack, "impostor_frame") < 0);
    CHECK(find_frame(s, stack, "fake_eval_loop") >= 0);
    memprof_free_snapshot(s);
    CHECK(memprof_unregister_frame_source(id) == -EINVAL); /* its id is not the successor's */
    CHECK(memprof_unregister_frame_source(other_id) == 0);
}

int main(int argc, char **argv)
{
    /* "raw": the process writes its profiles unsymbolized (MEMPROF_SYMBOLIZE=0); a frame
     * source's stacks must be named all the same, or no eval frame would be recognised. */
    bool raw = argc > 1 && !strcmp(argv[1], "raw");
    if (raw)
        memprof__sym_set_symbolize(false);
    memprof__backend_register(); /* this test feeds the engine itself */
    memprof_config cfg;
    memprof_config_init(&cfg);
    cfg.sampling_rate = 1;
    if (memprof_init_config(&cfg) != 0 || memprof_start() != 0) {
        fprintf(stderr, "cannot start the engine\n");
        return 1;
    }
    memprof_frame_source src = {.size = sizeof src,
                                .name = "fake",
                                .capture = fake_capture,
                                .resolve = fake_resolve,
                                .is_eval_frame = fake_is_eval};
    int id = memprof_register_frame_source(&src);
    CHECK(id >= 0);
    test_registration_is_validated();
    run_flat();
    run_nested();
    CHECK(captures >= 2);

    memprof_snapshot *s = NULL;
    CHECK(memprof_get_snapshot(&s) == 0);
    test_interpreter_frames_replace_the_eval_loop(s);
    test_nested_eval_loops_get_their_own_frames(s);
    memprof_free_snapshot(s);
    test_reported_blocks_are_freed();
    test_struct_sizes_of_other_headers();
    if (!raw) /* looks for native names in stacks no source holds: raw has none */
        test_stacks_of_a_gone_source_do_not_resolve_through_its_successor(id);
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
