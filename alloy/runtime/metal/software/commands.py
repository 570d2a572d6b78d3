"""The stand-ins for Metal's command objects: queue, command buffer, compute and blit encoders, indirect command buffer.
An encoder checks what Metal's validation layer would and records each dispatch (with a snapshot of its bindings and
the software options); commit hands the command buffer to the host (host.py), which runs it in the worker.

A concurrent compute encoder (MTLDispatchTypeConcurrent) orders only what its memory barriers order: the dispatches
between two barriers form a segment the worker runs in the `dispatch_order` option's order (reverse by default), so
a missing barrier changes the results. With the `hazards` option (on by default) a dispatch that reads a buffer an
earlier dispatch of its segment wrote, or writes one such a dispatch read or wrote, raises MetalHazardError naming both
kernels. What a kernel writes is known from its signature: the slots not declared const (the pipeline's `_writes`)."""
from __future__ import annotations
import itertools, random, time
from typing import TYPE_CHECKING
from alloy.runtime.metal.software.base import (MAX_SET_BYTES, MAX_THREADS_PER_THREADGROUP, MTLCommandBufferStatusCommitted,
                                               MTLCommandBufferStatusCompleted, MTLCommandBufferStatusError, MTLCommandBufferStatusNotEnqueued,
                                               MTLDispatchTypeConcurrent, MTLDispatchTypeSerial, SIMD_WIDTH, NSObject, as_bytes, check_index, size3)
from alloy.runtime.metal.software.errors import MetalHazardError, MetalLimitError, MetalValidationError
from alloy.runtime.metal.software.host import HOST
from alloy.runtime.metal.software.options import OPTIONS, ORDERS
from alloy.runtime.metal.software.resources import Buffer, MTLIndirectCommandBufferDescriptor
if TYPE_CHECKING: from alloy.runtime.metal.software.device import SoftwareDevice

class Dispatch:
  """One encoded dispatch: pipeline, sizes, a snapshot of the bindings and the software options."""
  __slots__ = ("pso", "groups", "tg", "grid", "nonuniform", "bindings", "order", "poison", "strict", "seed", "segment")
  def __init__(self, pso, groups, tg, grid, nonuniform, bindings):
    self.pso, self.groups, self.tg, self.grid, self.nonuniform = pso, groups, tg, grid, nonuniform
    self.bindings = dict(bindings)
    o = OPTIONS
    self.order, self.poison, self.strict = ORDERS[o["order"]], int(bool(o["poison"])), int(bool(o["strict"]))
    self.seed = int(o["seed"]) & 0xFFFFFFFFFFFFFFFF
    self.segment = None   # in a concurrent encoder: which run between barriers it belongs to
  def buffers(self, written: bool):
    """The buffers this dispatch binds in slots it may write (written=True) or only reads: only the kernel's own
    arguments, as bindings left at higher indices by an earlier dispatch of the encoder are not accessed."""
    mask, slots = self.pso._writes, self.pso._slots
    return [b[0] for i, b in self.bindings.items()
            if slots >> i & 1 and not isinstance(b, bytes) and b[0] is not None and bool(mask >> i & 1) == written]
  def wire(self):
    binds = []
    for idx, b in sorted(self.bindings.items()):
      if isinstance(b, bytes): binds.append((idx, 1, b, 0))
      elif b[0] is None: binds.append((idx, 2, None, 0))
      else: binds.append((idx, 0, b[0]._id, b[1]))
    return ("dispatch", self.pso._name, self.pso._id, self.groups, self.tg, self.grid, self.nonuniform, binds,
            self.order, self.poison, self.strict, self.seed)

def make_dispatch(pso, bindings, groups, tg, grid, nonuniform, where: str) -> Dispatch | None:
  if pso is None: raise MetalValidationError(f"{where}: no compute pipeline state set")
  if 0 in groups or (nonuniform and 0 in grid): return None  # an empty grid is a no-op, as on Metal
  n = tg[0] * tg[1] * tg[2]
  limit = pso.maxTotalThreadsPerThreadgroup()
  if n == 0 or n > limit or max(tg) > MAX_THREADS_PER_THREADGROUP:
    raise MetalLimitError(f"{where}: threadgroup size {tg[0]}x{tg[1]}x{tg[2]} = {n} threads is invalid for kernel '{pso._name}' "
                          f"(maxTotalThreadsPerThreadgroup {limit}, threadExecutionWidth {SIMD_WIDTH}, "
                          f"staticThreadgroupMemoryLength {pso._tg_memory})")
  if any(v >= 1 << 32 for v in (*groups, *grid)): raise MetalLimitError(f"{where}: grid {groups} x {tg} does not fit 32-bit thread positions")
  for i in range(pso._nargs):
    if i not in bindings:
      raise MetalValidationError(f"{where}: kernel '{pso._name}' takes {pso._nargs} positional buffer/constant arguments but index {i} is not bound")
  return Dispatch(pso, groups, tg, grid, nonuniform, bindings)

