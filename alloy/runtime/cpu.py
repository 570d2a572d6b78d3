"""The CPU device: C from the shared C-family renderer, compiled by the system C compiler, run by a worker thread.

Launches are asynchronous: they queue on one worker thread (ctypes releases the GIL while a kernel runs,
and kernels use OpenMP for their outer loop). copyout waits only for the launches that write its buffer.
"""
from __future__ import annotations
import ctypes, functools, os, platform, queue, shutil, subprocess, tempfile, threading, time
import numpy as np
from alloy.codegen.opts import DeviceCaps
from alloy.renderer.c import CRenderer
from alloy.runtime.device import Allocator, LRUAllocator, Compiler, CompileError, Program, Device

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
  def copyin(self, handle, src: memoryview):
    self.device.wait_for_writer(handle)
    handle[:] = np.frombuffer(src, dtype=np.uint8)
  def copyout(self, dst: memoryview, handle):
    self.device.wait_for_writer(handle)
    np.frombuffer(dst, dtype=np.uint8)[:] = handle
  def transfer(self, dst, src, nbytes: int):
    self.device.wait_for_writer(src)
    dst[:nbytes] = src[:nbytes]

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
    args = [ctypes.c_void_p(b.ctypes.data) for b in buffers] + [ctypes.c_int32(s) for s in scalars]
    # a small (single-threaded) kernel on an idle device runs on the caller's thread: handing it to the
    # worker costs more in GIL hand-offs than the kernel itself, and it is complete when this returns
    small = global_size[0] <= 1
    return self.device.submit(self.fn, args, [buffers[i] for i in range(outs)], wait, inline=small)

class CPUDevice(Device):
  renderer = CRenderer()
  caps = DeviceCaps(threads=False)
  graph = None
  graph_unavailable = "graph batching for CPU is not built yet: each captured launch is replayed one by one"
  def __init__(self, name: str):
    super().__init__(name)
    self.target = cpu_target()
    self.allocator, self.program_class = CPUAllocator(self), CPUProgram
    self.queue: queue.SimpleQueue = queue.SimpleQueue()
    self.submitted = self.completed = 0
    self.done = threading.Condition()
    self.last_writer: dict[int, int] = {}     # id(buffer) -> sequence number of the last launch writing it
    self.error: BaseException | None = None
    threading.Thread(target=self._worker, name="alloy-cpu", daemon=True).start()
  @functools.cached_property
  def compiler(self) -> CPUCompiler: return CPUCompiler()

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
