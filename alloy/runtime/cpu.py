"""The CPU device: C from the shared C-family renderer, compiled by the system C compiler, run by a worker thread.

Launches are asynchronous: they queue on one worker thread (ctypes releases the GIL while a kernel runs,
and kernels use OpenMP for their outer loop). copyout waits only for the launches that write its buffer.
CPUGraph runs a captured list of launches as one native call: a small C trampoline walks arrays of kernel
function pointers and their arguments, so a batch costs one queue hand-off instead of one per kernel.
"""
from __future__ import annotations
import ctypes, functools, os, platform, queue, shutil, subprocess, tempfile, threading, time
import numpy as np
from alloy.runtime.device import DeviceCaps
from alloy.renderer.c import CRenderer
from alloy.runtime.device import LRUAllocator, Compiler, CompileError, Program, Device, LaunchList

CFLAGS = ["-O2", "-march=native", "-ftree-vectorize", "-fopenmp", "-fPIC", "-shared", "-fno-math-errno", "-fwrapv", "-ffp-contract=off"]

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
  def _free(self, handle, nbytes: int): pass
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

def _kernel_args(buffers, scalars) -> tuple:
  return (*[ctypes.c_void_p(_address(b)) for b in buffers], *[ctypes.c_int32(s) for s in scalars])

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
  def __call__(self, buffers, scalars=(), global_size=(1, 1, 1), local_size=(1, 1, 1), wait=False, outs=1):
    args = _kernel_args(buffers, scalars)
    # a small (single-threaded) kernel on an idle device runs on the caller's thread: handing it to the
    # worker costs more in GIL hand-offs than the kernel itself, and it is complete when this returns
    small = global_size[0] <= 1
    return self.device.submit(self.fn, args, [buffers[i] for i in range(outs)], wait, inline=small)

GRAPH_MAX_ARGS = 32   # the trampoline calls kernels of 0..GRAPH_MAX_ARGS pointer parameters

def _trampoline_source() -> str:
  """C that calls n kernels in order; kernel i takes nargs[i] pointers, read consecutively from args."""
  cases = []
  for k in range(GRAPH_MAX_ARGS + 1):
    params = ", ".join(["void*"] * k) or "void"
    cases.append(f"    case {k}: ((void (*)({params}))fns[i])({', '.join(f'a[{j}]' for j in range(k))}); break;")
  return ("#include <stdint.h>\n"
          "void alloy_graph_run(int32_t n, void **fns, const int32_t *nargs, void **args) {\n"
          "  for (int32_t i = 0; i < n; i++) {\n"
          "    void **a = args;\n"
          "    args += nargs[i];\n"
          "    switch (nargs[i]) {\n" + "\n".join(cases) + "\n    }\n  }\n}\n")

class CPUGraph:
  """A captured list of CPU launches run as one batched native call, in order, on the device's worker.
  CPUGraph(launches, device) with launches [(program, buffers, scalars, global_size, local_size), ...];
  __call__(buffers_per_launch=None, wait=False, scalars_per_launch=None): an entry of buffers_per_launch that
  is not None replaces that launch's buffers (only the changed pointers are rewritten). wait=True returns seconds.
  Kernels here take pointers only; a launch with scalar arguments is refused (ValueError)."""
  def __init__(self, launches: list, device: "CPUDevice | None" = None):
    if not launches: raise ValueError("a CPU graph needs at least one launch")
    self.device = device = device if device is not None else launches[0][0].device
    self.run = device.graph_trampoline.fn
    self.cur: list[list] = []       # the buffers (numpy handles) each launch is bound to now
    self.offsets: list[int] = []    # where launch i's pointers start in args
    fns, nargs = [], []
    for i, (prog, buffers, scalars, global_size, local_size) in enumerate(launches):
      if not isinstance(prog, CPUProgram) or prog.device is not device: raise ValueError(f"launch {i}: not a CPUProgram of {device.name}")
      if scalars: raise ValueError(f"launch {i} ({prog.name}): CPU graphs pass pointers only, this launch has {len(scalars)} scalars")
      if len(buffers) > GRAPH_MAX_ARGS: raise ValueError(f"launch {i} ({prog.name}): {len(buffers)} buffers, CPU graphs take at most {GRAPH_MAX_ARGS}")
      fns.append(ctypes.cast(prog.fn, ctypes.c_void_p).value)
      nargs.append(len(buffers))
      self.offsets.append(sum(nargs[:-1]))
      self.cur.append(list(buffers))
    self.n = len(launches)
    self.fns = (ctypes.c_void_p * self.n)(*fns)
    self.nargs = (ctypes.c_int32 * self.n)(*nargs)
    self.args = (ctypes.c_void_p * max(sum(nargs), 1))(*[_address(b) for bufs in self.cur for b in bufs])
    self.small = all(launch[3][0] <= 1 for launch in launches)   # single-threaded kernels: may run inline
    self.written = [b for bufs in self.cur for b in bufs]        # conservative, as CUDAGraph: all it touches
    self.last_seq = 0                                            # device sequence number of the last run

  def _rebind(self, i: int, buffers) -> None:
    cur = self.cur[i]
    if len(buffers) != len(cur): raise ValueError(f"graph launch {i}: takes {len(cur)} buffers, given {len(buffers)}")
    for j, b in enumerate(buffers):
      if b is cur[j]: continue
      if self.device.completed < self.last_seq:   # a queued run still reads args: give it its own copy
        self.args = type(self.args).from_buffer_copy(self.args)
        self.last_seq = 0
      self.args[self.offsets[i] + j] = _address(b)
      cur[j] = b
      self.written = None

  def __call__(self, buffers_per_launch=None, wait: bool = False, scalars_per_launch=None) -> float | None:
    if scalars_per_launch is not None and any(s for s in scalars_per_launch):
      raise ValueError("CPU graphs pass pointers only: scalars_per_launch must be empty")
    if buffers_per_launch is not None:
      for i, buffers in enumerate(buffers_per_launch):
        if buffers is not None: self._rebind(i, buffers)
      if self.written is None: self.written = [b for bufs in self.cur for b in bufs]
    dev = self.device
    elapsed = dev.submit(self.run, (ctypes.c_int32(self.n), self.fns, self.nargs, self.args), self.written, wait, inline=self.small)
    self.last_seq = dev.submitted
    return elapsed

