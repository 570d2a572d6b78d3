/* What the CPU device's queue (queue.c) and its thread team (team.c) share: the argument limits, the kernel entry
   point's type, the clock, the thread spawner and the team's entry points. queue.py builds both files into one
   library and passes the limits as -D defines. */
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

/* Every kernel the queue runs exports this entry point: its pointers in a, its int32 words in c (a parallel kernel's
   slice start and end after its own), which it hands to its body (renderer/c.py). One type for every kernel, so a
   call needs no case per count of arguments (calling through another type than the function's is undefined). */
typedef void (*alloy_kernel)(void *const *a, const int32_t *c);
static inline void alloy_call(void *fn, void *const *a, const int32_t *c) { ((alloy_kernel)fn)(a, c); }

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
ALLOY_INTERNAL void alloy_team_run(struct alloy_team *t, void *fn, int32_t s, void **a, const int32_t *c, int32_t range);
#endif
