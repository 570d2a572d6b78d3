"""The CUDA device: CUDADevice and is_available; its stages are the other files of this folder, all through cuda-bindings.

Stages (see runtime/device.py): the device renders PTX where the PTX renderer covers a kernel, else CUDA C (renderer/ptx.py);
CUDACompiler (compiler.py) turns either into a cubin for one architecture (nvJitLink's ptxas, or NVRTC) and needs no GPU;
CUDAProgram (program.py) loads a cubin (cuModuleLoadData) and launches it on the device's one stream; CUDAAllocator
(allocator.py) owns device memory and the host copies; CUDAGraph (graph.py) replays a captured list of launches as one
graph, CUDALaunchList (launch_list.py) launch by launch from a small C loop. driver.py holds the errors, the result
checks and the context handling they share; tools.py the CUDA headers and SASS disassembly.

Ordering: all device work goes on one non-blocking stream, so it runs in submission order. CUDACommandEncoder
(encoder.py) cuts the stream into runs of launches, each closed by one event that the buffers its launches write (the
first `outs` of each) remember; copyout waits on that event only (committing the open run first where it writes the
buffer), so reading a buffer does not wait for unrelated work queued after its run.
"""
from __future__ import annotations
import dataclasses, threading
from cuda.bindings import driver as cu   # `driver` in this package is its driver.py
from alloy.helpers import getenv
from alloy.caps import DeviceCaps
from alloy.renderer.cuda import CUDARenderer
from alloy.renderer.ptx import PTXFirstRenderer
from alloy.runtime.device import Device
from alloy.runtime.cuda.driver import RING_MASK, SUCCESS, check, make_current
from alloy.runtime.cuda.compiler import CUDACompiler
from alloy.runtime.cuda.allocator import CUDAAllocator
from alloy.runtime.cuda.program import CUDAProgram
from alloy.runtime.cuda.graph import CUDAGraph
from alloy.runtime.cuda.launch_list import CUDALaunchList
from alloy.runtime.cuda.encoder import CUDACommandEncoder

def unavailable_reason() -> str:
  """Why the CUDA device cannot run here ("" when it can); never raises."""
  try:
    if (err := cu.cuInit(0)[0]) != SUCCESS: return f"the NVIDIA driver does not initialize (cuInit: {err.name})"
    err, n = cu.cuDeviceGetCount()
    return "" if err == SUCCESS and n > 0 else "the NVIDIA driver reports no GPU"
  except Exception as e: return f"the NVIDIA driver could not be loaded ({e})"

def is_available() -> bool: return not unavailable_reason()

def device_count() -> int:
  """The GPUs the driver reports: CUDA:0 .. CUDA:n-1 (0 where CUDA cannot run here)."""
  return 0 if unavailable_reason() else check(cu.cuDeviceGetCount(), "cuDeviceGetCount")

