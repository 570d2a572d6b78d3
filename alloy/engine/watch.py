"""The one interface through which the jit's capture, the trace recorder, benchmarks and tests watch realizes.

A watcher subclasses Watcher and overrides the events it needs; `watchers.watching(w)` attaches it for a with block
(or attach/detach). The engine, the runtime's command encoders (through one bridge) and the front end call the
events of the watchers attached, and nothing when none is: each event has a tuple of the watchers overriding it
(`watchers.on_launch`, ...), an empty tuple being the check the hot paths make. A watcher's `device_time` set asks
every launch to wait and report its device-measured time (the trace recorder's default).
"""
from __future__ import annotations
import contextlib
from alloy.runtime.device import commit_listeners

class Watcher:
  """Every event a realize can report, each a no-op here."""
  device_time = False
  def launch(self, ck, buffers, elapsed, t_submit, consts) -> None:
    """A kernel launched: its CompiledKernel, Buffers (output first), device seconds when waited for (else None), host
    submit seconds, and the CONST nodes whose values it took as scalar arguments."""
  def stage(self, stage: str, start: float, seconds: float, detail: str) -> None:
    """A host stage (schedule, lower, render, compile, load, submit) ran from start (perf_counter) for seconds."""
  def compiled(self, ck) -> None:
    """A kernel went through the compile stages (the tests' CUDA source check)."""
  def commit(self, record) -> None:
    """A device's encoder committed a command buffer (a runtime.device.CommandBufferRecord)."""
  def host_read(self, tensor) -> None:
    """tensor's value is about to be read on the host; raise to refuse (the jit's capture cannot replay a read)."""
  def device_check(self, values, check) -> None:
    """Instead of a host read the watcher refuses: values (a small Tensor) decide an error, check(their array) raising
    it; the watcher reads them once they are computed (the jit's capture: after the capture call and every replay)."""
  def rng_key(self, key) -> None:
    """A random key Tensor was made (a replay refreshes it)."""
  def step(self, name: str, run, buffers: list, n_in: int) -> None:
    """Work other than a kernel ran on Buffers (a collective, a copy between devices): run(ins, outs) repeats it on buffers of the same sizes;
    `buffers` are its inputs (the first n_in) and then its outputs."""
  def changed(self, obj) -> None:
    """A Tensor is about to be changed in place, or backward is about to set a leaf's .grad (its autograd Leaf): told
    before, so the watcher still sees the old value (the jit's capture keeps it)."""

EVENTS = ("launch", "stage", "compiled", "commit", "host_read", "device_check", "rng_key", "step", "changed")

class Watchers:
  """The watchers attached now, and per event the ones that override it (on_<event>, tuples); quiet: no one watches
  launches or stages, nor asks for device time."""
  def __init__(self):
    self.attached: tuple = ()
    self.device_time = False
    self._index()

  def _index(self) -> None:
    for e in EVENTS: setattr(self, "on_" + e, tuple(w for w in self.attached if getattr(type(w), e) is not getattr(Watcher, e)))
    self.device_time = any(w.device_time for w in self.attached)
    self.quiet = not (self.on_launch or self.on_stage or self.device_time)   # the eager path's one check
    # the runtime sits below the engine: its encoders tell one listener, which tells the watchers
    bridged = self._tell_commit in commit_listeners
    if self.on_commit and not bridged: commit_listeners.append(self._tell_commit)
    elif bridged and not self.on_commit: commit_listeners.remove(self._tell_commit)

  def attach(self, w: Watcher) -> None:
    self.attached += (w,)
    self._index()

  def detach(self, w: Watcher) -> None:
    if w in self.attached:
      k = self.attached.index(w)
      self.attached = self.attached[:k] + self.attached[k + 1:]
      self._index()

  @contextlib.contextmanager
  def watching(self, *ws: Watcher):
    for w in ws: self.attach(w)
    try: yield ws[0] if len(ws) == 1 else ws
    finally:
      for w in ws: self.detach(w)

  def _tell_commit(self, record) -> None:
    for w in self.on_commit: w.commit(record)
  def launched(self, ck, buffers, elapsed, t_submit, consts) -> None:
    for w in self.on_launch: w.launch(ck, buffers, elapsed, t_submit, consts)
  def staged(self, stage: str, start: float, seconds: float, detail: str = "") -> None:
    for w in self.on_stage: w.stage(stage, start, seconds, detail)
  def compiled(self, ck) -> None:
    for w in self.on_compiled: w.compiled(ck)
  def host_read(self, tensor) -> None:
    for w in self.on_host_read: w.host_read(tensor)
  def device_check(self, values, check) -> None:
    for w in self.on_device_check: w.device_check(values, check)
  def rng_key(self, key) -> None:
    for w in self.on_rng_key: w.rng_key(key)
  def stepped(self, name: str, run, buffers: list, n_in: int) -> None:
    for w in self.on_step: w.step(name, run, buffers, n_in)
  def changed(self, obj) -> None:
    for w in self.on_changed: w.changed(obj)

watchers = Watchers()

class OnLaunch(Watcher):
  """A watcher calling fn(ck, buffers, elapsed, t_submit, consts) at each launch (tests, benchmarks); device_time:
  launches wait and fn gets their device seconds."""
  def __init__(self, fn, device_time: bool = False): self.fn, self.device_time = fn, device_time
  def launch(self, ck, buffers, elapsed, t_submit, consts) -> None: self.fn(ck, buffers, elapsed, t_submit, consts)
