"""The CUDA device: NVRTC compiler, driver-API allocator, programs and graphs through cuda-bindings.

Stages (see device.py): the device renders PTX where the PTX renderer covers a kernel, else CUDA C (renderer/ptx.py);
CUDACompiler turns either into a cubin for one architecture (nvJitLink's ptxas, or NVRTC) and needs no GPU;
CUDAProgram loads a cubin (cuModuleLoadData) and launches it on the device's one stream; CUDAAllocator
owns device memory and the host copies; CUDAGraph replays a captured list of launches as one graph.

Ordering: all device work goes on one non-blocking stream, so it runs in submission order. Every launch
records an event and remembers it for the buffers it writes (the first `outs` buffers); copyout waits on
that event only, so reading a buffer does not wait for unrelated later work.
"""
from __future__ import annotations
import ctypes, functools, glob, os, re, shutil, struct, subprocess, sys, tempfile, threading
from cuda.bindings import driver, nvrtc
from alloy.helpers import DEBUG, getenv
from alloy.caps import DeviceCaps
from alloy.renderer.cuda import CUDARenderer
from alloy.renderer.ptx import PTXFirstRenderer, is_ptx
from alloy.runtime.device import CompileError, Compiler, Device, DeviceOutOfMemory, LaunchList, LRUAllocator, Program
from alloy.runtime.registry import get_device

_SUCCESS = driver.CUresult.CUDA_SUCCESS
# what a launch returns when another library has made its own context current on this thread
_CONTEXT_ERRORS = (driver.CUresult.CUDA_ERROR_INVALID_CONTEXT, driver.CUresult.CUDA_ERROR_INVALID_HANDLE)
_tls = threading.local()    # the context current on this thread as last set by us: launches trust it, and on an
                            # invalid-context error ask the driver and retry (see _CONTEXT_ERRORS)
_RING_MASK = 127           # launches record events from a ring of 128; a reused event only waits longer, never less
_NVRTC_SUCCESS = nvrtc.nvrtcResult.NVRTC_SUCCESS

class CUDAError(RuntimeError):
  def __init__(self, err, what: str):
    self.err = err
    try:
      name = driver.cuGetErrorName(err)[1].decode()
      desc = driver.cuGetErrorString(err)[1].decode()
    except Exception: name, desc = str(err), ""
    super().__init__(f"{what} failed: {name} ({desc})")

def _check(ret, what: str = "CUDA call"):
  """Unwrap a cuda-bindings result tuple (err, *values): raise on error, return the values."""
  if ret[0] != _SUCCESS: raise CUDAError(ret[0], what)
  return ret[1] if len(ret) == 2 else ret[1:] if len(ret) > 2 else None

def _nvrtc_check(ret, what: str):
  if ret[0] != _NVRTC_SUCCESS:
    msg = nvrtc.nvrtcGetErrorString(ret[0])[1]
    raise RuntimeError(f"{what} failed: {msg.decode() if isinstance(msg, bytes) else msg}")
  return ret[1] if len(ret) == 2 else ret[1:] if len(ret) > 2 else None

# ---------------------------------------------------------------------------------------------------
# Compiler

@functools.lru_cache(None)
def nvrtc_version() -> tuple[int, int]:
  return tuple(_nvrtc_check(nvrtc.nvrtcVersion(), "nvrtcVersion"))

@functools.lru_cache(None)
def cuda_include_dir() -> str | None:
  """The folder holding cuda_fp16.h / cuda_bf16.h: from the nvidia wheels (nvidia-cuda-runtime), CUDA_HOME, or /usr/local/cuda."""
  try:
    from cuda import pathfinder
    if (d := pathfinder.find_nvidia_header_directory("cudart")) and os.path.exists(os.path.join(d, "cuda_fp16.h")): return d
  except Exception: pass
  candidates = []
  for p in sys.path:
    candidates += sorted(glob.glob(os.path.join(p, "nvidia", "cu1*", "include")), reverse=True)
    candidates.append(os.path.join(p, "nvidia", "cuda_runtime", "include"))
  for env in ("CUDA_HOME", "CUDA_PATH"):
    if os.environ.get(env): candidates.append(os.path.join(os.environ[env], "include"))
  candidates.append("/usr/local/cuda/include")
  for d in candidates:
    if os.path.exists(os.path.join(d, "cuda_fp16.h")): return d
  return None

def find_cuda_tool(name: str) -> str | None:
  """Path of a CUDA binary utility (cuobjdump, nvdisasm), or None."""
  if (p := shutil.which(name)): return p
  for env in ("CUDA_HOME", "CUDA_PATH"):
    if os.environ.get(env) and os.path.exists(p := os.path.join(os.environ[env], "bin", name)): return p
  if os.path.exists(p := f"/usr/local/cuda/bin/{name}"): return p
  try:
    from cuda import pathfinder
    return pathfinder.find_nvidia_binary_utility(name)
  except Exception: return None