class CUDADevice(Device):
  renderer = CUDARenderer()   # this instance's: PTX first where nvJitLink assembles it (see __init__)
  # PTX goes to ptxas, which neither unrolls nor steps pointers; every CUDA GPU takes the float32 tiles on its CUDA cores
  # vectors of up to 16 bytes: 8 16-bit floats, 4 32-bit values (LDG.128)
  caps = DeviceCaps(threads=True, codegen_loops=True, tensor_cores=("simt.f32",), vector_widths=(8, 4, 2), vector_bytes=16,
                    vector_dtypes=frozenset({"float32", "int32", "uint32", "float16", "bfloat16"}))
  graph = CUDAGraph
  launch_list = CUDALaunchList
  queue_bytes = 1 << 30   # 64 MiB is 13 us of an H200's bandwidth: the host waited too often (engine/backpressure.py)

  def __init__(self, name: str = "CUDA"):
    super().__init__(name)
    self.index = int(name.partition(":")[2] or 0)
    check(cu.cuInit(0), "cuInit")
    count = check(cu.cuDeviceGetCount(), "cuDeviceGetCount")
    if not 0 <= self.index < count: raise ValueError(f"{name}: no such CUDA device ({count} present)")
    self.cu_device = check(cu.cuDeviceGet(self.index), "cuDeviceGet")
    self.ctx = check(cu.cuDevicePrimaryCtxRetain(self.cu_device), "cuDevicePrimaryCtxRetain")
    self._ctx_id = int(self.ctx)
    self.activate()
    A = cu.CUdevice_attribute
    attr = lambda a: check(cu.cuDeviceGetAttribute(a, self.cu_device), "cuDeviceGetAttribute")
    self.compute_capability = (attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR), attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))
    self.target = f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"
    if self.compute_capability >= (8, 0):   # mma.sync m16n8k16 with float16 and bfloat16 operands (sm_80 on)
      self.caps = dataclasses.replace(self.caps, tensor_cores=self.caps.tensor_cores + ("mma.sync.m16n8k16",))
    if self.compute_capability == (9, 0) and getenv("ALLOY_WGMMA", 1):   # Hopper: wgmma (engine/wgmma.py, the WGMMA tile), sm_90a
      self.caps = dataclasses.replace(self.caps, tensor_cores=self.caps.tensor_cores + ("wgmma.m64nNk16",))
    self.caps = dataclasses.replace(self.caps, multiprocessors=attr(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT))
    self.device_name = check(cu.cuDeviceGetName(256, self.cu_device), "cuDeviceGetName").split(b"\0")[0].decode()
    self.limits = {
      "threads": attr(A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK),
      "block": (attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X), attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y),
                attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)),
      "grid": (attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X), attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y),
               attr(A.CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)),
      "shared": attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
      "shared_optin": attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
      "sm_count": attr(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
    }
    self.caps = dataclasses.replace(self.caps, dynamic_shared_bytes=self.limits["shared_optin"])
    nonblocking = cu.CUstream_flags.CU_STREAM_NON_BLOCKING
    self.stream = check(cu.cuStreamCreate(nonblocking), "cuStreamCreate")        # all kernels and copyins
    self.copy_stream = check(cu.cuStreamCreate(nonblocking), "cuStreamCreate")   # copyouts
    no_timing = cu.CUevent_flags.CU_EVENT_DISABLE_TIMING
    self.ring = [check(cu.cuEventCreate(no_timing), "cuEventCreate") for _ in range(RING_MASK + 1)]
    self.ring_i = 0
    self.writers: dict[int, object] = {}    # buffer -> event recorded after the last work that writes it
    self.encoder = CUDACommandEncoder(self)  # the open run of launches, whose written buffers have no event yet
    # threads take turns: launches (CUDAProgram.__call__) and copyins share the parameter blocks, the event ring, the
    # writer books and the pinned staging buffers; copyouts share the device-to-host staging pair
    self.submitting, self.copying_out = threading.RLock(), threading.Lock()
    self.recorded = 0                       # events recorded for writes so far: a synchronize knows if any came meanwhile
    # backpressure's fences: at most two are open, and a new one is made only after the one before the last was waited on
    self.fence_events, self.fence_i = [check(cu.cuEventCreate(no_timing), "cuEventCreate") for _ in range(2)], 0
    self.t0 = check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")
    self._t1 = check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DEFAULT), "cuEventCreate")
    self.compiler = CUDACompiler(self.target)
    if self.compiler.assembles_ptx and getenv("ALLOY_PTX", 1): self.renderer = PTXFirstRenderer(self.target)
    self.allocator = CUDAAllocator(self)
    self.program_class = CUDAProgram
    self.retired: list = []   # (event, module) of programs gone: unloaded once the stream has passed the event

  def retire(self, module) -> None:
    """Unload a program's module once the work queued until now (which may run its kernels) is done."""
    self.activate()
    with self.submitting:   # the list is shared with the threads that synchronize
      ev = check(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
      check(cu.cuEventRecord(ev, self.stream), "cuEventRecord")
      self.retired.append((ev, module))
  def unload_retired(self, wait: bool = False) -> None:
    keep = []
    for ev, module in self.retired:
      if wait or cu.cuEventQuery(ev)[0] == SUCCESS:
        check(cu.cuModuleUnload(module), "cuModuleUnload")
        cu.cuEventDestroy(ev)
      else: keep.append((ev, module))
    self.retired = keep

  def activate(self) -> None:
    """Make this device's context current on this thread (see make_current)."""
    make_current(self.ctx, self._ctx_id)

  def mark_written(self, buffers) -> None:
    with self.submitting:
      ev = self.ring[self.ring_i]
      self.ring_i = (self.ring_i + 1) & RING_MASK
      self.recorded += 1
      check(cu.cuEventRecord(ev, self.stream), "cuEventRecord")
      self.writers.update(dict.fromkeys(buffers, ev))

  def fence(self):
    with self.submitting: self.encoder.commit()
    ev = self.fence_events[self.fence_i]
    self.fence_i ^= 1
    self.activate()
    check(cu.cuEventRecord(ev, self.stream), "cuEventRecord")
    return ev
  def wait_fence(self, fence) -> None: check(cu.cuEventSynchronize(fence), "cuEventSynchronize")

  def elapsed_since_t0(self) -> float:
    check(cu.cuEventRecord(self._t1, self.stream), "cuEventRecord")
    check(cu.cuEventSynchronize(self._t1), "cuEventSynchronize")
    return check(cu.cuEventElapsedTime(self.t0, self._t1), "cuEventElapsedTime") * 1e-3

  def synchronize(self) -> None:
    self.activate()
    with self.submitting:
      self.encoder.commit()
      recorded, written = self.recorded, dict(self.writers)
    check(cu.cuStreamSynchronize(self.stream), "cuStreamSynchronize")
    # the copy stream needs no wait: copyout returns only after its last copy has landed. Forget only the writes
    # waited for: another thread may have launched meanwhile, and a host read of its output must still wait for it
    with self.submitting:
      if self.retired: self.unload_retired()   # what retired before the wait is done; a later one may still run
      if self.recorded == recorded: self.writers.clear()
      else:
        for b, ev in written.items():   # an event of the ring recorded again since is pending, and kept
          if self.writers.get(b) is ev and cu.cuEventQuery(ev)[0] == SUCCESS: del self.writers[b]

  def __repr__(self): return f"<Device {self.name} {getattr(self, 'device_name', '')} target={self.target}>"

DEVICE_CLASS = CUDADevice
