"""CUDAProgram: a kernel loaded from a cubin, its limits checked per launch shape, launched on the device's stream;
ParamBlock: the kernel parameters of one launch, packed where cuLaunchKernel (and a graph node) reads them."""
from __future__ import annotations
import ctypes, struct, sys
from typing import TYPE_CHECKING
from cuda.bindings import driver
from alloy.helpers import DEBUG
from alloy.renderer.cuda import MAP_DTYPES
from alloy.renderer.cuda_wgmma import TENSOR_MAPS_SYMBOL, TensorMapSpec
from alloy.runtime.device import Program
from alloy.runtime.cuda.driver import CONTEXT_ERRORS, SUCCESS, CUDAError, check, tls
from alloy.runtime.cuda.tools import disassemble
if TYPE_CHECKING: from alloy.runtime.cuda import CUDADevice

DYNAMIC_SHARED_SYMBOL = b"alloy_dynamic_shared_bytes"   # extern "C" __device__ int: the bytes every launch gets

def _declared_dynamic_shared(module) -> int:
  """The dynamic shared memory a module's kernels ask for (the tensor-core tiles' pipeline buffers), declared as an int
  DYNAMIC_SHARED_SYMBOL in it, read once at load; 0 where it declares none."""
  err, ptr, size = driver.cuModuleGetGlobal(module, DYNAMIC_SHARED_SYMBOL)
  if err != SUCCESS or size != 4: return 0
  out = ctypes.c_int32(0)
  check(driver.cuMemcpyDtoH(ctypes.addressof(out), ptr, 4), "cuMemcpyDtoH(alloy_dynamic_shared_bytes)")
  return out.value

