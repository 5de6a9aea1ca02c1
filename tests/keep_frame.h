/* SPDX-License-Identifier: MIT */
/*
 * TEST_KEEP_FRAME: keeps a test function out of line and on the stack, so the stacks the
 * profiler captures through it name it. gcc's noipa also stops cloning, identical-code
 * folding and interprocedural changes; clang has no noipa, and needs noinline plus no tail
 * calls (a tail call would replace the frame by its callee's).
 */
#ifndef MEMPROF_TESTS_KEEP_FRAME_H
#define MEMPROF_TESTS_KEEP_FRAME_H

#if defined(__clang__)
#define TEST_KEEP_FRAME __attribute__((noinline, disable_tail_calls))
#else
#define TEST_KEEP_FRAME __attribute__((noipa))
#endif

#endif
