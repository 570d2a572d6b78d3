"""MetalAllocator: shared-storage MTLBuffers, read and written by the host through contents() after waiting."""
from __future__ import annotations
from typing import TYPE_CHECKING
from alloy.runtime.device import DeviceOutOfMemory, LRUAllocator
if TYPE_CHECKING: from alloy.runtime.metal import MetalDevice

SOFTWARE_CACHED_BUFFERS = 128

class MetalAllocator(LRUAllocator):
  """Shared-storage MTLBuffers; the host reads and writes them through contents() after waiting.
  The LRU cache is shared by the device's threads: alloc and free hold the device's lock.
  A software buffer whose finaliser ran is never handed out again: the cycle collector runs every finaliser of a
  cycle in one pass, so Buffer.__del__ can return a handle to the cache just before or after the handle's own
  finaliser closed its memory (`finalized`; PyObjC's buffers have no such attribute and no Python finaliser)."""
  def __init__(self, device: "MetalDevice"):
    # the software device's buffers each hold a descriptor (shared memory the worker maps): few cached
    super().__init__(max_cached_buffers=SOFTWARE_CACHED_BUFFERS if device.software else 4096)
    self.device = device
  def alloc(self, nbytes: int):
    with self.device.lock:
      while getattr(handle := super().alloc(nbytes), "finalized", False): self._free(handle, nbytes)
      return handle
  def free(self, handle, nbytes: int) -> None:
    with self.device.lock:
      if getattr(handle, "finalized", False): self._free(handle, nbytes)
      else: super().free(handle, nbytes)
  def _alloc(self, nbytes: int):
    buf = self.device.mtl_device.newBufferWithLength_options_(nbytes, self.device.mtl.MTLResourceStorageModeShared)
    if buf is None: raise DeviceOutOfMemory(f"{self.device.name}: out of memory allocating {nbytes} bytes")
    return buf
  def _free(self, handle, nbytes: int) -> None:
    self.device.writers.pop(handle, None)   # the command buffer keeps what it uses alive
    self.device.users.pop(handle, None)
  def copyin(self, handle, src: memoryview) -> None:
    self.device.wait_for(self.device.users.get(handle))   # the last kernel reading it
    handle.contents().as_buffer(len(src))[:] = src
  def copyout(self, dst: memoryview, handle) -> None:
    self.device.wait_for(self.device.writers.get(handle))   # the last kernel writing it
    dst[:] = handle.contents().as_buffer(len(dst))
  def transfer(self, dst, src, nbytes: int) -> None:
    """Buffer to buffer on this device: a copy through the shared mapping, once src's writer and dst's users ran."""
    self.device.wait_for(self.device.writers.get(src))
    self.device.wait_for(self.device.users.get(dst))
    dst.contents().as_buffer(nbytes)[:] = src.contents().as_buffer(nbytes)
