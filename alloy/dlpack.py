"""DLPack: CPU and CUDA tensors handed to other frameworks (PyTorch, NumPy, JAX, CuPy) without a copy, and theirs taken in.

Export (`Tensor.__dlpack__`) hands out a DLManagedTensor over the tensor's own buffer. The struct holds the Buffer,
so alloy neither frees nor reuses that memory until the consumer calls the deleter (or the capsule dies unused); the
deleter and the capsule's destructor are C (dlpack.c), since they run where Python code cannot.
Before handing it out, the device finishes the work that writes the buffer, so any stream the consumer uses sees it.

Import (`from_dlpack`) copies: alloy's buffers belong to its allocators, which reuse them once dropped, so foreign
memory cannot become one. A CUDA producer is asked to order its work before alloy's stream, and the copy is device
to device; a CPU array (bfloat16 too, which NumPy cannot take) is copied into a CPU buffer.
The structures follow dlpack.h (version 0.8, the unversioned capsule every consumer accepts).
"""
from __future__ import annotations
import ctypes, functools
from pathlib import Path
import numpy as np
from alloy import dtype as dt
from alloy.dtype import DType
from alloy.runtime.buffer import Buffer
from alloy.runtime.registry import get_device

class DLDevice(ctypes.Structure): _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]
class DLDataType(ctypes.Structure): _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]
class DLTensor(ctypes.Structure):
  _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
              ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]
class DLManagedTensor(ctypes.Structure): pass
DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]

KDL_CPU, KDL_CUDA = 1, 2
CODES = {"i": 0, "u": 1, "f": 2, "b": 6}   # kDLInt, kDLUInt, kDLFloat, kDLBool; bfloat16 is kDLBfloat, 4
NAME, USED = b"dltensor", b"used_dltensor"

_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype, _capsule_new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
_capsule_rename = ctypes.pythonapi.PyCapsule_SetName
_capsule_rename.restype, _capsule_rename.argtypes = ctypes.c_int, [ctypes.py_object, ctypes.c_char_p]
_incref = ctypes.pythonapi.Py_IncRef
_incref.restype, _incref.argtypes = None, [ctypes.py_object]

SOURCE = Path(__file__).with_name("dlpack.c")

@functools.lru_cache(None)
def callbacks() -> tuple[int, int]:
  """(the deleter's address, the capsule destructor's address) from dlpack.c, built once by the CPU device's compiler."""
  cpu = get_device("CPU")
  lib = cpu.load("alloy_dlpack_init", cpu.compiler.compile_cached(SOURCE.read_text())).lib
  address = lambda f: ctypes.cast(f, ctypes.c_void_p).value
  lib.alloy_dlpack_init.argtypes = [ctypes.c_void_p] * 5
  lib.alloy_dlpack_init(*[address(getattr(ctypes.pythonapi, n)) for n in ("PyCapsule_IsValid", "PyCapsule_GetPointer",
                                                                          "PyGILState_Ensure", "PyGILState_Release", "Py_DecRef")])
  return address(lib.alloy_dlpack_delete), address(lib.alloy_dlpack_capsule_freed)

def _dl_dtype(d: DType) -> DLDataType:
  if d is dt.bfloat16: return DLDataType(4, 16, 1)
  return DLDataType(CODES[d.kind], 8 * d.itemsize, 1)

def _alloy_dtype(code: int, bits: int, lanes: int) -> DType:
  if lanes != 1: raise BufferError(f"DLPack: vector dtypes (lanes={lanes}) are not supported")
  if (code, bits) == (4, 16): return dt.bfloat16
  kind = {v: k for k, v in CODES.items()}.get(code)
  if kind is None: raise BufferError(f"DLPack: dtype code {code} is not supported")
  return dt.to_dtype("bool" if kind == "b" else np.dtype(f"{kind}{bits // 8}"))

def device_of(device: str) -> tuple[int, int]:
  """(DLPack device type, index) of an alloy device that can export."""
  base, _, index = device.partition(":")
  if base == "CPU": return (KDL_CPU, 0)
  if base == "CUDA": return (KDL_CUDA, int(index or 0))
  raise BufferError(f"DLPack export is implemented for CPU and CUDA tensors, this one is on {device}")

def export(buf: Buffer, shape: tuple, device: str):
  """A DLPack capsule over `buf` (contiguous, holding `shape`), once the device has finished writing it."""
  device_type, index = device_of(device)
  dev = get_device(device)
  dev.synchronize()
  pointer = buf.handle.ctypes.data if device_type == KDL_CPU else int(buf.handle)
  strides = [1] * len(shape)
  for k in range(len(shape) - 2, -1, -1): strides[k] = strides[k + 1] * shape[k + 1]
  shape_arr, strides_arr = (ctypes.c_int64 * len(shape))(*shape), (ctypes.c_int64 * len(shape))(*strides)
  managed = DLManagedTensor()
  managed.dl_tensor = DLTensor(pointer, DLDevice(device_type, index), len(shape), _dl_dtype(buf.dtype),
                               ctypes.cast(shape_arr, ctypes.POINTER(ctypes.c_int64)), ctypes.cast(strides_arr, ctypes.POINTER(ctypes.c_int64)), 0)
  delete, capsule_freed = callbacks()
  holder = (managed, shape_arr, strides_arr, buf)   # alive, through the reference taken here, until the deleter runs
  _incref(holder)
  managed.manager_ctx, managed.deleter = id(holder), ctypes.cast(delete, DELETER)
  return _capsule_new(ctypes.addressof(managed), NAME, capsule_freed)

def import_array(x) -> tuple[Buffer, tuple, str]:
  """Copy a DLPack producer's array into a new alloy buffer: on its GPU (device to device) for CUDA, else on the CPU.
  Returns (buffer, shape, device name)."""
  device_type, index = x.__dlpack_device__()
  if device_type not in (KDL_CPU, KDL_CUDA): raise BufferError(f"from_dlpack: DLPack device type {device_type} is not supported")
  name = "CPU" if device_type == KDL_CPU else "CUDA" if index == 0 else f"CUDA:{index}"
  dev = get_device(name)
  # a CUDA producer makes alloy's stream wait for its work; a CPU producer's memory is ready now
  capsule = x.__dlpack__(stream=int(dev.stream)) if device_type == KDL_CUDA else x.__dlpack__()
  managed = DLManagedTensor.from_address(_capsule_pointer(capsule, NAME))
  t = managed.dl_tensor
  shape = tuple(t.shape[k] for k in range(t.ndim))
  d = _alloy_dtype(t.dtype.code, t.dtype.bits, t.dtype.lanes)
  compact = [1] * len(shape)
  for k in range(len(shape) - 2, -1, -1): compact[k] = compact[k + 1] * shape[k + 1]
  if t.strides and any(t.strides[k] != compact[k] for k in range(t.ndim) if shape[k] != 1):
    raise BufferError("from_dlpack: the array is not contiguous; make it contiguous first (e.g. .contiguous())")
  n = int(np.prod(shape, dtype=np.int64))
  buf = Buffer(name, n, d)
  if n and device_type == KDL_CUDA:
    dev.allocator.transfer(buf.handle, t.data + t.byte_offset, n * d.itemsize)
    dev.synchronize()                    # the producer's memory is released below: the copy must have landed
  elif n:   # copyin: a reused buffer waits for the queued launches that may still read it
    dev.allocator.copyin(buf.handle, memoryview((ctypes.c_uint8 * (n * d.itemsize)).from_address(t.data + t.byte_offset)))
  _capsule_rename(capsule, USED)
  if managed.deleter: managed.deleter(ctypes.pointer(managed))
  return buf, shape, name
