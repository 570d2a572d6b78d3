"""The METAL device: Apple GPUs through PyObjC's `Metal` module, else the software Metal device on the CPU.

The binding is chosen once (`metal_binding`): PyObjC's `Metal` when it imports and gives a system device,
otherwise `alloy.runtime.metal_software.binding`, which has the same selectors and runs the same Metal
source on the CPU (never the default device; ask for it with DEV=METAL). ALLOY_METAL_SOFTWARE=1 forces it.

Stages: MetalCompiler (MSL -> metallib through xcrun, or the source itself to compile at load time, or a
software library), MetalProgram (library -> function -> compute pipeline state; one command buffer per
launch), MetalAllocator (shared-storage buffers read and written through contents()), MetalGraph
(an indirect command buffer replaying captured launches), MetalDevice.

Ordering: one command queue runs command buffers in commit order. Each launch remembers its command
buffer for the buffers it binds (users) and writes (writers): copyout waits for the writer only, copyin
also for the readers, since both go straight through the CPU mapping of the buffer.
"""
from __future__ import annotations
import functools, os, platform, shutil, struct, subprocess, sys
from alloy.helpers import DEBUG, getenv, prod
from alloy.caps import DeviceCaps
from alloy.renderer.metal import MetalRenderer
from alloy.runtime.device import CompileError, Compiler, Device, DeviceOutOfMemory, LRUAllocator, Program

MAX_ICB_COMMANDS = 16384   # executeCommandsInBuffer's documented range limit (mac2 family)
MAX_BUFFER_BINDINGS = 31

@functools.lru_cache(None)
def _pyobjc_device():
  """(Metal module, system device) from PyObjC, or None where there is no real Metal."""
  if getenv("ALLOY_METAL_SOFTWARE", 0): return None
  try:
    import Metal
    dev = Metal.MTLCreateSystemDefaultDevice()
  except Exception: return None   # not macOS, PyObjC missing, or no GPU
  return (Metal, dev) if dev is not None else None

def software_available() -> bool:
  """The software device needs Linux on x86-64 (memfd, the fiber switch) and a C++ compiler."""
  if not (sys.platform.startswith("linux") and platform.machine().lower() in ("x86_64", "amd64") and hasattr(os, "memfd_create")):
    return False
  from alloy.runtime.metal_software import compiler
  return shutil.which(compiler.compiler()) is not None

@functools.lru_cache(None)
def metal_binding():
  """(module, device, software): the one binding this process uses."""
  if (real := _pyobjc_device()) is not None: return (*real, False)
  from alloy.runtime.metal_software import binding
  return binding, binding.MTLCreateSystemDefaultDevice(), True

def is_hardware() -> bool: return _pyobjc_device() is not None
def is_available() -> bool: return is_hardware() or software_available()

def _describe(err) -> str:
  return str(err.localizedDescription()) if hasattr(err, "localizedDescription") else str(err)

# the newest Metal Shading Language each macOS release compiles, oldest first: (macOS major, (MSL major, minor))
MSL_FOR_MACOS = ((11, (2, 3)), (12, (2, 4)), (13, (3, 0)), (14, (3, 1)), (15, (3, 2)))

def msl_version(macos: str | None = None) -> tuple[int, int]:
  """The MSL version to compile for: the newest this macOS has (2.3 before macOS 11 is not supported by alloy)."""
  release = macos if macos is not None else platform.mac_ver()[0]
  major = int(release.split(".")[0]) if release and release.split(".")[0].isdigit() else 0
  return next((v for m, v in reversed(MSL_FOR_MACOS) if major >= m), MSL_FOR_MACOS[0][1])

def msl_std_flag(version: tuple[int, int]) -> str:
  """xcrun metal's -std= spelling: metal3.1, or macos-metal2.4 before 3.0."""
  return f"-std=metal{version[0]}.{version[1]}" if version >= (3, 0) else f"-std=macos-metal{version[0]}.{version[1]}"

# ---------------------------------------------------------------------------------------------------

