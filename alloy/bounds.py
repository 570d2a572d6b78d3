"""Index bounds: the indices a gather, take_along_dim, index_select, embedding, x[idx] or scatter reads at, and the class
targets of cross_entropy and nll_loss, are checked before the result can be used, with an IndexError naming the bad
value, the dimension and its size.

Where reading the indices would cost a sync, the kernel reads at the indices clamped into range, so that a bad index
never reads outside the tensor, and the indices' least and greatest values (one small reduction kernel) are read later:
- under a @jit capture, which cannot replay a host read, the jit reads them after the capture call and after every
  replay (one small read, a sync, per call);
- eagerly on a GPU (CUDA, METAL), at the next host read of any value (numpy(), item(), ...) or alloy.synchronize(), as
  PyTorch's device-side asserts surface at the next sync: the IndexError is raised there, naming the op, and no result
  is read before it. Until then the GPU's queue runs on (a training step's loss no longer waits for the device).
Eagerly on the CPU device the indices are read at once, as are constants; `deferred=False` asks for that everywhere
(linalg's singular-matrix errors: torch's linalg syncs to raise them too).
"""
from __future__ import annotations
import numpy as np
from alloy import dtype as dt
from alloy.ir.ops import Op
from alloy.engine.watch import Watcher, watchers
from alloy.realize_tensors import buffer_of, realize as realize_all

def check_values(vals: np.ndarray, low: int, size: int, error) -> None:
  """Every value in [low, size), else raise error(the first bad value)."""
  if vals.size and (vals.min() < low or vals.max() >= size): raise error(vals[(vals < low) | (vals >= size)].flat[0])

DEFERRED_MAX = 256   # eager checks kept waiting before they are read anyway (a sync): bounds what they hold

class DeferredChecks(Watcher):
  """The eager checks waiting for the next host read, (extremes Tensor, check); attached while any wait."""
  def __init__(self): self.pending: list = []
  def host_read(self, t) -> None: run_deferred()

_deferred = DeferredChecks()

def run_deferred() -> None:
  """Read every waiting check's extremes (a sync) and raise the first failing check's error; none wait afterwards."""
  if not (pending := _deferred.pending): return
  _deferred.pending = []
  watchers.detach(_deferred)
  realize_all([values for values, _ in pending])
  for values, check in pending: check(buffer_of(values, host=False).numpy())   # not a host read the watchers hear of

def _defer(values, check) -> None:
  values.realize()   # launched now, in the queue's order, and read later: it holds no more than its two values
  if not _deferred.pending: watchers.attach(_deferred)
  _deferred.pending.append((values, check))
  if len(_deferred.pending) >= DEFERRED_MAX: run_deferred()

def _reads_sync(device: str) -> bool:
  """Whether reading a value of device on the host waits for a GPU's queue (the CPU device's costs next to nothing)."""
  return device.split(":")[0] != "CPU"

def in_bounds(index, low: int, size: int, error, deferred: bool = True):
  """index (an integer Tensor) checked to lie in [low, size), error(bad) being the exception for a bad value; returns
  the index to read at: index itself, or where the check is read later (see above), index clamped into range."""
  if index.numel() == 0: return index
  if index.node.op is Op.CONST:   # a constant is read off its node, no kernel
    check_values(np.asarray(index.node.arg), low, size, error)
    return index
  if watchers.on_device_check: record = watchers.device_check
  elif deferred and _reads_sync(index.device): record = _defer
  else:
    check_values(index.numpy(), low, size, error)
    return index
  from alloy.tensor import stack   # tensor.py imports this module (through indexing.py)
  wide = index.reshape(-1).cast(dt.int64)
  record(stack([-wide, wide]).amax(-1), lambda vals: check_values(np.array([-vals[0], vals[1]]), low, size, error))   # one kernel
  # a bound the index's dtype cannot hold is one it never passes (and as a constant of that dtype it would wrap)
  lo, hi = low > dt.min_value(index.dtype), size - 1 < dt.max_value(index.dtype)
  return index.clamp(low if lo else None, size - 1 if hi else None) if lo or hi else index

def check_index(index, size: int, what: str, dim: int):
  """in_bounds for an op's index into dimension dim of size `size` ([0, size)), with the error PyTorch's gather,
  index_select and scatter give."""
  return in_bounds(index, 0, size, lambda bad: IndexError(f"{what}: index {bad} is out of bounds for dimension {dim} with size {size}"))
