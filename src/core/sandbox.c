/* SPDX-License-Identifier: MIT */
/*
 * Which of the profiler's system calls a seccomp filter forbids (design in sandbox.h): a
 * classic-BPF interpreter with the kernel's seccomp subset of instructions, run on each
 * system call of each group with the arguments the profiler passes.
 */
#define _GNU_SOURCE
#include "core/sandbox.h"

#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>

/* The same numbers on every architecture (the common system-call table of Linux 5.3+). */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_clone3
#define SYS_clone3 435
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

/* Read at start and at exit in every process (compiler.h). */
_Atomic uint32_t memprof__sys_forbidden MEMPROF_START_DATA;

/* One system call of a group, with the arguments the profiler passes (pointers as 0: a
 * filter cannot look behind them, and none worth the name compares them). */
struct probe {
    uint8_t group;
    int nr;
    uint64_t args[6];
};

/* clang-format off */
#define P(g, nr, ...) {MEMPROF_SYS_##g, nr, {__VA_ARGS__}}
/* clang-format on */
#define AT ((uint64_t)(int64_t)AT_FDCWD)
#define THREAD_FLAGS                                                                               \
    (CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |            \
     CLONE_SETTLS | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID)

static const struct probe probes[] = {
    P(RANDOM, SYS_getrandom, 0, 8, 1 /* GRND_NONBLOCK */),
    P(IDS, SYS_gettid, 0),
    P(IDS, SYS_getpid, 0),
    P(THREAD_NAME, SYS_prctl, PR_GET_NAME, 0),
    P(PROC, SYS_openat, AT, 0, O_RDONLY | O_CLOEXEC),
    P(PROC, SYS_openat, AT, 0, O_RDONLY),
    P(PROC, SYS_read, 3, 0, 1024),
    P(PROC, SYS_close, 3),
    P(PROBE, SYS_mincore, 0, 4096, 0),
    P(PROBE, SYS_msync, 0, 4096, MS_ASYNC),
    P(PROBE, SYS_getpid, 0),
    P(PROBE, SYS_process_vm_readv, 1, 0, 1, 0, 1, 0),
    P(SIGMASK, SYS_rt_sigprocmask, SIG_SETMASK, 0, 0, 8),
    P(SAY, SYS_newfstatat, 2, 0, 0, AT_EMPTY_PATH),
#ifdef SYS_fstat
    P(SAY, SYS_fstat, 2, 0),
#endif
    P(SAY, SYS_write, 2, 0, 1),
    P(SAY, SYS_rt_sigprocmask, SIG_BLOCK, 0, 0, 8), /* SIGPIPE held (write_signals.h) */
    P(SAY, SYS_rt_sigprocmask, SIG_SETMASK, 0, 0, 8),
    P(SAY, SYS_rt_sigpending, 0, 8),
    P(SAY, SYS_rt_sigtimedwait, 0, 0, 0, 8),
    /* What writing a profile was seen to take, text to pprof, with libdw loading
     * libdebuginfod (and through it curl and gnutls) to look for debug files. */
    P(WRITE, SYS_getpid, 0),
    P(WRITE, SYS_gettid, 0),
    P(WRITE, SYS_openat, AT, 0, O_RDONLY | O_CLOEXEC),
    P(WRITE, SYS_openat, AT, 0, O_RDONLY),
    P(WRITE, SYS_openat, AT, 0, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600),
    P(WRITE, SYS_read, 3, 0, 4096),
    P(WRITE, SYS_pread64, 3, 0, 4096, 0),
    P(WRITE, SYS_write, 3, 0, 4096),
    P(WRITE, SYS_close, 3),
    P(WRITE, SYS_newfstatat, AT, 0, 0, AT_SYMLINK_NOFOLLOW),
    P(WRITE, SYS_newfstatat, 3, 0, 0, AT_EMPTY_PATH),
#ifdef SYS_fstat
    P(WRITE, SYS_fstat, 3, 0),
#endif
/* glibc's readlink(), rename() and unlink() use the oldest call the architecture has. */
#ifdef SYS_readlink
    P(WRITE, SYS_readlink, 0, 0, 4096),
#else
    P(WRITE, SYS_readlinkat, AT, 0, 0, 4096),
#endif
#if defined(SYS_rename)
    P(WRITE, SYS_rename, 0, 0),
#elif defined(SYS_renameat)
    P(WRITE, SYS_renameat, AT, 0, AT, 0),
#else
    P(WRITE, SYS_renameat2, AT, 0, AT, 0, 0),
#endif
#ifdef SYS_unlink
    P(WRITE, SYS_unlink, 0),
#else
    P(WRITE, SYS_unlinkat, AT, 0, 0),
#endif
    P(WRITE, SYS_fcntl, 3, F_GETFL),
    P(WRITE, SYS_lseek, 3, 0, 0),
    P(WRITE, SYS_mmap, 0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1,
      0),
    P(WRITE, SYS_mmap, 0, 4096, PROT_READ, MAP_PRIVATE, 3, 0),
    P(WRITE, SYS_mmap, 0, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_DENYWRITE, 3, 0),
    P(WRITE, SYS_mprotect, 0, 4096, PROT_READ),
    P(WRITE, SYS_munmap, 0, 4096),
    P(WRITE, SYS_brk, 0),
    P(WRITE, SYS_futex, 0, FUTEX_WAKE_PRIVATE, 1),
    P(WRITE, SYS_rt_sigprocmask, SIG_SETMASK, 0, 0, 8),
    P(WRITE, SYS_rt_sigpending, 0, 8),
    P(WRITE, SYS_rt_sigtimedwait, 0, 0, 0, 8),
    P(WRITE, SYS_sysinfo, 0),
    P(WRITE, SYS_getrandom, 0, 8, 1 /* GRND_NONBLOCK */),
    P(WRITE, SYS_socketpair, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, 0),
    P(WRITER, SYS_clone3, 0, 88),
    P(WRITER, SYS_clone, THREAD_FLAGS, 0, 0, 0, 0),
    P(WRITER, SYS_set_robust_list, 0, 24),
    P(WRITER, SYS_rseq, 0, 32, 0, 0),
    P(WRITER, SYS_mmap, 0, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, (uint64_t)-1,
      0),
    P(WRITER, SYS_unshare, CLONE_FILES),
    P(WRITER, SYS_close_range, 0, ~0u, 0),
    P(WRITER, SYS_pidfd_open, 1, 0),
    P(WRITER, SYS_pidfd_getfd, 3, 2, 0),
    P(WRITER, SYS_gettid, 0),
    /* exit() waiting for the writer: the writer's processor time, its thread clock */
    P(WRITER, SYS_clock_gettime, (uint64_t)-10 /* thread 1's */, 0),
    /* stopping the writer around unshare() and setns(): until the kernel let it go */
    P(WRITER, SYS_tgkill, 1, 1, 0),
    P(WRITER, SYS_clock_nanosleep, CLOCK_REALTIME, 0, 0, 0),
};

