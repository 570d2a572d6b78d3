"""The METAL device: Apple GPUs through PyObjC's `Metal` module, else the software Metal device on the CPU.

The binding is chosen once (`metal_binding`): PyObjC's `Metal` when it imports and gives a system device,
otherwise `alloy.runtime.metal.software.binding`, which has the same selectors and runs the same Metal
source on the CPU (never the default device; ask for it with DEV=METAL). ALLOY_METAL_SOFTWARE=1 forces it.

Stages, one file each: MetalCompiler (compiler.py: MSL -> metallib through xcrun, or the source itself to compile
at load time, or a software library), MetalProgram (program.py: library -> function -> compute pipeline state),
MetalCommandEncoder (encoder.py: the open command buffer launches go into, a barrier only on a hazard),
MetalAllocator (allocator.py: shared-storage buffers read and written through contents()), MetalGraph (graph.py:
an indirect command buffer replaying captured launches), MetalDevice (here).

Ordering: one command queue runs command buffers in commit order; inside one, the encoder's barriers order the
dispatches. Each launch remembers its command buffer for the buffers it binds (users) and writes (writers): copyout
waits for (and first commits, where it is still open) the writer's command buffer only, copyin also for the readers',
since both go straight through the CPU mapping of the buffer.
"""
from __future__ import annotations
import dataclasses, functools, os, platform, shutil, sys, threading
from alloy.helpers import getenv
from alloy.caps import DeviceCaps
from alloy.renderer.metal import MetalRenderer
from alloy.runtime.device import Device
from alloy.runtime.metal.allocator import MetalAllocator
from alloy.runtime.metal.compiler import MetalCompiler, msl_version
from alloy.runtime.metal.encoder import MetalCommandEncoder
from alloy.runtime.metal.graph import MetalGraph
from alloy.runtime.metal.program import MetalProgram, describe_error

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
  from alloy.runtime.metal.software import compiler
  return shutil.which(compiler.compiler()) is not None

@functools.lru_cache(None)
def metal_binding():
  """(module, device, software): the one binding this process uses."""
  if (real := _pyobjc_device()) is not None: return (*real, False)
  from alloy.runtime.metal.software import binding
  return binding, binding.MTLCreateSystemDefaultDevice(), True

def is_hardware() -> bool: return _pyobjc_device() is not None
def is_available() -> bool: return is_hardware() or software_available()

SIMDGROUP_MATRIX_FAMILIES = tuple(f"Apple{n}" for n in range(7, 11))   # simdgroup_matrix: Apple7 (M1, A14) and newer

def metal_caps(family: str) -> DeviceCaps:
  """MetalDevice.caps, with the simdgroup matrices TENSOR_CORE uses where the GPU family has them."""
  if family not in SIMDGROUP_MATRIX_FAMILIES: return MetalDevice.caps
  return dataclasses.replace(MetalDevice.caps, tensor_cores=("simdgroup_matrix.8x8",))   # codegen's SIMDGROUP_8X8

_made: dict = {}   # (class, name) -> its one device
_made_lock = threading.Lock()

class MetalDevice(Device):
  """Several Python threads may use one device: encoding and committing a launch, the books of which command buffer
  uses and writes which buffer, host copies and allocations are serialized behind one lock per device (`lock`);
  waiting for a command buffer happens outside it, so other threads keep launching meanwhile."""
  renderer = MetalRenderer()
  # 32 KiB of threadgroup memory (Apple's feature-set tables); Apple publishes no per-thread register count: 128 is a
  # conservative figure for the validator
  caps = DeviceCaps(threads=True, registers=128, shared_bytes=32 << 10, shuffle_bytes=4)
  graph = MetalGraph   # None per instance where indirect command buffers are missing

  def __new__(cls, name: str = "METAL"):
    # one object per device, however often it is constructed: threads that ask the registry for it at the same time may
    # each construct one, and two objects would keep separate books of which command buffer writes which buffer
    with _made_lock:
      if (dev := _made.get((cls, name))) is None:
        dev = super().__new__(cls)
        dev.setup(name)
        _made[(cls, name)] = dev
    return dev

  def __init__(self, name: str = "METAL"): pass   # set up once, in __new__

  def setup(self, name: str) -> None:
    super().__init__(name)
    self.lock = threading.RLock()
    if name.partition(":")[2] not in ("", "0"): raise ValueError(f"{name}: alloy drives only the system default Metal device")
    self.mtl, self.mtl_device, self.software = metal_binding()
    family = self.gpu_family()
    self.target = f"{family} (software)" if self.software else family
    self.caps = metal_caps(family)
    self.device_name = str(self.mtl_device.name())
    if "Paravirtual" in self.device_name:
      self.graph, self.graph_unavailable = None, f"{self.device_name} is a virtualized GPU without indirect command buffers"
    elif not family.startswith(("Apple", "Mac")) or family in ("Apple1", "Apple2"):
      self.graph, self.graph_unavailable = None, f"{family} GPUs have no indirect compute command buffers"
    self.queue = self.mtl_device.newCommandQueueWithMaxCommandBufferCount_(1024)
    self.inflight: dict = {}   # committed command buffer -> what it runs (kernel name), in commit order
    self.writers: dict = {}    # MTLBuffer -> the last command buffer writing it
    self.users: dict = {}      # MTLBuffer -> the last command buffer binding it
    self.encoder = MetalCommandEncoder(self)
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
    """Books a command buffer committed outside the encoder (a graph replay); the caller holds `lock` from encoding to here."""
    with self.lock:
      for b in used: self.users[b] = cb
      for b in written: self.writers[b] = cb
      self.booked(cb, what)

  def booked(self, cb, what: str) -> None:
    """A committed command buffer is in flight, running `what` (kernel names, for its error)."""
    with self.lock:
      self.inflight[cb] = what
      if len(self.inflight) > 256:   # retire finished command buffers so the bookkeeping stays small
        done = (self.mtl.MTLCommandBufferStatusCompleted, self.mtl.MTLCommandBufferStatusError)
        for old in [c for c in list(self.inflight)[:128] if c.status() in done]: self.wait_for(old)

  def wait_for(self, cb) -> None:
    """Wait for one command buffer; raise naming its kernel if it failed (once: it leaves the in-flight set)."""
    if cb is None: return
    if cb is self.encoder.cb:   # still open: send it first
      with self.lock:
        if cb is self.encoder.cb: self.encoder.commit()
    cb.waitUntilCompleted()
    with self.lock: what = self.inflight.pop(cb, None)
    if what is None: return
    err = cb.error()
    if err is not None or cb.status() == self.mtl.MTLCommandBufferStatusError:
      raise RuntimeError(f"{self.name}: kernel {what} failed on {self.target}: {describe_error(err)}")

  def fence(self):
    """The last committed command buffer, after committing the open one (Metal runs a queue's command buffers in
    commit order)."""
    with self.lock:
      self.encoder.commit()
      return next(reversed(self.inflight), None)
  def wait_fence(self, fence) -> None:
    if fence is not None: self.wait_for(fence)

  def synchronize(self) -> None:
    with self.lock:
      self.encoder.commit()
      pending = list(self.inflight)
    first = None
    for cb in pending:
      try: self.wait_for(cb)
      except RuntimeError as e: first = first or e
    with self.lock:   # forget only what was waited for: other threads may have launched meanwhile
      waited = set(pending)
      for book in (self.writers, self.users):
        for b in [b for b, c in book.items() if c in waited]: del book[b]
    if first is not None: raise first

  def __repr__(self): return f"<Device {self.name} {getattr(self, 'device_name', '')} target={self.target}>"

DEVICE_CLASS = MetalDevice
