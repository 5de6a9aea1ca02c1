/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the stress tests: a mutex-protected bounded queue of 64-bit keys, used
 * to hand blocks from the thread that allocated them to another thread that frees them
 * (cross-thread frees), and a bitmap for "which keys were seen".
 */
#ifndef MEMPROF_TESTS_STRESS_H
#define MEMPROF_TESTS_STRESS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#define STRESS_QUEUE_CAP 4096

struct stress_queue {
    pthread_mutex_t lock;
    uint64_t items[STRESS_QUEUE_CAP];
    unsigned head, count;
};

static inline void stress_queue_init(struct stress_queue *q)
{
    pthread_mutex_init(&q->lock, NULL);
    q->head = q->count = 0;
}

/* Returns false when the queue is full. */
static inline bool stress_queue_push(struct stress_queue *q, uint64_t v)
{
    pthread_mutex_lock(&q->lock);
    bool ok = q->count < STRESS_QUEUE_CAP;
    if (ok) {
        q->items[(q->head + q->count) % STRESS_QUEUE_CAP] = v;
        q->count++;
    }
    pthread_mutex_unlock(&q->lock);
    return ok;
}

/* Returns false when the queue is empty. */
static inline bool stress_queue_pop(struct stress_queue *q, uint64_t *v)
{
    pthread_mutex_lock(&q->lock);
    bool ok = q->count > 0;
    if (ok) {
        *v = q->items[q->head];
        q->head = (q->head + 1) % STRESS_QUEUE_CAP;
        q->count--;
    }
    pthread_mutex_unlock(&q->lock);
    return ok;
}

struct stress_bitmap {
    uint64_t *words;
    size_t nbits;
};

static inline bool stress_bitmap_init(struct stress_bitmap *b, size_t nbits)
{
    b->nbits = nbits;
    b->words = calloc((nbits + 63) / 64, sizeof *b->words);
    return b->words != NULL;
}

/* Sets bit i; returns its previous value. */
static inline bool stress_bitmap_set(struct stress_bitmap *b, size_t i)
{
    uint64_t m = (uint64_t)1 << (i % 64);
    bool old = (b->words[i / 64] & m) != 0;
    b->words[i / 64] |= m;
    return old;
}

static inline bool stress_bitmap_get(const struct stress_bitmap *b, size_t i)
{
    return (b->words[i / 64] >> (i % 64)) & 1;
}

#endif
