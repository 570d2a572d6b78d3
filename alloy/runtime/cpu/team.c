/* The CPU device's thread team: the threads that split a parallel kernel's outer loop between them (the design:
   team.py's docstring). Built with queue.c by queue.py, which passes TEAM_SPIN_US, SMALLEST_CHUNK, WAIT_SPIN_MAX_US
   and the limits in queue.h as -D defines. */
#define _GNU_SOURCE   /* sched_getcpu, CPU_SET and pthread_setaffinity_np */
#include <sched.h>
#include <string.h>
#include "queue.h"

#if !defined(TEAM_SPIN_US) || !defined(SMALLEST_CHUNK) || !defined(WAIT_SPIN_MAX_US)
#error "TEAM_SPIN_US, SMALLEST_CHUNK and WAIT_SPIN_MAX_US come from queue.py as -D defines"
#endif

struct alloy_team {
  int32_t size;                   /* threads sharing a call: the caller and size - 1 team threads */
  pthread_mutex_t lock;           /* guards sleeping and waiting, so a wake-up is never lost */
  pthread_cond_t go, done;        /* go: idle team threads; done: the caller waiting for the last chunks */
  int32_t sleeping, waiting;
  /* the current call: written by the caller before it publishes the call's number in claim */
  void *fn; int32_t s; void **a; int32_t c[MAX_SCALARS + 2]; int32_t range, smallest;
  int64_t claim;                  /* call number << 32 | first iteration nobody claimed yet */
  int32_t finished;               /* iterations of the current call done */
  pthread_t *threads;             /* the size - 1 team threads */
  int avoided;                    /* the CPU their affinity leaves out (-1: none) */
};

static void alloy_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

static uint32_t alloy_team_call_now(struct alloy_team *t) {
  return (uint32_t)((uint64_t)__atomic_load_n(&t->claim, __ATOMIC_ACQUIRE) >> 32);
}

/* Run chunks of call `call` until none is left unclaimed, or a later call has begun; returns the seconds the last
   chunk this thread ran took (0 if none). */
