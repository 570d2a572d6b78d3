"""CUDALaunchList: captured launches checked and packed once, then submitted one by one on the device's stream,
every cuLaunchKernel call made from a small C loop (launch_loop.c, built by the CPU device's C compiler) where it builds."""
from __future__ import annotations
import ctypes, functools, sys
from pathlib import Path
from typing import TYPE_CHECKING
from cuda.bindings import driver
from alloy.helpers import getenv
from alloy.runtime.device import LaunchList, rebound
from alloy.runtime.registry import get_device
from alloy.runtime.cuda.driver import SUCCESS, CUDAError, check
from alloy.runtime.cuda.program import CUDAProgram, ParamBlock
if TYPE_CHECKING: from alloy.runtime.cuda import CUDADevice

NATIVE_LOOP = getenv("ALLOY_CUDA_NATIVE_LOOP", 1)   # 0: launch lists call cuLaunchKernel from Python, launch by launch
LOOP_SOURCE_FILE = Path(__file__).parent / "launch_loop.c"
_LOOP_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                              ctypes.c_void_p, ctypes.POINTER(ctypes.c_int32))

def cu_launch_kernel_address() -> int:
  """libcuda's cuLaunchKernel, for the native loop (the explicit stream makes it the same call cuda-bindings makes)."""
  return ctypes.cast(ctypes.CDLL("nvcuda.dll" if sys.platform == "win32" else "libcuda.so.1").cuLaunchKernel, ctypes.c_void_p).value

@functools.lru_cache(None)
def native_launch_loop():
  """(loop, cuLaunchKernel's address, the CPU program holding the loop): LOOP_SOURCE_FILE built by the CPU device's C
  compiler, or (None, why not, None). The program is held here: its library goes when it does."""
  try:
    cpu = get_device("CPU")
    prog = cpu.load("alloy_cuda_launch_loop", cpu.compiler.compile_cached(LOOP_SOURCE_FILE.read_text()))
    return _LOOP_TYPE(ctypes.cast(prog.fn, ctypes.c_void_p).value), cu_launch_kernel_address(), prog
  except Exception as e: return None, f"{type(e).__name__}: {e}", None

class CUDALaunchList(LaunchList):
  """Captured launches submitted one by one (see LaunchList) with everything but cuLaunchKernel done once: launch
  dimensions checked, and a parameter block of its own packed, per launch. A call repacks only the rebound launches'
  blocks (new buffers or scalars) (the driver copies parameters at launch, so rewriting a block after its launch is safe), makes every
  cuLaunchKernel call from one small C loop (native_launch_loop; from Python where there is no C compiler, or with
  ALLOY_CUDA_NATIVE_LOOP=0) and records one event after the last launch: the stream runs in order, so that event
  completes every buffer the list writes."""
  def __init__(self, launches: list, device: "CUDADevice"):
    if not launches: raise ValueError("a launch list needs at least one launch")
    self.device = device
    device.activate()
    self.calls: list[tuple] = []              # cuLaunchKernel's arguments per launch
    self.blocks: list[ParamBlock] = []
    self.cur: list[tuple] = []                # the buffers (device pointers) each launch is bound to now
    self.scalars: list[tuple] = []
    self.programs: list[CUDAProgram] = []
    for i, (prog, buffers, scalars, global_size, local_size) in enumerate(launch[:5] for launch in launches):
      if not isinstance(prog, CUDAProgram) or prog.device is not device: raise ValueError(f"launch {i}: not a CUDAProgram of {device.name}")
      if not buffers: raise ValueError(f"launch {i} ({prog.name}): no buffers; a launch writes its first")
      prog.set_dims(global_size, local_size)
      blk = prog.param_block(len(buffers), len(scalars))
      blk.pack(buffers, scalars)
      self.calls.append((*prog.launch_dims, device.stream, blk.addr, 0))
      self.blocks.append(blk)
      self.cur.append(tuple(int(b) for b in buffers))
      self.scalars.append(tuple(int(x) for x in scalars))
      self.programs.append(prog)
    self.written = [bufs[0] for bufs in self.cur]   # as CUDAProgram: a launch writes its first buffer
    self.loop, self.launch, _ = native_launch_loop() if NATIVE_LOOP else (None, "ALLOY_CUDA_NATIVE_LOOP=0", None)
    if self.loop is not None:   # the loop's arrays; blocks are repacked in place, so params never changes
      n = len(self.calls)
      self.loop_args = (self.launch, n, (ctypes.c_void_p * n)(*[int(c[0]) for c in self.calls]),
                        (ctypes.c_uint32 * (7 * n))(*[d for c in self.calls for d in c[1:8]]), int(device.stream),
                        (ctypes.c_void_p * n)(*[blk.addr for blk in self.blocks]), ctypes.byref(err := ctypes.c_int32(0)))
      self.loop_err = err

  def _rebind(self, i: int, buffers, scalars) -> None:
    cur = self.cur[i]
    buffers = cur if buffers is None else tuple(b if type(b) is int else int(b) for b in buffers)
    scalars = self.scalars[i] if scalars is None else tuple(int(x) for x in scalars)
    if len(buffers) != len(cur): raise ValueError(f"launch {i}: takes {len(cur)} buffers, given {len(buffers)}")
    if len(scalars) != len(self.scalars[i]): raise ValueError(f"launch {i}: takes {len(self.scalars[i])} scalars, given {len(scalars)}")
    if buffers == cur and scalars == self.scalars[i]: return
    self.blocks[i].pack(buffers, scalars)
    self.cur[i], self.scalars[i] = buffers, scalars
    self.written[i] = buffers[0]

  def __call__(self, buffers_per_launch=None, wait: bool = False, scalars_per_launch=None) -> float | None:
    dev = self.device
    dev.activate()
    for i, b, s in rebound(len(self.calls), buffers_per_launch, scalars_per_launch): self._rebind(i, b, s)
    if wait: check(driver.cuEventRecord(dev.t0, dev.stream), "cuEventRecord")
    if self.loop is not None:
      if (done := self.loop(*self.loop_args)) != len(self.calls): self._failed(done, driver.CUresult(self.loop_err.value))
    else:
      launch = driver.cuLaunchKernel
      for args in self.calls:
        err, = launch(*args)
        if err != SUCCESS: self._failed(self.calls.index(args), err)
    dev.mark_written(self.written)
    return dev.elapsed_since_t0() if wait else None

  def _failed(self, i: int, err):
    args = self.calls[i]
    dev = self.device
    if i: dev.mark_written(self.written[:i])   # the launches before it run: later reads must wait for them
    raise CUDAError(err, f"cuLaunchKernel({self.programs[i].name}, grid={args[1:4]}, block={args[4:7]})")
