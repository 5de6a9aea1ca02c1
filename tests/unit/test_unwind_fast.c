/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the cached DWARF walk (src/core/unwind_fast.h): from the same place, it must
 * find the same return addresses as libgcc's unwinder (_Unwind_Backtrace()), through frames
 * with and without a frame pointer, through libc's code (qsort() calling back), on another
 * thread, and again from its cache; and it must give up, for libgcc to walk, where a signal
 * frame is on the stack and on a stack whose end it does not know (a coroutine's).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <ucontext.h>
#include <unwind.h>

#include "core/unwind_fast.h"
#include "test.h"

#define MAX_FRAMES 64

/* A function compiled without a frame pointer, whatever this file's flags (GCC). */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_FRAME_POINTER __attribute__((optimize("omit-frame-pointer")))
#else
#define NO_FRAME_POINTER
#endif

struct walks {
    void *libgcc[MAX_FRAMES];
    void *fast[MAX_FRAMES];
    int nlibgcc, nfast;
    bool ended;
};

static _Unwind_Reason_Code add_frame(struct _Unwind_Context *ctx, void *arg)
{
    struct walks *w = arg;
    if (w->nlibgcc == MAX_FRAMES)
        return _URC_END_OF_STACK;
    w->libgcc[w->nlibgcc++] = (void *)_Unwind_GetIP(ctx);
    return _URC_NO_REASON;
}

/* Both walks from this function: the first address differs (libgcc's first is the return
 * address here, the cached walk's its start a few bytes before), the rest must not. libgcc
 * called directly, as the profiler does: a sanitizer's backtrace() adds a frame of its own. */
static __attribute__((noinline)) void walk_here(struct walks *w)
{
    struct memprof_regs r;
    MEMPROF_REGS_HERE(&r);
    w->nlibgcc = 0;
    _Unwind_Backtrace(add_frame, w);
    if (w->nlibgcc > 1 && !w->libgcc[w->nlibgcc - 1]) /* a zero return address ends it */
        w->nlibgcc--;
    w->nfast = memprof__unwind_fast(&r, w->fast, MAX_FRAMES, &w->ended);
}

static bool same_stack(const struct walks *w)
{
    if (w->nfast < 2 || w->nfast != w->nlibgcc || !w->ended) {
        fprintf(stderr, "  fast walk %d frames (ended %d), libgcc %d\n", w->nfast, w->ended,
                w->nlibgcc);
        return false;
    }
    for (int i = 1; i < w->nfast; i++)
        if (w->fast[i] != w->libgcc[i]) {
            fprintf(stderr, "  frame %d: %p, libgcc %p\n", i, w->fast[i], w->libgcc[i]);
            return false;
        }
    return true;
}

/* Frames of several shapes between the test and the walk: a frame pointer (this file's
 * default), none (CFA = rsp + offset, moving with pushes), and a variable-sized frame. */
static __attribute__((noinline)) NO_FRAME_POINTER int no_fp(struct walks *w, int n);

static __attribute__((noinline)) int with_alloca(struct walks *w, int n)
{
    volatile char *buf = __builtin_alloca((size_t)n * 16 + 8);
    buf[0] = (char)n;
    int r = n > 0 ? no_fp(w, n - 1) : (walk_here(w), 0);
    return r + buf[0];
}

static __attribute__((noinline)) NO_FRAME_POINTER int no_fp(struct walks *w, int n)
{
    volatile int x = n;
    int r = n > 0 ? with_alloca(w, n - 1) : (walk_here(w), 0);
    return r + x;
}

static void test_same_frames_as_libgcc_through_mixed_frames(void)
{
    struct walks w;
    no_fp(&w, 7);
    CHECK(same_stack(&w));
}

static void test_same_frames_again_from_the_cache(void)
{
    struct walks first, again;
    with_alloca(&first, 5);
    with_alloca(&again, 5);
    CHECK(same_stack(&first));
    CHECK(same_stack(&again));
    EXPECT_EQ(first.nfast, again.nfast);
}

/* Through libc's code, built without frame pointers: qsort() calls the comparison back. */
static struct walks *in_qsort;

static int compare(const void *a, const void *b)
{
    if (in_qsort) {
        walk_here(in_qsort);
        in_qsort = NULL;
    }
    return *(const int *)a - *(const int *)b;
}

static void test_same_frames_through_libc(void)
{
    struct walks w;
    int v[] = {5, 3, 9, 1, 7};
    in_qsort = &w;
    qsort(v, 5, sizeof *v, compare);
    CHECK(same_stack(&w));
}

static void *on_thread(void *arg)
{
    no_fp(arg, 3);
    return NULL;
}

static void test_same_frames_on_a_thread(void)
{
    struct walks w;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, on_thread, &w) == 0);
    pthread_join(t, NULL);
    CHECK(same_stack(&w));
}

/* A signal frame (the kernel's, returned through glibc's __restore_rt) is libgcc's to walk. */
static struct walks in_handler;

static void handler(int sig)
{
    (void)sig;
    walk_here(&in_handler);
}

static void test_gives_up_at_a_signal_frame(void)
{
    struct sigaction sa = {.sa_handler = handler}, old;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, &old) == 0);
    raise(SIGUSR1);
    sigaction(SIGUSR1, &old, NULL);
    EXPECT_EQ(in_handler.nfast, -1);
    EXPECT(in_handler.nlibgcc > 3);
}

static void test_stops_at_the_limit_given(void)
{
    struct memprof_regs r;
    MEMPROF_REGS_HERE(&r);
    void *frames[2];
    bool ended = true;
    EXPECT_EQ(memprof__unwind_fast(&r, frames, 2, &ended), 2);
    EXPECT(!ended);
}

/* A coroutine on a stack from malloc(): neither a thread's nor the main one. */
static ucontext_t main_ctx, co_ctx;
static struct walks on_coroutine;

static void coroutine(void)
{
    walk_here(&on_coroutine);
}

static void test_gives_up_on_a_stack_it_does_not_know(void)
{
    size_t size = 256 * 1024;
    void *stack = malloc(size);
    CHECK(stack && getcontext(&co_ctx) == 0);
    co_ctx.uc_stack.ss_sp = stack;
    co_ctx.uc_stack.ss_size = size;
    co_ctx.uc_link = &main_ctx;
    makecontext(&co_ctx, coroutine, 0);
    CHECK(swapcontext(&main_ctx, &co_ctx) == 0);
    free(stack);
    EXPECT_EQ(on_coroutine.nfast, -1);
    EXPECT(on_coroutine.nlibgcc >= 2);
}

int main(int argc, char **argv)
{
    if (!MEMPROF_HAVE_UNWIND_FAST) {
        fprintf(stderr, "the cached walk is x86-64 only\n");
        return TEST_EXIT_SKIP;
    }
    static const struct test_case cases[] = {
        TEST_CASE(test_same_frames_as_libgcc_through_mixed_frames),
        TEST_CASE(test_same_frames_again_from_the_cache),
        TEST_CASE(test_same_frames_through_libc),
        TEST_CASE(test_same_frames_on_a_thread),
        TEST_CASE(test_gives_up_at_a_signal_frame),
        TEST_CASE(test_stops_at_the_limit_given),
        TEST_CASE(test_gives_up_on_a_stack_it_does_not_know),
    };
    return TEST_MAIN(cases, false);
}
