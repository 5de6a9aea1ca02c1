/* SPDX-License-Identifier: MIT */
/*
 * Calling dlopen() and then one function of the loaded library inside a running process, on
 * a thread borrowed with ptrace (PTRACE_SEIZE, PTRACE_INTERRUPT), for `memprof attach`.
 *
 * The design is set by one requirement: whatever happens to this process (SIGKILL at any
 * moment), the target must go on as if nothing had happened. The usual way -- point the
 * thread at dlopen with a return address that traps, and restore its registers from the
 * tracer afterwards -- leaves a thread that crashes if the tracer dies in between. So the
 * borrowed thread runs a small trampoline that does everything itself:
 *
 *   1. saves the extended (FP/vector) state with XSAVE into the data block, and the thread's
 *      errno (which dlopen() and the profiler's start change; a program stopped between a
 *      failed call and its look at errno must find it as it was);
 *   2. calls dlopen(path, RTLD_NOW), dlsym(handle, function) and function(a0, a1) (a0 is
 *      the address of the string argument, or a number), storing each result in the data
 *      block, and puts errno back;
 *   3. makes a marker system call (getpid with a random cookie in rdi) that the tracer,
 *      resuming the thread with PTRACE_SYSCALL, recognises: there it reads the results and
 *      restores every register and the signal mask itself (PTRACE_SETSIGMASK,
 *      PTRACE_SETREGSET of NT_X86_XSTATE, then NT_PRSTATUS) and detaches, so the normal path
 *      never runs step 4;
 *   4. if no tracer stopped it there (the tracer died), restores the signal mask, the
 *      extended state with XRSTOR, every general register from the data block, and rip,
 *      rsp and rflags at once with IRETQ from a frame at the data block's start (above the
 *      stack pointer, so a signal arriving meanwhile cannot overwrite it).
 *
 * The trampoline's code is written into the target's executable memory where nothing else
 * is: the zero padding after the last byte of libc's (or the loader's) code segment, up to
 * the end of its page (found again by its contents and reused by later calls). It holds no
 * per-call data, so two commands injecting into one process cannot disturb each other's
 * calls. Where that padding is too small, a page of its own is mapped by single-stepping a
 * `syscall` instruction found in the target's libc with the mmap arguments in the registers:
 * the only window (microseconds, the first time only, and only then) in which the tracer's
 * death would leave the thread with foreign registers. The
 * per-call data block (cookie, function addresses, strings, saved registers, signal mask,
 * XSAVE area) is written on the thread's own stack below the red zone, where the ABI lets
 * anyone write.
 *
 * A thread is borrowed only at a safe point, because dlopen() and the profiler allocate and
 * take the loader's lock: a thread stopped inside libc's allocator may hold an arena lock, and
 * one inside the dynamic loader its lock, and the call would wait for itself. So the stop must
 * be in the program's own code, or in a blocking system call made from libc other than the
 * memory-management ones malloc makes under its lock (mmap, munmap, mremap, mprotect, brk,
 * madvise); otherwise the thread is resumed and stopped again a little later, and after a
 * while the next thread is tried.
 *
 * System calls: a thread stopped in a blocking call (read on a pipe) has orig_rax = the
 * call's number and rax = -ERESTARTSYS (or -ERESTARTNOINTR, -ERESTARTNOHAND,
 * -ERESTART_RESTARTBLOCK). The trampoline runs with orig_rax = -1 so nothing is restarted in
 * its middle. The tracer gives the thread back at the marker's system-call exit with exactly
 * the registers of the stop, orig_rax and rax included, and detaches: the detach wakes the
 * thread with its signal-pending flag set, so on its way out of that system call the kernel
 * runs its own signal-and-restart logic on the original call, as if the thread had never left
 * it: restarted (read on a pipe; restart_syscall for a sleep, which continues with its
 * remaining time), or EINTR where a signal handler without SA_RESTART runs. The trampoline's
 * own way back (step 4) cannot ask the kernel, and restarts the call by hand as the kernel
 * does when no handler runs: rip back over the two-byte `syscall`, rax the call's number.
 *
 * Signals arriving while the thread is borrowed are delivered afterwards, where the thread
 * was: the tracer blocks every signal but the synchronous ones (a fault in the call) in the
 * thread for the call and restores its mask at the marker, so what arrived meanwhile is
 * pending then, and delivered by the kernel at the original point with its siginfo (and, for
 * a system call stopped half-way, the kernel's choice between restart and EINTR). Signals sent
 * to the process rather than the thread are taken by another thread that does not block them,
 * as always. SIGSTOP, which cannot be blocked, is held back and sent again once the thread is
 * released, so the process is not stopped with a thread in the middle of the call.
 */
#define _GNU_SOURCE
#include "inject.h"

#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "target.h"

#if defined(__x86_64__)
#include <cpuid.h>

