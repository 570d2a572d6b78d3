"""The CPU device: C from the shared C-family renderer, compiled by the system C compiler, run by a native queue.

Launches are asynchronous: they queue on a worker pthread that runs them in order without the GIL (cpu_queue.py);
a parallel kernel's outer loop is split between the worker and a team of threads (cpu_team.py). copyout waits only for the launches that write its buffer.
CPUGraph and CPULaunchList run a captured list of launches as one queue entry: arrays of kernel function pointers
and their arguments, built once and walked in C, so a replay costs one submit instead of one per kernel.
A launch beyond the queue's argument limits (more than cpu_queue.MAX_ARGS pointers or MAX_SCALARS int32 scalars)
is called through ctypes on the caller's thread once everything queued has run.
"""
from __future__ import annotations
import atexit, collections, ctypes, functools, os, platform, shutil, subprocess, tempfile, threading, time
import numpy as np
from alloy.caps import DeviceCaps
from alloy.renderer.c import CRenderer
from alloy.runtime.device import LRUAllocator, Compiler, CompileError, Program, Device, LaunchList
from alloy.runtime.cpu_queue import CPUQueue, QUEUE_SOURCE, MAX_ARGS, MAX_SCALARS

CFLAGS = ["-O2", "-march=native", "-ftree-vectorize", "-fPIC", "-shared", "-fno-math-errno", "-fwrapv", "-ffp-contract=off"]

@functools.lru_cache(None)
def find_c_compiler() -> str:
  for cand in ([os.environ["CC"]] if os.environ.get("CC") else []) + ["cc", "gcc", "clang"]:
    if (path := shutil.which(cand)): return path
  raise RuntimeError("alloy's CPU device needs a C compiler and none was found: install gcc "
                     "(e.g. `apt-get install gcc` or `xcode-select --install`) or set CC to one")

@functools.lru_cache(None)
def cpu_target() -> str:
  arch = platform.machine().lower().replace("amd64", "x86_64").replace("x86_64", "x86-64")
  flags = ""
  try:
    with open("/proc/cpuinfo") as f: flags = f.read()
  except OSError: pass
  ext = next((e for e in ("avx512f", "avx2", "avx", "sse4_2") if f" {e} " in flags or f" {e}\n" in flags), "")
  return f"{arch}+{ext}" if ext else arch

