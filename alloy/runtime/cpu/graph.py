"""Captured CPU launches run as one queue entry: CPUBatch (the bound arrays), CPUGraph and CPULaunchList on top of it.

A batch is arrays of kernel function pointers and their arguments, built once and walked in C (queue.c's
alloy_graph_run), so a replay costs one submit instead of one per kernel.
"""
from __future__ import annotations
import ctypes
from typing import TYPE_CHECKING
from alloy.runtime.device import LaunchList
from alloy.runtime.cpu.program import CPUProgram, address, native
from alloy.runtime.cpu.queue import MAX_ARGS, MAX_SCALARS
if TYPE_CHECKING: from alloy.runtime.cpu import CPUDevice

class CPUBatch:
  """Launches bound once into the arrays a queue entry of several calls reads: kernel function pointers, per-launch
  pointer and scalar counts, the pointers, the scalars and each kernel's parallel range (0: serial). CPUBatch(launches, device, writes) with launches
  [(program, buffers, scalars, global_size, local_size), ...] within the native limits; writes: "first" (each
  launch writes its first buffer) or "all" (assume it writes every buffer it gets).
  __call__(buffers_per_launch=None, wait=False, scalars_per_launch=None) replays them as one submit, on the caller's
  thread when every kernel is single-threaded and the device is idle; an entry of buffers_per_launch (or
  scalars_per_launch) that is not None rebinds that launch's buffers (or int32 scalars), for this call and the later
  ones (only the changed values are rewritten). wait=True returns seconds."""
  def __init__(self, launches: list, device: CPUDevice, writes: str):
    # the device's number of the last queued replay that reads args (last_seq) and scalars (last_scalars_seq)
    self.device, self.last_seq, self.last_scalars_seq = device, 0, 0
    self.cur: list[list] = []       # the buffers (numpy handles) each launch is bound to now
    self.offsets: list[int] = []    # where launch i's pointers start in args
    self.scalar_offsets: list[int] = []   # where launch i's scalars start in scalars
    fns, nargs, nscalars, scalars, ranges = [], [], [], [], []
    for i, (prog, buffers, sc, _, _) in enumerate(launch[:5] for launch in launches):
      if not isinstance(prog, CPUProgram) or prog.device is not device: raise ValueError(f"launch {i}: not a CPUProgram of {device.name}")
      if not native(buffers, sc):
        raise ValueError(f"launch {i} ({prog.name}): {len(buffers)} buffers and {len(sc)} scalars, a CPU batch takes at most "
                         f"{MAX_ARGS} and {MAX_SCALARS}")
      self.offsets.append(sum(nargs))
      self.scalar_offsets.append(len(scalars))
      fns.append(prog.address.value)
      nargs.append(len(buffers))
      nscalars.append(len(sc))
      scalars.extend(sc)
      ranges.append(prog.parallel.value)
      self.cur.append(list(buffers))
    self.n = len(launches)
    self.programs = [launch[0] for launch in launches]   # held: fns point into their libraries
    self.fns = (ctypes.c_void_p * self.n)(*fns)
    self.nargs = (ctypes.c_int32 * self.n)(*nargs)
    self.nscalars = (ctypes.c_int32 * self.n)(*nscalars)
    self.ranges = (ctypes.c_int32 * self.n)(*ranges)
    self.scalars = (ctypes.c_int32 * max(len(scalars), 1))(*scalars)
    self.args = (ctypes.c_void_p * max(sum(nargs), 1))(*[address(b) for bufs in self.cur for b in bufs])
    self.batch = (ctypes.c_int32(self.n), self.fns, self.nargs, self.args, self.nscalars, self.scalars, self.ranges)
    self.small = all(launch[3][0] <= 1 for launch in launches)   # single-threaded kernels: may run inline
    self.writes = writes
    self.written = self._written()

  def _written(self) -> list:
    return [b for bufs in self.cur for b in bufs] if self.writes == "all" else [bufs[0] for bufs in self.cur]

  def _rebind(self, i: int, buffers) -> None:
    cur = self.cur[i]
    if len(buffers) != len(cur): raise ValueError(f"launch {i}: takes {len(cur)} buffers, given {len(buffers)}")
    for j, b in enumerate(buffers):
      if b is cur[j]: continue
      if self.device.completed < self.last_seq:   # a queued replay still reads args: give it its own copy
        self.device.keep_until_done(self.args)
        self.args = type(self.args).from_buffer_copy(self.args)
        self.batch = (*self.batch[:3], self.args, *self.batch[4:])
        self.last_seq = 0
      self.args[self.offsets[i] + j] = address(b)
      cur[j] = b
      self.written = None

  def _rescalar(self, i: int, scalars) -> None:
    at, n = self.scalar_offsets[i], self.nscalars[i]
    if len(scalars) != n: raise ValueError(f"launch {i}: takes {n} scalars, given {len(scalars)}")
    if tuple(self.scalars[at:at + n]) == tuple(scalars): return
    if self.device.completed < self.last_scalars_seq:   # a queued replay still reads them: it keeps its own copy
      self.device.keep_until_done(self.scalars)
      self.scalars = type(self.scalars).from_buffer_copy(self.scalars)
      self.batch = (*self.batch[:5], self.scalars, *self.batch[6:])
      self.last_scalars_seq = 0
    self.scalars[at:at + n] = scalars

  def __call__(self, buffers_per_launch=None, wait: bool = False, scalars_per_launch=None) -> float | None:
    if scalars_per_launch is not None:
      for i, scalars in enumerate(scalars_per_launch):
        if scalars is not None: self._rescalar(i, scalars)
    if buffers_per_launch is not None:
      for i, buffers in enumerate(buffers_per_launch):
        if buffers is not None: self._rebind(i, buffers)
      if self.written is None: self.written = self._written()
    seq, elapsed = self.device.encoder.submit(self.batch, self.programs, self.written, wait, here=self.small)
    if seq: self.last_seq = self.last_scalars_seq = seq
    return elapsed

  def __del__(self):
    # a queued replay reads these arrays: they go when it is done
    try:
      if self.device.completed < max(self.last_seq, self.last_scalars_seq):
        self.device.keep_until_done((self.fns, self.nargs, self.args, self.nscalars, self.scalars, self.ranges))
    except Exception: pass   # interpreter shutdown (everything queued finished at exit)

