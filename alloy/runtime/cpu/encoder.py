"""CPUCommandEncoder: the CPU device's launches under the command-encoder interface (runtime/device.py).

The native queue (queue.py) already batches: each entry it runs is a command buffer, sent as soon as it is encoded,
holding one kernel call (an eager launch) or a captured list of them (CPUGraph, CPULaunchList). Entries run in
order on one worker thread, so no barrier is ever needed, and there is never an open command buffer to commit:
`commit` has nothing to do and a host read waits only for the entry that wrote its buffer (CPUDevice.last_writer).
Submission is one ctypes call under the device's lock; the encoder adds only its counters to it.
"""
from __future__ import annotations
from typing import TYPE_CHECKING
from alloy.helpers import DEBUG
from alloy.runtime.device import CommandEncoder, commit_listeners
from alloy.runtime.cpu.program import address
if TYPE_CHECKING: from alloy.runtime.cpu import CPUDevice

class CPUCommandEncoder(CommandEncoder):
  """dispatch: one kernel call as a queue entry; submit: a bound batch of calls as one entry. Both return at once
  unless wait (then the entry's seconds), or where the entry ran on the caller's thread (its seconds)."""
  def __init__(self, device: "CPUDevice"):
    super().__init__(device, 1, 0)
    self.device: CPUDevice = device

  def dispatch(self, prog, buffers, scalars, written, wait: bool, here: bool) -> float | None:
    """Queue one call of CPUProgram prog (within the native limits), writing `written`."""
    dev = self.device
    pointers = [address(b) for b in buffers]
    with dev.submitting:
      seq = dev.queue.launch(prog.address, pointers, scalars, here, prog.parallel)
      elapsed = dev.submitted_entry(seq, written)
      self.committed += 1
      self.dispatched += 1
    if DEBUG >= 2 or commit_listeners: self.report([prog.name], 0, 0.0)
    return dev.queue.wait(seq) if wait and seq else elapsed

  def submit(self, batch: tuple, programs: list, written, wait: bool, here: bool) -> tuple[int, float | None]:
    """Queue a bound batch of calls of `programs` (see CPUQueue.submit). Returns its entry number (0: it ran on this
    thread) and, with wait or where it ran here, its seconds."""
    dev = self.device
    with dev.submitting:
      seq = dev.queue.submit(batch, here)
      elapsed = dev.submitted_entry(seq, written)
      self.committed += 1
      self.dispatched += len(programs)
    if DEBUG >= 2 or commit_listeners: self.report([p.name for p in programs], 0, 0.0)
    return seq, dev.queue.wait(seq) if wait and seq else elapsed

  def _commit(self, kernels: list) -> None: pass   # never called: nothing stays open
