"""CUDAAllocator: device memory through cuMemAlloc (handles are device pointers, ints) with the LRU cache, and the
host copies: copyin through a few pinned staging chunks in flight on the device's stream, copyout double-buffered on
the copy stream after the event of the buffer's last writer, transfer device to device."""
from __future__ import annotations
import ctypes
from typing import TYPE_CHECKING
from cuda.bindings import driver
from alloy.helpers import getenv
from alloy.runtime.device import DeviceOutOfMemory, LRUAllocator
from alloy.runtime.cuda.driver import SUCCESS, CUDAError, check
if TYPE_CHECKING: from alloy.runtime.cuda import CUDADevice

_STAGING_CHUNK = 32 << 20   # pinned staging buffers are this big (or smaller for small copies)
_STAGING_MAX = 4            # copyin may have this many chunks in flight

class _Pinned:
  """One pinned host buffer (cuMemHostAlloc) with a byte memoryview over it, and the event of its last use."""
  def __init__(self, nbytes: int):
    self.nbytes = nbytes
    self.ptr = check(driver.cuMemHostAlloc(nbytes, 0), "cuMemHostAlloc")
    self.view = memoryview((ctypes.c_char * nbytes).from_address(int(self.ptr))).cast("B")
    self.event = None   # recorded after the async copy that reads it; None when idle

