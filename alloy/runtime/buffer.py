"""A typed buffer on one device: allocated on first use, returned to the device's LRU cache when dropped."""
from __future__ import annotations
import numpy as np
from alloy.dtype import DType
from alloy.runtime.registry import get_device

_devices: dict = {}   # device name -> Device: get_device checks and canonicalizes the name, too slow for every allocation

def _device(name: str):
  if (dev := _devices.get(name)) is None: dev = _devices[name] = get_device(name)
  return dev

class Buffer:
  __slots__ = ("device", "size", "dtype", "_handle", "__weakref__")
  def __init__(self, device: str, size: int, dtype: DType):
    self.device, self.size, self.dtype, self._handle = device, size, dtype, None
  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize
  @property
  def allocated(self) -> bool: return self._handle is not None
  @property
  def handle(self):
    if self._handle is None: self._handle = _device(self.device).allocator.alloc(max(self.size * self.dtype.itemsize, 1))
    return self._handle
  def copyin(self, data: np.ndarray) -> "Buffer":
    data = np.ascontiguousarray(data)
    assert data.nbytes == self.nbytes, f"copyin of {data.nbytes} bytes into a buffer of {self.nbytes}"
    if self.nbytes: _device(self.device).allocator.copyin(self.handle, memoryview(data).cast("B"))
    return self
  def numpy(self) -> np.ndarray:
    out = np.empty(self.size, dtype=self.dtype.np)
    if self.nbytes: _device(self.device).allocator.copyout(memoryview(out).cast("B"), self.handle)
    return out
  def __del__(self):
    if self._handle is not None:
      try: _device(self.device).allocator.free(self._handle, max(self.size * self.dtype.itemsize, 1))
      except Exception: pass   # interpreter shutdown
  def __repr__(self): return f"<Buffer {self.device} {self.size} {self.dtype.name}>"

class Borrowed:
  """A buffer's device, size and dtype with a handle it does not own (it never allocates nor frees): a @jit replay
  hands a captured collective the buffers bound to its slots this call as these (runtime/collective.py reads no more)."""
  __slots__ = ("device", "size", "dtype", "handle")
  def __init__(self, device: str, size: int, dtype: DType, handle):
    self.device, self.size, self.dtype, self.handle = device, size, dtype, handle
  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize
  def __repr__(self): return f"<Borrowed {self.device} {self.size} {self.dtype.name}>"