class MetalCompiler(Compiler):
  """MSL -> library bytes: a metallib (`xcrun metal` + `metallib`, magic MTLB) where Xcode is installed,
  otherwise the source itself, compiled by the driver when loaded; a software library on the software device."""
  def __init__(self, software: bool):
    self.software = software
    if software: self.mode = "software"
    else: self.mode = "metallib" if shutil.which("xcrun") and subprocess.run(["xcrun", "-sdk", "macosx", "--find", "metal"], capture_output=True).returncode == 0 else "source"
    self.version = msl_version()
    self.identity = f"metal-{self.mode} msl{self.version[0]}.{self.version[1]}" + (" -fno-fast-math" if self.mode == "metallib" else "")
    if software:
      from alloy.runtime.metal_software import compiler as sw
      self.identity += f" format {sw.FORMAT_VERSION} shim {sw.shim_hash()[:16]} {sw.compiler()} {' '.join(sw.KERNEL_FLAGS)}"
    if self.mode == "metallib":
      self.identity += " " + subprocess.run(["xcrun", "-sdk", "macosx", "metal", "--version"], capture_output=True, text=True).stdout.split("\n")[0]
    if DEBUG >= 1:
      print({"software": "METAL: software Metal device (MSL compiled as C++ and run on the CPU)",
             "metallib": "METAL: compiling offline with xcrun metal/metallib",
             "source": "METAL: no offline Metal compiler (xcrun metal); the driver compiles the source at load time"}[self.mode])

  def compile(self, source: str) -> bytes:
    if self.mode == "software":
      from alloy.runtime.metal_software import MetalCompileError, compile_library
      try: return compile_library(source)
      except MetalCompileError as e: raise CompileError(str(e), source) from None
    if self.mode == "source": return source.encode()
    # -fno-fast-math: the offline compiler defaults to fast math, which may ignore NaN/Inf (as the runtime's safe math mode)
    air = subprocess.run(["xcrun", "-sdk", "macosx", "metal", msl_std_flag(self.version), "-fno-fast-math", "-x", "metal", "-c", "-", "-o", "-"],
                         input=source.encode(), capture_output=True)
    if air.returncode != 0: raise CompileError(f"xcrun metal failed:\n{air.stderr.decode()}", source)
    lib = subprocess.run(["xcrun", "-sdk", "macosx", "metallib", "-", "-o", "-"], input=air.stdout, capture_output=True)
    if lib.returncode != 0 or lib.stdout[:4] != b"MTLB": raise CompileError(f"xcrun metallib failed:\n{lib.stderr.decode()}", source)
    return lib.stdout

# ---------------------------------------------------------------------------------------------------

class MetalAllocator(LRUAllocator):
  """Shared-storage MTLBuffers; the host reads and writes them through contents() after waiting."""
  def __init__(self, device: "MetalDevice"):
    super().__init__()
    self.device = device
  def _alloc(self, nbytes: int):
    buf = self.device.mtl_device.newBufferWithLength_options_(nbytes, self.device.mtl.MTLResourceStorageModeShared)
    if buf is None: raise DeviceOutOfMemory(f"{self.device.name}: out of memory allocating {nbytes} bytes")
    return buf
  def _free(self, handle, nbytes: int) -> None:
    self.device.writers.pop(handle, None)   # the command buffer keeps what it uses alive
    self.device.users.pop(handle, None)
  def copyin(self, handle, src: memoryview) -> None:
    self.device.wait_for(self.device.users.get(handle))
    handle.contents().as_buffer(len(src))[:] = src
  def copyout(self, dst: memoryview, handle) -> None:
    self.device.wait_for(self.device.writers.get(handle))
    dst[:] = handle.contents().as_buffer(len(dst))

# ---------------------------------------------------------------------------------------------------

