"""The stand-ins for Metal's resources and descriptors: buffers (memfd shared memory mapped by host and worker, so
contents().as_buffer(n) is a zero-copy view), libraries (a C++ shared object from compiler.py), functions, compute
pipeline states, and the compile-options / pipeline / indirect-command-buffer descriptors."""
from __future__ import annotations
import ctypes, errno, itertools, mmap, os, sys
from typing import TYPE_CHECKING
from alloy.runtime.metal.software import compiler
from alloy.runtime.metal.software.base import (MAX_BUFFER_BINDINGS, MAX_THREADS_PER_THREADGROUP, MTLLanguageVersion3_1, MTLMathModeFast,
                                               SIMD_WIDTH, NSObject)
from alloy.runtime.metal.software.errors import MetalLimitError
from alloy.runtime.metal.software.host import HOST
if TYPE_CHECKING: from alloy.runtime.metal.software.device import SoftwareDevice

class MTLCompileOptions(NSObject):
  def __init__(self): self._fast_math, self._math_mode, self._lang, self._macros = True, MTLMathModeFast, MTLLanguageVersion3_1, {}
  def setFastMathEnabled_(self, v): self._fast_math = bool(v)
  def fastMathEnabled(self): return self._fast_math
  def setMathMode_(self, v): self._math_mode = int(v)
  def mathMode(self): return self._math_mode
  def setMathFloatingPointFunctions_(self, v): pass
  def setLanguageVersion_(self, v): self._lang = int(v)
  def languageVersion(self): return self._lang
  def setPreprocessorMacros_(self, d): self._macros = dict(d or {})
  def preprocessorMacros(self): return dict(self._macros)

class MTLComputePipelineDescriptor(NSObject):
  def __init__(self): self._function, self._icb = None, False
  def setComputeFunction_(self, fn): self._function = fn
  def computeFunction(self): return self._function
  def setSupportIndirectCommandBuffers_(self, v): self._icb = bool(v)
  def supportIndirectCommandBuffers(self): return self._icb
  def setMaxTotalThreadsPerThreadgroup_(self, v): pass
  def setThreadGroupSizeIsMultipleOfThreadExecutionWidth_(self, v): pass

class MTLIndirectCommandBufferDescriptor(NSObject):
  def __init__(self): self._types, self._inherit_buffers, self._inherit_pso, self._max_bind = 0, True, True, MAX_BUFFER_BINDINGS
  def setCommandTypes_(self, t): self._types = int(t)
  def commandTypes(self): return self._types
  def setInheritBuffers_(self, v): self._inherit_buffers = bool(v)
  def inheritBuffers(self): return self._inherit_buffers
  def setInheritPipelineState_(self, v): self._inherit_pso = bool(v)
  def inheritPipelineState(self): return self._inherit_pso
  def setMaxKernelBufferBindCount_(self, n):
    if not 0 <= int(n) <= MAX_BUFFER_BINDINGS: raise MetalLimitError(f"maxKernelBufferBindCount {n} exceeds the limit of {MAX_BUFFER_BINDINGS}")
    self._max_bind = int(n)
  def maxKernelBufferBindCount(self): return self._max_bind
  def setMaxKernelThreadgroupMemoryBindCount_(self, n): pass

class Contents:
  """What ``buffer.contents()`` returns: like PyObjC's objc.varlist, ``as_buffer(n)`` gives a
  writable memoryview of the first n bytes."""
  def __init__(self, buf: "Buffer"): self._buf = buf
  def as_buffer(self, n: int) -> memoryview:
    if n > self._buf._alloc: raise IndexError(f"as_buffer({n}) past the end of a {self._buf._length}-byte buffer")
    return memoryview(self._buf._mm)[:n]
  def __getitem__(self, i): return self._buf._mm[i]

# Python's mmap keeps a duplicate of the descriptor unless told not to (3.13 on): one descriptor a buffer, not two
_UNTRACKED = {"trackfd": False} if sys.version_info >= (3, 13) else {}

