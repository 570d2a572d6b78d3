"""The CPU device's command queue: a worker pthread, in C, that runs queued batches of kernel calls in order.

Python submits with one ctypes call and waits with one. ctypes releases the GIL during both and the worker never
takes it, so a kernel starts as soon as the worker gets a core, whatever Python does meanwhile, and a waiter wakes
as soon as its kernel ends (a worker in Python needed the GIL first: it got it only once the main thread blocked).
A parallel kernel's outer loop is split between the worker and a team of threads (team.py) that sleep between
kernels, so the cores are Python's whenever no kernel runs.

An entry is a batch of n kernel calls: function pointers, per-call counts of pointer and int32 arguments, the
arguments, and per call the length of the outer loop the team splits (0: a serial kernel), walked by
alloy_graph_run. An entry of one call carries its own copy of that call (a single launch's arguments are staged in
memory the next launch reuses); an entry of several reads the caller's arrays when it runs, so the caller leaves
them unchanged until then (CPUGraph copies before it rebinds). Entries are numbered 1, 2, ... in submission
order; the worker publishes the last finished number in `completed`, which Python reads
from memory, and the seconds each entry ran, measured around its calls, in a ring indexed by number.
One thread submits at a time: the staging area and the last inline time are shared, so CPUDevice holds a lock
around each submission.
"""
from __future__ import annotations
import ctypes, os
from alloy.runtime.cpu.team import team_source

MAX_ARGS = 32      # pointer arguments of one kernel call the native path takes
MAX_SCALARS = 4    # int32 arguments after the pointers; launches beyond either limit run another way (see program.py)
RING = 1024        # queued entries at most: a submit waits for room beyond that
WAIT_SLICE_MS = 50 # a wait returns to Python this often, so Ctrl-C is seen while a long kernel runs

def _call_switch() -> str:
  """C that calls fn with k pointers then s int32s, for every k <= MAX_ARGS and s <= MAX_SCALARS + 2 (a parallel
  kernel's slice comes after its scalars): a kernel is called through a function pointer of its exact type (calling
  through another type is undefined behaviour)."""
  cases = []
  for k in range(MAX_ARGS + 1):
    for s in range(MAX_SCALARS + 3):
      types = ", ".join(["void *"] * k + ["int32_t"] * s) or "void"
      values = ", ".join([f"a[{j}]" for j in range(k)] + [f"c[{j}]" for j in range(s)])
      cases.append(f"  case {k * (MAX_SCALARS + 3) + s}: ((void (*)({types}))fn)({values}); break;")
  return ("static void alloy_call(void *fn, int32_t k, int32_t s, void **a, const int32_t *c) {\n"
          f"  switch (k * {MAX_SCALARS + 3} + s) {{\n" + "\n".join(cases) +
          "\n  default: abort();   /* Python keeps calls within the limits: one beyond them is a bug */\n  }\n}\n")

_HEAD = r"""#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
static double alloy_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* fn(arg) on a new thread: detached (never joined, it sleeps through exit), with the stack Python gives its threads
   for kernels, and taking no signals (they go to Python's threads, whose handlers expect them); 0 if it started */
static int alloy_spawn(void *(*fn)(void *), void *arg, pthread_t *thread) {
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
"""

_QUEUE = r"""
/* n kernel calls in order; call i takes nargs[i] pointers from args, then nscalars[i] int32s from scalars; with
   ranges[i] > 0 it is a parallel kernel, its outer loop of that length split across the team */
static void alloy_graph_run(struct alloy_team *team, int32_t n, void **fns, const int32_t *nargs, void **args,
                            const int32_t *nscalars, const int32_t *scalars, const int32_t *ranges) {
  for (int32_t i = 0; i < n; i++) {
    if (ranges[i]) alloy_team_run(team, fns[i], nargs[i], nscalars[i], args, scalars, ranges[i]);
    else alloy_call(fns[i], nargs[i], nscalars[i], args, scalars);
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
"""

QUEUE_SOURCE = ("#define _GNU_SOURCE\n" f"#include <stdint.h>\n#include <stdlib.h>\n#define MAX_ARGS {MAX_ARGS}\n#define MAX_SCALARS {MAX_SCALARS}\n"
                f"#define RING {RING}\n#define WAIT_SLICE_MS {WAIT_SLICE_MS}\n" + _call_switch() + _HEAD + team_source() + _QUEUE)

class Shared(ctypes.Structure):
  """The head of struct alloy_queue: what Python reads and writes in place."""
  _fields_ = [("completed", ctypes.c_int64), ("ran_here", ctypes.c_double),
              ("stage_args", ctypes.c_void_p * MAX_ARGS), ("stage_scalars", ctypes.c_int32 * MAX_SCALARS)]

_INT32 = [ctypes.c_int32(i) for i in range(MAX_ARGS + 1)]   # small counts and flags, made once

def team_size() -> int:
  """The threads a parallel kernel runs on: one per core this process may use."""
  try: return len(os.sched_getaffinity(0))
  except AttributeError: return os.cpu_count() or 1

class CPUQueue:
  """One native queue and its worker thread. lib: the loaded QUEUE_SOURCE; seq: the number the first entry follows.
  Its calls pass ctypes objects and declare no argtypes: converting each argument costs more than the call."""
  def __init__(self, lib: ctypes.CDLL, seq: int = 0, threads: int = 0):
    start = lib.alloy_queue_start
    start.restype, start.argtypes = ctypes.c_void_p, [ctypes.c_int64, ctypes.c_int32]
    if not (address := start(seq, threads or team_size())): raise RuntimeError("alloy's CPU device could not start its worker thread")
    self.ptr = ctypes.c_void_p(address)
    self._launch, self._submit, self._wait = lib.alloy_queue_launch, lib.alloy_queue_submit, lib.alloy_queue_wait
    self._launch.restype = self._submit.restype = ctypes.c_int64
    self._wait.restype = ctypes.c_double
    shared = Shared.from_address(address)
    self.completed = ctypes.c_int64.from_address(address + Shared.completed.offset)   # .value: the last entry run
    self.ran_here = ctypes.c_double.from_address(address + Shared.ran_here.offset)
    self.stage_args, self.stage_scalars = shared.stage_args, shared.stage_scalars     # views, not copies
    self.lib = lib                                                                    # its code outlives the queue

  def launch(self, fn: ctypes.c_void_p, pointers: list[int], scalars, here: bool, parallel: ctypes.c_int32) -> int:
    """Queue one call of fn (within MAX_ARGS, MAX_SCALARS): its entry's number, or 0 where it ran on this thread
    (here, and nothing queued). parallel: the length of the outer loop the team splits, 0 for a serial kernel."""
    self.stage_args[:len(pointers)] = pointers
    if scalars: self.stage_scalars[:len(scalars)] = scalars
    return self._launch(self.ptr, fn, _INT32[len(pointers)], _INT32[len(scalars)], parallel, _INT32[here])

  def submit(self, batch: tuple, here: bool) -> int:
    """Queue a batch, (n, fns, nargs, args, nscalars, scalars, ranges) as ctypes objects, as launch does. A batch of several
    calls is read from these arrays when it runs: they stay alive and unchanged until it is complete."""
    return self._submit(self.ptr, *batch, _INT32[here])

  def wait(self, seq: int) -> float:
    """Block until entry seq has run (in C even when it has: its acquire load makes the entry's writes visible
    here) and return its seconds. In slices, so a signal's Python handler (Ctrl-C) runs while a long kernel goes."""
    seq = ctypes.c_int64(seq)
    while (elapsed := self._wait(self.ptr, seq)) < 0: pass
    return elapsed