class MetalProgram(Program):
  """Library -> function -> compute pipeline state (built to allow indirect command buffers as well)."""
  def __init__(self, device: "MetalDevice", name: str, binary: bytes):
    self.device, self.name = device, name
    mtl, dev = device.mtl, device.mtl_device
    if binary[:4] == b"MTLB":
      import libdispatch   # pyobjc-framework-libdispatch: newLibraryWithData takes a dispatch_data_t
      lib, err = dev.newLibraryWithData_error_(libdispatch.dispatch_data_create(binary, len(binary), None, None), None)
    elif device.software: lib, err = dev.newLibraryWithData_error_(binary, None)
    else: lib, err = dev.newLibraryWithSource_options_error_(binary.decode(), device.compile_options(), None)
    if lib is None: raise CompileError(f"{name}: loading the Metal library failed: {_describe(err)}", "" if binary[:4] == b"MTLB" else binary.decode(errors="replace"))
    if (fn := lib.newFunctionWithName_(name)) is None: raise RuntimeError(f"{name}: the Metal library has no kernel named {name!r}")
    desc = mtl.MTLComputePipelineDescriptor.new()
    desc.setComputeFunction_(fn)
    desc.setSupportIndirectCommandBuffers_(True)
    self.pso, err = dev.newComputePipelineStateWithDescriptor_options_reflection_error_(desc, mtl.MTLPipelineOption(0), None, None)
    if self.pso is None: raise RuntimeError(f"{name}: creating the compute pipeline state failed: {_describe(err)}")
    self.max_threads = self.pso.maxTotalThreadsPerThreadgroup()

  def dims(self, global_size, local_size):
    """The launch as two MTLSizes, checked against this pipeline's threadgroup limit."""
    g3 = tuple(int(x) for x in global_size) + (1,) * (3 - len(global_size))
    l3 = tuple(int(x) for x in local_size) + (1,) * (3 - len(local_size))
    if prod(l3) > self.max_threads:
      raise ValueError(f"{self.name}: threadgroup of {prod(l3)} threads (local_size {l3}) exceeds this kernel's "
                       f"maxTotalThreadsPerThreadgroup={self.max_threads} (threadExecutionWidth {self.pso.threadExecutionWidth()}, "
                       f"{self.pso.staticThreadgroupMemoryLength()} bytes of threadgroup memory)")
    return self.device.mtl.MTLSizeMake(*g3), self.device.mtl.MTLSizeMake(*l3)

  def __call__(self, buffers, scalars=(), global_size=(1, 1, 1), local_size=(1, 1, 1), wait: bool = False, outs: int = 1):
    groups, threads = self.dims(global_size, local_size)
    if len(buffers) + len(scalars) > MAX_BUFFER_BINDINGS:
      raise ValueError(f"{self.name}: {len(buffers)} buffers and {len(scalars)} scalars exceed Metal's {MAX_BUFFER_BINDINGS} bindings")
    cb = self.device.queue.commandBuffer()
    enc = cb.computeCommandEncoder()
    enc.setComputePipelineState_(self.pso)
    for i, b in enumerate(buffers): enc.setBuffer_offset_atIndex_(b, 0, i)
    for j, s in enumerate(scalars): enc.setBytes_length_atIndex_(struct.pack("<i", s), 4, len(buffers) + j)
    enc.dispatchThreadgroups_threadsPerThreadgroup_(groups, threads)
    enc.endEncoding()
    cb.commit()
    self.device.submitted(cb, self.name, buffers, buffers[:outs])
    if wait:
      self.device.wait_for(cb)
      return cb.GPUEndTime() - cb.GPUStartTime()
    return None

# ---------------------------------------------------------------------------------------------------

