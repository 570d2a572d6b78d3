"""MetalProgram: library -> function -> compute pipeline state; a launch is encoded into the device's open command buffer
(encoder.py)."""
from __future__ import annotations
from typing import TYPE_CHECKING
from alloy.helpers import prod
from alloy.runtime.device import CompileError, Program
if TYPE_CHECKING: from alloy.runtime.metal import MetalDevice

MAX_BUFFER_BINDINGS = 31

def scalars_packed(n_buffers: int, n_scalars: int) -> bool:
  """Whether a launch's int32 scalars all go in one binding after its buffers (too few bindings for one each): the
  kernel declares them so (renderer/metal.py), and a hand-written kernel with that many scalars must too."""
  return n_buffers + n_scalars > MAX_BUFFER_BINDINGS

def describe_error(err) -> str:
  """An NSError's message (PyObjC), or the software device's error as text."""
  return str(err.localizedDescription()) if hasattr(err, "localizedDescription") else str(err)

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
    if lib is None:
      source = "" if binary[:4] == b"MTLB" else binary.decode(errors="replace")
      raise CompileError(f"{name}: loading the Metal library failed: {describe_error(err)}", source)
    if (fn := lib.newFunctionWithName_(name)) is None: raise RuntimeError(f"{name}: the Metal library has no kernel named {name!r}")
    desc = mtl.MTLComputePipelineDescriptor.new()
    desc.setComputeFunction_(fn)
    desc.setSupportIndirectCommandBuffers_(True)
    self.pso, err = dev.newComputePipelineStateWithDescriptor_options_reflection_error_(desc, mtl.MTLPipelineOption(0), None, None)
    if self.pso is None: raise RuntimeError(f"{name}: creating the compute pipeline state failed: {describe_error(err)}")
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
    if len(buffers) + (scalars_packed(len(buffers), len(scalars)) or len(scalars)) > MAX_BUFFER_BINDINGS:
      raise ValueError(f"{self.name}: {len(buffers)} buffers exceed Metal's {MAX_BUFFER_BINDINGS} bindings")
    dev = self.device
    with dev.lock:   # one open command buffer, shared by the device's threads
      if wait: dev.encoder.commit()   # timed alone: a command buffer's GPU time is all the device measures
      cb = dev.encoder.dispatch(self, buffers, scalars, groups, threads, outs, scalars_packed(len(buffers), len(scalars)))
      if wait: dev.encoder.commit()
    if wait:
      dev.wait_for(cb)
      return cb.GPUEndTime() - cb.GPUStartTime()
    return None