class CPUCompiler(Compiler):
  def __init__(self):
    self.cc = find_c_compiler()
    version = subprocess.run([self.cc, "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    self.identity = f"{version} {' '.join(CFLAGS)} {cpu_target()}"
  def compile(self, source: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
      out = os.path.join(tmp, "kernel.so")
      proc = subprocess.run([self.cc, *CFLAGS, "-x", "c", "-", "-o", out, "-lm"], input=source, capture_output=True, text=True)
      if proc.returncode != 0: raise CompileError(f"C compile failed ({self.cc}):\n{proc.stderr}", source)
      with open(out, "rb") as f: return f.read()

class CPUAllocator(LRUAllocator):
  def __init__(self, device: "CPUDevice"):
    super().__init__()
    self.device = device
  def _alloc(self, nbytes: int): return np.empty(nbytes, dtype=np.uint8)
  def _free(self, handle, nbytes: int):
    # numpy returns the memory with the last reference to the array: not while a queued launch may use it
    self.device.keep_until_done(handle)
  def free(self, handle, nbytes: int):
    # queued launches may still read a freed buffer: a host write into it after reuse waits for them
    dev = self.device
    if dev.completed < dev.submitted:
      if len(dev.freed_at) > 4096: dev.freed_at = {h: s for h, s in dev.freed_at.items() if s > dev.completed}
      dev.freed_at[id(handle)] = dev.submitted
    super().free(handle, nbytes)
  def copyin(self, handle, src: memoryview):
    self.device.wait_for_writer(handle)
    if (seq := self.device.freed_at.pop(id(handle), 0)): self.device._wait_seq(seq)
    handle[:] = np.frombuffer(src, dtype=np.uint8)
  def copyout(self, dst: memoryview, handle):
    self.device.wait_for_writer(handle)
    np.frombuffer(dst, dtype=np.uint8)[:] = handle
  def transfer(self, dst, src, nbytes: int):
    self.device.wait_for_writer(src)
    dst[:nbytes] = src[:nbytes]

def _address(handle: np.ndarray) -> int:
  """Where a buffer's bytes start (ndarray.ctypes.data, at a fraction of its cost)."""
  try: return ctypes.addressof(ctypes.c_char.from_buffer(handle))
  except (TypeError, ValueError): return handle.ctypes.data   # read-only or empty arrays

def _kernel_args(buffers, scalars, parallel: int) -> tuple:
  """A call's ctypes arguments; a parallel kernel's slice is then its whole outer loop, run on one thread."""
  scalars = (*scalars, 0, parallel) if parallel else scalars
  return (*[ctypes.c_void_p(_address(b)) for b in buffers], *[ctypes.c_int32(s) for s in scalars])

def _native(buffers, scalars) -> bool:
  """Whether the queue's calls take a launch of these arguments (see cpu_queue.MAX_ARGS, MAX_SCALARS)."""
  return len(buffers) <= MAX_ARGS and len(scalars) <= MAX_SCALARS

class CPUProgram(Program):
  def __init__(self, device: "CPUDevice", name: str, binary: bytes):
    self.device, self.name = device, name
    # dlopen needs a file; the binary is content-addressed so one file per binary is enough
    fd, self.path = tempfile.mkstemp(suffix=".so", prefix=f"alloy-{name}-")
    with os.fdopen(fd, "wb") as f: f.write(binary)
    self.lib = ctypes.CDLL(self.path)
    os.unlink(self.path)
    self.fn = getattr(self.lib, name)
    self.fn.restype = None
    self.address = ctypes.cast(self.fn, ctypes.c_void_p)   # what the queue calls
    # a parallel kernel (renderer/c.py) exports its outer loop's length: the queue's team splits that loop
    try: self.parallel = ctypes.c_int32(ctypes.c_int32.in_dll(self.lib, f"{name}_parallel_range").value)
    except ValueError: self.parallel = ctypes.c_int32(0)
  def __call__(self, buffers, scalars=(), global_size=(1, 1, 1), local_size=(1, 1, 1), wait=False, outs=1):
    # a small (single-threaded) kernel on an idle device runs on the caller's thread: a hand-off to the worker
    # costs more than the kernel, and it is complete when this returns
    if not _native(buffers, scalars): return self.device.call_here(self.fn, _kernel_args(buffers, scalars, self.parallel.value))
    return self.device.launch(self.address, self.parallel, buffers, scalars, buffers[:outs], wait, here=global_size[0] <= 1)

class CPUBatch:
  """Launches bound once into the arrays a queue entry of several calls reads: kernel function pointers, per-launch
  pointer and scalar counts, the pointers, the scalars and each kernel's parallel range (0: serial). CPUBatch(launches, device, writes) with launches
  [(program, buffers, scalars, global_size, local_size), ...] within the native limits; writes: "first" (each
  launch writes its first buffer) or "all" (assume it writes every buffer it gets).
  __call__(buffers_per_launch=None, wait=False) replays them as one submit, on the caller's thread when every kernel
  is single-threaded and the device is idle; an entry of buffers_per_launch that is not None rebinds that launch's
  buffers, for this call and the later ones (only the changed pointers are rewritten). wait=True returns seconds."""
  def __init__(self, launches: list, device: "CPUDevice", writes: str):
    self.device, self.last_seq = device, 0   # last_seq: the device's number of the last queued replay
    self.cur: list[list] = []       # the buffers (numpy handles) each launch is bound to now
    self.offsets: list[int] = []    # where launch i's pointers start in args
    fns, nargs, nscalars, scalars, ranges = [], [], [], [], []
    for i, (prog, buffers, sc, global_size, local_size) in enumerate(launch[:5] for launch in launches):
      if not isinstance(prog, CPUProgram) or prog.device is not device: raise ValueError(f"launch {i}: not a CPUProgram of {device.name}")
      if not _native(buffers, sc):
        raise ValueError(f"launch {i} ({prog.name}): {len(buffers)} buffers and {len(sc)} scalars, a CPU batch takes at most "
                         f"{MAX_ARGS} and {MAX_SCALARS}")
      self.offsets.append(sum(nargs))
      fns.append(prog.address.value)
      nargs.append(len(buffers))
      nscalars.append(len(sc))
      scalars.extend(sc)
      ranges.append(prog.parallel.value)
      self.cur.append(list(buffers))
    self.n = len(launches)
    self.fns = (ctypes.c_void_p * self.n)(*fns)
    self.nargs = (ctypes.c_int32 * self.n)(*nargs)
    self.nscalars = (ctypes.c_int32 * self.n)(*nscalars)
    self.ranges = (ctypes.c_int32 * self.n)(*ranges)
    self.scalars = (ctypes.c_int32 * max(len(scalars), 1))(*scalars)
    self.args = (ctypes.c_void_p * max(sum(nargs), 1))(*[_address(b) for bufs in self.cur for b in bufs])
    self.batch = (ctypes.c_int32(self.n), self.fns, self.nargs, self.args, self.nscalars, self.scalars, self.ranges)
    self.small = all(launch[3][0] <= 1 for launch in launches)   # single-threaded kernels: may run inline
    self.writes = writes
    self.written = self._written()

  def _written(self) -> list:
    return [b for bufs in self.cur for b in bufs] if self.writes == "all" else [bufs[0] for bufs in self.cur]

  def _rebind(self, i: int, buffers) -> None:
    cur = self.cur[i]
    if len(buffers) != len(cur): raise ValueError(f"launch {i}: takes {len(cur)} buffers, given {len(buffers)}")
    for j, b in enumerate(buffers):
      if b is cur[j]: continue
      if self.device.completed < self.last_seq:   # a queued replay still reads args: give it its own copy
        self.device.keep_until_done(self.args)
        self.args = type(self.args).from_buffer_copy(self.args)
        self.batch = (*self.batch[:3], self.args, *self.batch[4:])
        self.last_seq = 0
      self.args[self.offsets[i] + j] = _address(b)
      cur[j] = b
      self.written = None

  def __call__(self, buffers_per_launch=None, wait: bool = False) -> float | None:
    if buffers_per_launch is not None:
      for i, buffers in enumerate(buffers_per_launch):
        if buffers is not None: self._rebind(i, buffers)
      if self.written is None: self.written = self._written()
    seq, elapsed = self.device.submit(self.batch, self.written, wait, here=self.small)
    if seq: self.last_seq = seq
    return elapsed

  def __del__(self):
    # a queued replay reads these arrays: they go when it is done
    try:
      if self.device.completed < self.last_seq: self.device.keep_until_done((self.fns, self.nargs, self.args, self.nscalars, self.scalars, self.ranges))
    except Exception: pass   # interpreter shutdown (everything queued finished at exit)

class CPUGraph(CPUBatch):
  """A captured list of CPU launches run as one queue entry, in order (see CPUBatch).
  CPUGraph(launches, device) with launches [(program, buffers, scalars, global_size, local_size), ...];
  __call__(buffers_per_launch=None, wait=False, scalars_per_launch=None) as CPUBatch. Every buffer counts as written
  (as CUDAGraph). Kernels here take pointers only: a launch with scalar arguments is refused (ValueError), as is one
  beyond the native queue's pointer limit."""
  def __init__(self, launches: list, device: "CPUDevice | None" = None):
    if not launches: raise ValueError("a CPU graph needs at least one launch")
    device = device if device is not None else launches[0][0].device
    for i, (prog, _, scalars, *_) in enumerate(launches):
      if scalars: raise ValueError(f"launch {i} ({getattr(prog, 'name', prog)}): CPU graphs pass pointers only, this launch has {len(scalars)} scalars")
    super().__init__(launches, device, writes="all")

  def __call__(self, buffers_per_launch=None, wait: bool = False, scalars_per_launch=None) -> float | None:
    if scalars_per_launch is not None and any(s for s in scalars_per_launch):
      raise ValueError("CPU graphs pass pointers only: scalars_per_launch must be empty")
    return super().__call__(buffers_per_launch, wait)

class CPULaunchList(LaunchList):
  """Captured CPU launches (see LaunchList) run as one queue entry per call (a CPUBatch, each launch writing its first
  buffer); where a launch is beyond the native queue's argument limits, one program call per launch instead."""
  def __init__(self, launches: list, device: "CPUDevice"):
    super().__init__(launches, device)
    for i, (prog, buffers, *_) in enumerate(self.launches):
      if not buffers: raise ValueError(f"launch {i} ({getattr(prog, 'name', prog)}): no buffers; a launch writes its first")
    self.batch = CPUBatch(launches, device, writes="first") if all(_native(l[1], l[2]) for l in self.launches) else None

  def __call__(self, buffers_per_launch=None, wait: bool = False) -> float | None:
    if self.batch is None: return super().__call__(buffers_per_launch, wait)
    return self.batch(buffers_per_launch, wait)

class CPUDevice(Device):
  renderer = CRenderer()
  caps = DeviceCaps(threads=False, vector_widths=(8, 4), vector_arithmetic=True)
  graph = CPUGraph
  launch_list = CPULaunchList
  def __init__(self, name: str):
    super().__init__(name)
    self.target = cpu_target()
    self.allocator, self.program_class = CPUAllocator(self), CPUProgram
    self.submitted = 0                        # the number of the last queued entry (they count from 1)
    self._completed = ctypes.c_int64(0)       # the last entry run to its end: the queue's own counter once it starts
    self.last_writer: dict[int, int] = {}     # id(buffer) -> number of the last entry writing it
    self.freed_at: dict[int, int] = {}        # id(buffer) -> entries submitted when it was freed
    self.kept: collections.deque = collections.deque()   # (entry number, object an entry up to it may use)
    # threads submit one at a time: the queue's staging area, its last inline time and `submitted` are shared
    self.submitting = threading.Lock()
  @functools.cached_property
  def compiler(self) -> CPUCompiler: return CPUCompiler()
  @functools.cached_property
  def queue(self) -> CPUQueue:
    lib = self.load("alloy_queue_start", self.compiler.compile_cached(QUEUE_SOURCE)).lib
    queue = CPUQueue(lib, self.submitted)
    self._completed = queue.completed
    atexit.register(self.synchronize)   # nothing queued may outlive the memory Python frees at exit
    os.register_at_fork(before=self.synchronize, after_in_child=self._restart_queue)
    return queue
  def _restart_queue(self) -> None:
    # a forked child has no worker thread; it numbers on from the parent's entries, all complete (synchronized before)
    self.queue = CPUQueue(self.queue.lib, self.submitted)
    self._completed = self.queue.completed

  @property
  def completed(self) -> int: return self._completed.value

  def launch(self, fn: ctypes.c_void_p, parallel: ctypes.c_int32, buffers, scalars, written, wait: bool, here: bool) -> float | None:
    """Queue one call of kernel fn with pointers to buffers and int32 scalars, within the native limits; parallel:
    the length of its outer loop the team splits (0: a serial kernel)."""
    pointers = [_address(b) for b in buffers]
    with self.submitting:
      seq = self.queue.launch(fn, pointers, scalars, here, parallel)
      elapsed = self._submitted(seq, written)
    return self.queue.wait(seq) if wait and seq else elapsed
  def submit(self, batch: tuple, written, wait: bool, here: bool) -> tuple[int, float | None]:
    """Queue a batch (see CPUQueue.submit). Returns its entry number (0: it ran on this thread) and, with wait or
    where it ran here, its seconds."""
    with self.submitting:
      seq = self.queue.submit(batch, here)
      elapsed = self._submitted(seq, written)
    return seq, self.queue.wait(seq) if wait and seq else elapsed
  def _submitted(self, seq: int, written) -> float | None:
    if not seq: return self.queue.ran_here.value   # ran on this thread: complete
    self.submitted = seq
    for w in written: self.last_writer[id(w)] = seq
    return None
  def call_here(self, fn, args) -> float:
    """Run a call beyond the native queue's argument limits on this thread, after everything queued: seconds."""
    self.synchronize()
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start

  def keep_until_done(self, obj) -> None:
    """Hold a Python object (a buffer, an argument array) that queued entries may use until they have run."""
    kept = self.kept
    while kept and kept[0][0] <= self.completed: kept.popleft()
    if self.completed < self.submitted: kept.append((self.submitted, obj))
  def _wait_seq(self, seq: int) -> None:
    if seq: self.queue.wait(seq)
  def wait_for_writer(self, handle):
    if (seq := self.last_writer.get(id(handle))) is not None: self._wait_seq(seq)
  def synchronize(self) -> None:
    self._wait_seq(self.submitted)
    self.last_writer.clear()   # all complete: nothing to wait for
    self.freed_at.clear()
    self.kept.clear()

def is_available() -> bool: return True
DEVICE_CLASS = CPUDevice