def disassemble(cubin: bytes) -> str | None:
  """SASS of a cubin through cuobjdump (or nvdisasm), or None when neither tool is installed."""
  with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
    f.write(cubin)
    f.flush()
    for tool, args in (("cuobjdump", ["-sass"]), ("nvdisasm", ["-c"])):
      if (path := find_cuda_tool(tool)) is None: continue
      try: out = subprocess.run([path, *args, f.name], capture_output=True, text=True, timeout=60)
      except (OSError, subprocess.SubprocessError): continue
      if out.returncode == 0: return out.stdout
  return None

@functools.lru_cache(None)
def nvjitlink_version() -> tuple[int, int] | None:
  """nvJitLink's version where its library loads (pip nvidia-nvjitlink, or a CUDA toolkit's), else None."""
  try:
    from cuda.bindings import nvjitlink
    return tuple(nvjitlink.version())
  except Exception: return None

class CUDACompiler(Compiler):
  """CUDA C or PTX source -> cubin for one architecture. Needs no GPU: CUDACompiler("sm_90").
  CUDA C goes through NVRTC; PTX (text starting with .version) through nvJitLink, which runs ptxas alone."""
  def __init__(self, arch: str = "sm_90", extra_flags: tuple[str, ...] = ()):
    if not re.fullmatch(r"sm_\d+[af]?", arch): raise ValueError(f"arch must look like sm_90, got {arch!r}")
    self.arch = arch
    # IEEE-ish: no --use_fast_math (precise division/sqrt, denormals kept); FMA contraction stays on, as in nvcc.
    # -minimal: no texture, surface or device-runtime declarations to parse (kernels use none): faster compiles
    self.flags = ("-default-device", "-std=c++17", "-minimal", *extra_flags)
    self.include_dir = cuda_include_dir()
    major, minor = nvrtc_version()
    self.assembles_ptx = (linker := nvjitlink_version()) is not None
    self.identity = f"nvrtc-{major}.{minor} nvjitlink-{linker} {arch} {' '.join(self.flags)}"

  def _options(self, arch: str) -> list[bytes]:
    opts = [f"--gpu-architecture={arch}", *self.flags]
    if self.include_dir: opts.append(f"-I{self.include_dir}")
    return [o.encode() for o in opts]

  def _compile(self, source: str, arch: str, ptx: bool) -> bytes:
    prog = _nvrtc_check(nvrtc.nvrtcCreateProgram(source.encode(), b"kernel.cu", 0, [], []), "nvrtcCreateProgram")
    try:
      opts = self._options(arch)
      err, = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
      log = self._log(prog)
      if err != _NVRTC_SUCCESS: raise CompileError(log or str(err), source)
      if DEBUG >= 3 and log.strip(): print(log, file=sys.stderr)
      get_size, get = (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX) if ptx else (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)
      out = bytearray(_nvrtc_check(get_size(prog), "nvrtcGet size"))   # writable: NVRTC writes into it
      _nvrtc_check(get(prog, out), "nvrtcGet binary")
      return bytes(out)
    finally: nvrtc.nvrtcDestroyProgram(prog)

  @staticmethod
  def _log(prog) -> str:
    # a bytearray, not b" " * size: NVRTC writes into the buffer, and for an empty log (size 1) b" " * 1 is
    # Python's shared one-byte object, whose NUL then turned up in unrelated strings (a C kernel's source read
    # "floatpanel0" after an earlier CUDA compile in the same process)
    log = bytearray(_nvrtc_check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize"))
    _nvrtc_check(nvrtc.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
    return log.rstrip(b"\0").decode(errors="replace")

  def _assemble(self, source: str) -> bytes:
    from cuda.bindings import nvjitlink
    handle = nvjitlink.create(1, [f"-arch={self.arch}"])
    try:
      try:
        data = source.encode()
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel.ptx")
        nvjitlink.complete(handle)
      except nvjitlink.nvJitLinkError as e:
        log = bytearray(nvjitlink.get_error_log_size(handle))
        nvjitlink.get_error_log(handle, log)
        raise CompileError(f"ptxas (nvJitLink) failed: {e}\n{log.rstrip(bytes(1)).decode(errors='replace')}", source) from None
      out = bytearray(nvjitlink.get_linked_cubin_size(handle))
      nvjitlink.get_linked_cubin(handle, out)
      return bytes(out)
    finally: nvjitlink.destroy(handle)

  def compile(self, source: str) -> bytes:
    if is_ptx(source):
      if not self.assembles_ptx: raise CompileError("PTX needs nvJitLink to assemble: pip install nvidia-nvjitlink", source)
      return self._assemble(source)
    return self._compile(source, self.arch, ptx=False)

  def ptx(self, source: str) -> str:
    """PTX for the same architecture (compute_XY), for DEBUG output."""
    if is_ptx(source): return source
    return self._compile(source, self.arch.replace("sm_", "compute_"), ptx=True).rstrip(b"\0").decode()

# ---------------------------------------------------------------------------------------------------
# Allocator

_STAGING_CHUNK = 32 << 20   # pinned staging buffers are this big (or smaller for small copies)
_STAGING_MAX = 4            # copyin may have this many chunks in flight

class _Pinned:
  """One pinned host buffer (cuMemHostAlloc) with a byte memoryview over it, and the event of its last use."""
  def __init__(self, nbytes: int):
    self.nbytes = nbytes
    self.ptr = _check(driver.cuMemHostAlloc(nbytes, 0), "cuMemHostAlloc")
    self.view = memoryview((ctypes.c_char * nbytes).from_address(int(self.ptr))).cast("B")
    self.event = None   # recorded after the async copy that reads it; None when idle

class CUDAAllocator(LRUAllocator):
  """Device memory through cuMemAlloc; handles are ints (device pointers)."""
  def __init__(self, device: "CUDADevice", max_cached_bytes: int = getenv("ALLOY_CUDA_LRU_BYTES", 4 << 30)):
    super().__init__(max_cached_bytes)
    self.device = device
    self._in_staging: list[_Pinned] = []    # copyin chunks, oldest use first
    self._out_staging: list[_Pinned] = []   # two chunks for double-buffered copyout
    self._out_events: list = []

  def _alloc(self, nbytes: int) -> int:
    self.device._activate()
    err, ptr = driver.cuMemAlloc(max(nbytes, 1))
    if err == _SUCCESS: return int(ptr)
    if err == driver.CUresult.CUDA_ERROR_OUT_OF_MEMORY or err == driver.CUresult.CUDA_ERROR_INVALID_VALUE:
      free, total = _check(driver.cuMemGetInfo(), "cuMemGetInfo")
      if err == driver.CUresult.CUDA_ERROR_OUT_OF_MEMORY or nbytes > free:
        raise DeviceOutOfMemory(f"{self.device.name}: out of memory allocating {nbytes} bytes ({nbytes/2**30:.2f} GiB); "
                                f"{free} bytes ({free/2**30:.2f} GiB) free of {total} ({total/2**30:.2f} GiB), "
                                f"{self.cached_bytes} bytes held in the LRU cache")
    raise CUDAError(err, f"cuMemAlloc({nbytes})")

  def _free(self, handle: int, nbytes: int) -> None:
    self.device._activate()
    self.device._writers.pop(handle, None)
    _check(driver.cuMemFree(handle), "cuMemFree")

  def _staging_in(self, nbytes: int) -> _Pinned:
    """A pinned buffer of at least nbytes whose previous copy has finished."""
    for i, buf in enumerate(self._in_staging):
      if buf.nbytes >= nbytes and (buf.event is None or driver.cuEventQuery(buf.event)[0] == _SUCCESS):
        self._in_staging.append(self._in_staging.pop(i))   # most recently used last
        return buf
    if len(self._in_staging) >= _STAGING_MAX:   # all busy or too small: retire the oldest
      old = self._in_staging.pop(0)
      if old.event is not None: _check(driver.cuEventSynchronize(old.event), "cuEventSynchronize")
      if old.nbytes >= nbytes:
        self._in_staging.append(old)
        return old
      _check(driver.cuMemFreeHost(old.ptr), "cuMemFreeHost")
      if old.event is not None: driver.cuEventDestroy(old.event)
    buf = _Pinned(max(nbytes, 1 << 16))
    self._in_staging.append(buf)
    return buf

  def copyin(self, handle: int, src: memoryview) -> None:
    """Host -> device, asynchronous on the device's stream; src may be reused as soon as this returns."""
    dev = self.device
    dev._activate()
    src = memoryview(src).cast("B") if not (isinstance(src, memoryview) and src.format == "B" and src.ndim == 1) else src
    nbytes, off = src.nbytes, 0
    while off < nbytes:
      n = min(_STAGING_CHUNK, nbytes - off)
      buf = self._staging_in(n)
      buf.view[:n] = src[off:off + n]
      _check(driver.cuMemcpyHtoDAsync(handle + off, buf.ptr, n, dev.stream), "cuMemcpyHtoDAsync")
      if buf.event is None: buf.event = _check(driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
      _check(driver.cuEventRecord(buf.event, dev.stream), "cuEventRecord")
      off += n
    dev._mark_written((handle,))

  def copyout(self, dst: memoryview, handle: int) -> None:
    """Device -> host. Waits only for the last work that wrote this buffer, then copies (double-buffered)."""
    dev = self.device
    dev._activate()
    dst = memoryview(dst).cast("B") if not (isinstance(dst, memoryview) and dst.format == "B" and dst.ndim == 1) else dst
    if (ev := dev._writers.get(handle)) is not None: _check(driver.cuEventSynchronize(ev), "cuEventSynchronize")
    nbytes = dst.nbytes
    if not self._out_staging:
      self._out_staging = [_Pinned(_STAGING_CHUNK) for _ in range(2)]
      self._out_events = [_check(driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate") for _ in range(2)]
    pending = None   # (staging index, offset, size) copied on the device, not yet to dst
    off, k = 0, 0
    while off < nbytes or pending is not None:
      if off < nbytes:
        n = min(_STAGING_CHUNK, nbytes - off)
        buf = self._out_staging[k & 1]
        _check(driver.cuMemcpyDtoHAsync(buf.ptr, handle + off, n, dev.copy_stream), "cuMemcpyDtoHAsync")
        _check(driver.cuEventRecord(self._out_events[k & 1], dev.copy_stream), "cuEventRecord")
        nxt = (k & 1, off, n)
        off, k = off + n, k + 1
      else: nxt = None
      if pending is not None:
        i, o, n = pending
        _check(driver.cuEventSynchronize(self._out_events[i]), "cuEventSynchronize")
        dst[o:o + n] = self._out_staging[i].view[:n]
      pending = nxt

  def transfer(self, dst: int, src: int, nbytes: int) -> None:
    """Device -> device on the same device, asynchronous on the stream."""
    self.device._activate()
    _check(driver.cuMemcpyDtoDAsync(dst, src, nbytes, self.device.stream), "cuMemcpyDtoDAsync")
    self.device._mark_written((dst,))

  def free_staging(self) -> None:
    self.device.synchronize()
    for buf in self._in_staging + self._out_staging:
      driver.cuMemFreeHost(buf.ptr)
      if buf.event is not None: driver.cuEventDestroy(buf.event)
    self._in_staging, self._out_staging = [], []

# ---------------------------------------------------------------------------------------------------
# Program

class _ParamBlock:
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
  on the device's stream and returns at once; wait=True blocks and returns device seconds (CUDA events)."""
  def __init__(self, device: "CUDADevice", name: str, binary: bytes):
    self.device, self.name, self.binary = device, name, binary
    device._activate()
    if DEBUG >= 6 and (sass := disassemble(binary)): print(sass, file=sys.stderr)
    self.module = _check(driver.cuModuleLoadData(binary), f"cuModuleLoadData({name})")
    self.func = _check(driver.cuModuleGetFunction(self.module, name.encode()), f"cuModuleGetFunction({name})")
    attr = lambda a: _check(driver.cuFuncGetAttribute(a, self.func), "cuFuncGetAttribute")
    A = driver.CUfunction_attribute
    self.max_threads = attr(A.CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
    self.static_shared = attr(A.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
    self.max_dynamic_shared = attr(A.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    self.num_regs = attr(A.CU_FUNC_ATTRIBUTE_NUM_REGS)
    self.local_bytes = attr(A.CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)
    self.param_layout = self._param_layout()
    self._blocks: dict[tuple[int, int], _ParamBlock] = {}
    self._gs = self._ls = None          # the last (validated) launch dimensions as given
    self._g3 = self._l3 = (1, 1, 1)
    self._shared = 0
    self._launch_dims = (self.func, 1, 1, 1, 1, 1, 1, 0)   # func, grid xyz, block xyz, dynamic shared bytes
    self._blk = _ParamBlock(0, 0)                           # the block of the last launch's parameter shape

  def _param_layout(self) -> tuple[tuple[int, int], ...] | None:
    """(offset, size) of each kernel parameter (cuFuncGetParamInfo, driver >= 12.4), or None if unknown."""
    layout = []
    for i in range(4096):
      try: err, offset, size = driver.cuFuncGetParamInfo(self.func, i)
      except Exception: return None
      if err != _SUCCESS: return tuple(layout) if err == driver.CUresult.CUDA_ERROR_INVALID_VALUE else None
      layout.append((offset, size))
    return tuple(layout)

  def _check_params(self, blk: _ParamBlock) -> None:
    if self.param_layout is None: return
    want = tuple(zip(blk.offsets, (8,) * blk.nbuf + (4,) * blk.nscal))
    if want != self.param_layout:
      raise ValueError(f"{self.name}: takes parameters at (offset, size) {self.param_layout}, given {blk.nbuf} buffers "
                       f"(8 bytes) and {blk.nscal} int32 scalars (4 bytes) laid out as {want}")

  def _block(self, nbuf: int, nscal: int) -> _ParamBlock:
    blk = _ParamBlock(nbuf, nscal)
    self._check_params(blk)
    self._blocks[(nbuf, nscal)] = blk
    return blk

  def _set_dims(self, global_size, local_size, shared: int = 0) -> None:
    """Check a launch shape against the function's and the device's limits; remember it once valid."""
    g3 = tuple(int(x) for x in global_size) + (1,) * (3 - len(global_size))
    l3 = tuple(int(x) for x in local_size) + (1,) * (3 - len(local_size))
    if len(g3) != 3 or len(l3) != 3: raise ValueError(f"{self.name}: global_size and local_size take at most 3 dimensions")
    lim = self.device.limits
    threads = l3[0] * l3[1] * l3[2]
    if threads > self.max_threads:
      raise ValueError(f"{self.name}: {threads} threads per block (local_size {l3}) exceeds this kernel's limit "
                       f"CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK={self.max_threads} ({self.num_regs} registers per thread)")
    for d, axis in enumerate("xyz"):
      if not 1 <= l3[d] <= lim["block"][d]: raise ValueError(f"{self.name}: local_size[{d}]={l3[d]} outside 1..{lim['block'][d]} (max block dim {axis})")
      if not 1 <= g3[d] <= lim["grid"][d]: raise ValueError(f"{self.name}: global_size[{d}]={g3[d]} blocks outside 1..{lim['grid'][d]} (max grid dim {axis})")
    if shared < 0 or self.static_shared + shared > lim["shared_optin"]:
      raise ValueError(f"{self.name}: {self.static_shared} static + {shared} dynamic bytes of shared memory exceeds the "
                       f"per-block limit {lim['shared_optin']} (CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)")
    if shared > self.max_dynamic_shared:
      _check(driver.cuFuncSetAttribute(self.func, driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared),
             "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")
      self.max_dynamic_shared = shared
    self._gs, self._ls, self._g3, self._l3, self._shared = global_size, local_size, g3, l3, shared
    self._launch_dims = (self.func, *g3, *l3, shared)

  def __call__(self, buffers, scalars=(), global_size=(1, 1, 1), local_size=(1, 1, 1), wait: bool = False, outs: int = 1,
               shared: int = 0) -> float | None:
    dev = self.device
    if _tls.__dict__.get("ctx") is not dev.ctx: dev._activate()
    with dev.submitting:   # threads take turns: the parameter block, the launch shape and the event ring are shared
      if global_size != self._gs or local_size != self._ls or shared != self._shared: self._set_dims(global_size, local_size, shared)
      blk = self._blk
      if blk.nbuf != len(buffers) or blk.nscal != len(scalars):
        blk = self._blk = self._blocks.get((len(buffers), len(scalars))) or self._block(len(buffers), len(scalars))
      try: blk.pack_into(blk.storage, 0, *buffers, *scalars)
      except struct.error: blk.pack(buffers, scalars)
      if wait: driver.cuEventRecord(dev._t0, dev.stream)
      err, = driver.cuLaunchKernel(*self._launch_dims, dev.stream, blk.addr, 0)
      if err in _CONTEXT_ERRORS:   # our context is no longer current: make it so and launch again
        dev._activate()
        if wait: driver.cuEventRecord(dev._t0, dev.stream)
        err, = driver.cuLaunchKernel(*self._launch_dims, dev.stream, blk.addr, 0)
      if err != _SUCCESS: raise CUDAError(err, f"cuLaunchKernel({self.name}, grid={self._g3}, block={self._l3})")
      # remember which event completes the writes of the output buffers
      ev = dev._ring[dev._ring_i]
      dev._ring_i = (dev._ring_i + 1) & _RING_MASK
      driver.cuEventRecord(ev, dev.stream)
      writers = dev._writers
      for b in (buffers[:outs] if outs != 1 else (buffers[0],) if buffers else ()): writers[b if type(b) is int else int(b)] = ev
      if wait: return dev._elapsed_since_t0()
    return None

# ---------------------------------------------------------------------------------------------------
# Graph

class CUDAGraph:
  """A CUDA graph of kernel nodes, one per captured launch, in a chain (each waits for the one before).
  CUDAGraph(launches, device=None) with launches [(program, buffers, scalars, global_size, local_size), ...];
  the device defaults to the first program's.
  __call__(buffers_per_launch=None, wait=False, scalars_per_launch=None) replays it; an entry of
  buffers_per_launch (or scalars_per_launch) that is not None and differs from the last replay's updates
  that node's parameters (cuGraphExecKernelNodeSetParams). wait=True returns device seconds."""
  def __init__(self, launches: list, device: "CUDADevice | None" = None):
    if not launches: raise ValueError("a CUDA graph needs at least one launch")
    self.device = device = device if device is not None else launches[0][0].device
    device._activate()
    self.graph = _check(driver.cuGraphCreate(0), "cuGraphCreate")
    self.nodes, self.params, self.blocks, self.cur_bufs, self.cur_scalars = [], [], [], [], []
    prev = None
    for i, launch in enumerate(launches):
      prog, buffers, scalars, global_size, local_size = launch[:5]
      if not isinstance(prog, CUDAProgram) or prog.device is not device: raise ValueError(f"launch {i}: not a CUDAProgram of {device.name}")
      prog._set_dims(global_size, local_size)
      blk = _ParamBlock(len(buffers), len(scalars))   # a block of its own: replays rewrite it
      prog._check_params(blk)
      blk.pack(buffers, scalars)
      p = driver.CUDA_KERNEL_NODE_PARAMS()
      p.func = prog.func
      p.gridDimX, p.gridDimY, p.gridDimZ = prog._g3
      p.blockDimX, p.blockDimY, p.blockDimZ = prog._l3
      p.sharedMemBytes = 0
      p.kernelParams = blk.addr
      node = _check(driver.cuGraphAddKernelNode(self.graph, [prev] if prev is not None else None, 1 if prev is not None else 0, p),
                    f"cuGraphAddKernelNode({prog.name})")
      self.nodes.append(node)
      self.params.append(p)
      self.blocks.append(blk)
      self.cur_bufs.append(tuple(int(b) for b in buffers))
      self.cur_scalars.append(tuple(int(s) for s in scalars))
      prev = node
    self.exec = _check(driver.cuGraphInstantiate(self.graph, 0), "cuGraphInstantiate")
    self._written = {b for bufs in self.cur_bufs for b in bufs}

  def _update(self, i: int, buffers, scalars) -> None:
    buffers = self.cur_bufs[i] if buffers is None else tuple(int(b) for b in buffers)
    scalars = self.cur_scalars[i] if scalars is None else tuple(int(s) for s in scalars)
    if buffers == self.cur_bufs[i] and scalars == self.cur_scalars[i]: return
    if len(buffers) != len(self.cur_bufs[i]) or len(scalars) != len(self.cur_scalars[i]):
      raise ValueError(f"graph launch {i}: takes {len(self.cur_bufs[i])} buffers and {len(self.cur_scalars[i])} scalars")
    self.blocks[i].pack(buffers, scalars)
    _check(driver.cuGraphExecKernelNodeSetParams(self.exec, self.nodes[i], self.params[i]), "cuGraphExecKernelNodeSetParams")
    self.cur_bufs[i], self.cur_scalars[i] = buffers, scalars
    self._written = None   # recomputed once per replay: a set that only grew would keep every buffer ever bound

  def __call__(self, buffers_per_launch=None, wait: bool = False, scalars_per_launch=None) -> float | None:
    dev = self.device
    dev._activate()
    if buffers_per_launch is not None or scalars_per_launch is not None:
      for i in range(len(self.nodes)):
        b = buffers_per_launch[i] if buffers_per_launch is not None else None
        s = scalars_per_launch[i] if scalars_per_launch is not None else None
        if b is not None or s is not None: self._update(i, b, s)
      if self._written is None: self._written = {b for bufs in self.cur_bufs for b in bufs}
    if wait: _check(driver.cuEventRecord(dev._t0, dev.stream), "cuEventRecord")
    _check(driver.cuGraphLaunch(self.exec, dev.stream), "cuGraphLaunch")
    dev._mark_written(self._written)   # conservative: every buffer the graph touches waits for the whole graph
    return dev._elapsed_since_t0() if wait else None

  def __del__(self):
    try:
      driver.cuGraphExecDestroy(self.exec)
      driver.cuGraphDestroy(self.graph)
    except Exception: pass

# ---------------------------------------------------------------------------------------------------
# Launch list

NATIVE_LOOP = getenv("ALLOY_CUDA_NATIVE_LOOP", 1)   # 0: launch lists call cuLaunchKernel from Python, launch by launch

_LOOP_SOURCE = """#include <stdint.h>
typedef int (*launch_t)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra);
/* cuLaunchKernel (at `launch`) for n kernels in order; dims holds 7 per kernel (grid xyz, block xyz, shared bytes).
   Returns how many were launched; on a failure, the driver's error is in *err. */
int32_t alloy_cuda_launch_loop(void *launch, int32_t n, void *const *funcs, const uint32_t *dims, void *stream,
                               void *const *params, int32_t *err) {
  for (int32_t i = 0; i < n; i++) {
    const uint32_t *d = dims + 7 * i;
    int e = ((launch_t)launch)(funcs[i], d[0], d[1], d[2], d[3], d[4], d[5], d[6], stream, (void **)params[i], (void **)0);
    if (e != 0) { *err = e; return i; }
  }
  return n;
}
"""
_LOOP_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32))

def _cu_launch_kernel_address() -> int:
  """libcuda's cuLaunchKernel, for the native loop (the explicit stream makes it the same call cuda-bindings makes)."""
  return ctypes.cast(ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1").cuLaunchKernel, ctypes.c_void_p).value

@functools.lru_cache(None)
def native_launch_loop():
  """(loop, cuLaunchKernel's address): _LOOP_SOURCE built by the CPU device's C compiler, or (None, why not)."""
  try:
    cpu = get_device("CPU")
    prog = cpu.load("alloy_cuda_launch_loop", cpu.compiler.compile_cached(_LOOP_SOURCE))
    return _LOOP_TYPE(ctypes.cast(prog.fn, ctypes.c_void_p).value), _cu_launch_kernel_address()
  except Exception as e: return None, f"{type(e).__name__}: {e}"

class CUDALaunchList(LaunchList):
  """Captured launches submitted one by one (see LaunchList) with everything but cuLaunchKernel done once: launch
  dimensions checked, and a parameter block of its own packed, per launch. A call repacks only the rebound launches'
  blocks (the driver copies parameters at launch, so rewriting a block after its launch is safe), makes every
  cuLaunchKernel call from one small C loop (native_launch_loop; from Python where there is no C compiler, or with
  ALLOY_CUDA_NATIVE_LOOP=0) and records one event after the last launch: the stream runs in order, so that event
  completes every buffer the list writes."""
  def __init__(self, launches: list, device: "CUDADevice"):
    if not launches: raise ValueError("a launch list needs at least one launch")
    self.device = device
    device._activate()
    self.calls: list[tuple] = []              # cuLaunchKernel's arguments per launch
    self.blocks: list[_ParamBlock] = []
    self.cur: list[tuple] = []                # the buffers (device pointers) each launch is bound to now
    self.scalars: list[tuple] = []
    self.programs: list[CUDAProgram] = []
    for i, (prog, buffers, scalars, global_size, local_size) in enumerate(launch[:5] for launch in launches):
      if not isinstance(prog, CUDAProgram) or prog.device is not device: raise ValueError(f"launch {i}: not a CUDAProgram of {device.name}")
      if not buffers: raise ValueError(f"launch {i} ({prog.name}): no buffers; a launch writes its first")
      prog._set_dims(global_size, local_size)
      blk = _ParamBlock(len(buffers), len(scalars))
      prog._check_params(blk)
      blk.pack(buffers, scalars)
      self.calls.append((*prog._launch_dims, device.stream, blk.addr, 0))
      self.blocks.append(blk)
      self.cur.append(tuple(int(b) for b in buffers))
      self.scalars.append(tuple(int(x) for x in scalars))
      self.programs.append(prog)
    self.written = [bufs[0] for bufs in self.cur]   # as CUDAProgram: a launch writes its first buffer
    self.loop, self.launch = native_launch_loop() if NATIVE_LOOP else (None, "ALLOY_CUDA_NATIVE_LOOP=0")
    if self.loop is not None:   # the loop's arrays; blocks are repacked in place, so params never changes
      n = len(self.calls)
      self.loop_args = (self.launch, n, (ctypes.c_void_p * n)(*[int(c[0]) for c in self.calls]),
                        (ctypes.c_uint32 * (7 * n))(*[d for c in self.calls for d in c[1:8]]), int(device.stream),
                        (ctypes.c_void_p * n)(*[blk.addr for blk in self.blocks]), ctypes.byref(err := ctypes.c_int32(0)))
      self.loop_err = err

  def _rebind(self, i: int, buffers) -> None:
    cur = self.cur[i]
    if len(buffers) != len(cur): raise ValueError(f"launch {i}: takes {len(cur)} buffers, given {len(buffers)}")
    buffers = tuple(b if type(b) is int else int(b) for b in buffers)
    if buffers == cur: return
    self.blocks[i].pack(buffers, self.scalars[i])
    self.cur[i] = buffers
    self.written[i] = buffers[0]

  def __call__(self, buffers_per_launch=None, wait: bool = False) -> float | None:
    dev = self.device
    dev._activate()
    if buffers_per_launch is not None:
      for i, buffers in enumerate(buffers_per_launch):
        if buffers is not None: self._rebind(i, buffers)
    if wait: _check(driver.cuEventRecord(dev._t0, dev.stream), "cuEventRecord")
    if self.loop is not None:
      if (done := self.loop(*self.loop_args)) != len(self.calls): self._failed(done, driver.CUresult(self.loop_err.value))
    else:
      launch = driver.cuLaunchKernel
      for args in self.calls:
        err, = launch(*args)
        if err != _SUCCESS: self._failed(self.calls.index(args), err)
    dev._mark_written(self.written)
    return dev._elapsed_since_t0() if wait else None

  def _failed(self, i: int, err):
    args = self.calls[i]
    dev = self.device
    if i: dev._mark_written(self.written[:i])   # the launches before it run: later reads must wait for them
    raise CUDAError(err, f"cuLaunchKernel({self.programs[i].name}, grid={args[1:4]}, block={args[4:7]})")

# ---------------------------------------------------------------------------------------------------
# Device


def is_available() -> bool:
  """True when the driver initializes and reports at least one device; never raises."""
  try:
    if driver.cuInit(0)[0] != _SUCCESS: return False
    err, n = driver.cuDeviceGetCount()
    return err == _SUCCESS and n > 0
  except Exception: return False

class CUDADevice(Device):
  renderer = CUDARenderer()   # this instance's: PTX first where nvJitLink assembles it (see __init__)
  caps = DeviceCaps(threads=True)
  graph = None      # set to CUDAGraph below
  launch_list = CUDALaunchList

  def __init__(self, name: str = "CUDA"):
    super().__init__(name)
    self.index = int(name.partition(":")[2] or 0)
    _check(driver.cuInit(0), "cuInit")
    count = _check(driver.cuDeviceGetCount(), "cuDeviceGetCount")
    if not 0 <= self.index < count: raise ValueError(f"{name}: no such CUDA device ({count} present)")
    self.cu_device = _check(driver.cuDeviceGet(self.index), "cuDeviceGet")
    self.ctx = _check(driver.cuDevicePrimaryCtxRetain(self.cu_device), "cuDevicePrimaryCtxRetain")
    self._ctx_id = int(self.ctx)
    self._activate()
    A = driver.CUdevice_attribute
    attr = lambda a: _check(driver.cuDeviceGetAttribute(a, self.cu_device), "cuDeviceGetAttribute")
    self.compute_capability = (attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
    self.target = f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"
    self.device_name = _check(driver.cuDeviceGetName(256, self.cu_device), "cuDeviceGetName").split(b"\0")[0].decode()
    self.limits = {
      "threads": attr(A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
      "block": (attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X), attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y), attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)),
      "grid": (attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y), attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)),
      "shared": attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
      "shared_optin": attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
      "sm_count": attr(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
    }
    nonblocking = driver.CUstream_flags.CU_STREAM_NON_BLOCKING
    self.stream = _check(driver.cuStreamCreate(nonblocking), "cuStreamCreate")        # all kernels and copyins
    self.copy_stream = _check(driver.cuStreamCreate(nonblocking), "cuStreamCreate")   # copyouts
    no_timing = driver.CUevent_flags.CU_EVENT_DISABLE_TIMING
    self._ring = [_check(driver.cuEventCreate(no_timing), "cuEventCreate") for _ in range(_RING_MASK + 1)]
    self._ring_i = 0
    self._writers: dict[int, object] = {}   # buffer -> event recorded after the last work that writes it
    self.submitting = threading.Lock()      # held around one launch's encoding (see CUDAProgram.__call__)
    self._t0 = _check(driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")
    self._t1 = _check(driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")
    self.compiler = CUDACompiler(self.target)
    if self.compiler.assembles_ptx and getenv("ALLOY_PTX", 1): self.renderer = PTXFirstRenderer(self.target)
    self.allocator = CUDAAllocator(self)
    self.program_class = CUDAProgram

  def _activate(self) -> None:
    """Make this device's context current on this thread. The driver is asked, not _tls: another library in the
    process (tinygrad makes a context of its own) may have made its context current since we last set ours."""
    if int(_check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")) != self._ctx_id:
      _check(driver.cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
    _tls.ctx = self.ctx

  def _mark_written(self, buffers) -> None:
    ev = self._ring[self._ring_i]
    self._ring_i = (self._ring_i + 1) & _RING_MASK
    _check(driver.cuEventRecord(ev, self.stream), "cuEventRecord")
    self._writers.update(dict.fromkeys(buffers, ev))

  def _elapsed_since_t0(self) -> float:
    _check(driver.cuEventRecord(self._t1, self.stream), "cuEventRecord")
    _check(driver.cuEventSynchronize(self._t1), "cuEventSynchronize")
    return _check(driver.cuEventElapsedTime(self._t0, self._t1), "cuEventElapsedTime") * 1e-3

  def synchronize(self) -> None:
    self._activate()
    _check(driver.cuStreamSynchronize(self.stream), "cuStreamSynchronize")
    # the copy stream needs no wait: copyout returns only after its last copy has landed
    self._writers.clear()

  def __repr__(self): return f"<Device {self.name} {getattr(self, 'device_name', '')} target={self.target}>"

CUDADevice.graph = CUDAGraph
DEVICE_CLASS = CUDADevice
