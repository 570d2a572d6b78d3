"""A loaded CPU kernel (CPUProgram) and how its arguments are packed for the native queue or a direct ctypes call.

A launch within the queue's argument limits (queue.MAX_ARGS pointers, MAX_SCALARS int32 scalars) is queued; one
beyond them is called through ctypes on the caller's thread once everything queued has run. A program's library is
closed (dlclose) once the program is gone and every launch queued before then has run.
"""
from __future__ import annotations
import ctypes, os, tempfile, weakref
from typing import TYPE_CHECKING
import numpy as np
from alloy.helpers import SweepAt
from alloy.runtime.device import Program
from alloy.runtime.cpu.queue import MAX_ARGS, MAX_SCALARS
if TYPE_CHECKING: from alloy.runtime.cpu import CPUDevice

# id(array) -> (weak reference to it, where its bytes start): an eager launch binds the same few buffers again and again
_addresses: dict = {}
_sweeps = SweepAt()

def address(handle: np.ndarray) -> int:
  """Where a buffer's bytes start (ndarray.ctypes.data, at a fraction of its cost; a known array's at less)."""
  if (hit := _addresses.get(id(handle))) is not None and hit[0]() is handle: return hit[1]
  try: at = ctypes.addressof(ctypes.c_char.from_buffer(handle))
  except (TypeError, ValueError): return handle.ctypes.data   # read-only or empty arrays
  if len(_addresses) >= _sweeps.at:   # drop the dead
    for k in [k for k, (ref, _) in _addresses.items() if ref() is None]: del _addresses[k]
    _sweeps.swept(len(_addresses))
  _addresses[id(handle)] = (weakref.ref(handle), at)
  return at

def kernel_args(buffers, scalars, parallel: int) -> tuple:
  """A direct call's ctypes arguments: the kernel's entry point takes an array of pointers and one of int32 words
  (renderer/c.py); a parallel kernel's slice is then its whole outer loop, run on one thread."""
  scalars = (*scalars, 0, parallel) if parallel else scalars
  return (ctypes.c_void_p * max(len(buffers), 1))(*[address(b) for b in buffers]), (ctypes.c_int32 * max(len(scalars), 1))(*scalars)

_libc = ctypes.CDLL(None)
_libc.dlclose.argtypes, _libc.dlclose.restype = [ctypes.c_void_p], ctypes.c_int
open_libraries = 0   # kernel libraries loaded and not closed yet

class Library:
  """A kernel's shared library, closed when this object goes (CPUProgram hands it to the device to outlive the
  launches queued before the program went)."""
  def __init__(self, path: str):
    global open_libraries
    self.lib = ctypes.CDLL(path)
    open_libraries += 1
  def __del__(self):
    global open_libraries
    try:
      _libc.dlclose(self.lib._handle)
      open_libraries -= 1
    except Exception: pass   # interpreter shutdown

def native(buffers, scalars) -> bool:
  """Whether the queue's calls take a launch of these arguments (see queue.MAX_ARGS, MAX_SCALARS)."""
  return len(buffers) <= MAX_ARGS and len(scalars) <= MAX_SCALARS

class CPUProgram(Program):
  def __init__(self, device: CPUDevice, name: str, binary: bytes):
    self.device, self.name = device, name
    # dlopen needs a file: a temporary one, removed once loaded (the mapping outlives its name) or when loading fails
    fd, path = tempfile.mkstemp(suffix=".so", prefix=f"alloy-{name}-")
    try:
      with os.fdopen(fd, "wb") as f: f.write(binary)
      self.library = Library(path)
      self.lib = self.library.lib
    finally: os.unlink(path)
    self.fn = getattr(self.lib, name)
    self.fn.restype = None
    self.address = ctypes.cast(self.fn, ctypes.c_void_p)   # what the queue calls
    # a parallel kernel (renderer/c.py) exports its outer loop's length: the queue's team splits that loop
    try: self.parallel = ctypes.c_int32(ctypes.c_int32.in_dll(self.lib, f"{name}_parallel_range").value)
    except ValueError: self.parallel = ctypes.c_int32(0)
  def __del__(self):
    try: self.device.keep_until_done(self.library)   # closed once the launches queued until now have run
    except Exception: pass
  def __call__(self, buffers, scalars=(), global_size=(1, 1, 1), local_size=(1, 1, 1), wait=False, outs=1):
    # a small (single-threaded) kernel on an idle device runs on the caller's thread: a hand-off to the worker
    # costs more than the kernel, and it is complete when this returns
    if not native(buffers, scalars): return self.device.call_here(self.fn, kernel_args(buffers, scalars, self.parallel.value))
    return self.device.encoder.dispatch(self, buffers, scalars, buffers[:outs], wait, here=global_size[0] <= 1)