/* The data block, at D on the target's stack (offsets from D). */
#define D_IRET       0x00   /* rip, cs, rflags, rsp, ss: IRETQ's frame */
#define D_DLOPEN     0x28   /* in: dlopen's address */
#define D_DLSYM      0x30   /* in: dlsym's address */
#define D_HANDLE     0x38   /* out: dlopen's result */
#define D_FN         0x40   /* out: dlsym's result */
#define D_RESULT     0x48   /* out: the function's result */
#define D_COOKIE     0x50   /* in: the marker call's cookie */
#define D_REGS       0x58   /* in: rax rbx rcx rdx rsi rdi rbp r8 .. r15, restored by step 4 */
#define D_ERRNOF     0xd0   /* in: __errno_location's address */
#define D_ERRNOP     0xd8   /* the thread's &errno */
#define D_ERRNO      0xe0   /* its errno before the calls */
#define D_A1         0xe8   /* in: the function's second argument (rsi) */
#define D_A0         0xf0   /* in: its first argument (rdi): D_ARG's address, or a number */
#define D_SIGMASK    0xf8   /* in: the thread's signal mask, restored by step 4 */
#define D_NAME       0x100  /* the function's name, 64 bytes */
#define D_PATH       0x140  /* the library's path, 4096 bytes */
#define D_ARG        0x1140 /* the argument string, 4096 bytes */
#define D_XSAVE      0x2140 /* XSAVE area, 64-byte aligned */
#define NAME_MAX_LEN 64
#define STR_MAX_LEN  4096

#define CODE_MAGIC_LEN 16
#define CODE_PAGE      4096

/* Time limits: looking for a safe point, and the call itself (dlopen and the function). */
#define SAFE_POINT_TRIES_PER_THREAD 400
#define SAFE_POINT_PAUSE_US         500
#define CALL_TIMEOUT_S              60
#define CALL_TICK_MS                100
#define CLEANUP_TIMEOUT_S           5 /* the stop of a thread after a failed call */

/* The trampoline (steps 1 to 4 above): its bytes are copied into the target, never run
 * here. It starts with a 16-byte magic by which a later call recognises the page; entry is
 * right after it, with rbx = rsp = D. */
__asm__(".pushsection .rodata.memprof_inject,\"a\"\n"
        ".balign 16\n"
        ".globl memprof_inject_code_begin\n"
        ".hidden memprof_inject_code_begin\n"
        "memprof_inject_code_begin:\n"
        ".ascii \"memprof-inject-2\"\n"
        "movl $-1, %eax\n"
        "movl $-1, %edx\n"
        "xsave64 0x2140(%rbx)\n"
        "call *0xd0(%rbx)\n" /* __errno_location */
        "movq %rax, 0xd8(%rbx)\n"
        "movl (%rax), %ecx\n"
        "movl %ecx, 0xe0(%rbx)\n"
        "leaq 0x140(%rbx), %rdi\n"
        "movl $2, %esi\n" /* RTLD_NOW */
        "call *0x28(%rbx)\n"
        "movq %rax, 0x38(%rbx)\n"
        "testq %rax, %rax\n"
        "jz 1f\n"
        "movq %rax, %rdi\n"
        "leaq 0x100(%rbx), %rsi\n"
        "call *0x30(%rbx)\n"
        "movq %rax, 0x40(%rbx)\n"
        "testq %rax, %rax\n"
        "jz 1f\n"
        "movq 0xf0(%rbx), %rdi\n"
        "movq 0xe8(%rbx), %rsi\n"
        "call *%rax\n"
        "movq %rax, 0x48(%rbx)\n"
        "1:\n"
        "movq 0xd8(%rbx), %rax\n"
        "movl 0xe0(%rbx), %ecx\n"
        "movl %ecx, (%rax)\n"
        "movl $39, %eax\n" /* getpid: the marker */
        "movq 0x50(%rbx), %rdi\n"
        "movq %rbx, %rsi\n"
        "syscall\n"
        "movl $14, %eax\n" /* rt_sigprocmask(SIG_SETMASK, the saved mask, NULL, 8) */
        "movl $2, %edi\n"
        "leaq 0xf8(%rbx), %rsi\n"
        "xorl %edx, %edx\n"
        "movl $8, %r10d\n"
        "syscall\n"
        "movl $-1, %eax\n"
        "movl $-1, %edx\n"
        "xrstor64 0x2140(%rbx)\n"
        "movq %rbx, %rsp\n"
        "movq 0x58(%rbx), %rax\n"
        "movq 0x68(%rbx), %rcx\n"
        "movq 0x70(%rbx), %rdx\n"
        "movq 0x78(%rbx), %rsi\n"
        "movq 0x80(%rbx), %rdi\n"
        "movq 0x88(%rbx), %rbp\n"
        "movq 0x90(%rbx), %r8\n"
        "movq 0x98(%rbx), %r9\n"
        "movq 0xa0(%rbx), %r10\n"
        "movq 0xa8(%rbx), %r11\n"
        "movq 0xb0(%rbx), %r12\n"
        "movq 0xb8(%rbx), %r13\n"
        "movq 0xc0(%rbx), %r14\n"
        "movq 0xc8(%rbx), %r15\n"
        "movq 0x60(%rbx), %rbx\n"
        "iretq\n"
        ".globl memprof_inject_code_end\n"
        ".hidden memprof_inject_code_end\n"
        "memprof_inject_code_end:\n"
        ".popsection\n");