class MetalGraph:
  """The captured launches as one indirect command buffer, a barrier before each command.
  MetalGraph(launches, device=None) with launches [(program, buffers, scalars, global_size, local_size), ...].
  __call__(buffers_per_launch=None, wait=False, scalars_per_launch=None) replays it; a non-None entry rebinds
  that command's buffers (or rewrites its scalars, which live in one int32 buffer: an indirect command has no
  setBytes). Commands are changed only after the previous replay has completed. wait=True returns device seconds."""
  def __init__(self, launches: list, device: "MetalDevice | None" = None):
    if not launches: raise ValueError("a Metal graph needs at least one launch")
    self.device = device = device if device is not None else launches[0][0].device
    if len(launches) > MAX_ICB_COMMANDS: raise ValueError(f"a Metal graph holds at most {MAX_ICB_COMMANDS} launches, got {len(launches)}")
    mtl, dev = device.mtl, device.mtl_device
    desc = mtl.MTLIndirectCommandBufferDescriptor.new()
    desc.setCommandTypes_(mtl.MTLIndirectCommandTypeConcurrentDispatch)
    desc.setInheritBuffers_(False)
    desc.setInheritPipelineState_(False)
    desc.setMaxKernelBufferBindCount_(MAX_BUFFER_BINDINGS)
    self.icb = dev.newIndirectCommandBufferWithDescriptor_maxCommandCount_options_(desc, len(launches), mtl.MTLResourceOptions(0))
    if self.icb is None: raise RuntimeError(f"{device.name}: the system could not create an indirect command buffer of {len(launches)} commands")
    self.programs = [launch[0] for launch in launches]
    self.scalar_base = [sum(len(launch[2]) for launch in launches[:i]) for i in range(len(launches))]
    self.scalar_buf = device.allocator._alloc(4 * max(1, sum(len(launch[2]) for launch in launches)))
    self.cur_bufs, self.cur_scalars, self.last = [], [], None
    for i, (prog, buffers, scalars, global_size, local_size) in enumerate(launch[:5] for launch in launches):
      if not isinstance(prog, MetalProgram) or prog.device is not device: raise ValueError(f"launch {i}: not a MetalProgram of {device.name}")
      if len(buffers) + len(scalars) > MAX_BUFFER_BINDINGS:
        raise ValueError(f"launch {i} ({prog.name}): {len(buffers)} buffers and {len(scalars)} scalars exceed {MAX_BUFFER_BINDINGS} bindings")
      cmd = self.icb.indirectComputeCommandAtIndex_(i)
      cmd.setComputePipelineState_(prog.pso)
      for j in range(len(scalars)): cmd.setKernelBuffer_offset_atIndex_(self.scalar_buf, 4 * (self.scalar_base[i] + j), len(buffers) + j)
      cmd.concurrentDispatchThreadgroups_threadsPerThreadgroup_(*prog.dims(global_size, local_size))
      cmd.setBarrier()
      self.cur_bufs.append(None)
      self.cur_scalars.append(None)
      self._update(i, tuple(buffers), tuple(int(s) for s in scalars))

  def _update(self, i: int, buffers, scalars) -> None:
    if buffers is not None and buffers != self.cur_bufs[i]:
      if self.cur_bufs[i] is not None and len(buffers) != len(self.cur_bufs[i]): raise ValueError(f"graph launch {i}: takes {len(self.cur_bufs[i])} buffers")
      cmd = self.icb.indirectComputeCommandAtIndex_(i)
      for j, b in enumerate(buffers): cmd.setKernelBuffer_offset_atIndex_(b, 0, j)
      self.cur_bufs[i] = buffers
    if scalars is not None and scalars != self.cur_scalars[i]:
      if self.cur_scalars[i] is not None and len(scalars) != len(self.cur_scalars[i]): raise ValueError(f"graph launch {i}: takes {len(self.cur_scalars[i])} scalars")
      if scalars: self.scalar_buf.contents().as_buffer(4 * (self.scalar_base[i] + len(scalars)))[4 * self.scalar_base[i]:] = struct.pack(f"<{len(scalars)}i", *scalars)
      self.cur_scalars[i] = scalars

  def __call__(self, buffers_per_launch=None, wait: bool = False, scalars_per_launch=None) -> float | None:
    dev, mtl = self.device, self.device.mtl
    if buffers_per_launch is not None or scalars_per_launch is not None:
      dev.wait_for(self.last)   # an indirect command buffer (and the scalars) may change only when idle
      for i in range(len(self.programs)):
        self._update(i, None if buffers_per_launch is None or buffers_per_launch[i] is None else tuple(buffers_per_launch[i]),
                     None if scalars_per_launch is None or scalars_per_launch[i] is None else tuple(int(s) for s in scalars_per_launch[i]))
    resources = list({id(b): b for bufs in self.cur_bufs for b in bufs}.values()) + [self.scalar_buf]
    cb = dev.queue.commandBuffer()
    enc = cb.computeCommandEncoder()
    enc.useResources_count_usage_(resources, len(resources), mtl.MTLResourceUsageRead | mtl.MTLResourceUsageWrite)
    if not dev.software and type(self.icb).__name__ != "AGXG15XFamilyIndirectCommandBuffer":
      # reported: before M3, executing an ICB whose pipelines were never bound on the encoder crashes the GPU
      for prog in {id(p): p for p in self.programs}.values():
        enc.setComputePipelineState_(prog.pso)
        enc.dispatchThreadgroups_threadsPerThreadgroup_(mtl.MTLSizeMake(0, 0, 0), mtl.MTLSizeMake(0, 0, 0))
    enc.executeCommandsInBuffer_withRange_(self.icb, mtl.NSMakeRange(0, len(self.programs)))
    enc.endEncoding()
    cb.commit()
    self.last = cb
    dev.submitted(cb, f"graph of {len(self.programs)} kernels ({', '.join(p.name for p in self.programs[:3])}{', ...' if len(self.programs) > 3 else ''})",
                  resources, resources)   # conservative: every buffer the graph touches waits for the whole graph
    if wait:
      dev.wait_for(cb)
      return cb.GPUEndTime() - cb.GPUStartTime()
    return None

