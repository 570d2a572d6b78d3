"""The device contract: Allocator, Compiler, Program, LaunchList, Device (the registry is registry.py).

Every device is one folder in this package that subclasses these. Stages stay separate:
compile (source -> bytes, cached on disk) is not load (bytes -> Program, i.e. pipeline creation),
and launching (Program.__call__) returns at once; completion is observed through Device.synchronize
or a launch with wait=True, which returns the time measured by the device's own clock.
"""
from __future__ import annotations
import collections, functools, threading, time, weakref
from typing import Any
from alloy.helpers import DEBUG, disk_cache_get, disk_cache_put, getenv

class CompileError(RuntimeError):
  """A kernel failed to compile. Carries the source and the compiler's message."""
  def __init__(self, message: str, source: str = ""):
    self.source, self.message = source, message
    numbered = "\n".join(f"{i+1:4d} {line}" for i, line in enumerate(source.splitlines()))
    super().__init__(f"{message}\n--- source ---\n{numbered}" if source else message)

class DeviceOutOfMemory(MemoryError):
  pass

class Allocator:
  """Raw device memory. Subclasses implement _alloc/_free/copyin/copyout on opaque handles."""
  def alloc(self, nbytes: int) -> Any: return self._alloc(nbytes)
  def free(self, handle: Any, nbytes: int) -> None: self._free(handle, nbytes)
  def _alloc(self, nbytes: int) -> Any: raise NotImplementedError
  def _free(self, handle: Any, nbytes: int) -> None: raise NotImplementedError
  def copyin(self, handle: Any, src: memoryview) -> None: raise NotImplementedError
  def copyout(self, dst: memoryview, handle: Any) -> None: raise NotImplementedError

class LRUAllocator(Allocator):
  """Keeps freed buffers by size and hands them out again; frees the cache when memory runs out. At most
  max_cached_bytes and max_cached_buffers stay cached (a buffer may hold more than memory: the software Metal
  device's each hold a file descriptor, and many distinct sizes would run a process out of them)."""
  def __init__(self, max_cached_bytes: int = 1 << 30, max_cached_buffers: int = 4096):
    self.cache: collections.OrderedDict[int, list] = collections.OrderedDict()
    self.cached_bytes, self.max_cached_bytes = 0, max_cached_bytes
    self.cached_buffers, self.max_cached_buffers = 0, max_cached_buffers
    self.keep = getenv("ALLOY_LRU", 1) != 0   # read once: every free would pay for the environment lookup
    self.cache_lock = threading.Lock()
  def alloc(self, nbytes: int) -> Any:
    with self.cache_lock:   # threads share the cache: a handle must go to one of them
      if (handles := self.cache.get(nbytes)):
        self.cached_bytes -= nbytes
        self.cached_buffers -= 1
        handle = handles.pop()
        if not handles: del self.cache[nbytes]
        return handle
    try: return self._alloc(nbytes)
    except DeviceOutOfMemory:
      self.free_cache()
      return self._alloc(nbytes)
  def free(self, handle: Any, nbytes: int) -> None:
    if not self.keep or nbytes > self.max_cached_bytes: return self._free(handle, nbytes)
    evicted = []
    with self.cache_lock:
      if (handles := self.cache.get(nbytes)) is None: self.cache[nbytes] = [handle]
      else:
        handles.append(handle)
        self.cache.move_to_end(nbytes)
      self.cached_bytes += nbytes
      self.cached_buffers += 1
      while self.cached_bytes > self.max_cached_bytes or self.cached_buffers > self.max_cached_buffers:
        size, handles = next(iter(self.cache.items()))   # evict the least recently freed sizes
        evicted.append((handles.pop(), size))
        self.cached_bytes -= size
        self.cached_buffers -= 1
        if not handles: del self.cache[size]
    for h, size in evicted: self._free(h, size)
  def free_cache(self) -> None:
    with self.cache_lock:
      cached, self.cache, self.cached_bytes, self.cached_buffers = self.cache, collections.OrderedDict(), 0, 0
    for size, handles in cached.items():
      for h in handles: self._free(h, size)

class Compiler:
  """source -> binary. Pure, so results are cached on disk by (identity, source)."""
  identity = "base"   # compiler name, version and flags: part of the cache key
  def compile(self, source: str) -> bytes: raise NotImplementedError
  def compile_cached(self, source: str) -> bytes:
    key = self.identity + "\0" + source
    if (binary := disk_cache_get("compile", key)) is not None: return binary
    binary = self.compile(source)
    disk_cache_put("compile", key, binary)
    return binary