static double alloy_team_work(struct alloy_team *t, uint32_t call) {
  double last = 0;
  int64_t v = __atomic_load_n(&t->claim, __ATOMIC_ACQUIRE);
  for (;;) {
    if ((uint32_t)((uint64_t)v >> 32) != call) return last;
    int32_t start = (int32_t)(uint32_t)v;
    if (start >= t->range) return last;
    int32_t left = t->range - start, n = left / (2 * t->size);
    if (n < t->smallest) n = t->smallest < left ? t->smallest : left;
    if (!__atomic_compare_exchange_n(&t->claim, &v, v + n, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) continue;
    /* claimed: the call cannot end, nor its arguments change, before this chunk counts as finished */
    int32_t end = start + n;
    int32_t c[MAX_SCALARS + 2];
    memcpy(c, t->c, sizeof(int32_t) * t->s);
    c[t->s] = start;
    c[t->s + 1] = end;
    double t0 = alloy_now();
    alloy_call(t->fn, t->a, c);
    last = alloy_now() - t0;
    if (__atomic_add_fetch(&t->finished, end - start, __ATOMIC_ACQ_REL) == t->range) {
      pthread_mutex_lock(&t->lock);
      if (t->waiting) pthread_cond_signal(&t->done);
      pthread_mutex_unlock(&t->lock);
    }
    v = __atomic_load_n(&t->claim, __ATOMIC_ACQUIRE);
  }
}

static void *alloy_team_thread(void *arg) {
  struct alloy_team *t = arg;
  uint32_t seen = 0;
  for (;;) {
    double until = alloy_now() + TEAM_SPIN_US * 1e-6;
    while (alloy_team_call_now(t) == seen && alloy_now() < until) alloy_relax();
    if (alloy_team_call_now(t) == seen) {
      pthread_mutex_lock(&t->lock);
      t->sleeping++;
      while (alloy_team_call_now(t) == seen) pthread_cond_wait(&t->go, &t->lock);
      t->sleeping--;
      pthread_mutex_unlock(&t->lock);
    }
    seen = alloy_team_call_now(t);
    alloy_team_work(t, seen);
  }
  return 0;
}

/* A team of `size` threads with the caller (size - 1 started here, fewer if the system refuses); NULL without memory */
struct alloy_team *alloy_team_start(int32_t size) {
  struct alloy_team *t = calloc(1, sizeof *t);
  if (!t) return 0;
  t->size = size < 1 ? 1 : size;
  t->avoided = -1;
  pthread_mutex_init(&t->lock, 0);
  pthread_cond_init(&t->go, 0);
  pthread_cond_init(&t->done, 0);
  if (!(t->threads = calloc(t->size, sizeof(pthread_t)))) { free(t); return 0; }
  for (int32_t i = 1; i < t->size; i++)
    if (alloy_spawn(alloy_team_thread, t, &t->threads[i - 1])) { t->size = i; break; }   /* a smaller team */
  return t;
}

/* Keep the team threads off this thread's CPU before waking them: a woken thread is often queued behind its waker,
   here the caller about to run its share, and waited for the scheduler's next balancing (2 ms on the 2-core VM, one
   launch in ten after a millisecond of Python) instead of taking the idle core. Their mask is all the process's CPUs
   but the one the caller last woke them from. Linux only (elsewhere the scheduler decides). */
static void alloy_team_avoid_this_cpu(struct alloy_team *t) {
#ifdef __linux__
  cpu_set_t allowed;
  int cpu = sched_getcpu();
  if (cpu == t->avoided) return;   /* set already: the syscalls cost ~20 us of every launch's start */
  if (cpu < 0 || sched_getaffinity(0, sizeof allowed, &allowed) || !CPU_ISSET(cpu, &allowed) || CPU_COUNT(&allowed) < 2) return;
  CPU_CLR(cpu, &allowed);
  for (int32_t i = 0; i < t->size - 1; i++) pthread_setaffinity_np(t->threads[i], sizeof allowed, &allowed);
  t->avoided = cpu;
#endif
}

/* fn(a, the s int32s of c then start and end) over [0, range), split across the team; returns when done */
void alloy_team_run(struct alloy_team *t, void *fn, int32_t s, void **a, const int32_t *c, int32_t range) {
  if (t->size == 1 || range < 2) {
    int32_t whole[MAX_SCALARS + 2];
    memcpy(whole, c, sizeof(int32_t) * s);
    whole[s] = 0;
    whole[s + 1] = range;
    alloy_call(fn, a, whole);
    return;
  }
  t->fn = fn; t->s = s; t->a = a; t->range = range;
  memcpy(t->c, c, sizeof(int32_t) * s);
  int32_t smallest = range / (t->size * SMALLEST_CHUNK);
  t->smallest = smallest < 1 ? 1 : smallest;
  t->finished = 0;
  uint32_t call = alloy_team_call_now(t) + 1;
  __atomic_store_n(&t->claim, (int64_t)((uint64_t)call << 32), __ATOMIC_RELEASE);   /* the arguments first */
  pthread_mutex_lock(&t->lock);
  if (t->sleeping) {
    alloy_team_avoid_this_cpu(t);   /* only when they sleep: spinning ones already run elsewhere */
    pthread_cond_broadcast(&t->go);
  }
  pthread_mutex_unlock(&t->lock);
  double chunk_seconds = alloy_team_work(t, call);
  /* The chunks others still run end within about the time of this thread's last one (chunks shrink): spin that
     long (bounded) rather than pay a wake-up on top, then sleep until the last one signals. */
  if (chunk_seconds > WAIT_SPIN_MAX_US * 1e-6) chunk_seconds = WAIT_SPIN_MAX_US * 1e-6;
  if (chunk_seconds < TEAM_SPIN_US * 1e-6) chunk_seconds = TEAM_SPIN_US * 1e-6;
  double until = alloy_now() + chunk_seconds;
  while (__atomic_load_n(&t->finished, __ATOMIC_ACQUIRE) < range && alloy_now() < until) alloy_relax();
  if (__atomic_load_n(&t->finished, __ATOMIC_ACQUIRE) < range) {
    pthread_mutex_lock(&t->lock);
    t->waiting = 1;
    while (__atomic_load_n(&t->finished, __ATOMIC_ACQUIRE) < range) pthread_cond_wait(&t->done, &t->lock);
    t->waiting = 0;
    pthread_mutex_unlock(&t->lock);
  }
}