# ---------------------------------------------------------------------------------------------------

class MetalDevice(Device):
  renderer = MetalRenderer()
  caps = DeviceCaps(threads=True)
  graph = None   # set to MetalGraph below, or per instance where indirect command buffers are missing

  def __init__(self, name: str = "METAL"):
    super().__init__(name)
    if name.partition(":")[2] not in ("", "0"): raise ValueError(f"{name}: alloy drives only the system default Metal device")
    self.mtl, self.mtl_device, self.software = metal_binding()
    family = self.gpu_family()
    self.target = f"{family} (software)" if self.software else family
    self.device_name = str(self.mtl_device.name())
    if "Paravirtual" in self.device_name:
      self.graph, self.graph_unavailable = None, f"{self.device_name} is a virtualized GPU without indirect command buffers"
    elif not family.startswith(("Apple", "Mac")) or family in ("Apple1", "Apple2"):
      self.graph, self.graph_unavailable = None, f"{family} GPUs have no indirect compute command buffers"
    self.queue = self.mtl_device.newCommandQueueWithMaxCommandBufferCount_(1024)
    self.inflight: dict = {}   # committed command buffer -> what it runs (kernel name), in commit order
    self.writers: dict = {}    # MTLBuffer -> the last command buffer writing it
    self.users: dict = {}      # MTLBuffer -> the last command buffer binding it
    self.compiler = MetalCompiler(self.software)
    self.allocator = MetalAllocator(self)
    self.program_class = MetalProgram

  def gpu_family(self) -> str:
    for n in range(10, 0, -1):
      if (fam := getattr(self.mtl, f"MTLGPUFamilyApple{n}", None)) is not None and self.mtl_device.supportsFamily_(fam): return f"Apple{n}"
    for n in (2, 1):
      if (fam := getattr(self.mtl, f"MTLGPUFamilyMac{n}", None)) is not None and self.mtl_device.supportsFamily_(fam): return f"Mac{n}"
    return "unknown"

  def compile_options(self):
    opts = self.mtl.MTLCompileOptions.new()
    major, minor = msl_version()
    if (lang := getattr(self.mtl, f"MTLLanguageVersion{major}_{minor}", None)) is not None: opts.setLanguageVersion_(lang)
    if hasattr(opts, "setMathMode_"): opts.setMathMode_(self.mtl.MTLMathModeSafe)   # macOS 15+: IEEE NaN/Inf, as the tests expect
    else: opts.setFastMathEnabled_(False)
    return opts

  def submitted(self, cb, what: str, used, written) -> None:
    self.inflight[cb] = what
    for b in used: self.users[b] = cb
    for b in written: self.writers[b] = cb
    if len(self.inflight) > 256:   # retire finished command buffers so the bookkeeping stays small
      done = (self.mtl.MTLCommandBufferStatusCompleted, self.mtl.MTLCommandBufferStatusError)
      for old in [c for c in list(self.inflight)[:128] if c.status() in done]: self.wait_for(old)

  def wait_for(self, cb) -> None:
    """Wait for one command buffer; raise naming its kernel if it failed (once: it leaves the in-flight set)."""
    if cb is None: return
    cb.waitUntilCompleted()
    if (what := self.inflight.pop(cb, None)) is None: return
    err = cb.error()
    if err is not None or cb.status() == self.mtl.MTLCommandBufferStatusError:
      raise RuntimeError(f"{self.name}: kernel {what} failed on {self.target}: {_describe(err)}")

  def synchronize(self) -> None:
    first = None
    for cb in list(self.inflight):
      try: self.wait_for(cb)
      except RuntimeError as e: first = first or e
    self.writers.clear()
    self.users.clear()
    if first is not None: raise first

  def __repr__(self): return f"<Device {self.name} {getattr(self, 'device_name', '')} target={self.target}>"

MetalDevice.graph = MetalGraph
DEVICE_CLASS = MetalDevice