/* The action classic BPF program f answers for d; SECCOMP_RET_KILL_PROCESS if it cannot
 * tell (an instruction outside seccomp's subset, a jump or load out of bounds). The kernel
 * checked the same program when it was installed, and refused one like that. */
static uint32_t run(const struct sock_filter *f, unsigned len, const struct seccomp_data *d)
{
    uint32_t a = 0, x = 0, mem[BPF_MEMWORDS] = {0};
    for (unsigned pc = 0; pc < len; pc++) {
        const struct sock_filter *in = &f[pc];
        uint32_t k = in->k, v = BPF_SRC(in->code) == BPF_X ? x : k;
        switch (BPF_CLASS(in->code)) {
        case BPF_LD:
        case BPF_LDX: {
            uint32_t *to = BPF_CLASS(in->code) == BPF_LD ? &a : &x;
            switch (BPF_MODE(in->code)) {
            case BPF_ABS: /* seccomp allows only 32-bit aligned loads from seccomp_data */
                if (BPF_CLASS(in->code) != BPF_LD || BPF_SIZE(in->code) != BPF_W || (k & 3) ||
                    k > sizeof *d - 4)
                    return SECCOMP_RET_KILL_PROCESS;
                memcpy(to, (const char *)d + k, 4);
                break;
            case BPF_IMM:
                *to = k;
                break;
            case BPF_MEM:
                if (k >= BPF_MEMWORDS)
                    return SECCOMP_RET_KILL_PROCESS;
                *to = mem[k];
                break;
            case BPF_LEN:
                *to = sizeof *d;
                break;
            default:
                return SECCOMP_RET_KILL_PROCESS;
            }
            break;
        }
        case BPF_ST:
        case BPF_STX:
            if (k >= BPF_MEMWORDS)
                return SECCOMP_RET_KILL_PROCESS;
            mem[k] = BPF_CLASS(in->code) == BPF_ST ? a : x;
            break;
        case BPF_ALU:
            switch (BPF_OP(in->code)) {
            case BPF_ADD:
                a += v;
                break;
            case BPF_SUB:
                a -= v;
                break;
            case BPF_MUL:
                a *= v;
                break;
            case BPF_DIV:
                if (v == 0)
                    return 0; /* the interpreter's answer to a division by zero */
                a /= v;
                break;
            case BPF_MOD:
                if (v == 0)
                    return 0;
                a %= v;
                break;
            case BPF_AND:
                a &= v;
                break;
            case BPF_OR:
                a |= v;
                break;
            case BPF_XOR:
                a ^= v;
                break;
            case BPF_LSH:
                a = v < 32 ? a << v : 0;
                break;
            case BPF_RSH:
                a = v < 32 ? a >> v : 0;
                break;
            case BPF_NEG:
                a = -a;
                break;
            default:
                return SECCOMP_RET_KILL_PROCESS;
            }
            break;
        case BPF_JMP: {
            uint32_t skip;
            switch (BPF_OP(in->code)) {
            case BPF_JA:
                skip = k;
                break;
            case BPF_JEQ:
                skip = a == v ? in->jt : in->jf;
                break;
            case BPF_JGT:
                skip = a > v ? in->jt : in->jf;
                break;
            case BPF_JGE:
                skip = a >= v ? in->jt : in->jf;
                break;
            case BPF_JSET:
                skip = (a & v) ? in->jt : in->jf;
                break;
            default:
                return SECCOMP_RET_KILL_PROCESS;
            }
            if (skip >= len - pc - 1)
                return SECCOMP_RET_KILL_PROCESS;
            pc += skip;
            break;
        }
        case BPF_RET:
            return BPF_RVAL(in->code) == BPF_A ? a : k;
        case BPF_MISC:
            if (BPF_MISCOP(in->code) == BPF_TAX)
                x = a;
            else
                a = x;
            break;
        default:
            return SECCOMP_RET_KILL_PROCESS;
        }
    }
    return SECCOMP_RET_KILL_PROCESS; /* ran off the end */
}