class CUDAAllocator(LRUAllocator):
  """Device memory through cuMemAlloc; handles are ints (device pointers)."""
  def __init__(self, device: "CUDADevice", max_cached_bytes: int | None = None):
    # freed buffers are kept up to half the GPU's memory (ALLOY_CUDA_LRU_BYTES), as PyTorch's caching allocator keeps
    # them until an allocation fails (so does alloc: it empties the cache and tries again). A 4 GiB bound made GPT-2's
    # prefill, whose attention scores take 400 MB a layer, free and allocate about 51 buffers again a call (about 8 ms
    # of cuMemAlloc and cuMemFree under cProfile on the H200)
    if max_cached_bytes is None:
      max_cached_bytes = getenv("ALLOY_CUDA_LRU_BYTES", 0) or check(driver.cuDeviceTotalMem(device.cu_device), "cuDeviceTotalMem") // 2
    super().__init__(max_cached_bytes)
    self.device = device
    self._in_staging: list[_Pinned] = []    # copyin chunks, oldest use first
    self._out_staging: list[_Pinned] = []   # two chunks for double-buffered copyout
    self._out_events: list = []
    self._peers: set = set()   # the indices of the devices this one's context has peer access to

  def _alloc(self, nbytes: int) -> int:
    self.device.activate()
    err, ptr = driver.cuMemAlloc(max(nbytes, 1))
    if err == SUCCESS: return int(ptr)
    if err == driver.CUresult.CUDA_ERROR_OUT_OF_MEMORY or err == driver.CUresult.CUDA_ERROR_INVALID_VALUE:
      free, total = check(driver.cuMemGetInfo(), "cuMemGetInfo")
      if err == driver.CUresult.CUDA_ERROR_OUT_OF_MEMORY or nbytes > free:
        raise DeviceOutOfMemory(f"{self.device.name}: out of memory allocating {nbytes} bytes ({nbytes/2**30:.2f} GiB); "
                                f"{free} bytes ({free/2**30:.2f} GiB) free of {total} ({total/2**30:.2f} GiB), "
                                f"{self.cached_bytes} bytes held in the LRU cache")
    raise CUDAError(err, f"cuMemAlloc({nbytes})")

  def _free(self, handle: int, nbytes: int) -> None:
    self.device.activate()
    self.device.writers.pop(handle, None)
    self.device.encoder.unrecorded.pop(handle, None)
    check(driver.cuMemFree(handle), "cuMemFree")

  def _staging_in(self, nbytes: int) -> _Pinned:
    """A pinned buffer of at least nbytes whose previous copy has finished."""
    for i, buf in enumerate(self._in_staging):
      if buf.nbytes >= nbytes and (buf.event is None or driver.cuEventQuery(buf.event)[0] == SUCCESS):
        self._in_staging.append(self._in_staging.pop(i))   # most recently used last
        return buf
    if len(self._in_staging) >= _STAGING_MAX:   # all busy or too small: retire the oldest
      old = self._in_staging.pop(0)
      if old.event is not None: check(driver.cuEventSynchronize(old.event), "cuEventSynchronize")
      if old.nbytes >= nbytes:
        self._in_staging.append(old)
        return old
      check(driver.cuMemFreeHost(old.ptr), "cuMemFreeHost")
      if old.event is not None: driver.cuEventDestroy(old.event)
    buf = _Pinned(max(nbytes, 1 << 16))
    self._in_staging.append(buf)
    return buf

  def copyin(self, handle: int, src: memoryview) -> None:
    """Host -> device, asynchronous on the device's stream; src may be reused as soon as this returns."""
    dev = self.device
    dev.activate()
    src = memoryview(src).cast("B") if not (isinstance(src, memoryview) and src.format == "B" and src.ndim == 1) else src
    nbytes, off = src.nbytes, 0
    with dev.submitting:   # the staging buffers are shared: one thread's copy must land before another refills them
      while off < nbytes:
        n = min(_STAGING_CHUNK, nbytes - off)
        buf = self._staging_in(n)
        buf.view[:n] = src[off:off + n]
        check(driver.cuMemcpyHtoDAsync(handle + off, buf.ptr, n, dev.stream), "cuMemcpyHtoDAsync")
        if buf.event is None: buf.event = check(driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
        check(driver.cuEventRecord(buf.event, dev.stream), "cuEventRecord")
        off += n
      dev.mark_written((handle,))

  def copyout(self, dst: memoryview, handle: int) -> None:
    """Device -> host. The copy stream waits (on the device) only for the last work that wrote this buffer, then copies
    (double-buffered): the host waits once, for the copy, not first for the writer and then for the copy (a tiny
    realize and read on the H200's host, alternated: 36.2-38.6 us -> 35.3-36.8)."""
    dev = self.device
    dev.activate()
    dst = memoryview(dst).cast("B") if not (isinstance(dst, memoryview) and dst.format == "B" and dst.ndim == 1) else dst
    ev = dev.encoder.writer_event(handle)
    with dev.copying_out:
      if ev is not None: check(driver.cuStreamWaitEvent(dev.copy_stream, ev, 0), "cuStreamWaitEvent")
      self._copy_out(dst, handle)

  def _copy_out(self, dst: memoryview, handle: int) -> None:
    dev = self.device
    nbytes = dst.nbytes
    if not self._out_staging:
      self._out_staging = [_Pinned(_STAGING_CHUNK) for _ in range(2)]
      self._out_events = [check(driver.cuEventCreate(driver.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate") for _ in range(2)]
    pending = None   # (staging index, offset, size) copied on the device, not yet to dst
    off, k = 0, 0
    while off < nbytes or pending is not None:
      if off < nbytes:
        n = min(_STAGING_CHUNK, nbytes - off)
        buf = self._out_staging[k & 1]
        check(driver.cuMemcpyDtoHAsync(buf.ptr, handle + off, n, dev.copy_stream), "cuMemcpyDtoHAsync")
        check(driver.cuEventRecord(self._out_events[k & 1], dev.copy_stream), "cuEventRecord")
        nxt = (k & 1, off, n)
        off, k = off + n, k + 1
      else: nxt = None
      if pending is not None:
        i, o, n = pending
        check(driver.cuEventSynchronize(self._out_events[i]), "cuEventSynchronize")
        dst[o:o + n] = self._out_staging[i].view[:n]
      pending = nxt

  def transfer(self, dst: int, src: int, nbytes: int) -> None:
    """Device -> device on the same device, asynchronous on the stream."""
    self.device.activate()
    with self.device.submitting:
      check(driver.cuMemcpyDtoDAsync(dst, src, nbytes, self.device.stream), "cuMemcpyDtoDAsync")
      self.device.mark_written((dst,))

  def peer_transfer(self, dst: int, src_device: "CUDADevice", src: int, nbytes: int) -> bool:
    """src_device's buffer src into this device's dst with cuMemcpyPeerAsync, where the driver reports peer access
    between the two GPUs (False otherwise: the caller copies through the host). The copy waits on this stream for
    the event of src's writer (a cross-stream use), and src's stream waits for the copy before it reuses src.
    Written for two GPUs and not yet run on two: tested only where one GPU is present, where it is never taken."""
    dev = self.device
    if not check(driver.cuDeviceCanAccessPeer(dev.cu_device, src_device.cu_device), "cuDeviceCanAccessPeer"): return False
    if src_device.index not in self._peers:
      dev.activate()
      err, = driver.cuCtxEnablePeerAccess(src_device.ctx, 0)
      if err not in (SUCCESS, driver.CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED): raise CUDAError(err, "cuCtxEnablePeerAccess")
      self._peers.add(src_device.index)
    src_device.activate()
    writer = src_device.encoder.writer_event(src)
    dev.activate()
    with dev.submitting:
      if writer is not None: check(driver.cuStreamWaitEvent(dev.stream, writer, 0), "cuStreamWaitEvent")
      check(driver.cuMemcpyPeerAsync(dst, dev.ctx, src, src_device.ctx, nbytes, dev.stream), "cuMemcpyPeerAsync")
      dev.mark_written((dst,))
      copied = dev.writers[dst]
    src_device.activate()
    with src_device.submitting: check(driver.cuStreamWaitEvent(src_device.stream, copied, 0), "cuStreamWaitEvent")
    return True

  def free_staging(self) -> None:
    self.device.synchronize()
    for buf in self._in_staging + self._out_staging:
      driver.cuMemFreeHost(buf.ptr)
      if buf.event is not None: driver.cuEventDestroy(buf.event)
    self._in_staging, self._out_staging = [], []
