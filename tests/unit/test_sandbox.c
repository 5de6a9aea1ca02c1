/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the seccomp-filter reading (src/core/sandbox.h, memprof__sandbox_forbids()):
 * which groups of the profiler's system calls a filter forbids. Allowlists and denylists as
 * programs write them, actions that let a call go on (ALLOW, LOG, ERRNO) and those that do
 * not (KILL_PROCESS, KILL_THREAD, TRAP, TRACE, USER_NOTIF), a filter that looks at an
 * argument, the scratch memory, arithmetic and RET A, strict mode, and filters the
 * interpreter cannot read (forbid everything). Also what the platform layer does without
 * the calls: memprof__pf_random() still varies, memprof__pf_thread_id() says 0. Nothing is
 * installed: the filters are only read.
 */
#define _GNU_SOURCE
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "core/platform.h"
#include "core/sandbox.h"
#include "test.h"

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#endif

#define ALL  ((1u << MEMPROF_SYS_COUNT) - 1)
#define G(g) (1u << MEMPROF_SYS_##g)

#define LD_NR     BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr))
#define LD_ARCH   BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch))
#define LD_ARG0   BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0]))
#define RET(v)    BPF_STMT(BPF_RET | BPF_K, (v))
#define IS(nr)    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1)
#define ALLOW(nr) IS(nr), RET(SECCOMP_RET_ALLOW)

static uint32_t forbids(const struct sock_filter *f, size_t n)
{
    struct sock_fprog p = {.len = (unsigned short)n, .filter = (struct sock_filter *)f};
    return memprof__sandbox_forbids(false, &p);
}
#define FORBIDS(...)                                                                               \
    forbids((const struct sock_filter[]){__VA_ARGS__},                                             \
            sizeof((const struct sock_filter[]){__VA_ARGS__}) / sizeof(struct sock_filter))

/* The calls of a program that allocates and writes to its standard streams, killing for any
 * other: everything of the profiler's but the signal mask goes. */
static void test_an_allocator_allowlist_forbids_all_but_the_signal_mask(void)
{
    uint32_t f = FORBIDS(LD_ARCH, BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
                         RET(SECCOMP_RET_KILL_PROCESS), LD_NR, ALLOW(SYS_brk), ALLOW(SYS_mmap),
                         ALLOW(SYS_munmap), ALLOW(SYS_mprotect), ALLOW(SYS_madvise),
                         ALLOW(SYS_futex), ALLOW(SYS_write), ALLOW(SYS_rt_sigprocmask),
                         ALLOW(SYS_exit_group), RET(SECCOMP_RET_KILL_PROCESS));
    EXPECT_EQ_U(f, ALL & ~G(SIGMASK));
}

/* A denylist of calls the profiler never makes forbids nothing. */
static void test_a_denylist_of_other_calls_forbids_nothing(void)
{
    EXPECT_EQ_U(FORBIDS(LD_NR, IS(SYS_ptrace), RET(SECCOMP_RET_KILL_PROCESS), IS(SYS_mount),
                        RET(SECCOMP_RET_KILL_PROCESS), RET(SECCOMP_RET_ALLOW)),
                0);
}

/* Failing with an error is survivable: the profiler copes with a refused call. */
static void test_errno_and_log_allow_a_call_and_other_actions_forbid_it(void)
{
    static const uint32_t survivable[] = {SECCOMP_RET_ALLOW, SECCOMP_RET_LOG,
                                          SECCOMP_RET_ERRNO | 13};
    static const uint32_t fatal[] = {SECCOMP_RET_KILL_PROCESS, SECCOMP_RET_KILL_THREAD,
                                     SECCOMP_RET_TRAP,         SECCOMP_RET_TRACE | 1,
                                     SECCOMP_RET_USER_NOTIF,   0x12340000u /* unknown */};
    for (size_t i = 0; i < sizeof survivable / sizeof *survivable; i++)
        EXPECT_EQ_U(FORBIDS(LD_NR, IS(SYS_getrandom), RET(survivable[i]), RET(SECCOMP_RET_ALLOW)),
                    0);
    for (size_t i = 0; i < sizeof fatal / sizeof *fatal; i++)
        EXPECT_EQ_U(FORBIDS(LD_NR, IS(SYS_getrandom), RET(fatal[i]), RET(SECCOMP_RET_ALLOW)),
                    G(RANDOM) | G(WRITE)); /* a profile's temporary file's name */
}