def _declared_tensor_maps(module) -> tuple | None:
  """((TensorMapSpec, TensorMapSpec), ((slot, byte offset), (slot, byte offset))) of a module whose kernel reads its
  operands through tensor maps (a Lowerer WGMMA tile, renderer/cuda.py's tensor_map_symbol), None for any other."""
  err, ptr, size = driver.cuModuleGetGlobal(module, TENSOR_MAPS_SYMBOL.encode())
  if err != SUCCESS: return None
  words = (ctypes.c_int64 * (size // 8))()
  check(driver.cuMemcpyDtoH(ctypes.addressof(words), ptr, size), "cuMemcpyDtoH(alloy_tensor_maps)")
  return tensor_maps_of(list(words))

def tensor_maps_of(words: list) -> tuple:
  """TENSOR_MAPS_SYMBOL's words (renderer/cuda.py's tensor_map_symbol) as ((TensorMapSpec, ...), ((slot, byte offset), ...))."""
  specs, operands = [], []
  for at in range(0, len(words), 11):
    code, d0, d1, d2, s0, s1, b0, b1, b2, slot, offset = words[at:at + 11]
    specs.append(TensorMapSpec(MAP_DTYPES[code], (d0, d1, d2), (s0, s1), (b0, b1, b2)))
    operands.append((slot, offset))
  return tuple(specs), tuple(operands)

class ParamBlock:
  """Kernel parameter storage for one (nbuffers, nscalars) shape: a ctypes buffer the values are packed into
  (pointers as 8 bytes, then int32 scalars), and a void** array pointing at each value, whose address (`addr`)
  is cuLaunchKernel's kernelParams. (Passing one packed buffer through `extra` instead measured no faster.)"""
  def __init__(self, nbuf: int, nscal: int):
    self.nbuf, self.nscal = nbuf, nscal
    self.packer = struct.Struct("<" + "Q" * nbuf + "i" * nscal)
    self.storage = ctypes.create_string_buffer(max(self.packer.size, 8))
    self.pack_into = self.packer.pack_into
    base = ctypes.addressof(self.storage)
    self.offsets = [8 * i for i in range(nbuf)] + [8 * nbuf + 4 * j for j in range(nscal)]
    self.ptrs = (ctypes.c_void_p * max(len(self.offsets), 1))(*[base + o for o in self.offsets])
    self.addr = ctypes.addressof(self.ptrs) if self.offsets else 0
  def pack(self, buffers, scalars):
    try: self.pack_into(self.storage, 0, *buffers, *scalars)
    except struct.error:   # CUdeviceptr objects, numpy ints, ...: convert and retry
      self.pack_into(self.storage, 0, *[int(b) for b in buffers], *[int(s) for s in scalars])

class CUDAProgram(Program):
  """A kernel loaded from a cubin. __call__(buffers, scalars, global_size=blocks, local_size=threads) launches
  on the device's stream and returns at once; wait=True blocks and returns device seconds (CUDA events).
  Two hooks for kernels whose parameters are more than their buffers and scalars (runtime/cuda/tensor_map.py):
  `param_block` makes the parameter storage every launch path packs (eager, graphs, launch lists), and
  `dynamic_shared` (what the module declares, else 0) is the shared memory a launch gets where none is given."""
  dynamic_shared = 0
  tensor_maps = None   # (map specs, operands) where the module declares tensor maps (_declared_tensor_maps)
  encode = None        # the OperandMaps encoding them, made with the first parameter block
  def __init__(self, device: "CUDADevice", name: str, binary: bytes):
    self.device, self.name, self.binary = device, name, binary
    device.activate()
    if device.retired: device.unload_retired()
    if DEBUG >= 6 and (sass := disassemble(binary)): print(sass, file=sys.stderr)
    self.module = check(driver.cuModuleLoadData(binary), f"cuModuleLoadData({name})")
    self.func = check(driver.cuModuleGetFunction(self.module, name.encode()), f"cuModuleGetFunction({name})")
    attr = lambda a: check(driver.cuFuncGetAttribute(a, self.func), "cuFuncGetAttribute")
    A = driver.CUfunction_attribute
    self.max_threads = attr(A.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
    self.static_shared = attr(A.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
    self.max_dynamic_shared = attr(A.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    self.num_regs = attr(A.CU_FUNC_ATTRIBUTE_NUM_REGS)
    self.local_bytes = attr(A.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)
    self.param_layout = self._param_layout()
    self.dynamic_shared = _declared_dynamic_shared(self.module)
    self.tensor_maps = _declared_tensor_maps(self.module)
    self._blocks: dict[tuple[int, int], ParamBlock] = {}
    self._gs = self._ls = None          # the last (validated) launch dimensions as given
    self.g3 = self.l3 = (1, 1, 1)
    self._shared = 0
    self.launch_dims = (self.func, 1, 1, 1, 1, 1, 1, 0)   # func, grid xyz, block xyz, dynamic shared bytes
    self._blk = ParamBlock(0, 0)                           # the block of the last launch's parameter shape

  def __del__(self):
    try: self.device.retire(self.module)   # unloaded once the launches queued until now have run
    except Exception: pass                # interpreter shutdown, or the constructor failed before the module loaded

  def _param_layout(self) -> tuple[tuple[int, int], ...] | None:
    """(offset, size) of each kernel parameter (cuFuncGetParamInfo, driver >= 12.4), or None if unknown."""
    layout = []
    for i in range(4096):
      try: err, offset, size = driver.cuFuncGetParamInfo(self.func, i)
      except Exception: return None
      if err != SUCCESS: return tuple(layout) if err == driver.CUresult.CUDA_ERROR_INVALID_VALUE else None
      layout.append((offset, size))
    return tuple(layout)

  def param_block(self, nbuf: int, nscal: int) -> ParamBlock:
    """Fresh parameter storage for launches of nbuf buffers and nscal scalars (checked against the kernel's); with the
    tensor maps' pointer after the buffers where the module declares maps."""
    if self.tensor_maps is not None:
      from alloy.runtime.cuda.tensor_map import OperandMaps, TensorMapParamBlock   # that module builds on this one
      if self.encode is None: self.encode = OperandMaps(*self.tensor_maps)
      blk = TensorMapParamBlock(self.device.allocator, self.encode, nbuf, nscal)
    else: blk = ParamBlock(nbuf, nscal)
    self.check_params(blk)
    return blk

  def check_params(self, blk: ParamBlock) -> None:
    if self.param_layout is None: return
    want = tuple(zip(blk.offsets, (8,) * (len(blk.offsets) - blk.nscal) + (4,) * blk.nscal))
    if want != self.param_layout:
      raise ValueError(f"{self.name}: takes parameters at (offset, size) {self.param_layout}, given {blk.nbuf} buffers "
                       f"(8 bytes) and {blk.nscal} int32 scalars (4 bytes) laid out as {want}")

  def _block(self, nbuf: int, nscal: int) -> ParamBlock:
    blk = self._blocks[(nbuf, nscal)] = self.param_block(nbuf, nscal)
    return blk

  def set_dims(self, global_size, local_size, shared: int | None = None) -> None:
    """Check a launch shape against the function's and the device's limits; remember it once valid. shared: dynamic
    shared-memory bytes (default: what the module declares, DYNAMIC_SHARED_SYMBOL)."""
    if shared is None: shared = self.dynamic_shared
    g3 = tuple(int(x) for x in global_size) + (1,) * (3 - len(global_size))
    l3 = tuple(int(x) for x in local_size) + (1,) * (3 - len(local_size))
    if len(g3) != 3 or len(l3) != 3: raise ValueError(f"{self.name}: global_size and local_size take at most 3 dimensions")
    lim = self.device.limits
    threads = l3[0] * l3[1] * l3[2]
    if threads > self.max_threads:
      raise ValueError(f"{self.name}: {threads} threads per block (local_size {l3}) exceeds this kernel's limit "
                       f"CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK={self.max_threads} ({self.num_regs} registers per thread)")
    for d, axis in enumerate("xyz"):
      if not 1 <= l3[d] <= lim["block"][d]:
        raise ValueError(f"{self.name}: local_size[{d}]={l3[d]} outside 1..{lim['block'][d]} (max block dim {axis})")
      if not 1 <= g3[d] <= lim["grid"][d]:
        raise ValueError(f"{self.name}: global_size[{d}]={g3[d]} blocks outside 1..{lim['grid'][d]} (max grid dim {axis})")
    if shared < 0 or self.static_shared + shared > lim["shared_optin"]:
      raise ValueError(f"{self.name}: {self.static_shared} static + {shared} dynamic bytes of shared memory exceeds the "
                       f"per-block limit {lim['shared_optin']} (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)")
    if shared > self.max_dynamic_shared:
      check(driver.cuFuncSetAttribute(self.func, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared),
             "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
      self.max_dynamic_shared = shared
    self._gs, self._ls, self.g3, self.l3, self._shared = global_size, local_size, g3, l3, shared
    self.launch_dims = (self.func, *g3, *l3, shared)

  def __call__(self, buffers, scalars=(), global_size=(1, 1, 1), local_size=(1, 1, 1), wait: bool = False, outs: int = 1,
               shared: int | None = None) -> float | None:
    dev = self.device
    if tls.__dict__.get("ctx") is not dev.ctx: dev.activate()
    with dev.submitting:   # threads take turns: the parameter block, the launch shape and the event ring are shared
      if shared is None: shared = self.dynamic_shared
      if global_size != self._gs or local_size != self._ls or shared != self._shared: self.set_dims(global_size, local_size, shared)
      blk = self._blk
      if blk.nbuf != len(buffers) or blk.nscal != len(scalars):
        blk = self._blk = self._blocks.get((len(buffers), len(scalars))) or self._block(len(buffers), len(scalars))
      try: blk.pack_into(blk.storage, 0, *buffers, *scalars)
      except struct.error: blk.pack(buffers, scalars)
      if wait: driver.cuEventRecord(dev.t0, dev.stream)
      err, = driver.cuLaunchKernel(*self.launch_dims, dev.stream, blk.addr, 0)
      if err in CONTEXT_ERRORS:   # our context is no longer current: make it so and launch again
        dev.activate()
        if wait: driver.cuEventRecord(dev.t0, dev.stream)
        err, = driver.cuLaunchKernel(*self.launch_dims, dev.stream, blk.addr, 0)
      if err != SUCCESS: raise CUDAError(err, f"cuLaunchKernel({self.name}, grid={self.g3}, block={self.l3})")
      # the output buffers wait for the event that closes this run of launches (encoder.py)
      enc = dev.encoder
      unrecorded = enc.unrecorded
      for b in (buffers[:outs] if outs != 1 else (buffers[0],) if buffers else ()): unrecorded[b if type(b) is int else int(b)] = None
      if enc.encoded(self.name, 0, False) or wait: enc.commit()
      if wait: return dev.elapsed_since_t0()
    return None