class CPUGraph(CPUBatch):
  """A captured list of CPU launches run as one queue entry, in order (see CPUBatch).
  CPUGraph(launches, device) with launches [(program, buffers, scalars, global_size, local_size), ...];
  __call__(buffers_per_launch=None, wait=False, scalars_per_launch=None) as CPUBatch. Every buffer counts as written
  (as CUDAGraph). A launch beyond the native queue's limits is refused (ValueError)."""
  updates_scalars = True   # the jit may rebind scalars per replay (see jit.py)
  def __init__(self, launches: list, device: CPUDevice | None = None):
    if not launches: raise ValueError("a CPU graph needs at least one launch")
    device = device if device is not None else launches[0][0].device
    for i, (prog, buffers, scalars, *_) in enumerate(launches):
      if not native(buffers, scalars):
        raise ValueError(f"launch {i} ({getattr(prog, 'name', prog)}): {len(buffers)} buffers and {len(scalars)} scalars are beyond "
                         f"the native queue's {MAX_ARGS} and {MAX_SCALARS}")
    super().__init__(launches, device, writes="all")

class CPULaunchList(LaunchList):
  """Captured CPU launches (see LaunchList) run as one queue entry per call (a CPUBatch, each launch writing its first
  buffer); where a launch is beyond the native queue's argument limits, one program call per launch instead."""
  def __init__(self, launches: list, device: CPUDevice):
    super().__init__(launches, device)
    for i, (prog, buffers, *_) in enumerate(self.launches):
      if not buffers: raise ValueError(f"launch {i} ({getattr(prog, 'name', prog)}): no buffers; a launch writes its first")
    self.batch = CPUBatch(launches, device, writes="first") if all(native(l[1], l[2]) for l in self.launches) else None

  def __call__(self, buffers_per_launch=None, wait: bool = False, scalars_per_launch=None) -> float | None:
    if self.batch is None: return super().__call__(buffers_per_launch, wait, scalars_per_launch)
    return self.batch(buffers_per_launch, wait, scalars_per_launch)