def _refuse_past_descriptor_limit(e: BaseException) -> None:
  """EMFILE raised as the limit it is (the caller re-raises any other error as it is)."""
  if not isinstance(e, OSError) or e.errno != errno.EMFILE: return
  import resource   # Unix only, as memfd is
  raise MetalLimitError(f"the software Metal device holds a file descriptor per live buffer, and this process has reached its limit "
                         f"of {resource.getrlimit(resource.RLIMIT_NOFILE)[0]} (ulimit -n): drop buffers, or raise the hard limit") from e

class Buffer(NSObject):
  _ids = itertools.count(1)
  def __init__(self, device: "SoftwareDevice", length: int, options: int):
    self._device, self._length, self._options = device, int(length), int(options)
    self._id = next(self._ids)
    self._alloc = max(self._length, 1)
    try: self._fd = os.memfd_create(f"alloy-mtl-buffer-{self._id}")
    except OSError as e:
      _refuse_past_descriptor_limit(e)
      raise
    try:
      os.ftruncate(self._fd, self._alloc)
      self._mm = mmap.mmap(self._fd, self._alloc, **_UNTRACKED)
    except BaseException as e:
      os.close(self._fd)
      _refuse_past_descriptor_limit(e)
      raise
  def contents(self): return Contents(self)
  def length(self): return self._length
  def allocatedSize(self): return self._alloc
  def device(self): return self._device
  def storageMode(self): return (self._options >> 4) & 0xF
  def resourceOptions(self): return self._options
  def didModifyRange_(self, r): pass
  @property
  def finalized(self) -> bool:
    """Not Metal's: the finaliser ran and closed the memory. The cycle collector can run it on a buffer that another
    finaliser of the same cycle then keeps alive (an allocator's cache); such a buffer cannot be used again."""
    return self._fd is None
  def gpuAddress(self) -> int:
    """Host address of the mapping (the worker maps the same memory at its own address)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(self._mm))
  def __del__(self):
    fd = getattr(self, "_fd", None)
    if fd is None: return
    self._fd = None
    try:
      os.close(fd)
      HOST.buffer_freed(self._id)
    except Exception: pass   # no worker any more; or at interpreter exit, when module globals (os, HOST) are gone

class Function(NSObject):
  def __init__(self, library: "Library", name: str): self._library, self._name = library, name
  def name(self): return self._name
  def device(self): return self._library._device
  def functionType(self): return 3  # MTLFunctionTypeKernel

class Library(NSObject):
  def __init__(self, device: "SoftwareDevice", data: bytes):
    self._device, self._data = device, data
    self._info = compiler.library_info(data)
    self._so_path = compiler.shared_object_path(data)
  def functionNames(self): return list(self._info.entries)
  def device(self): return self._device
  def newFunctionWithName_(self, name: str): return Function(self, str(name)) if str(name) in self._info.entries else None

class ComputePipelineState(NSObject):
  _ids = itertools.count(1)
  def __init__(self, device: "SoftwareDevice", fn: Function, tg_memory: int):
    self._id = next(self._ids)
    self._device, self._function, self._name = device, fn, fn._name
    lib = fn._library
    self._so_path, self._fiber = lib._so_path, lib._info.uses_sync
    self._nargs, self._tg_memory = lib._info.entries[fn._name], tg_memory
    self._writes = lib._info.writes.get(fn._name, 0xFFFFFFFF)   # bit i: slot i may be written (unknown: every slot)
    # bit i: the kernel may access slot i (its positional arguments and declared [[buffer(n)]] slots; unknown: every slot)
    slots = lib._info.buffer_slots.get(fn._name)
    self._slots = 0xFFFFFFFF if slots is None else slots | ((1 << self._nargs) - 1)
  def maxTotalThreadsPerThreadgroup(self): return MAX_THREADS_PER_THREADGROUP
  def threadExecutionWidth(self): return SIMD_WIDTH
  def staticThreadgroupMemoryLength(self): return self._tg_memory
  def supportIndirectCommandBuffers(self): return True
  def device(self): return self._device
  def gpuResourceID(self): return self._id
  def __repr__(self): return f"<software MTLComputePipelineState {self._name!r} mode={'fiber' if self._fiber else 'loop'}>"