def _run_calls(calls: list) -> None:
  for fn, args in calls: fn(*args)

class CPULaunchList(LaunchList):
  """Captured CPU launches run one by one from arguments built once (see LaunchList): one hand-off to the worker
  per call (on the caller's thread when every kernel is single-threaded and the device is idle), a native call per
  launch. Only the launches given new buffers rebuild their arguments."""
  def __init__(self, launches: list, device: "CPUDevice"):
    if not launches: raise ValueError("a launch list needs at least one launch")
    self.device = device
    self.calls: list[tuple] = []   # (kernel function, its ctypes arguments) per launch, in order
    self.cur: list[list] = []      # the buffers each launch is bound to now
    self.scalars: list[tuple] = []
    for i, (prog, buffers, scalars, global_size, local_size) in enumerate(launch[:5] for launch in launches):
      if not isinstance(prog, CPUProgram) or prog.device is not device: raise ValueError(f"launch {i}: not a CPUProgram of {device.name}")
      if not buffers: raise ValueError(f"launch {i} ({prog.name}): no buffers; a launch writes its first")
      self.calls.append((prog.fn, _kernel_args(buffers, scalars)))
      self.cur.append(list(buffers))
      self.scalars.append(tuple(scalars))
    self.small = all(launch[3][0] <= 1 for launch in launches)
    self.written = [bufs[0] for bufs in self.cur]           # as CPUProgram: a launch writes its first buffer
    self.last_seq = 0                                        # device sequence number of the last queued run

  def _rebind(self, i: int, buffers) -> None:
    cur = self.cur[i]
    if len(buffers) != len(cur): raise ValueError(f"launch {i}: takes {len(cur)} buffers, given {len(buffers)}")
    for b, c in zip(buffers, cur):
      if b is not c: break
    else: return
    if self.device.completed < self.last_seq:   # a queued run still walks the list: give it its own
      self.calls = self.calls[:]
      self.last_seq = 0
    fn, args = self.calls[i]
    args = list(args)
    for j, b in enumerate(buffers):
      if b is not cur[j]: args[j] = ctypes.c_void_p(_address(b))
    self.calls[i] = (fn, tuple(args))
    self.cur[i] = list(buffers)
    self.written[i] = buffers[0]

  def __call__(self, buffers_per_launch=None, wait: bool = False) -> float | None:
    if buffers_per_launch is not None:
      for i, buffers in enumerate(buffers_per_launch):
        if buffers is not None: self._rebind(i, buffers)
    dev = self.device
    if self.small and not wait and dev.completed == dev.submitted: return _run_calls(self.calls)   # as submit(inline=True)
    elapsed = dev.submit(_run_calls, (self.calls,), self.written, wait, inline=self.small)
    self.last_seq = dev.submitted
    return elapsed

class CPUDevice(Device):
  renderer = CRenderer()
  caps = DeviceCaps(threads=False, vector_widths=(8, 4), vector_arithmetic=True)
  graph = CPUGraph
  launch_list = CPULaunchList
  def __init__(self, name: str):
    super().__init__(name)
    self.target = cpu_target()
    self.allocator, self.program_class = CPUAllocator(self), CPUProgram
    self.queue: queue.SimpleQueue = queue.SimpleQueue()
    self.submitted = self.completed = 0
    self.done = threading.Condition()
    self.last_writer: dict[int, int] = {}     # id(buffer) -> sequence number of the last launch writing it
    self.freed_at: dict[int, int] = {}        # id(buffer) -> launches submitted when it was freed
    self.error: BaseException | None = None
    threading.Thread(target=self._worker, name="alloy-cpu", daemon=True).start()
  @functools.cached_property
  def compiler(self) -> CPUCompiler: return CPUCompiler()
  @functools.cached_property
  def graph_trampoline(self) -> CPUProgram:
    return self.load("alloy_graph_run", self.compiler.compile_cached(_trampoline_source()))

  def _worker(self):
    while True:
      seq, fn, args, timing = self.queue.get()
      start = time.perf_counter()
      try: fn(*args)
      except BaseException as e: self.error = e
      timing.append(time.perf_counter() - start)
      with self.done:
        self.completed = seq
        self.done.notify_all()

  def submit(self, fn, args, written, wait: bool, inline: bool = False):
    if inline and self.completed == self.submitted:
      start = time.perf_counter()
      fn(*args)
      return time.perf_counter() - start
    self.submitted += 1
    seq, timing = self.submitted, []
    for w in written: self.last_writer[id(w)] = seq
    self.queue.put((seq, fn, args, timing))
    if wait:
      self._wait_seq(seq)
      return timing[0]
    return None
  def _wait_seq(self, seq: int):
    if self.completed >= seq: return
    with self.done:
      while self.completed < seq: self.done.wait()
    if self.error is not None:
      err, self.error = self.error, None
      raise err
  def wait_for_writer(self, handle):
    if (seq := self.last_writer.get(id(handle))) is not None: self._wait_seq(seq)
  def synchronize(self): self._wait_seq(self.submitted)

def is_available() -> bool: return True
DEVICE_CLASS = CPUDevice
