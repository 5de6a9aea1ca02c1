/* SPDX-License-Identifier: MIT */
/*
 * The process `memprof attach` attaches to in tests/attach/attach_test.py. It prints its
 * state on stdout ("ready") and then, by mode:
 *   blocked: blocks in a raw read() system call on stdin with known values in every
 *            callee-saved register, xmm0-xmm15 and errno, and after the read returns checks
 *            that all of them, and the byte read, are as they were: the borrowed thread
 *            continued exactly where it was;
 *   loop:    three threads allocate 4 KiB blocks in attach_alloc_site() forever, each keeping
 *            the last 1024 (12 MiB live in all), until killed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KEEP 1024

void *attach_alloc_site(size_t n);

__attribute__((noinline)) void *attach_alloc_site(size_t n)
{
    void *p = malloc(n);
    __asm__ volatile("" : : "r"(p) : "memory"); /* not a tail call: the site keeps its frame */
    return p;
}

static void *allocate(void *arg)
{
    void **keep = calloc(KEEP, sizeof *keep);
    (void)arg;
    for (unsigned i = 0;; i++) {
        unsigned k = i % KEEP;
        free(keep[k]);
        keep[k] = attach_alloc_site(4096);
        memset(keep[k], 1, 64);
    }
    return NULL;
}

/* read(0, buf, 1) as a raw system call with patterns in r12-r15, rbx, rbp and xmm0-xmm15,
 * which are stored back after it into `after` for the caller to compare. */
static long blocked_read(char *buf, uint64_t after[6], uint64_t xmm_after[16])
{
    long ret;
    __asm__ volatile("push %%rbp\n"
                     "movq $0x1111111111111111, %%r12\n"
                     "movq $0x2222222222222222, %%r13\n"
                     "movq $0x3333333333333333, %%r14\n"
                     "movq $0x4444444444444444, %%r15\n"
                     "movq $0x5555555555555555, %%rbx\n"
                     "movq $0x6666666666666666, %%rbp\n"
                     "movq $0x0101010101010101, %%rax\n"
                     "movq %%rax, %%xmm0\n"
                     "movq %%rax, %%xmm15\n"
                     "movq $0x0202020202020202, %%rax\n"
                     "movq %%rax, %%xmm1\n"
                     "movq %%rax, %%xmm8\n"
                     "xorl %%edi, %%edi\n"
                     "movl $1, %%edx\n"
                     "xorl %%eax, %%eax\n" /* read */
                     "syscall\n"
                     "movq %%r12, 0(%[a])\n"
                     "movq %%r13, 8(%[a])\n"
                     "movq %%r14, 16(%[a])\n"
                     "movq %%r15, 24(%[a])\n"
                     "movq %%rbx, 32(%[a])\n"
                     "movq %%rbp, 40(%[a])\n"
                     "movq %%xmm0, 0(%[x])\n"
                     "movq %%xmm15, 8(%[x])\n"
                     "movq %%xmm1, 16(%[x])\n"
                     "movq %%xmm8, 24(%[x])\n"
                     "pop %%rbp\n"
                     : "=a"(ret)
                     : "S"(buf), [a] "r"(after), [x] "r"(xmm_after)
                     : "rdi", "rdx", "rcx", "r11", "r12", "r13", "r14", "r15", "rbx", "xmm0",
                       "xmm1", "xmm8", "xmm15", "memory");
    return ret;
}

static int blocked(void)
{
    char buf[2] = {0, 0};
    uint64_t after[6], xmm[16];
    static const uint64_t want[6] = {0x1111111111111111, 0x2222222222222222, 0x3333333333333333,
                                     0x4444444444444444, 0x5555555555555555, 0x6666666666666666};
    static const uint64_t want_xmm[4] = {0x0101010101010101, 0x0101010101010101, 0x0202020202020202,
                                         0x0202020202020202};
    errno = EDOM;
    long n = blocked_read(buf, after, xmm);
    int e = errno;
    if (n != 1 || buf[0] != 'x') {
        printf("read returned %ld '%c', expected 1 'x'\n", n, buf[0]);
        return 1;
    }
    if (e != EDOM) {
        printf("errno is %d after the read, expected EDOM (%d)\n", e, EDOM);
        return 1;
    }
    if (memcmp(after, want, sizeof want)) {
        printf("a callee-saved register changed across the read\n");
        return 1;
    }
    if (memcmp(xmm, want_xmm, sizeof want_xmm)) {
        printf("an xmm register changed across the read\n");
        return 1;
    }
    printf("ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc == 2 && !strcmp(argv[1], "blocked")) {
        printf("ready\n");
        return blocked();
    }
    if (argc == 2 && !strcmp(argv[1], "loop")) {
        pthread_t t[3];
        for (int i = 0; i < 3; i++)
            pthread_create(&t[i], NULL, allocate, NULL);
        printf("ready\n");
        pause();
        return 0;
    }
    fprintf(stderr, "usage: attach-target blocked|loop\n");
    return 2;
}
