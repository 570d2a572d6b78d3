"""CUDAGraph: captured launches as one CUDA graph, a chain of kernel nodes replayed by one cuGraphLaunch."""
from __future__ import annotations
from typing import TYPE_CHECKING
from cuda.bindings import driver
from alloy.runtime.device import rebound
from alloy.runtime.cuda.driver import check
from alloy.runtime.cuda.program import CUDAProgram
if TYPE_CHECKING: from alloy.runtime.cuda import CUDADevice

class CUDAGraph:
  """A CUDA graph of kernel nodes, one per captured launch, in a chain (each waits for the one before).
  CUDAGraph(launches, device=None) with launches [(program, buffers, scalars, global_size, local_size), ...];
  the device defaults to the first program's.
  __call__(buffers_per_launch=None, wait=False, scalars_per_launch=None) replays it; an entry of
  buffers_per_launch (or scalars_per_launch) that is not None and differs from the last replay's updates
  that node's parameters (cuGraphExecKernelNodeSetParams). wait=True returns device seconds."""
  updates_scalars = True   # the jit may rebind scalars per replay (see jit.py)
  def __init__(self, launches: list, device: "CUDADevice | None" = None):
    if not launches: raise ValueError("a CUDA graph needs at least one launch")
    self.device = device = device if device is not None else launches[0][0].device
    device.activate()
    self.graph = check(driver.cuGraphCreate(0), "cuGraphCreate")
    self.nodes, self.params, self.blocks, self.cur_bufs, self.cur_scalars = [], [], [], [], []
    self.programs = [launch[0] for launch in launches]   # held: the nodes run functions of their modules
    prev = None
    for i, launch in enumerate(launches):
      prog, buffers, scalars, global_size, local_size = launch[:5]
      if not isinstance(prog, CUDAProgram) or prog.device is not device: raise ValueError(f"launch {i}: not a CUDAProgram of {device.name}")
      prog.set_dims(global_size, local_size)
      blk = prog.param_block(len(buffers), len(scalars))   # a block of its own: replays rewrite it
      blk.pack(buffers, scalars)
      p = driver.CUDA_KERNEL_NODE_PARAMS()
      p.func = prog.func
      p.gridDimX, p.gridDimY, p.gridDimZ = prog.g3
      p.blockDimX, p.blockDimY, p.blockDimZ = prog.l3
      p.sharedMemBytes = prog.launch_dims[-1]   # set_dims: what the module declares
      p.kernelParams = blk.addr
      node = check(driver.cuGraphAddKernelNode(self.graph, [prev] if prev is not None else None, 1 if prev is not None else 0, p),
                    f"cuGraphAddKernelNode({prog.name})")
      self.nodes.append(node)
      self.params.append(p)
      self.blocks.append(blk)
      self.cur_bufs.append(tuple(int(b) for b in buffers))
      self.cur_scalars.append(tuple(int(s) for s in scalars))
      prev = node
    self.exec = check(driver.cuGraphInstantiate(self.graph, 0), "cuGraphInstantiate")
    self._written = {b for bufs in self.cur_bufs for b in bufs}

  def _update(self, i: int, buffers, scalars) -> None:
    buffers = self.cur_bufs[i] if buffers is None else tuple(int(b) for b in buffers)
    scalars = self.cur_scalars[i] if scalars is None else tuple(int(s) for s in scalars)
    if buffers == self.cur_bufs[i] and scalars == self.cur_scalars[i]: return
    if len(buffers) != len(self.cur_bufs[i]) or len(scalars) != len(self.cur_scalars[i]):
      raise ValueError(f"graph launch {i}: takes {len(self.cur_bufs[i])} buffers and {len(self.cur_scalars[i])} scalars")
    self.blocks[i].pack(buffers, scalars)
    check(driver.cuGraphExecKernelNodeSetParams(self.exec, self.nodes[i], self.params[i]), "cuGraphExecKernelNodeSetParams")
    self.cur_bufs[i], self.cur_scalars[i] = buffers, scalars
    self._written = None   # recomputed once per replay: a set that only grew would keep every buffer ever bound

  def __call__(self, buffers_per_launch=None, wait: bool = False, scalars_per_launch=None) -> float | None:
    dev = self.device
    dev.activate()
    for i, b, s in rebound(len(self.nodes), buffers_per_launch, scalars_per_launch): self._update(i, b, s)
    if self._written is None: self._written = {b for bufs in self.cur_bufs for b in bufs}
    if wait: check(driver.cuEventRecord(dev.t0, dev.stream), "cuEventRecord")
    check(driver.cuGraphLaunch(self.exec, dev.stream), "cuGraphLaunch")
    dev.mark_written(self._written)   # conservative: every buffer the graph touches waits for the whole graph
    return dev.elapsed_since_t0() if wait else None

  def __del__(self):
    try:
      driver.cuGraphExecDestroy(self.exec)
      driver.cuGraphDestroy(self.graph)
    except Exception: pass