extern const unsigned char memprof_inject_code_begin[], memprof_inject_code_end[];

/* One injection's state. */
struct inj {
    pid_t pid, tid;
    int mem; /* /proc/PID/mem, read and write */
    const char *function;
    char *err;
    size_t errsize;
    struct target_map *maps;
    ssize_t nmaps;
    uintptr_t dlopen_addr, dlsym_addr, errno_addr, gadget;
    struct user_regs_struct saved; /* the thread's registers at the stop */
    unsigned char *xstate;         /* its extended state (NT_X86_XSTATE or NT_PRFPREG) */
    size_t xstate_len;
    int xstate_type;
    uint64_t sigmask;     /* its signal mask at the stop */
    uint64_t deadline_ns; /* the call's time limit (CLOCK_MONOTONIC), 0 before the call */
    bool returned;        /* the call is over and the thread restored, stopped at the marker */
    int held_signals[8];  /* signals held back while it was not ours to give back */
    unsigned nheld;
};

static void fail(struct inj *in, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(struct inj *in, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(in->err, in->errsize, fmt, ap);
    va_end(ap);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int get_regs(pid_t tid, struct user_regs_struct *r)
{
    struct iovec iov = {r, sizeof *r};
    return ptrace(PTRACE_GETREGSET, tid, (void *)NT_PRSTATUS, &iov) == 0 ? 0 : -1;
}

static int set_regs(pid_t tid, const struct user_regs_struct *r)
{
    struct iovec iov = {(void *)r, sizeof *r};
    return ptrace(PTRACE_SETREGSET, tid, (void *)NT_PRSTATUS, &iov) == 0 ? 0 : -1;
}

/* Saves the thread's extended state: the XSAVE layout where the kernel offers it, else the
 * FXSAVE one (NT_PRFPREG). */
static int save_xstate(struct inj *in)
{
    static const int types[] = {NT_X86_XSTATE, NT_PRFPREG};
    size_t cap = 1 << 16;
    in->xstate = malloc(cap);
    if (!in->xstate)
        return -1;
    for (size_t i = 0; i < sizeof types / sizeof *types; i++) {
        struct iovec iov = {in->xstate, cap};
        if (ptrace(PTRACE_GETREGSET, in->tid, (void *)(long)types[i], &iov) == 0) {
            in->xstate_len = iov.iov_len;
            in->xstate_type = types[i];
            return 0;
        }
    }
    return -1;
}

static int restore_xstate(const struct inj *in)
{
    struct iovec iov = {in->xstate, in->xstate_len};
    return ptrace(PTRACE_SETREGSET, in->tid, (void *)(long)in->xstate_type, &iov) == 0 ? 0 : -1;
}

/* The signals a thread raises itself by faulting: never blocked during the call, so a fault
 * in it is what it would be in the program (its handler, or the default action). */
static bool is_synchronous(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP ||
           sig == SIGSYS;
}

/* The mask the thread runs the call with: everything blocked but the synchronous signals
 * (the kernel ignores SIGKILL and SIGSTOP in it). */
static uint64_t call_sigmask(void)
{
    uint64_t m = ~(uint64_t)0;
    for (int sig = 1; sig <= 64; sig++)
        if (is_synchronous(sig))
            m &= ~((uint64_t)1 << (sig - 1));
    return m;
}

static int set_sigmask(pid_t tid, uint64_t mask)
{
    return ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof mask, &mask) == 0 ? 0 : -1;
}

/* The thread is gone: the process ended, or another of its threads called exec(), which
 * ends every other thread (the process goes on, as the new program). */
static void thread_gone(struct inj *in)
{
    char v[8];
    if (memprof_target_status(in->pid, "State", v, sizeof v) && v[0] != 'Z' && v[0] != 'X')
        fail(in, "the process called exec() while memprof was attaching (the new program runs "
                 "without the profiler; attach again)");
    else
        fail(in, "the process ended while memprof was attaching");
}

/* Whether the borrowed thread still exists and is traced by this process. */
static bool still_traced(const struct inj *in)
{
    char path[96], line[256];
    snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)in->pid, (int)in->tid);
    FILE *f = fopen(path, "re");
    if (!f)
        return false;
    bool ours = false;
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "TracerPid:", 10)) {
            ours = atoi(line + 10) == (int)getpid();
            break;
        }
    fclose(f);
    return ours;
}

/* Waits for the next stop of the thread; false (message set) if it exited or the wait was
 * interrupted by the call's time limit. */
static bool wait_stop(struct inj *in, int *status)
{
    for (;;) {
        pid_t r = waitpid(in->tid, status, __WALL);
        if (r == in->tid) {
            if (WIFSTOPPED(*status))
                return true;
            thread_gone(in);
            return false;
        }
        if (r < 0 && errno == EINTR) {
            /* The tick (memprof_inject_call_args()): an exec() by another thread ends the
             * borrowed one without a word to the tracer, so look. */
            if (!still_traced(in)) {
                thread_gone(in);
                return false;
            }
            if (in->deadline_ns && now_ns() > in->deadline_ns) {
                fail(in, "the call in the target did not return within %d s", CALL_TIMEOUT_S);
                return false;
            }
            continue;
        }
        if (r < 0 && errno == ECHILD) { /* an exec() gave its id to another thread */
            thread_gone(in);
            return false;
        }
        if (r < 0) {
            fail(in, "waiting for thread %d: %s", (int)in->tid, strerror(errno));
            return false;
        }
    }
}