/* prctl allowed only for PR_GET_NAME: the thread registry may name threads. */
static void test_a_filter_on_an_argument_is_read_with_the_profilers_arguments(void)
{
    uint32_t f = FORBIDS(LD_NR, BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_prctl, 0, 3), LD_ARG0,
                         BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PR_GET_NAME, 1, 0),
                         RET(SECCOMP_RET_KILL_PROCESS), RET(SECCOMP_RET_ALLOW));
    EXPECT_EQ_U(f, 0);
    f = FORBIDS(LD_NR, BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_prctl, 0, 3), LD_ARG0,
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PR_SET_NAME, 1, 0),
                RET(SECCOMP_RET_KILL_PROCESS), RET(SECCOMP_RET_ALLOW));
    EXPECT_EQ_U(f, G(THREAD_NAME));
}

/* Scratch memory, X, arithmetic, JSET, JA and RET A: the action is computed from nr. */
static void test_memory_arithmetic_and_return_of_a(void)
{
    /* A = nr; M[3] = A; X = SYS_gettid; A = X; A -= M[3]... equal to zero for gettid. */
    uint32_t f = FORBIDS(LD_NR, BPF_STMT(BPF_ST, 3), BPF_STMT(BPF_LDX | BPF_IMM, SYS_gettid),
                         BPF_STMT(BPF_MISC | BPF_TXA, 0), BPF_STMT(BPF_LDX | BPF_MEM, 3),
                         BPF_STMT(BPF_ALU | BPF_SUB | BPF_X, 0),
                         BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, 0xffffffffu, 1, 0),
                         BPF_STMT(BPF_JMP | BPF_JA, 1), RET(SECCOMP_RET_ALLOW),
                         BPF_STMT(BPF_LD | BPF_IMM, SECCOMP_RET_TRAP),
                         BPF_STMT(BPF_ALU | BPF_OR | BPF_K, 7), BPF_STMT(BPF_RET | BPF_A, 0));
    /* gettid jumps over ALLOW to TRAP|7 (RET A); every other call is allowed. */
    EXPECT_EQ_U(f, G(IDS) | G(WRITE) | G(WRITER));
}

/* Strict mode leaves read, write, exit and rt_sigreturn: every group needs another. */
static void test_strict_mode_forbids_everything(void)
{
    EXPECT_EQ_U(memprof__sandbox_forbids(true, NULL), ALL);
}

/* What the kernel would refuse forbids everything (it is never installed: the caller gives
 * the groups back). */
static void test_an_unreadable_filter_forbids_everything(void)
{
    EXPECT_EQ_U(memprof__sandbox_forbids(false, NULL), ALL);
    EXPECT_EQ_U(FORBIDS(LD_NR), ALL);                                        /* runs off the end */
    EXPECT_EQ_U(FORBIDS(LD_NR, BPF_STMT(BPF_JMP | BPF_JA, 5), RET(0)), ALL); /* jump out */
    EXPECT_EQ_U(FORBIDS(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 64), RET(SECCOMP_RET_ALLOW)), ALL);
    EXPECT_EQ_U(FORBIDS(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 2), RET(SECCOMP_RET_ALLOW)), ALL);
    EXPECT_EQ_U(FORBIDS(BPF_STMT(BPF_LD | BPF_MEM, 16), RET(SECCOMP_RET_ALLOW)), ALL);
}

/* With the calls forbidden the platform layer does without them. */
static void test_without_getrandom_and_ids_the_platform_makes_do(void)
{
    uint32_t saved = memprof_atomic_load_relaxed(&memprof__sys_forbidden);
    EXPECT(memprof__pf_thread_id() != 0);
    memprof__pf_random_prepare();
    memprof_atomic_store_relaxed(&memprof__sys_forbidden, G(RANDOM) | G(IDS));
    uint64_t a = memprof__pf_random(), b = memprof__pf_random();
    EXPECT(a != b);
    EXPECT_EQ_U(memprof__pf_thread_id(), 0);
    memprof_atomic_store_relaxed(&memprof__sys_forbidden, saved);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_an_allocator_allowlist_forbids_all_but_the_signal_mask),
        TEST_CASE(test_a_denylist_of_other_calls_forbids_nothing),
        TEST_CASE(test_errno_and_log_allow_a_call_and_other_actions_forbid_it),
        TEST_CASE(test_a_filter_on_an_argument_is_read_with_the_profilers_arguments),
        TEST_CASE(test_memory_arithmetic_and_return_of_a),
        TEST_CASE(test_strict_mode_forbids_everything),
        TEST_CASE(test_an_unreadable_filter_forbids_everything),
        TEST_CASE(test_without_getrandom_and_ids_the_platform_makes_do),
    };
    return TEST_MAIN(cases, false);
}
