"""The CPU device's memory: numpy byte arrays, kept by size for reuse (LRUAllocator), ordered against queued launches.

The queue runs launches after Python moved on, so a freed buffer stays alive until the launches that may use it have
run, a host write into a reused one waits for its earlier readers, and a copy out waits for the buffer's last writer.
"""
from __future__ import annotations
from typing import TYPE_CHECKING
import numpy as np
from alloy.helpers import SweepAt
from alloy.runtime.device import LRUAllocator
if TYPE_CHECKING: from alloy.runtime.cpu import CPUDevice

class CPUAllocator(LRUAllocator):
  def __init__(self, device: CPUDevice):
    super().__init__()
    self.device = device
    self.freed_sweeps = SweepAt()   # when device.freed_at drops the frees whose launches have all run
  def _alloc(self, nbytes: int): return np.empty(nbytes, dtype=np.uint8)
  def _free(self, handle, nbytes: int):
    # numpy returns the memory with the last reference to the array: not while a queued launch may use it
    self.device.keep_until_done(handle)
  def free(self, handle, nbytes: int):
    # queued launches may still read a freed buffer: a host write into it after reuse waits for them
    dev = self.device
    if dev.completed < dev.submitted:
      if len(dev.freed_at) >= self.freed_sweeps.at:
        dev.freed_at = {h: s for h, s in dev.freed_at.items() if s > dev.completed}
        self.freed_sweeps.swept(len(dev.freed_at))
      dev.freed_at[id(handle)] = dev.submitted
    super().free(handle, nbytes)
  def copyin(self, handle, src: memoryview):
    self.wait_unused(handle)
    handle[:] = np.frombuffer(src, dtype=np.uint8)
  def wait_unused(self, handle) -> None:
    """Before the host writes a buffer: the launch writing it, and a reused one's earlier readers, have run."""
    self.device.wait_for_writer(handle)
    if (seq := self.device.freed_at.pop(id(handle), 0)): self.device.wait_seq(seq)
  def wait_readers(self) -> None:
    """Before the host writes a buffer that queued entries may still read though none writes it (the queue books
    writers, not readers: a @jit replay writes the same buffer on every call while the last call's kernels may read
    it): everything queued on the device has run."""
    self.device.wait_fence(self.device.fence())
  def writable(self, handle, nbytes: int) -> memoryview:
    """The buffer's first nbytes for another device's copyout to write, once nothing queued uses them."""
    self.wait_unused(handle)
    return memoryview(handle)[:nbytes]
  def readable(self, handle, nbytes: int) -> memoryview:
    """The buffer's first nbytes for another device's copyin to read, once the launch writing it has run."""
    self.device.wait_for_writer(handle)
    return memoryview(handle)[:nbytes]
  def copyout(self, dst: memoryview, handle):
    self.device.wait_for_writer(handle)
    np.frombuffer(dst, dtype=np.uint8)[:] = handle
  def transfer(self, dst, src, nbytes: int):
    self.wait_unused(dst)   # a reused dst may still be read (or written) by queued launches, as in copyin
    self.device.wait_for_writer(src)
    dst[:nbytes] = src[:nbytes]