/* Stops the thread with PTRACE_INTERRUPT and waits for that stop, letting signals that
 * arrive first through. Returns 1 when stopped, 0 if a group stop came instead (the
 * process is being stopped by someone), -1 on error. */
static int interrupt(struct inj *in)
{
    if (ptrace(PTRACE_INTERRUPT, in->tid, 0, 0) < 0) {
        fail(in, "cannot interrupt thread %d: %s", (int)in->tid, strerror(errno));
        return -1;
    }
    for (;;) {
        int status;
        if (!wait_stop(in, &status))
            return -1;
        int sig = WSTOPSIG(status);
        if (status >> 16 == PTRACE_EVENT_STOP)
            return sig == SIGTRAP ? 1 : 0;
        if (status >> 16 == 0 && sig != (SIGTRAP | 0x80)) {
            /* A signal on its way to the program: let it go and keep waiting. */
            if (ptrace(PTRACE_CONT, in->tid, 0, (void *)(long)sig) < 0)
                return -1;
            continue;
        }
        if (ptrace(PTRACE_CONT, in->tid, 0, 0) < 0)
            return -1;
    }
}

/* The system calls glibc's malloc makes while it may hold an arena's lock. */
static bool allocator_syscall(long nr)
{
    return nr == SYS_mmap || nr == SYS_munmap || nr == SYS_mremap || nr == SYS_mprotect ||
           nr == SYS_brk || nr == SYS_madvise;
}

static bool name_starts(const struct target_map *m, const char *prefix)
{
    return m->path[0] == '/' && !strncmp(memprof_target_file_name(m->path), prefix, strlen(prefix));
}

/* Whether the stopped thread may be borrowed (see the top of the file); `room` is the stack
 * the call needs below the stack pointer. */
static bool safe_point(const struct inj *in, const struct user_regs_struct *r, size_t room)
{
    const struct target_map *code = memprof_target_map_at(in->maps, (size_t)in->nmaps, r->rip);
    const struct target_map *stack = memprof_target_map_at(in->maps, (size_t)in->nmaps, r->rsp);
    if (!code || !stack)
        return false; /* code mapped since the maps were read, or a strange stack */
    if (strcmp(stack->path, "[stack]") && r->rsp - stack->start < room)
        return false;
    if (name_starts(code, "ld-linux") || name_starts(code, "ld-2.") ||
        name_starts(code, "libmemprof"))
        return false;
    if (name_starts(code, "libc.so") || name_starts(code, "libc-2.") ||
        name_starts(code, "libpthread")) {
        long nr = (long)r->orig_rax;
        return nr >= 0 && !allocator_syscall(nr);
    }
    return true;
}

/* The thread's registers as step 4 resumes it: a system call stopped half-way is restarted the
 * way the kernel restarts one when no handler runs. */
static struct user_regs_struct resume_regs(const struct user_regs_struct *saved, bool *restarted)
{
    struct user_regs_struct r = *saved;
    long nr = (long)saved->orig_rax, ret = (long)saved->rax;
    *restarted = false;
    if (nr >= 0 && (ret == -512 || ret == -513 || ret == -514 || ret == -516)) {
        r.rip -= 2; /* back over `syscall` (0f 05) */
        r.rax = ret == -516 ? (unsigned long long)SYS_restart_syscall : (unsigned long long)nr;
        *restarted = true;
    }
    r.orig_rax = (unsigned long long)-1;
    return r;
}

static bool mem_read(const struct inj *in, uintptr_t addr, void *buf, size_t len)
{
    return pread(in->mem, buf, len, (off_t)addr) == (ssize_t)len;
}

static bool mem_write(const struct inj *in, uintptr_t addr, const void *buf, size_t len)
{
    return pwrite(in->mem, buf, len, (off_t)addr) == (ssize_t)len;
}

/* Finds a `syscall` instruction in libc's code to single-step the mmap through. */
static bool find_gadget(struct inj *in, const char *libc_path)
{
    unsigned char buf[65536];
    for (ssize_t i = 0; i < in->nmaps; i++) {
        const struct target_map *m = &in->maps[i];
        if (strcmp(m->path, libc_path) || m->perms[2] != 'x')
            continue;
        for (uintptr_t a = m->start; a < m->end; a += sizeof buf - 1) {
            size_t len = m->end - a < sizeof buf ? m->end - a : sizeof buf;
            if (!mem_read(in, a, buf, len))
                break;
            for (size_t k = 0; k + 1 < len; k++)
                if (buf[k] == 0x0f && buf[k + 1] == 0x05) {
                    in->gadget = a + k;
                    return true;
                }
        }
    }
    fail(in, "no system call instruction found in the target's libc");
    return false;
}

