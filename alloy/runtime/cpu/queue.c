/* The CPU device's command queue: a worker pthread that runs queued batches of kernel calls in order, without the
   GIL (the design: queue.py's docstring). Built with team.c by queue.py, which passes RING, WAIT_SLICE_MS and the
   limits in queue.h as -D defines. Python calls alloy_queue_start, alloy_queue_submit, alloy_queue_launch and
   alloy_queue_wait. */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include "queue.h"

#if !defined(RING) || !defined(WAIT_SLICE_MS)
#error "RING and WAIT_SLICE_MS come from queue.py as -D defines"
#endif

/* fn(arg) on a new thread: detached (never joined, it sleeps through exit), with the stack Python gives its threads
   for kernels, and taking no signals (they go to Python's threads, whose handlers expect them); 0 if it started */
int alloy_spawn(void *(*fn)(void *), void *arg, pthread_t *thread) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);   /* the new thread inherits this mask */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 16 << 20);
  int failed = pthread_create(thread, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, 0);
  return failed;
}

/* n kernel calls in order; call i takes nargs[i] pointers from args, then nscalars[i] int32s from scalars; with
   ranges[i] > 0 it is a parallel kernel, its outer loop of that length split across the team */
static void alloy_graph_run(struct alloy_team *team, int32_t n, void **fns, const int32_t *nargs, void **args,
                            const int32_t *nscalars, const int32_t *scalars, const int32_t *ranges) {
  for (int32_t i = 0; i < n; i++) {
    if (ranges[i]) alloy_team_run(team, fns[i], nscalars[i], args, scalars, ranges[i]);
    else alloy_call(fns[i], args, scalars);
    args += nargs[i];
    scalars += nscalars[i];
  }
}

struct alloy_entry {
  int32_t n;
  void **fns; int32_t *nargs; void **args; int32_t *nscalars; int32_t *scalars; int32_t *ranges;
  void *fn; int32_t nargs1, nscalars1, range1; void *args1[MAX_ARGS]; int32_t scalars1[MAX_SCALARS];   /* a one-call entry's own copy */
};

struct alloy_queue {
  /* read by Python at the queue's address (queue.py's Shared mirrors these) */
  int64_t completed;              /* the last entry run to its end: written by the worker */
  double ran_here;                /* seconds of the last batch run on the submitting thread */
  void *stage_args[MAX_ARGS];     /* a single launch's arguments, written by Python just before alloy_queue_launch */
  int32_t stage_scalars[MAX_SCALARS];
  /* the rest belongs to C; the lock guards submitted, started, waiters and sleeping */
  int64_t submitted, started;
  int32_t waiters, sleeping;
  pthread_mutex_t lock;
  pthread_cond_t work, done;      /* work: the worker sleeps on it; done: waiters, and submitters short of room */
  struct alloy_team *team;        /* splits parallel kernels with whichever thread runs them */
  double elapsed[RING];           /* seconds each entry ran, at its number % RING */
  struct alloy_entry ring[RING];  /* entry k at k % RING: free once k is completed */
};

static void alloy_run_entry(struct alloy_queue *q, int64_t seq) {
  struct alloy_entry *e = &q->ring[seq % RING];
  double t0 = alloy_now();
  alloy_graph_run(q->team, e->n, e->fns, e->nargs, e->args, e->nscalars, e->scalars, e->ranges);
  q->elapsed[seq % RING] = alloy_now() - t0;
}

static void *alloy_worker(void *arg) {
  struct alloy_queue *q = arg;
  pthread_mutex_lock(&q->lock);
  for (;;) {
    while (q->started == q->submitted) {
      q->sleeping = 1;
      pthread_cond_wait(&q->work, &q->lock);
      q->sleeping = 0;
    }
    int64_t seq = ++q->started;
    pthread_mutex_unlock(&q->lock);
    alloy_run_entry(q, seq);
    pthread_mutex_lock(&q->lock);
    __atomic_store_n(&q->completed, seq, __ATOMIC_RELEASE);   /* its writes and elapsed are visible first */
    if (q->waiters) pthread_cond_broadcast(&q->done);
  }
  return 0;
}

/* a queue whose first entry will be numbered seq + 1, with its worker and a team of `threads` running (the worker
   one of them); NULL if it cannot start */
