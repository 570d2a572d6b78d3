"""Index bounds: the indices a gather, take_along_dim, index_select, embedding, x[idx] or scatter reads at, and the class
targets of cross_entropy and nll_loss, are checked before the result can be used, with an IndexError naming the bad
value, the dimension and its size.

Eager, the indices are read on the host: free for host data, a sync for indices computed on the device. A @jit capture
cannot replay a host read, so there the check moves to the device: the indices' least and greatest values become a
2-element tensor that the capture realizes with its other launches and the jit reads after the capture call and after
every replay (one small read, a sync, per call), raising the same IndexError; and the kernel reads at indices clamped
into range, so that a bad index never reads outside the tensor before the error is raised.
"""
from __future__ import annotations
import numpy as np
from alloy import dtype as dt
from alloy.ir.ops import Op
from alloy.engine.watch import watchers

def check_values(vals: np.ndarray, low: int, size: int, error) -> None:
  """Every value in [low, size), else raise error(the first bad value)."""
  if vals.size and (vals.min() < low or vals.max() >= size): raise error(vals[(vals < low) | (vals >= size)].flat[0])

def in_bounds(index, low: int, size: int, error):
  """index (an integer Tensor) checked to lie in [low, size), error(bad) being the exception for a bad value; returns
  the index to read at: index itself, or under a capture that takes the check on the device, index clamped into range."""
  if index.numel() == 0: return index
  if index.node.op is Op.CONST:   # a constant is read off its node, no kernel
    check_values(np.asarray(index.node.arg), low, size, error)
    return index
  if not watchers.on_device_check:
    check_values(index.numpy(), low, size, error)
    return index
  from alloy.tensor import stack
  extremes = stack([index.min(), index.max()]).cast(dt.int64)
  watchers.device_check(extremes, lambda vals: check_values(vals, low, size, error))
  # a bound the index's dtype cannot hold is one it never passes (and as a constant of that dtype it would wrap)
  lo, hi = low > dt.min_value(index.dtype), size - 1 < dt.max_value(index.dtype)
  return index.clamp(low if lo else None, size - 1 if hi else None) if lo or hi else index

def check_index(index, size: int, what: str, dim: int):
  """in_bounds for an op's index into dimension dim of size `size` ([0, size)), with the error PyTorch's gather,
  index_select and scatter give."""
  return in_bounds(index, 0, size, lambda bad: IndexError(f"{what}: index {bad} is out of bounds for dimension {dim} with size {size}"))