/* A code page left by an earlier call, recognised by its exact contents. */
static uintptr_t find_code_page(const struct inj *in)
{
    size_t len = (size_t)(memprof_inject_code_end - memprof_inject_code_begin);
    unsigned char buf[CODE_PAGE];
    for (ssize_t i = 0; i < in->nmaps; i++) {
        const struct target_map *m = &in->maps[i];
        if (m->path[0] || m->inode || strcmp(m->perms, "r-xp") || m->end - m->start != CODE_PAGE)
            continue;
        if (mem_read(in, m->start, buf, len) && !memcmp(buf, memprof_inject_code_begin, len))
            return m->start;
    }
    return 0;
}

/* Where the trampoline can live without a system call in the target: the unused end of the
 * last code page of libc or of the loader (memprof_target_code_slack()), executable already.
 * Returns the address, 16-byte aligned, if the trampoline is there (an earlier call's) or the
 * room is all zeros (the file's padding), else 0. Only reads. */
static uintptr_t find_slack(const struct inj *in)
{
    static const char *const objects[] = {"libc.so.6", "ld-linux"};
    size_t len = (size_t)(memprof_inject_code_end - memprof_inject_code_begin);
    unsigned char buf[CODE_PAGE];
    for (size_t i = 0; i < sizeof objects / sizeof objects[0]; i++) {
        uintptr_t base, at;
        size_t room;
        const struct target_map *m =
            memprof_target_object(in->maps, (size_t)in->nmaps, objects[i], &base);
        if (!m || !(at = memprof_target_code_slack(in->pid, m->path, base, &room)))
            continue;
        uintptr_t a = (at + 15) & ~(uintptr_t)15;
        const struct target_map *x = memprof_target_map_at(in->maps, (size_t)in->nmaps, a);
        if (a + len > at + room || !x || x->perms[2] != 'x' || a + len > x->end ||
            !mem_read(in, a, buf, len))
            continue;
        if (!memcmp(buf, memprof_inject_code_begin, len))
            return a;
        size_t k = 0;
        while (k < len && !buf[k])
            k++;
        if (k == len)
            return a;
    }
    return 0;
}

/* Puts the trampoline at `a` (find_slack()). The write, through /proc/PID/mem, gives the
 * process a private copy of that page of the library (a page of memory; other processes
 * keep the file's), identical but for bytes nothing uses. Returns a, or 0 if the kernel
 * refuses the write. */
static uintptr_t fill_slack(const struct inj *in, uintptr_t a)
{
    size_t len = (size_t)(memprof_inject_code_end - memprof_inject_code_begin);
    unsigned char buf[CODE_PAGE];
    if (mem_read(in, a, buf, len) && !memcmp(buf, memprof_inject_code_begin, len))
        return a;
    return mem_write(in, a, memprof_inject_code_begin, len) ? a : 0;
}

/* Maps the code page by single-stepping mmap at the gadget, and fills it (writes through
 * /proc/PID/mem reach a read-only private page). Returns its address or 0. */
static uintptr_t map_code_page(struct inj *in)
{
    struct user_regs_struct r = in->saved;
    r.rax = SYS_mmap;
    r.rdi = 0;
    r.rsi = CODE_PAGE;
    r.rdx = PROT_READ | PROT_EXEC;
    r.r10 = MAP_PRIVATE | MAP_ANONYMOUS;
    r.r8 = (unsigned long long)-1;
    r.r9 = 0;
    r.rip = in->gadget;
    r.orig_rax = (unsigned long long)-1;
    if (set_regs(in->tid, &r) < 0)
        return 0;
    for (;;) {
        if (ptrace(PTRACE_SINGLESTEP, in->tid, 0, 0) < 0)
            return 0;
        int status;
        if (!wait_stop(in, &status))
            return 0;
        int sig = WSTOPSIG(status);
        if (status >> 16 == 0 && sig == SIGTRAP)
            break;
        /* A signal arrived before the step: hold it back, it goes after the call. */
        if (status >> 16 == 0 && sig != (SIGTRAP | 0x80) && in->nheld < 8)
            in->held_signals[in->nheld++] = sig;
    }
    if (get_regs(in->tid, &r) < 0 || set_regs(in->tid, &in->saved) < 0)
        return 0;
    if (r.rax > (unsigned long long)-4096) {
        fail(in, "mmap in the target failed: %s", strerror((int)-(long)r.rax));
        return 0;
    }
    size_t len = (size_t)(memprof_inject_code_end - memprof_inject_code_begin);
    if (!mem_write(in, r.rax, memprof_inject_code_begin, len)) {
        fail(in, "cannot write the target's memory: %s", strerror(errno));
        return 0;
    }
    return (uintptr_t)r.rax;
}

/* Size of the XSAVE area for the features the kernel enabled (CPUID leaf 0xd). */
static size_t xsave_size(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(0xd, 0, &a, &b, &c, &d) || b < 576)
        return 4096;
    return (b + 63) & ~63u;
}

/* Seizes thread tid and stops it at a safe point. Returns 1 when stopped there, 0 if none
 * was found (the thread is released), -1 on error (the thread released). */
