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

The C is queue.c (the worker, the entries) and team.c, which share queue.h; compile_queue builds them into one
library with the numbers below and team.py's as -D defines (the C has no defaults: it stops with #error without them).
Every kernel has one entry point type, `void name(void *const *a, const int32_t *c)` (renderer/c.py), so a call
is one indirect call whatever its counts of arguments: a switch with a case per count, one type each, took gcc 13 s
to build, which every process paid on a machine whose compile cache was cold.
"""
from __future__ import annotations
import ctypes, os
from pathlib import Path
from alloy.helpers import disk_cache_get, disk_cache_put
from alloy.runtime.cpu.compiler import CPUCompiler
from alloy.runtime.cpu.team import TEAM_SPIN_US, SMALLEST_CHUNK, WAIT_SPIN_MAX_US

MAX_ARGS = 32      # pointer arguments of one kernel call the native path takes
MAX_SCALARS = 16   # int32 arguments after the pointers (a kernel's scalar words); launches beyond either limit run another way (see program.py)
RING = 1024        # queued entries at most: a submit waits for room beyond that
WAIT_SLICE_MS = 50 # a wait returns to Python this often, so Ctrl-C is seen while a long kernel runs

HERE = Path(__file__).parent
SOURCES = (HERE / "queue.c", HERE / "team.c")   # one library; the team's functions are internal to it
HEADERS = (HERE / "queue.h",)
WARNINGS = ["-Wall", "-Wextra"]                 # test_cpu_c_sources.py adds -Werror
DEFINES = {"MAX_ARGS": MAX_ARGS, "MAX_SCALARS": MAX_SCALARS, "RING": RING, "WAIT_SLICE_MS": WAIT_SLICE_MS,
           "TEAM_SPIN_US": TEAM_SPIN_US, "SMALLEST_CHUNK": SMALLEST_CHUNK, "WAIT_SPIN_MAX_US": WAIT_SPIN_MAX_US}

def queue_flags(extra=()) -> list[str]:
  """What the queue's build passes after CFLAGS, before its include directory and files."""
  return [*WARNINGS, *extra, *(f"-D{k}={v}" for k, v in DEFINES.items())]

def compile_queue(compiler: CPUCompiler, extra=()) -> bytes:
  """The queue library: SOURCES built by the kernels' compiler (CFLAGS) with queue_flags(extra)."""
  return compiler.shared_library([*queue_flags(extra), *map(str, SOURCES)])

def queue_key(compiler: CPUCompiler) -> str:
  """The queue library's disk cache key: the compiler, the flags and the text of every C file."""
  return "\0".join([compiler.identity, *queue_flags(), *(p.read_text() for p in (*HEADERS, *SOURCES))])

def queue_binary(compiler: CPUCompiler) -> bytes:
  """compile_queue's library, cached on disk (queue_key)."""
  key = queue_key(compiler)
  if (binary := disk_cache_get("compile", key)) is not None: return binary
  binary = compile_queue(compiler)
  disk_cache_put("compile", key, binary)
  return binary

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
  """One native queue and its worker thread. lib: the loaded queue library (queue_binary); seq: the number the first entry follows.
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
