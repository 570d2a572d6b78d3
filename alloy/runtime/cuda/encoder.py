"""CUDACommandEncoder: the device's one stream cut into command buffers, each a run of launches closed by one event.

A launch goes straight onto the stream (CUDA orders one stream's work: no barrier is ever needed) and books only
which buffers it writes (`unrecorded`). The run is committed after ALLOY_CUDA_COMMIT_LAUNCHES launches (default 64),
or when a host read needs a buffer it writes: commit records one event from the device's ring after the run and
gives it to those buffers (CUDADevice.writers), so copyout waits for the run that wrote its buffer, never for work
queued after that run. Where every launch recorded its own event, one now records one per run: the per-launch host
work is the parameter packing, cuLaunchKernel and a dictionary entry.
"""
from __future__ import annotations
from typing import TYPE_CHECKING
from alloy.helpers import getenv
from alloy.runtime.device import CommandEncoder
if TYPE_CHECKING: from alloy.runtime.cuda import CUDADevice

COMMIT_LAUNCHES = getenv("ALLOY_CUDA_COMMIT_LAUNCHES", 64)

class CUDACommandEncoder(CommandEncoder):
  """`unrecorded`: the buffers written by the open run's launches (no event covers them yet). Used under the
  device's `submitting` lock."""
  def __init__(self, device: "CUDADevice"):
    super().__init__(device, COMMIT_LAUNCHES, 1 << 62)
    self.unrecorded: dict = {}

  def writer_event(self, handle: int):
    """The event after the last work that writes handle (None where nothing queued does), committing the open run
    first where it writes handle. Under the lock: between a commit's taking of `unrecorded` and its booking of the
    event, handle is in neither book, and a reader that looked then copied before the kernel had run (1 wrong
    value in about 5000 eager ops with three threads realizing and a fourth synchronizing, on the H200)."""
    with self.device.submitting:
      if handle in self.unrecorded: self.commit()
      return self.device.writers.get(handle)

  def _commit(self, kernels: list) -> None:
    written, self.unrecorded = self.unrecorded, {}
    self.device.mark_written(written)
