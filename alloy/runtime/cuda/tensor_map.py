"""Tensor maps (CUtensorMap, the bulk tensor copy engine's 128-byte descriptors of a global tensor) and the launch
of a kernel that reads its operands through them (renderer/cuda_wgmma.py's Hopper matmul).

Where the maps live: in a small device buffer, passed as one more pointer parameter, not as `__grid_constant__`
parameters. A map holds its tensor's address, so it is encoded per launch's operands anyway; in device memory it
fits the runtime's parameter blocks (8-byte pointers and int32 words, checked against cuFuncGetParamInfo), a CUDA
graph node keeps a pointer to it, and the cost is one `prefetch.tensormap` per block (the maps then sit in the
descriptor cache). A map is written by a host copy on the kernel's stream, so it has landed before the kernel
starts. `TensorMapKernel` keeps the map buffers of the last few operand pairs, so a loop over the same tensors
encodes and copies nothing."""
from __future__ import annotations
import collections, ctypes, functools
from typing import TYPE_CHECKING
from cuda.bindings import driver
from alloy.renderer.cuda_wgmma import TensorMapSpec, WGMMAGemm, WGMMAKernel, render_wgmma
from alloy.runtime.cuda.compiler import CUDACompiler
from alloy.runtime.cuda.driver import check
from alloy.runtime.cuda.program import CUDAProgram
if TYPE_CHECKING: from alloy.runtime.cuda import CUDADevice

MAP_BYTES = 128
ELEMENT_TYPES = {"float16": driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                 "bfloat16": driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16}

def encode_tensor_map(spec: TensorMapSpec, address: int) -> bytes:
  """cuTensorMapEncodeTiled for a tensor at `address`: 128-byte swizzle, zero fill outside the tensor."""
  if address % 16: raise ValueError(f"tensor map: address {address:#x} is not 16-byte aligned")
  rank = len(spec.dims)
  tmap = check(driver.cuTensorMapEncodeTiled(
    ELEMENT_TYPES[spec.dtype], rank, address, [driver.cuuint64_t(d) for d in spec.dims],
    [driver.cuuint64_t(s) for s in spec.strides], [driver.cuuint32_t(b) for b in spec.box], [driver.cuuint32_t(1)] * rank,
    driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
    driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
    driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), f"cuTensorMapEncodeTiled({spec})")
  raw = bytes(ctypes.string_at(tmap.getPtr(), MAP_BYTES))
  assert len(raw) == MAP_BYTES
  return raw

class TensorMapKernel:
  """A compiled WGMMAKernel on one device: __call__(out, a, b) launches it on the device's stream with the tensor
  maps of a and b (device pointers), encoded and copied once per operand pair (the last `keep` pairs are kept)."""
  def __init__(self, device: "CUDADevice", kernel: WGMMAKernel, binary: bytes, keep: int = 16):
    self.device, self.kernel, self.keep = device, kernel, keep
    self.program = CUDAProgram(device, kernel.name, binary)
    self.maps: collections.OrderedDict[tuple[int, int], int] = collections.OrderedDict()   # (a, b) -> map buffer

  def map_buffer(self, a: int, b: int) -> int:
    if (buf := self.maps.get((a, b))) is not None:
      self.maps.move_to_end((a, b))
      return buf
    data = encode_tensor_map(self.kernel.maps[0], a) + encode_tensor_map(self.kernel.maps[1], b)
    alloc = self.device.allocator
    buf = alloc.alloc(len(data))
    alloc.copyin(buf, memoryview(data))
    self.maps[(a, b)] = buf
    if len(self.maps) > self.keep:
      # freed buffers are reused by later allocations only after the stream has passed this point (the LRU
      # allocator hands a freed handle out again for work queued later on the same stream)
      _, old = self.maps.popitem(last=False)
      alloc.free(old, 2 * MAP_BYTES)
    return buf

  def __call__(self, out: int, a: int, b: int, wait: bool = False) -> float | None:
    k = self.kernel
    return self.program([out, a, b, self.map_buffer(int(a), int(b))], (), k.grid, k.block, wait=wait, shared=k.shared)

  def __del__(self):
    try:
      for buf in self.maps.values(): self.device.allocator.free(buf, 2 * MAP_BYTES)
    except Exception: pass

@functools.lru_cache(None)
def arch_compiler(target: str) -> CUDACompiler:
  """The compiler for the target's architecture-specific features (sm_90 -> sm_90a: wgmma, setmaxnreg)."""
  return CUDACompiler(target + "a")

def build_wgmma(device: "CUDADevice", gemm: WGMMAGemm) -> TensorMapKernel:
  """Render, compile (disk-cached) and load the Hopper matmul for gemm on a device of compute capability 9.0."""
  if device.compute_capability != (9, 0):
    raise ValueError(f"the wgmma kernel needs compute capability 9.0 (Hopper), {device} has {device.compute_capability}")
  kernel = render_wgmma(gemm)
  return TensorMapKernel(device, kernel, arch_compiler(device.target).compile_cached(kernel.source))