_segments = itertools.count(1)

class ComputeCommandEncoder(NSObject):
  def __init__(self, cb: "CommandBuffer", dispatch_type: int = MTLDispatchTypeSerial):
    self._cb, self._pso, self._bindings, self._ended, self._type = cb, None, {}, False, int(dispatch_type)
    self._segment = next(_segments)
    self._wrote: dict = {}   # concurrent: buffer id -> the kernel of this segment that wrote it
    self._read: dict = {}    # concurrent: buffer id -> a kernel of this segment that read it
  def _add(self, d):
    if self._ended: raise MetalValidationError("encoder used after endEncoding")
    if d is None: return
    if self._type == MTLDispatchTypeConcurrent:
      d.segment = self._segment
      if OPTIONS["hazards"]: self._check_hazards(d)
    self._cb._items.append(d)
  def _check_hazards(self, d: Dispatch) -> None:
    reads, writes = d.buffers(False), d.buffers(True)
    def hazard(b, access: str, other: str, other_access: str):
      raise MetalHazardError(f"missing memory barrier: kernel '{d.pso._name}' {access} a {b._length}-byte buffer that kernel '{other}' "
                             f"{other_access} earlier in the same concurrent compute encoder, with no barrier between them", d.pso._name, other)
    for b in reads + writes:   # read after write, write after write
      if (other := self._wrote.get(b._id)) is not None: hazard(b, "writes" if b in writes else "reads", other, "wrote")
    for b in writes:           # write after read
      if (other := self._read.get(b._id)) is not None: hazard(b, "writes", other, "read")
    for b in reads: self._read[b._id] = d.pso._name
    for b in writes: self._wrote[b._id] = d.pso._name
  def setComputePipelineState_(self, pso): self._pso = pso
  def setBuffer_offset_atIndex_(self, buf, offset, index):
    index = check_index(index, "setBuffer")
    if buf is not None and not 0 <= int(offset) <= buf._length:
      raise MetalValidationError(f"setBuffer: offset {offset} outside a {buf._length}-byte buffer")
    self._bindings[index] = (buf, int(offset))
  def setBufferOffset_atIndex_(self, offset, index):
    index = check_index(index, "setBufferOffset")
    b = self._bindings.get(index)
    if b is None or isinstance(b, bytes): raise MetalValidationError(f"setBufferOffset: no buffer at index {index}")
    self._bindings[index] = (b[0], int(offset))
  def setBuffers_offsets_withRange_(self, bufs, offsets, rng):
    loc, length = tuple(rng)
    for i in range(length): self.setBuffer_offset_atIndex_(bufs[i], offsets[i], loc + i)
  def setBytes_length_atIndex_(self, data, length, index):
    index = check_index(index, "setBytes")
    if int(length) >= MAX_SET_BYTES:
      raise MetalLimitError(f"setBytes: {length} bytes is too large; setBytes only takes data smaller than "
                            f"{MAX_SET_BYTES} bytes (4 KiB); put it in a buffer")
    self._bindings[index] = as_bytes(data, int(length))
  def setThreadgroupMemoryLength_atIndex_(self, length, index):
    raise NotImplementedError("software Metal: dynamic threadgroup memory ([[threadgroup(n)]]) is not supported")
  def dispatchThreadgroups_threadsPerThreadgroup_(self, groups, tg):
    g, t = size3(groups), size3(tg)
    self._add(make_dispatch(self._pso, self._bindings, g, t, tuple(a * b for a, b in zip(g, t)), 0, "dispatchThreadgroups"))
  def dispatchThreads_threadsPerThreadgroup_(self, grid, tg):
    n, t = size3(grid), size3(tg)
    g = tuple(-(-a // b) if b else 0 for a, b in zip(n, t))
    self._add(make_dispatch(self._pso, self._bindings, g, t, n, 1, "dispatchThreads"))
  def executeCommandsInBuffer_withRange_(self, icb, rng):
    loc, length = tuple(rng)
    if loc < 0 or loc + length > len(icb._commands):
      raise MetalValidationError(f"executeCommandsInBuffer: range {loc}+{length} outside an indirect command buffer of {len(icb._commands)} commands")
    for c in icb._commands[loc:loc + length]:
      if c._sizes is None: continue
      pso = self._pso if icb._inherit_pso else c._pso
      bindings = self._bindings if icb._inherit_buffers else c._bindings
      g, t, grid, nonuniform = c._sizes
      self._add(make_dispatch(pso, bindings, g, t, grid, nonuniform, "indirect compute command"))
  def memoryBarrierWithScope_(self, scope):
    """Everything before it is complete and visible to everything after it: a new segment."""
    self._segment = next(_segments)
    self._wrote.clear()
    self._read.clear()
  def memoryBarrierWithResources_count_(self, resources, count):
    """Orders the accesses to these resources; executed as a full barrier (stronger, never wrong)."""
    self._segment = next(_segments)
    for r in list(resources)[:int(count)]:
      self._wrote.pop(r._id, None)
      self._read.pop(r._id, None)
  def useResource_usage_(self, resource, usage): pass
  def useResources_count_usage_(self, resources, count, usage): pass
  def useHeap_(self, heap): pass
  def dispatchType(self): return self._type
  def endEncoding(self): self._ended = True

class BlitCommandEncoder(NSObject):
  def __init__(self, cb: "CommandBuffer"): self._cb = cb
  def copyFromBuffer_sourceOffset_toBuffer_destinationOffset_size_(self, src, soff, dst, doff, size):
    soff, doff, size = int(soff), int(doff), int(size)
    if soff + size > src._length or doff + size > dst._length: raise MetalValidationError(f"blit copy of {size} bytes runs past the end of a buffer")
    self._cb._items.append(("copy", src, soff, dst, doff, size))
  def fillBuffer_range_value_(self, buf, rng, value):
    loc, length = tuple(rng)
    if loc + length > buf._length: raise MetalValidationError("fillBuffer range runs past the end of the buffer")
    self._cb._items.append(("fill", buf, int(loc), int(length), int(value) & 0xFF))
  def synchronizeResource_(self, resource): pass
  def endEncoding(self): pass

class CommandBuffer(NSObject):
  """Runs in the worker after commit, in commit order. _resources, _wire_items and _finish are the host's side of it."""
  def __init__(self, queue: "CommandQueue"):
    self._queue, self._items, self._status, self._error = queue, [], MTLCommandBufferStatusNotEnqueued, None
    self._seq, self._done, self._handlers, self._timeout = 0, False, [], None
    self._gpu_start = self._gpu_end = 0.0
    self._commit_time = self._complete_time = 0.0
  def computeCommandEncoder(self): return ComputeCommandEncoder(self)
  def computeCommandEncoderWithDispatchType_(self, t): return ComputeCommandEncoder(self, t)
  def blitCommandEncoder(self): return BlitCommandEncoder(self)
  def commandQueue(self): return self._queue
  def device(self): return self._queue._device
  def enqueue(self): pass

  def _resources(self):
    buffers, pipelines = {}, {}
    for it in self._items:
      if isinstance(it, Dispatch):
        pipelines[it.pso._id] = it.pso
        for b in it.bindings.values():
          if not isinstance(b, bytes) and b[0] is not None: buffers[b[0]._id] = b[0]
      else:
        for b in it[1:]:
          if isinstance(b, Buffer): buffers[b._id] = b
    return list(buffers.values()), list(pipelines.values())

  def _wire_items(self):
    out, run = [], []   # run: the dispatches of one concurrent segment, reordered as the worker may run them
    order = OPTIONS["dispatch_order"]
    def flush():
      if order == "reverse": run.reverse()
      elif order == "shuffled": random.Random(int(OPTIONS["seed"]) ^ len(out)).shuffle(run)
      out.extend(d.wire() for d in run)
      run.clear()
    for it in self._items:
      if isinstance(it, Dispatch) and it.segment is not None:
        if run and run[-1].segment != it.segment: flush()
        run.append(it)
        continue
      flush()
      if isinstance(it, Dispatch): out.append(it.wire())
      elif it[0] == "copy": out.append(("copy", it[1]._id, it[2], it[3]._id, it[4], it[5]))
      else: out.append(("fill", it[1]._id, it[2], it[3], it[4]))
    flush()
    return out

  def commit(self):
    if self._status != MTLCommandBufferStatusNotEnqueued: raise MetalValidationError("commit: command buffer was already committed")
    self._status = MTLCommandBufferStatusCommitted
    self._commit_time = time.clock_gettime(time.CLOCK_MONOTONIC)
    HOST.submit(self)

  def _finish(self, error, t0: float, t1: float):
    self._error, self._gpu_start, self._gpu_end = error, t0, t1
    self._status = MTLCommandBufferStatusError if error is not None else MTLCommandBufferStatusCompleted
    self._complete_time = time.clock_gettime(time.CLOCK_MONOTONIC)
    self._done = True
    self._items = []  # drop references to buffers and pipelines
    for h in self._handlers: h(self)

  def waitUntilCompleted(self):
    if self._status == MTLCommandBufferStatusNotEnqueued:
      raise MetalValidationError("waitUntilCompleted on a command buffer that was never committed")
    HOST.wait(self)
  def waitUntilScheduled(self): pass
  def addCompletedHandler_(self, fn):
    """Handlers run on the calling thread when the host notices completion (wait/status/commit)."""
    if self._done: fn(self)
    else: self._handlers.append(fn)
  def status(self):
    if not self._done and self._status != MTLCommandBufferStatusNotEnqueued: HOST.poll()
    return self._status
  def error(self):
    if not self._done and self._status != MTLCommandBufferStatusNotEnqueued: HOST.poll()
    return self._error
  def GPUStartTime(self): return self._gpu_start
  def GPUEndTime(self): return self._gpu_end
  def kernelStartTime(self): return self._commit_time
  def kernelEndTime(self): return self._complete_time

class CommandQueue(NSObject):
  def __init__(self, device: "SoftwareDevice"): self._device = device
  def commandBuffer(self): return CommandBuffer(self)
  def commandBufferWithUnretainedReferences(self): return CommandBuffer(self)
  def device(self): return self._device

class IndirectComputeCommand:
  def __init__(self, icb: "IndirectCommandBuffer"):
    self._icb = icb
    self.reset()
  def reset(self): self._pso, self._bindings, self._sizes, self._barrier = None, {}, None, False
  def setComputePipelineState_(self, pso): self._pso = pso
  def setKernelBuffer_offset_atIndex_(self, buf, offset, index):
    index = check_index(index, "setKernelBuffer")
    if index >= self._icb._max_bind: raise MetalLimitError(f"setKernelBuffer: index {index} >= maxKernelBufferBindCount {self._icb._max_bind}")
    self._bindings[index] = (buf, int(offset))
  def concurrentDispatchThreadgroups_threadsPerThreadgroup_(self, groups, tg):
    g, t = size3(groups), size3(tg)
    self._sizes = (g, t, tuple(a * b for a, b in zip(g, t)), 0)
  def concurrentDispatchThreads_threadsPerThreadgroup_(self, grid, tg):
    n, t = size3(grid), size3(tg)
    self._sizes = (tuple(-(-a // b) if b else 0 for a, b in zip(n, t)), t, n, 1)
  def setThreadgroupMemoryLength_atIndex_(self, length, index):
    raise NotImplementedError("software Metal: dynamic threadgroup memory is not supported")
  def setBarrier(self): self._barrier = True  # commands run one after another anyway
  def clearBarrier(self): self._barrier = False

class IndirectCommandBuffer(NSObject):
  def __init__(self, device, desc: MTLIndirectCommandBufferDescriptor, count: int):
    self._device, self._inherit_buffers, self._inherit_pso = device, desc._inherit_buffers, desc._inherit_pso
    self._max_bind = desc._max_bind
    self._commands = [IndirectComputeCommand(self) for _ in range(int(count))]
  def size(self): return len(self._commands)
  def indirectComputeCommandAtIndex_(self, i): return self._commands[int(i)]
  def resetWithRange_(self, rng):
    loc, length = tuple(rng)
    for c in self._commands[loc:loc + length]: c.reset()