# Loaded programs a device keeps by (name, binary), least recently loaded out first. A program nothing else holds is
# unloaded when it goes (each device's Program frees its library once no queued launch uses it): every CPU kernel
# is a mapped shared library, and a process runs out of memory maps after some ten thousand of them.
PROGRAM_CACHE_SIZE = getenv("ALLOY_PROGRAM_CACHE", 1024)

class Program:
  """A loaded kernel (pipeline). Calling it checks limits, submits and returns at once;
  with wait=True it blocks and returns the device-measured seconds. Its library is unloaded when the object goes."""
  def __init__(self, device: "Device", name: str, binary: bytes): raise NotImplementedError
  def __call__(self, buffers: list, scalars: tuple = (), global_size=(1, 1, 1), local_size=(1, 1, 1),
               wait: bool = False) -> float | None: raise NotImplementedError

def rebound(n: int, buffers_per_launch, scalars_per_launch):
  """(launch number, its new buffers or None, its new scalars or None) for each of n launches a replay rebinds."""
  if buffers_per_launch is None and scalars_per_launch is None: return
  for i in range(n):
    b = buffers_per_launch[i] if buffers_per_launch is not None else None
    s = scalars_per_launch[i] if scalars_per_launch is not None else None
    if b is not None or s is not None: yield i, b, s

class LaunchList:
  """Captured launches replayed one by one, in order: what the jit runs where it uses no graph.
  LaunchList(launches, device) takes launches as a Graph does, [(program, buffers, scalars, global_size, local_size), ...];
  __call__(buffers_per_launch=None, wait=False, scalars_per_launch=None): an entry of buffers_per_launch (or
  scalars_per_launch) that is not None rebinds that launch's buffers (or int32 scalars), for this call and the later
  ones. Each launch writes its first buffer, as a Program call with one output.
  wait=True blocks and returns device seconds. This one calls each Program; a device subclasses it to check every
  launch once, here, and keep its encoded arguments between calls, re-encoding only the rebound ones."""
  def __init__(self, launches: list, device: "Device"):
    if not launches: raise ValueError("a launch list needs at least one launch")
    self.device = device
    self.launches = [list(launch[:5]) for launch in launches]
  def __call__(self, buffers_per_launch=None, wait: bool = False, scalars_per_launch=None) -> float | None:
    if buffers_per_launch is not None:
      for launch, buffers in zip(self.launches, buffers_per_launch):
        if buffers is not None: launch[1] = buffers
    if scalars_per_launch is not None:
      for i, (launch, scalars) in enumerate(zip(self.launches, scalars_per_launch)):
        if scalars is None: continue
        if len(scalars) != len(launch[2]): raise ValueError(f"launch {i}: takes {len(launch[2])} scalars, given {len(scalars)}")
        launch[2] = tuple(scalars)
    elapsed = [prog(buffers, scalars, global_size, local_size, wait=wait) for prog, buffers, scalars, global_size, local_size in self.launches]
    return sum(elapsed) if wait else None

# told of every command buffer an encoder commits (the trace recorder listens): listener(CommandBufferRecord)
commit_listeners: list = []

class CommandBufferRecord:
  """What one committed command buffer held: its device, its kernels in encoding order, its dispatch and barrier
  counts, and the host times (perf_counter seconds) of its first encoded dispatch and of its commit."""
  __slots__ = ("device", "kernels", "dispatches", "barriers", "opened", "committed")
  def __init__(self, device: str, kernels: list, dispatches: int, barriers: int, opened: float, committed: float):
    self.device, self.kernels, self.dispatches, self.barriers, self.opened, self.committed = device, kernels, dispatches, barriers, opened, committed
  def __repr__(self): return f"<command buffer {self.device}: {self.dispatches} dispatches, {self.barriers} barriers>"