static int borrow(struct inj *in, size_t room, unsigned *attempts)
{
    if (ptrace(PTRACE_SEIZE, in->tid, 0, (void *)(long)PTRACE_O_TRACESYSGOOD) < 0) {
        if (errno == ESRCH)
            return 0;
        int e = errno;
        fail(in, "PTRACE_SEIZE of thread %d: %s%s", (int)in->tid, strerror(e),
             e == EPERM ? " (a set-user-ID or otherwise non-dumpable process, or a security "
                          "module's rule; root with CAP_SYS_PTRACE can)"
                        : "");
        return -1;
    }
    for (unsigned i = 0; i < SAFE_POINT_TRIES_PER_THREAD; i++) {
        int st = interrupt(in);
        if (st < 0)
            return -1;
        if (st == 0) {
            ptrace(PTRACE_DETACH, in->tid, 0, 0);
            fail(in, "the process was stopped (SIGSTOP) while memprof was attaching");
            return -1;
        }
        ++*attempts;
        if (get_regs(in->tid, &in->saved) < 0) {
            fail(in, "cannot read thread %d's registers: %s", (int)in->tid, strerror(errno));
            ptrace(PTRACE_DETACH, in->tid, 0, 0);
            return -1;
        }
        if (safe_point(in, &in->saved, room))
            return 1;
        ptrace(PTRACE_CONT, in->tid, 0, 0);
        /* Varied pauses, so a program with a period does not meet us in the same place. */
        usleep(SAFE_POINT_PAUSE_US / 2 + (unsigned)(now_ns() % SAFE_POINT_PAUSE_US));
    }
    if (interrupt(in) == 1)
        ptrace(PTRACE_DETACH, in->tid, 0, 0);
    return 0;
}

/* A ptrace request on the borrowed thread failed during the call: with ESRCH the thread is
 * gone (killed by another thread's exec() between its stop and the request), else "cannot
 * <what> thread N" and the error. */
static void call_lost(struct inj *in, const char *what)
{
    int e = errno;
    if (e == ESRCH)
        thread_gone(in);
    else
        fail(in, "cannot %s thread %d: %s", what, (int)in->tid, strerror(e));
}

/* Runs the trampoline and takes the thread back at the marker. */
static int run_call(struct inj *in, uintptr_t code, uintptr_t d, uint64_t cookie,
                    struct inject_result *res)
{
    struct user_regs_struct t = in->saved;
    t.rip = code + CODE_MAGIC_LEN;
    t.rsp = d;
    t.rbx = d;
    t.orig_rax = (unsigned long long)-1;
    t.eflags &= ~(0x400ull | 0x100ull); /* DF clear, as the ABI requires at a call; no TF */
    /* The registers first: if this process dies between the two, the trampoline runs with
     * the program's mask, and restores that same mask. */
    if (set_regs(in->tid, &t) < 0 || set_sigmask(in->tid, call_sigmask()) < 0 ||
        ptrace(PTRACE_SYSCALL, in->tid, 0, 0) < 0) {
        fail(in, "cannot start the call in thread %d: %s", (int)in->tid, strerror(errno));
        return -1;
    }
    bool marker = false;
    uint64_t out[3]; /* handle, function, result */
    for (;;) {
        int status;
        if (!wait_stop(in, &status))
            return -1;
        int sig = WSTOPSIG(status), event = status >> 16;
        long resume_sig = 0;
        if (sig == (SIGTRAP | 0x80)) {
            struct user_regs_struct r;
            if (get_regs(in->tid, &r) < 0) {
                call_lost(in, "read the registers of");
                return -1;
            }
            if (marker) {
                /* The marker's exit: the thread is ours to give back, with the mask first
                 * (should this process die before the registers, step 4 restores the same
                 * mask), then exactly the registers of the stop: the kernel restarts or
                 * interrupts a system call stopped half-way on the way out (top of file). */
                if (set_sigmask(in->tid, in->sigmask) < 0 || restore_xstate(in) < 0 ||
                    set_regs(in->tid, &in->saved) < 0) {
                    fail(in, "cannot restore thread %d's registers: %s", (int)in->tid,
                         strerror(errno));
                    return -1;
                }
                break;
            }
            if (r.orig_rax == SYS_getpid && r.rdi == cookie && r.rsi == d) {
                if (!mem_read(in, d + D_HANDLE, out, sizeof out)) {
                    fail(in, "cannot read the target's memory: %s", strerror(errno));
                    return -1;
                }
                marker = true;
            }
        } else if (event == 0 && sig == SIGSTOP) {
            if (in->nheld < 8)
                in->held_signals[in->nheld++] = sig; /* sent again after the release */
        } else if (event == 0) {
            resume_sig = sig; /* a fault in the call, or a signal that came before the mask */
        }
        if (ptrace(PTRACE_SYSCALL, in->tid, 0, (void *)resume_sig) < 0) {
            call_lost(in, "resume");
            return -1;
        }
    }
    in->returned = true;
    if (!out[0]) {
        fail(in, "dlopen() in the target failed (the library or one it needs cannot be loaded "
                 "there)");
        return -1;
    }
    if (!out[1] && in->function[0]) {
        fail(in, "the library loaded in the target has no function %s", in->function);
        return -1;
    }
    res->value = (long)(int)out[2];
    return 0;
}

