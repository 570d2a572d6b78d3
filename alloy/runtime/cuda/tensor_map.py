"""Tensor maps (CUtensorMap, the bulk tensor copy engine's 128-byte descriptors of a global tensor) and the launch
of a kernel that reads its operands through them (renderer/cuda_wgmma.py's Hopper matmul).

Where the maps live: in a small device buffer, passed as one more pointer parameter, not as `__grid_constant__`
parameters. A map holds its tensor's address, so it is encoded per launch's operands anyway; in device memory it
fits the runtime's parameter blocks (8-byte pointers and int32 words, checked against cuFuncGetParamInfo), a CUDA
graph node keeps a pointer to it, and the cost is one `prefetch.tensormap` per block (the maps then sit in the
descriptor cache). A map is written by a host copy on the kernel's stream, so it has landed before the kernel
starts. Each parameter block (one per launch shape of an eager program, one per launch of a graph or launch list)
owns its map buffer and rewrites it only when its operands change, so a loop over the same tensors encodes and
copies nothing, and a rebound graph launch gets maps of its new operands."""
from __future__ import annotations
import collections, ctypes, functools
from typing import TYPE_CHECKING
from cuda.bindings import driver
from alloy.renderer.cuda_wgmma import TensorMapSpec, WGMMAGemm, WGMMAKernel, render_wgmma
from alloy.runtime.cuda.compiler import CUDACompiler
from alloy.runtime.cuda.driver import check
from alloy.runtime.cuda.program import CUDAProgram, ParamBlock
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

class OperandMaps:
  """The two tensor maps of a kernel's operands as bytes, for the buffers of a launch: `operands` gives, for A and
  B, the buffer slot and the byte offset of the operand's first element in it. The last 256 pairs are kept (host
  bytes: cheap to drop)."""
  def __init__(self, specs: tuple[TensorMapSpec, ...], operands: tuple):
    self.specs, self.operands = specs, operands
    self.encodings: collections.OrderedDict[tuple, bytes] = collections.OrderedDict()
  def key(self, bufs) -> tuple: return tuple(bufs[slot] + offset for slot, offset in self.operands)
  def __call__(self, key: tuple) -> bytes:
    if (data := self.encodings.get(key)) is None:
      data = self.encodings[key] = b"".join(encode_tensor_map(spec, address) for spec, address in zip(self.specs, key))
      if len(self.encodings) > 256: self.encodings.popitem(last=False)
    return data

class TensorMapParamBlock(ParamBlock):
  """The parameters of one launch of a TensorMapProgram: its buffers, then the address of this block's own map
  buffer (two tensor maps, 256 bytes of device memory), then its scalars. Packing new operand addresses re-encodes
  the maps and copies them in on the device's stream: after the launches that read the old ones, before the next
  (an eager launch, a graph replay, a launch list's), so no launch reads maps of another's operands.
  It holds the allocator and the encoder, never its program: a program holds its blocks, and a cycle between them
  would leave both to the cyclic collector, whose __del__ can then run inside the allocator's lock (a deadlock)."""
  def __init__(self, allocator, encode: OperandMaps, nbuf: int, nscal: int):
    super().__init__(nbuf + 1, nscal)
    self.nbuf, self.allocator, self.encode, self.bound = nbuf, allocator, encode, None   # nbuf: the buffers a launch gives
    self.maps = allocator.alloc(2 * MAP_BYTES)
    del self.pack_into   # ParamBlock's instance attribute (the packer's): launches then call the method below

  def pack_into(self, storage, offset: int, *values) -> None:
    bufs = tuple(b if type(b) is int else int(b) for b in values[:self.nbuf])
    if (key := self.encode.key(bufs)) != self.bound:   # the operands moved (a new output alone changes no map)
      self.allocator.copyin(self.maps, memoryview(self.encode(key)))
      self.bound = key
    self.packer.pack_into(storage, offset, *bufs, self.maps, *values[self.nbuf:])
  def pack(self, buffers, scalars) -> None: self.pack_into(self.storage, 0, *buffers, *[int(s) for s in scalars])

  def __del__(self):
    try: self.allocator.free(self.maps, 2 * MAP_BYTES)
    except Exception: pass   # interpreter shutdown

class TensorMapProgram(CUDAProgram):
  """A compiled WGMMAKernel: launched as any CUDAProgram (buffers in its kernel's slot order, no scalars), on every
  path (eager, CUDA graphs, launch lists), with its dynamic shared memory and the tensor maps of its operands
  (`operands`: see OperandMaps)."""
  def __init__(self, device: "CUDADevice", kernel: WGMMAKernel, binary: bytes, operands=((1, 0), (2, 0))):
    super().__init__(device, kernel.name, binary)
    # its maps as CUDAProgram takes a module's own (param_block): the WGMMAKernel carries them
    self.kernel, self.dynamic_shared, self.tensor_maps = kernel, kernel.shared, (kernel.maps, operands)

  def launch(self, buffers, wait: bool = False) -> float | None:
    return self(buffers, (), self.kernel.grid, self.kernel.block, wait=wait)

@functools.lru_cache(None)
def arch_compiler(target: str) -> CUDACompiler:
  """The compiler for the target's architecture-specific features (sm_90 -> sm_90a: wgmma, setmaxnreg)."""
  return CUDACompiler(target + "a")

def build_wgmma(device: "CUDADevice", gemm: WGMMAGemm) -> TensorMapProgram:
  """Render, compile (disk-cached) and load the Hopper matmul for gemm on a device of compute capability 9.0."""
  if device.compute_capability != (9, 0):
    raise ValueError(f"the wgmma kernel needs compute capability 9.0 (Hopper), {device} has {device.compute_capability}")
  kernel = render_wgmma(gemm)
  return TensorMapProgram(device, kernel, arch_compiler(device.target).compile_cached(kernel.source))