class CommandEncoder:
  """A device's open command buffer: launches are encoded into it, and it goes to the device (commit) once it holds
  max_dispatches dispatches or max_bytes of bound buffers, or when the host needs a value it computes. A device
  subclass encodes (its own dispatch method, which books each dispatch here with `encoded`), orders dispatches
  (a barrier only where one reads or writes what an earlier one of the same command buffer wrote, or writes what it
  read) and commits (_commit). The public counters: command buffers committed, dispatches and barriers encoded.
  DEBUG=2 prints each commit; commit_listeners hear of each (the trace's command-buffer slices)."""
  def __init__(self, device: "Device", max_dispatches: int, max_bytes: int):
    self.device, self.max_dispatches, self.max_bytes = device, max(int(max_dispatches), 1), int(max_bytes)
    self.committed = self.dispatched = self.barriers = 0
    self.open_kernels: list = []
    self.open_barriers = self.open_bytes = 0
    self.opened = 0.0
  def encoded(self, name: str, nbytes: int, barrier: bool) -> bool:
    """Book one dispatch of kernel `name` binding nbytes of buffers (after a barrier or not); True when the command
    buffer is full and the caller should commit it."""
    if not self.open_kernels and (DEBUG >= 2 or commit_listeners): self.opened = time.perf_counter()
    self.open_kernels.append(name)
    self.dispatched += 1
    if barrier:
      self.open_barriers += 1
      self.barriers += 1
    self.open_bytes += nbytes
    return len(self.open_kernels) >= self.max_dispatches or self.open_bytes >= self.max_bytes
  def commit(self) -> None:
    """Send the open command buffer to the device (nothing when it is empty); returns at once."""
    if not self.open_kernels: return
    kernels, barriers = self.open_kernels, self.open_barriers
    self.open_kernels, self.open_barriers, self.open_bytes = [], 0, 0
    self._commit(kernels)
    self.committed += 1
    if DEBUG >= 2 or commit_listeners: self.report(kernels, barriers, self.opened)
  def report(self, kernels: list, barriers: int, opened: float) -> None:
    """Tell DEBUG=2 and the commit listeners of a committed command buffer."""
    record = CommandBufferRecord(self.device.name, kernels, len(kernels), barriers, opened, time.perf_counter())
    if DEBUG >= 2:
      print(f"  commit {self.device.name} command buffer {self.committed}: {record.dispatches} dispatch{'es' if record.dispatches != 1 else ''}, "
            f"{barriers} barrier{'s' if barriers != 1 else ''}")
    for listener in commit_listeners: listener(record)
  def _commit(self, kernels: list) -> None:
    """Send the open command buffer, which holds one dispatch of each of `kernels` (their names)."""
    raise NotImplementedError

class Device:
  """One device: declares its renderer, target and stages, and waits for in-flight work."""
  renderer: Any = None           # instance of a renderer.Renderer subclass
  target: str = "unknown"        # e.g. x86-64+avx2, sm_90, Apple7
  graph: Any = None              # Graph class batching captured launches, or None
  graph_unavailable: str = ""    # why graph is None
  launch_list: type[LaunchList] = LaunchList   # replays captured launches one by one (see LaunchList)
  encoder: CommandEncoder                      # the open command buffer launches go into (see CommandEncoder)
  queue_bytes: int = 64 << 20                  # backpressure's budget of queued output bytes (engine/backpressure.py)
  def __init__(self, name: str):
    self.name = name
    self.allocator: Allocator
    self.compiler: Compiler
    self.program_class: type[Program]
  @functools.cached_property
  def _programs(self) -> collections.OrderedDict: return collections.OrderedDict()
  @functools.cached_property
  def _loaded(self) -> weakref.WeakValueDictionary: return weakref.WeakValueDictionary()   # every live one, held or not
  @functools.cached_property
  def _loading(self) -> threading.Lock: return threading.Lock()
  def load(self, name: str, binary: bytes) -> Program:
    """Pipeline creation, once per (kernel name, binary) while the program lives; the last PROGRAM_CACHE_SIZE loaded
    are kept alive here (the caller keeps any other it needs: a compiled kernel, a captured launch)."""
    key = (name, binary)
    with self._loading:
      if (prog := self._programs.get(key)) is not None:
        self._programs.move_to_end(key)
        return prog
      if (prog := self._loaded.get(key)) is None: prog = self._loaded[key] = self.program_class(self, name, binary)
      self._programs[key] = prog
      while len(self._programs) > PROGRAM_CACHE_SIZE: self._programs.popitem(last=False)
    return prog
  def loaded_programs(self) -> int:
    """How many of this device's programs are loaded (alive), whoever holds them."""
    return len(self._loaded)
  def synchronize(self) -> None: raise NotImplementedError
  def fence(self) -> Any:
    """A point in this device's queue, after everything submitted so far (engine/backpressure.py waits on it)."""
    return None
  def wait_fence(self, fence: Any) -> None:
    """Block until the work submitted before `fence` has run. A device without fences waits for everything."""
    self.synchronize()
  def __repr__(self): return f"<Device {self.name} target={self.target}>"
