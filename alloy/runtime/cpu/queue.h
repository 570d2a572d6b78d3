/* What the CPU device's queue (queue.c) and its thread team (team.c) share: the argument limits, the call switch,
   the clock, the thread spawner and the team's entry points. queue.py builds both files into one library: it passes
   the limits as -D defines and generates call_switch.h for them in the build's include directory. */
#ifndef ALLOY_CPU_QUEUE_H
#define ALLOY_CPU_QUEUE_H
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

/* no defaults: struct alloy_queue's head is mirrored in Python (queue.py's Shared), which owns these numbers */
#if !defined(MAX_ARGS) || !defined(MAX_SCALARS)
#error "MAX_ARGS and MAX_SCALARS come from queue.py as -D defines"
#endif

/* static void alloy_call(void *fn, int32_t k, int32_t s, void **a, const int32_t *c): fn called with k pointers
   from a, then s int32s from c, through a function pointer of exactly that type (calling through another type is
   undefined behaviour); one case per (k, s), so queue.py writes it out */
#include "call_switch.h"

/* internal to the library: its exports are the alloy_queue_* functions Python calls */
#define ALLOY_INTERNAL __attribute__((visibility("hidden")))

static inline double alloy_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* fn(arg) on a new detached thread that takes no signals (queue.c); 0 if it started */
ALLOY_INTERNAL int alloy_spawn(void *(*fn)(void *), void *arg, pthread_t *thread);

/* the team (team.c): threads that split a parallel kernel's outer loop with the one thread calling alloy_team_run */
struct alloy_team;
ALLOY_INTERNAL struct alloy_team *alloy_team_start(int32_t size);
ALLOY_INTERNAL void alloy_team_run(struct alloy_team *t, void *fn, int32_t k, int32_t s, void **a, const int32_t *c,
                                   int32_t range);
#endif