static void on_alarm(int sig)
{
    (void)sig;
}

int memprof_inject_call(pid_t pid, const char *library, const char *function, const char *arg,
                        struct inject_result *res, char *err, size_t errsize)
{
    struct inject_args a = {.str = arg};
    return memprof_inject_call_args(pid, library, function, &a, res, err, errsize);
}

int memprof_inject_call_args(pid_t pid, const char *library, const char *function,
                             const struct inject_args *args, struct inject_result *res, char *err,
                             size_t errsize)
{
    struct inj in = {.pid = pid, .mem = -1, .function = function, .err = err, .errsize = errsize};
    memset(res, 0, sizeof *res);
    err[0] = 0;
    if (strlen(library) >= STR_MAX_LEN || (args->str && strlen(args->str) >= STR_MAX_LEN) ||
        strlen(function) >= NAME_MAX_LEN) {
        fail(&in, "path or argument too long");
        return -1;
    }
    int rc = -1;
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGQUIT);
    sigprocmask(SIG_BLOCK, &block, &old);
    struct sigaction sa = {.sa_handler = on_alarm}, old_sa;
    sigaction(SIGALRM, &sa, &old_sa); /* no SA_RESTART: the tick interrupts waitpid */
    /* The tick, for every wait on a thread from its seizing on: a thread can be gone without
     * a word to its tracer (an exec() by another thread ends it), which only a look at /proc
     * tells (wait_stop()); during the call it also enforces the time limit. */
    struct itimerval tick = {{0, CALL_TICK_MS * 1000}, {0, CALL_TICK_MS * 1000}}, no_tick = {0};
    setitimer(ITIMER_REAL, &tick, NULL);

    char name[64];
    snprintf(name, sizeof name, "/proc/%d/mem", (int)pid);
    in.mem = open(name, O_RDWR | O_CLOEXEC);
    in.nmaps = memprof_target_maps(pid, &in.maps);
    if (in.mem < 0 || in.nmaps < 0) {
        fail(&in, "cannot read process %d's memory: %s", (int)pid, strerror(errno));
        goto out;
    }
    uintptr_t libc_base;
    const struct target_map *libc =
        memprof_target_object(in.maps, (size_t)in.nmaps, "libc.so.6", &libc_base);
    if (!libc) {
        fail(&in, "process %d has no glibc (libc.so.6) mapped", (int)pid);
        goto out;
    }
    char libc_path[PATH_MAX];
    snprintf(libc_path, sizeof libc_path, "%s", libc->path);
    in.dlopen_addr = memprof_target_symbol(pid, libc_path, libc_base, "dlopen");
    in.dlsym_addr = memprof_target_symbol(pid, libc_path, libc_base, "dlsym");
    in.errno_addr = memprof_target_symbol(pid, libc_path, libc_base, "__errno_location");
    if (!in.dlopen_addr || !in.dlsym_addr || !in.errno_addr) {
        fail(&in, "no dlopen in the target's libc %s (glibc 2.34 or later is needed)", libc_path);
        goto out;
    }
    /* The trampoline's place: a page an earlier call mapped, else the slack of a code page,
     * else a page mapped now by a single-stepped mmap (the one step that runs with the
     * call's registers in the thread: doc/guarantees.md). */
    uintptr_t code = find_code_page(&in), slack = code ? 0 : find_slack(&in);
    if (!code && !slack && !find_gadget(&in, libc_path))
        goto out;

    size_t xs = xsave_size();
    size_t dsize = D_XSAVE + xs;
    size_t room = 128 + 64 + dsize + (64 << 10); /* red zone, block, and the call's stack */

    /* The main thread first: most programs' other threads are helpers or pools. */
    pid_t tids[256];
    size_t ntids = 0;
    tids[ntids++] = pid;
    snprintf(name, sizeof name, "/proc/%d/task", (int)pid);
    DIR *dir = opendir(name);
    for (struct dirent *e; dir && (e = readdir(dir)) && ntids < 256;) {
        pid_t t = (pid_t)atoi(e->d_name);
        if (t > 0 && t != pid)
            tids[ntids++] = t;
    }
    if (dir)
        closedir(dir);

    int got = 0;
    for (size_t i = 0; i < ntids && got == 0; i++) {
        in.tid = tids[i];
        got = borrow(&in, room, &res->attempts);
    }
    if (got <= 0) {
        if (got == 0)
            fail(&in,
                 "no thread of process %d reached a point where it could be borrowed "
                 "(outside the allocator and the dynamic loader) after %u tries",
                 (int)pid, res->attempts);
        goto out;
    }
    uint64_t t0 = now_ns();
    res->tid = in.tid;
    if (save_xstate(&in) < 0) {
        fail(&in, "cannot read thread %d's FP/vector registers: %s", (int)in.tid, strerror(errno));
        goto release;
    }
    if (ptrace(PTRACE_GETSIGMASK, in.tid, (void *)sizeof in.sigmask, &in.sigmask) < 0) {
        fail(&in, "cannot read thread %d's signal mask: %s", (int)in.tid, strerror(errno));
        goto release;
    }
    if (!code && slack)
        code = fill_slack(&in, slack);
    if (!code && !in.gadget && !find_gadget(&in, libc_path))
        goto release;
    if (!code && !(code = map_code_page(&in)))
        goto release;

    /* The data block, below the red zone, 64-byte aligned (XSAVE needs it). */
    uintptr_t d = (uintptr_t)(in.saved.rsp - 128 - 64 - dsize) & ~(uintptr_t)63;
    unsigned char *blk = calloc(1, dsize);
    if (!blk) {
        fail(&in, "out of memory");
        goto release;
    }
    bool restarted;
    struct user_regs_struct back = resume_regs(&in.saved, &restarted);
    res->in_syscall = restarted;
    uint64_t iret[5] = {back.rip, back.cs, back.eflags, back.rsp, back.ss};
    memcpy(blk + D_IRET, iret, sizeof iret);
    uint64_t addrs[2] = {in.dlopen_addr, in.dlsym_addr};
    memcpy(blk + D_DLOPEN, addrs, sizeof addrs);
    uint64_t cookie;
    if (getrandom(&cookie, sizeof cookie, 0) != sizeof cookie)
        cookie = now_ns() ^ ((uint64_t)getpid() << 32);
    memcpy(blk + D_COOKIE, &cookie, sizeof cookie);
    uint64_t gpr[15] = {back.rax, back.rbx, back.rcx, back.rdx, back.rsi,
                        back.rdi, back.rbp, back.r8,  back.r9,  back.r10,
                        back.r11, back.r12, back.r13, back.r14, back.r15};
    memcpy(blk + D_REGS, gpr, sizeof gpr);
    memcpy(blk + D_ERRNOF, &in.errno_addr, sizeof in.errno_addr);
    uint64_t a0 = args->str ? d + D_ARG : (uint64_t)args->a0, a1 = (uint64_t)args->a1;
    memcpy(blk + D_A0, &a0, sizeof a0);
    memcpy(blk + D_A1, &a1, sizeof a1);
    memcpy(blk + D_SIGMASK, &in.sigmask, sizeof in.sigmask);
    strcpy((char *)blk + D_NAME, function);
    strcpy((char *)blk + D_PATH, library);
    if (args->str)
        strcpy((char *)blk + D_ARG, args->str);
    bool written = mem_write(&in, d, blk, dsize);
    free(blk);
    if (!written) {
        fail(&in, "cannot write the target's stack: %s", strerror(errno));
        goto release;
    }
    in.deadline_ns = now_ns() + (uint64_t)CALL_TIMEOUT_S * 1000000000u;
    int call = run_call(&in, code, d, cookie, res);
    if (call < 0 && in.returned) {
        ptrace(PTRACE_DETACH, in.tid, 0, 0); /* restored: the call itself failed */
        goto out;
    }
    if (call < 0) {
        /* The thread runs the trampoline, which finishes and restores itself on its own,
         * unless it is gone: an exec() by another thread may end it while the interrupt is on
         * its way, and the stop then never comes. */
        int st = 0;
        if (ptrace(PTRACE_INTERRUPT, in.tid, 0, 0) == 0 &&
            memprof_target_wait_stop(in.tid, &st, CLEANUP_TIMEOUT_S * 1000) && WIFSTOPPED(st))
            ptrace(PTRACE_DETACH, in.tid, 0,
                   (void *)(long)(st >> 16 == 0 && WSTOPSIG(st) != (SIGTRAP | 0x80) ? WSTOPSIG(st)
                                                                                    : 0));
        goto out;
    }
    ptrace(PTRACE_DETACH, in.tid, 0, 0);
    res->away_ns = now_ns() - t0;
    rc = 0;
    goto out;
release:
    set_regs(in.tid, &in.saved);
    ptrace(PTRACE_DETACH, in.tid, 0, 0);
out:
    setitimer(ITIMER_REAL, &no_tick, NULL);
    for (unsigned i = 0; i < in.nheld; i++)
        kill(pid, in.held_signals[i]);
    if (in.mem >= 0)
        close(in.mem);
    free(in.maps);
    free(in.xstate);
    sigaction(SIGALRM, &old_sa, NULL);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return rc;
}

#else /* not x86_64: the trampoline and the registers above are x86_64's */

int memprof_inject_call_args(pid_t pid, const char *library, const char *function,
                             const struct inject_args *args, struct inject_result *res, char *err,
                             size_t errsize)
{
    (void)pid, (void)library, (void)function, (void)args;
    memset(res, 0, sizeof *res);
    snprintf(err, errsize, "memprof attach supports x86_64 only");
    return -1;
}

int memprof_inject_call(pid_t pid, const char *library, const char *function, const char *arg,
                        struct inject_result *res, char *err, size_t errsize)
{
    struct inject_args a = {.str = arg};
    return memprof_inject_call_args(pid, library, function, &a, res, err, errsize);
}

#endif
