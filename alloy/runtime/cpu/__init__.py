"""The CPU device: C from the shared C-family renderer, compiled by the system C compiler, run by a native queue.

Launches are asynchronous: they queue on a worker pthread that runs them in order without the GIL (queue.py,
queue.c); a parallel kernel's outer loop is split between the worker and a team of threads (team.py, team.c).
copyout waits only for the launches that write its buffer. CPUGraph and CPULaunchList (graph.py) run a captured list
of launches as one queue entry. The stages: compiler.py, allocator.py, program.py (a launch beyond the queue's
argument limits is called through ctypes on the caller's thread once everything queued has run), encoder.py (the
command-encoder interface over the queue: each entry is a command buffer, sent as it is encoded).
"""
from __future__ import annotations
import atexit, collections, ctypes, dataclasses, functools, os, threading, time
from alloy.caps import DeviceCaps
from alloy.renderer.c import CRenderer
from alloy.runtime.device import Device
from alloy.runtime.cpu.allocator import CPUAllocator
from alloy.runtime.cpu.compiler import CPUCompiler, bf16_dot_products, cpu_target, vector_isa
from alloy.runtime.cpu.graph import CPUGraph, CPULaunchList
from alloy.runtime.cpu.encoder import CPUCommandEncoder
from alloy.runtime.cpu.program import CPUProgram
from alloy.runtime.cpu.queue import CPUQueue, queue_binary

# registers: AVX2's (and NEON's) 16 vector registers of 8 float32; shared_bytes: a packed panel lives on the kernel
# thread's stack (16 MB)
CAPS_8_WIDE = DeviceCaps(threads=False, vector_widths=(8, 4), vector_arithmetic=True, registers=16 * 8, shared_bytes=1 << 18)
# AVX-512: 32 registers of 16 float32, so matmul's register tile is 8 x 32 (opts.py); a panel of 32 columns is
# 128 bytes per step of the reduction: up to 1 MB, K = 8192, half the 2 MB L2 of the machines measured (read in place,
# a power-of-two row length puts every step's columns in one cache set)
CAPS_AVX512 = DeviceCaps(threads=False, vector_widths=(16, 8, 4), vector_arithmetic=True, registers=32 * 16,
                         shared_bytes=1 << 20)

def cpu_caps() -> DeviceCaps:
  """The caps of the vector extension kernels are built for (compiler.vector_isa: the CPU's, or ALLOY_CPU_ISA's); with
  AVX512-BF16, bfloat16 matmuls rendered whole (engine/cpu_bf16.py)."""
  caps = CAPS_AVX512 if vector_isa() == "avx512f" else CAPS_8_WIDE
  return dataclasses.replace(caps, whole_matmuls=("bfloat16",)) if bf16_dot_products() else caps

class CPUDevice(Device):
  renderer = CRenderer()
  caps = CAPS_8_WIDE   # the class's; each device takes cpu_caps() for the CPU it runs on
  graph = CPUGraph
  launch_list = CPULaunchList
  def __init__(self, name: str):
    super().__init__(name)
    self.target, self.caps = cpu_target(), cpu_caps()
    self.allocator, self.program_class = CPUAllocator(self), CPUProgram
    self.submitted = 0                        # the number of the last queued entry (they count from 1)
    self._completed = ctypes.c_int64(0)       # the last entry run to its end: the queue's own counter once it starts
    self.last_writer: dict[int, int] = {}     # id(buffer) -> number of the last entry writing it
    self.freed_at: dict[int, int] = {}        # id(buffer) -> entries submitted when it was freed
    self.kept: collections.deque = collections.deque()   # (entry number, object an entry up to it may use)
    # threads submit one at a time: the queue's staging area, its last inline time and `submitted` are shared
    self.submitting = threading.Lock()
    self.encoder = CPUCommandEncoder(self)
  @functools.cached_property
  def compiler(self) -> CPUCompiler: return CPUCompiler()
  @functools.cached_property
  def queue(self) -> CPUQueue:
    self.queue_program = self.load("alloy_queue_start", queue_binary(self.compiler))   # held: its library runs the worker
    queue = CPUQueue(self.queue_program.lib, self.submitted)
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

  def submitted_entry(self, seq: int, written) -> float | None:
    """Book queue entry seq (0: it ran on this thread), which writes `written`; the encoder holds `submitting`."""
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
  def wait_seq(self, seq: int) -> None:
    """Block until queued entry seq has run (0: nothing to wait for)."""
    if seq: self.queue.wait(seq)
  def fence(self) -> int: return self.submitted
  def wait_fence(self, fence: int) -> None: self.wait_seq(fence)
  def wait_for_writer(self, handle):
    if (seq := self.last_writer.get(id(handle))) is not None: self.wait_seq(seq)
  def synchronize(self) -> None:
    self.wait_seq(self.submitted)
    self.last_writer.clear()   # all complete: nothing to wait for
    self.freed_at.clear()
    self.kept.clear()

def is_available() -> bool: return True
DEVICE_CLASS = CPUDevice
