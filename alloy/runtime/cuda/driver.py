"""What the CUDA stages share: CUDAError and the result checks of cuda-bindings' driver and NVRTC calls (check,
nvrtc_check); the current-context handling (tls: the context this thread last made current; CONTEXT_ERRORS: what a
launch gets when another library's context is current; make_current); and the size of the device's event ring."""
from __future__ import annotations
import threading
from cuda.bindings import driver, nvrtc

SUCCESS = driver.CUresult.CUDA_SUCCESS
NVRTC_SUCCESS = nvrtc.nvrtcResult.NVRTC_SUCCESS
# what a launch returns when another library has made its own context current on this thread
CONTEXT_ERRORS = (driver.CUresult.CUDA_ERROR_INVALID_CONTEXT, driver.CUresult.CUDA_ERROR_INVALID_HANDLE)
tls = threading.local()   # the context current on this thread as last set by us: launches trust it, and on an
                          # invalid-context error ask the driver and retry (see CONTEXT_ERRORS)
RING_MASK = 127           # launches record events from the device's ring of 128; a reused event only waits longer, never less

class CUDAError(RuntimeError):
  def __init__(self, err, what: str):
    self.err = err
    try:
      name = driver.cuGetErrorName(err)[1].decode()
      desc = driver.cuGetErrorString(err)[1].decode()
    except Exception: name, desc = str(err), ""
    super().__init__(f"{what} failed: {name} ({desc})")

def check(ret, what: str = "CUDA call"):
  """Unwrap a cuda-bindings result tuple (err, *values): raise on error, return the values."""
  if ret[0] != SUCCESS: raise CUDAError(ret[0], what)
  return ret[1] if len(ret) == 2 else ret[1:] if len(ret) > 2 else None

def nvrtc_check(ret, what: str):
  if ret[0] != NVRTC_SUCCESS:
    msg = nvrtc.nvrtcGetErrorString(ret[0])[1]
    raise RuntimeError(f"{what} failed: {msg.decode() if isinstance(msg, bytes) else msg}")
  return ret[1] if len(ret) == 2 else ret[1:] if len(ret) > 2 else None

def make_current(ctx, ctx_id: int) -> None:
  """Make ctx (whose int is ctx_id) current on this thread. The driver is asked, not tls: another library in the
  process (tinygrad makes a context of its own) may have made its context current since we last set ours."""
  if int(check(driver.cuCtxGetCurrent(), "cuCtxGetCurrent")) != ctx_id:
    check(driver.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
  tls.ctx = ctx
