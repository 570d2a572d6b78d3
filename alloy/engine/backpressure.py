"""Backpressure: the host waits when a device is too far behind, as CUDA's bounded launch queue makes it.

Without it, a loop of launches queues without bound: 400 queued 1024^2 matmuls took 13 s to drain on the CPU, and a
Ctrl-C waited for all of them. The bound is in bytes of pending outputs, which track the work queued better than a
count of launches does (a tiny kernel and a big matmul are one launch each). Each QUEUE_BYTES of outputs ends in a
fence (Device.fence); once two fences are open the host waits for the older one, so at most about 2 x QUEUE_BYTES of
outputs are queued, and the device never runs dry while the host waits.

The budget is the device's (`Device.queue_bytes`: 64 MiB, 1 GiB on CUDA) unless ALLOY_QUEUE_BYTES sets one for all.
On the H200, 64 MiB is two 4096^2 fp16 matmul outputs: the host waited every other launch, and back-to-back 4096^3
matmuls took 205.7 us a kernel on the device against 192.4 us with 1 GiB (the same as a @jit replay's 192.6).
"""
from __future__ import annotations
import collections, threading
from alloy.helpers import getenv

QUEUE_BYTES = getenv("ALLOY_QUEUE_BYTES", 0)   # 0: each device's own budget

class Throttle:
  """One device's pending output bytes and open fences."""
  def __init__(self, device):
    self.device, self.pending, self.fences, self.lock = device, 0, collections.deque(), threading.Lock()
    self.budget = QUEUE_BYTES or device.queue_bytes
  def launched(self, nbytes: int) -> None:
    """Count a launch's output bytes; wait for the older fence when two are open."""
    self.pending += nbytes   # unlocked, as every launch does it: two threads at once may lose a count (a fence comes later)
    if self.pending < self.budget: return
    with self.lock:
      if self.pending < self.budget: return   # another thread fenced meanwhile
      self.pending = 0
      self.fences.append(self.device.fence())
      oldest = self.fences.popleft() if len(self.fences) > 1 else None
    if oldest is not None: self.device.wait_fence(oldest)

_throttles: dict = {}

def throttle(device) -> Throttle:
  if (t := _throttles.get(device.name)) is None: t = _throttles.setdefault(device.name, Throttle(device))
  return t
