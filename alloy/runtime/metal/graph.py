"""MetalGraph: captured launches replayed as one indirect command buffer (the Metal back end of @jit)."""
from __future__ import annotations
import struct
from typing import TYPE_CHECKING
from alloy.helpers import round_up
from alloy.runtime.metal.program import MAX_BUFFER_BINDINGS, MetalProgram, scalars_packed
if TYPE_CHECKING: from alloy.runtime.metal import MetalDevice

MAX_ICB_COMMANDS = 16384   # executeCommandsInBuffer's documented range limit (mac2 family)
# a kernel's scalars are `constant int&` bindings, one per word, or one `constant int*` to all of them (MetalRenderer):
# on macOS a constant-space binding's offset must be a multiple of 256 bytes, so each binding has a slot of its own
SCALAR_SLOT = 256

class MetalGraph:
  """The captured launches as one indirect command buffer, a barrier before each command.
  MetalGraph(launches, device=None) with launches [(program, buffers, scalars, global_size, local_size), ...].
  __call__(buffers_per_launch=None, wait=False, scalars_per_launch=None) replays it; a non-None entry rebinds
  that command's buffers (or rewrites its scalars, which live in one buffer, a slot per int32: an indirect command
  has no setBytes). Commands are changed only after the previous replay has completed. wait=True returns device seconds."""
  updates_scalars = True   # the jit may rebind scalars per replay (see jit.py)
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
    # per launch: the byte offset of each scalar word in scalar_buf, and the binding (index, offset) of each slot
    self.word_at, slots, end = [], [], 0
    for _, buffers, scalars, *_ in launches:
      if scalars_packed(len(buffers), len(scalars)):
        self.word_at.append([end + 4 * j for j in range(len(scalars))])
        slots.append([(len(buffers), end)])
        end += round_up(4 * len(scalars), SCALAR_SLOT)
      else:
        self.word_at.append([end + SCALAR_SLOT * j for j in range(len(scalars))])
        slots.append([(len(buffers) + j, end + SCALAR_SLOT * j) for j in range(len(scalars))])
        end += SCALAR_SLOT * len(scalars)
    self.scalar_buf = device.allocator.alloc(max(end, SCALAR_SLOT))
    self.cur_bufs, self.cur_scalars, self.last = [], [], None
    for i, (prog, buffers, scalars, global_size, local_size) in enumerate(launch[:5] for launch in launches):
      if not isinstance(prog, MetalProgram) or prog.device is not device: raise ValueError(f"launch {i}: not a MetalProgram of {device.name}")
      if len(buffers) + len(slots[i]) > MAX_BUFFER_BINDINGS:
        raise ValueError(f"launch {i} ({prog.name}): {len(buffers)} buffers exceed {MAX_BUFFER_BINDINGS} bindings")
      cmd = self.icb.indirectComputeCommandAtIndex_(i)
      cmd.setComputePipelineState_(prog.pso)
      for index, offset in slots[i]: cmd.setKernelBuffer_offset_atIndex_(self.scalar_buf, offset, index)
      cmd.concurrentDispatchThreadgroups_threadsPerThreadgroup_(*prog.dims(global_size, local_size))
      cmd.setBarrier()
      self.cur_bufs.append(None)
      self.cur_scalars.append(None)
      self._update(i, tuple(buffers), tuple(int(s) for s in scalars))

  def _update(self, i: int, buffers, scalars) -> None:
    if buffers is not None and buffers != self.cur_bufs[i]:
      if self.cur_bufs[i] is not None and len(buffers) != len(self.cur_bufs[i]):
        raise ValueError(f"graph launch {i}: takes {len(self.cur_bufs[i])} buffers")
      cmd = self.icb.indirectComputeCommandAtIndex_(i)
      for j, b in enumerate(buffers): cmd.setKernelBuffer_offset_atIndex_(b, 0, j)
      self.cur_bufs[i] = buffers
    if scalars is not None and scalars != self.cur_scalars[i]:
      if self.cur_scalars[i] is not None and len(scalars) != len(self.cur_scalars[i]):
        raise ValueError(f"graph launch {i}: takes {len(self.cur_scalars[i])} scalars")
      if scalars:
        memory = self.scalar_buf.contents().as_buffer(self.word_at[i][-1] + 4)
        for at, word in zip(self.word_at[i], scalars): memory[at:at + 4] = struct.pack("<i", word)
      self.cur_scalars[i] = scalars

  def __call__(self, buffers_per_launch=None, wait: bool = False, scalars_per_launch=None) -> float | None:
    dev, mtl = self.device, self.device.mtl
    with dev.lock:   # one replay at a time: a replay rewrites the commands of the one before
      if buffers_per_launch is not None or scalars_per_launch is not None:
        dev.wait_for(self.last)   # an indirect command buffer (and the scalars) may change only when idle
        for i in range(len(self.programs)):
          self._update(i, None if buffers_per_launch is None or buffers_per_launch[i] is None else tuple(buffers_per_launch[i]),
                       None if scalars_per_launch is None or scalars_per_launch[i] is None else tuple(int(s) for s in scalars_per_launch[i]))
      resources = list({id(b): b for bufs in self.cur_bufs for b in bufs}.values()) + [self.scalar_buf]
      dev.encoder.commit()   # the eager launches encoded so far run first: the graph may read what they write
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
      names = ", ".join(p.name for p in self.programs[:3]) + (", ..." if len(self.programs) > 3 else "")
      # conservative: every buffer the graph touches waits for the whole graph
      dev.submitted(cb, f"graph of {len(self.programs)} kernels ({names})", resources, resources)
    if wait:
      dev.wait_for(cb)
      return cb.GPUEndTime() - cb.GPUStartTime()
    return None
