"""copy_buffer: one Buffer's bytes into another's, on whichever devices they live, without a round trip through a
NumPy array where the devices allow it (what Tensor.to uses).

- Same device: the allocator's `transfer` (CUDA: cuMemcpyDtoDAsync on the stream; CPU: a memory copy after the
  source's writer; METAL: a copy between the shared-storage buffers after their command buffers).
- A CPU device (CPU, CPU:1, ...) to another device: the device's copyin reads the CPU buffer's memory itself (CUDA: through pinned staging,
  the DMA asynchronous on the stream), after the CPU launch writing it.
- Another device to a CPU device: the device's copyout writes the CPU buffer's memory itself.
- Between two devices of one kind that can reach each other (CUDA peers, `peer_transfer`): a peer copy.
- Otherwise through a host array (copyout, then copyin).
"""
from __future__ import annotations
import numpy as np
from alloy.runtime.buffer import Buffer
from alloy.runtime.registry import get_device

def _kind(device) -> str: return device.name.partition(":")[0]   # CPU:1 is a CPU device with its own queue

def copy_buffer(dst: Buffer, src: Buffer, reused: bool = False) -> None:
  """dst := src (the same size and dtype, any devices); returns once the copy is queued (or done, where a host
  copy does it). Every path waits for src's writer. reused: dst may still be read by work queued on its device (a
  @jit replay copies into the same buffer on every call), which a host write into a CPU buffer waits for (CUDA
  orders its copies after them on the stream, METAL waits for a buffer's users itself)."""
  if dst.nbytes != src.nbytes: raise ValueError(f"copy_buffer: {src!r} into {dst!r}: the sizes differ")
  if not src.nbytes: return
  sdev, ddev, n = get_device(src.device), get_device(dst.device), src.nbytes
  if reused and hasattr(ddev.allocator, "wait_readers"): ddev.allocator.wait_readers()
  if sdev is ddev and hasattr(ddev.allocator, "transfer"): return ddev.allocator.transfer(dst.handle, src.handle, n)
  if _kind(sdev) == "CPU": return ddev.allocator.copyin(dst.handle, sdev.allocator.readable(src.handle, n))
  if _kind(ddev) == "CPU": return sdev.allocator.copyout(ddev.allocator.writable(dst.handle, n), src.handle)
  if type(sdev) is type(ddev) and hasattr(ddev.allocator, "peer_transfer") and ddev.allocator.peer_transfer(dst.handle, sdev, src.handle, n):
    return
  staging = np.empty(n, np.uint8)
  sdev.allocator.copyout(memoryview(staging), src.handle)
  ddev.allocator.copyin(dst.handle, memoryview(staging))