/* Whether an action lets the calling code go on: the call is made (ALLOW, LOG) or fails
 * with an error number (ERRNO). Everything else ends the process or thread, raises
 * SIGSYS, or hands the call to a tracer or supervisor. */
static bool survivable(uint32_t action)
{
    action &= SECCOMP_RET_ACTION_FULL;
    return action == SECCOMP_RET_ALLOW || action == SECCOMP_RET_LOG || action == SECCOMP_RET_ERRNO;
}

static bool strict_allows(int nr)
{
    return nr == SYS_read || nr == SYS_write || nr == SYS_exit || nr == SYS_rt_sigreturn;
}

uint32_t memprof__sandbox_forbids(bool strict, const void *fprog)
{
    const struct sock_fprog *p = fprog;
    uint32_t all = (1u << MEMPROF_SYS_COUNT) - 1, forbids = 0;
    if (!strict && (!p || !p->filter || p->len == 0 || p->len > BPF_MAXINSNS))
        return all;
    for (size_t i = 0; i < MEMPROF_ARRAY_SIZE(probes); i++) {
        const struct probe *pr = &probes[i];
        bool ok;
        if (strict) {
            ok = strict_allows(pr->nr);
        } else {
            struct seccomp_data d = {.nr = pr->nr, .arch = NATIVE_ARCH};
            memcpy(d.args, pr->args, sizeof d.args);
            ok = survivable(run(p->filter, p->len, &d));
        }
        if (!ok)
            forbids |= 1u << pr->group;
    }
    return forbids;
}