struct alloy_queue *alloy_queue_start(int64_t seq, int32_t threads) {
  struct alloy_queue *q = calloc(1, sizeof *q);
  if (!q) return 0;
  if (!(q->team = alloy_team_start(threads))) { free(q); return 0; }
  q->completed = q->submitted = q->started = seq;
  pthread_mutex_init(&q->lock, 0);
  pthread_cond_init(&q->work, 0);
  pthread_cond_init(&q->done, 0);
  pthread_t worker;
  if (alloy_spawn(alloy_worker, q, &worker)) { free(q); return 0; }
  return q;
}

/* Queue n calls (see alloy_graph_run) and return their entry's number; or, with here set and nothing queued or
   running, run them on this thread and return 0 (they are complete, their seconds in ran_here). */
int64_t alloy_queue_submit(struct alloy_queue *q, int32_t n, void **fns, int32_t *nargs, void **args,
                           int32_t *nscalars, int32_t *scalars, int32_t *ranges, int32_t here) {
  if (here && __atomic_load_n(&q->completed, __ATOMIC_ACQUIRE) == q->submitted) {
    double t0 = alloy_now();   /* the worker is idle: the team is free for this thread */
    alloy_graph_run(q->team, n, fns, nargs, args, nscalars, scalars, ranges);
    q->ran_here = alloy_now() - t0;
    return 0;
  }
  pthread_mutex_lock(&q->lock);
  while (q->submitted - __atomic_load_n(&q->completed, __ATOMIC_RELAXED) >= RING) {
    q->waiters++;
    pthread_cond_wait(&q->done, &q->lock);
    q->waiters--;
  }
  int64_t seq = q->submitted + 1;
  struct alloy_entry *e = &q->ring[seq % RING];
  e->n = n;
  if (n == 1) {
    e->fn = fns[0];
    e->nargs1 = nargs[0];
    e->nscalars1 = nscalars[0];
    e->range1 = ranges[0];
    memcpy(e->args1, args, sizeof(void *) * e->nargs1);
    if (e->nscalars1) memcpy(e->scalars1, scalars, sizeof(int32_t) * e->nscalars1);
    e->fns = &e->fn; e->nargs = &e->nargs1; e->args = e->args1; e->nscalars = &e->nscalars1; e->scalars = e->scalars1;
    e->ranges = &e->range1;
  } else {
    e->fns = fns; e->nargs = nargs; e->args = args; e->nscalars = nscalars; e->scalars = scalars; e->ranges = ranges;
  }
  q->submitted = seq;
  if (q->sleeping) pthread_cond_signal(&q->work);
  pthread_mutex_unlock(&q->lock);
  return seq;
}

/* one call of fn with the staged arguments: nargs pointers from stage_args, nscalars int32s from stage_scalars;
   range as in alloy_graph_run */
int64_t alloy_queue_launch(struct alloy_queue *q, void *fn, int32_t nargs, int32_t nscalars, int32_t range,
                           int32_t here) {
  return alloy_queue_submit(q, 1, &fn, &nargs, q->stage_args, &nscalars, q->stage_scalars, &range, here);
}

/* Block until entry seq has run and return its seconds (kept for the last RING entries); or return -1 after
   WAIT_SLICE_MS (call again). */
double alloy_queue_wait(struct alloy_queue *q, int64_t seq) {
  if (__atomic_load_n(&q->completed, __ATOMIC_ACQUIRE) < seq) {
    struct timeval now;
    gettimeofday(&now, 0);   /* pthread_cond_timedwait's default clock is the wall clock */
    int64_t ns = (int64_t)now.tv_usec * 1000 + (int64_t)WAIT_SLICE_MS * 1000000;
    struct timespec until = {now.tv_sec + (time_t)(ns / 1000000000), (long)(ns % 1000000000)};
    pthread_mutex_lock(&q->lock);
    q->waiters++;
    int timed_out = 0;
    while (__atomic_load_n(&q->completed, __ATOMIC_ACQUIRE) < seq && !timed_out)
      timed_out = pthread_cond_timedwait(&q->done, &q->lock, &until) != 0;
    q->waiters--;
    pthread_mutex_unlock(&q->lock);
    if (__atomic_load_n(&q->completed, __ATOMIC_ACQUIRE) < seq) return -1.0;
  }
  return q->elapsed[seq % RING];
}
