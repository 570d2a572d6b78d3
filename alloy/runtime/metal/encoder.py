"""MetalCommandEncoder: the device's one open command buffer, with a concurrent compute encoder and a barrier only
where a dispatch needs one.

Launches are encoded into the open command buffer through one compute encoder of dispatch type
MTLDispatchTypeConcurrent: the GPU may overlap dispatches that no barrier separates. The encoder remembers which
buffers the dispatches since the last barrier wrote and read (a launch writes its first `outs` buffers and reads the
rest), and puts memoryBarrierWithScope(buffers) before a dispatch that reads a buffer one of them wrote (RAW) or
writes a buffer one of them read or wrote (WAR, WAW); independent dispatches carry none.

The command buffer is committed after ALLOY_METAL_COMMIT_DISPATCHES dispatches (default 64) or once its dispatches
bind ALLOY_METAL_COMMIT_MB megabytes of buffers (default 64), or when something needs its work to have run: a copyout
of a buffer it writes, a copyin into one it uses, a fence, synchronize, a graph replay (its own command buffer, which
must come after), or a launch with wait=True (which then runs alone in a command buffer of its own, to be timed).
"""
from __future__ import annotations
import struct
from typing import TYPE_CHECKING
from alloy.helpers import getenv
from alloy.runtime.device import CommandEncoder
if TYPE_CHECKING: from alloy.runtime.metal import MetalDevice
if TYPE_CHECKING: from alloy.runtime.metal.program import MetalProgram

COMMIT_DISPATCHES = getenv("ALLOY_METAL_COMMIT_DISPATCHES", 64)
COMMIT_MB = getenv("ALLOY_METAL_COMMIT_MB", 64)

class MetalCommandEncoder(CommandEncoder):
  """The open command buffer (`cb`, None when nothing is encoded) and its compute encoder (`enc`); `written` and
  `read`: the buffers the dispatches since the last barrier wrote and read. Used under the device's lock."""
  def __init__(self, device: "MetalDevice"):
    super().__init__(device, COMMIT_DISPATCHES, COMMIT_MB << 20)
    self.cb = self.enc = None
    self.written: dict = {}
    self.read: dict = {}

  def dispatch(self, prog: "MetalProgram", buffers, scalars, groups, threads, outs: int = 1, packed: bool = False):
    """Encode one launch of prog (its scalars as one binding where `packed`); returns its command buffer."""
    dev = self.device
    if self.cb is None:
      self.cb = dev.queue.commandBuffer()
      self.enc = self.cb.computeCommandEncoderWithDispatchType_(dev.mtl.MTLDispatchTypeConcurrent)
    enc, written, read = self.enc, self.written, self.read
    writes = buffers[:outs]
    barrier = any(b in written for b in buffers) or any(b in read for b in writes)
    if barrier:
      enc.memoryBarrierWithScope_(dev.mtl.MTLBarrierScopeBuffers)
      written.clear()
      read.clear()
    enc.setComputePipelineState_(prog.pso)
    for i, b in enumerate(buffers): enc.setBuffer_offset_atIndex_(b, 0, i)
    if packed: enc.setBytes_length_atIndex_(struct.pack(f"<{len(scalars)}i", *scalars), 4 * len(scalars), len(buffers))
    else:
      for j, s in enumerate(scalars): enc.setBytes_length_atIndex_(struct.pack("<i", s), 4, len(buffers) + j)
    enc.dispatchThreadgroups_threadsPerThreadgroup_(groups, threads)
    cb, users, writers = self.cb, dev.users, dev.writers
    for b in writes: written[b] = writers[b] = cb
    for b in buffers:
      users[b] = cb
      if b not in written: read[b] = cb
    if self.encoded(prog.name, sum(b.length() for b in buffers), barrier): self.commit()
    return cb

  def _commit(self, kernels: list) -> None:
    cb, self.cb = self.cb, None
    self.enc.endEncoding()
    self.enc = None
    self.written.clear()
    self.read.clear()
    cb.commit()
    names = ", ".join(dict.fromkeys(kernels[:3])) + (", ..." if len(kernels) > 3 else "")
    self.device.booked(cb, names if len(kernels) == 1 else f"{names} ({len(kernels)} dispatches)")
