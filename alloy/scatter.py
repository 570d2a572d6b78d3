"""scatter, scatter_add and scatter_reduce (sum, prod, mean, amax, amin; include_self), with their in-place forms.

Lowered with the existing IR, no new kernel kind. The sums (scatter_add, scatter_reduce's sum and mean) are
scatter-adds (alloy/scatter_sum.py: one dense compare for short rows, else sorted by index), and their gradients
reads at the index, as PyTorch's. The others compare every index with every target position along `dim` (an
arange), a where feeding one reduction over the index's extent along dim, all fused: numel(index) x self.size(dim)
work, linear for the common shapes (one index per row, a short dim), quadratic when a long index scatters into a
long dim (then prefer index_put_, which inverts the index on the host: alloy/assign.py). The index is read back
to check its bounds, as __getitem__ does, except inside a @jit capture, where the read cannot be replayed: there an
index out of range writes nothing. The others' gradients come from the ops they are made of (where, sum, prod, amax, amin), as PyTorch's.
"""
from __future__ import annotations
import numpy as np
from alloy import dtype as dt
from alloy.engine import realize as engine
from alloy.inplace import norm_dim
from alloy.assign import assign, current, setitem_value
from alloy.scatter_sum import scatter_add_rows

REDUCTIONS = ("sum", "prod", "mean", "amax", "amin")

def _args(self, dim, index, src, what: str):
  from alloy.tensor import Tensor
  d = norm_dim(dim, self.ndim, what)
  if not isinstance(index, Tensor): index = Tensor(np.asarray(index), device=self.device)
  if not index.dtype.is_int: raise RuntimeError(f"{what}: index must be an integer tensor, got {index.dtype.name}")
  if index.device != self.device: raise ValueError(f"{what}: index is on {index.device}, self on {self.device}")
  if index.ndim != self.ndim and not (index.ndim <= 1 and self.ndim <= 1):
    raise RuntimeError(f"{what}: index has {index.ndim} dims and self {self.ndim}; they must have the same number of dimensions")
  index = index.reshape(index.shape + (1,) * (self.ndim - index.ndim)) if index.ndim < self.ndim else index
  for k, (n, s) in enumerate(zip(index.shape, self.shape)):
    if k != d and n > s: raise RuntimeError(f"{what}: index of shape {index.shape} is larger than self {self.shape} in dim {k}")
  if isinstance(src, Tensor):
    if src.device != self.device: raise ValueError(f"{what}: src is on {src.device}, self on {self.device}")
    if src.dtype != self.dtype: raise RuntimeError(f"{what}: src has dtype {src.dtype.name}, self has {self.dtype.name}; they must match")
    if src.ndim != index.ndim or any(n > s for n, s in zip(index.shape, src.shape)):
      raise RuntimeError(f"{what}: index of shape {index.shape} is larger than src {src.shape} (or of another rank)")
    if src.shape != index.shape: src = src.shrink(tuple((0, n) for n in index.shape))
  elif src is None: raise TypeError(f"{what}: expected src (a Tensor) or value (a number)")
  if index.numel() and not engine.host_read_guards:   # a @jit capture cannot read back: there the check is left out
    a = index.numpy()
    if a.min() < 0 or a.max() >= self.shape[d]:
      bad = a[(a < 0) | (a >= self.shape[d])].flat[0]
      raise IndexError(f"{what}: index {bad} is out of bounds for dimension {d} with size {self.shape[d]}")
  return d, index, src

def _lowest(d, highest=False):
  if d.is_float: return float("inf") if highest else float("-inf")
  return dt.max_value(d) if highest else dt.min_value(d)

def scatter_value(self, dim, index, src, reduce, include_self: bool = True, what: str = "scatter"):
  """The new value of self: reduce None for scatter (the last of repeated indices wins), else one of REDUCTIONS."""
  from alloy.tensor import Tensor, where
  if reduce is not None and reduce not in REDUCTIONS: raise ValueError(f"{what}: reduce must be one of {REDUCTIONS}, got {reduce!r}")
  d, index, src = _args(self, dim, index, src, what)
  if index.numel() == 0: return self
  n, s = self.ndim, self.shape[d]
  sub_shape = index.shape[:d] + (s,) + index.shape[d + 1:]
  sub = self if sub_shape == self.shape else self.shrink(tuple((0, k) for k in sub_shape))
  # hit[..., j, t, ...]: index[..., j, ...] == t, the target axis t right after the index's axis j (= d)
  at = Tensor.arange(s, device=self.device).reshape((1,) * (d + 1) + (s,) + (1,) * (n - d - 1))
  hit = index.unsqueeze(d + 1) == at   # lazy: the sums below do not read it
  vals = src.unsqueeze(d + 1) if isinstance(src, Tensor) else src
  written = hit.any(d)
  if reduce is None:
    j = Tensor.arange(index.shape[d], device=self.device).reshape((1,) * d + (index.shape[d], 1) + (1,) * (n - d - 1))
    last = where(hit, j, -1).amax(d, keepdim=True)
    pick = hit & (j == last)
    new = where(pick, vals, 0).sum(d, dtype=self.dtype) if isinstance(src, Tensor) else src
    out = where(written, new, sub)
  elif reduce in ("sum", "mean"):   # scatter-adds (O(n log^2 n) where n * s is large), their gradients reads at index
    vals = src if isinstance(src, Tensor) else Tensor.full(index.shape, src, dtype=self.dtype, device=self.device)
    total = scatter_add_rows(sub_shape, d, index, vals)
    if reduce == "sum" and include_self: out = sub + total
    else:
      count = scatter_add_rows(sub_shape, d, index, Tensor.ones(*index.shape, dtype=dt.int32, device=self.device))
      if reduce == "sum": out = where(count > 0, total, sub)
      else:
        count = count + (1 if include_self else 0)
        top = sub + total if include_self else total
        mean = top / count if self.dtype.is_float else top.floor_divide(count.maximum(1))
        out = where(count > 0, mean, sub)
  elif reduce == "prod":
    total = where(hit, vals, 1).prod(d, dtype=self.dtype)
    out = sub * total if include_self else where(written, total, sub)
  else:
    lowest = _lowest(self.dtype, highest=reduce == "amin")
    ext = where(hit, vals, lowest)
    ext = ext.amax(d) if reduce == "amax" else ext.amin(d)
    both = (sub.maximum(ext) if reduce == "amax" else sub.minimum(ext)) if include_self else ext
    out = where(written, both, sub)
  out = out.cast(self.dtype)
  return out if sub_shape == self.shape else setitem_value(self, tuple(slice(0, k) for k in sub_shape), out, what=what)

_OLD_REDUCE = {None: None, "add": "sum", "multiply": "prod"}

def scatter(self, dim, index, src=None, value=None, reduce=None):
  if reduce not in _OLD_REDUCE: raise ValueError(f"scatter: reduce must be 'add' or 'multiply', got {reduce!r}")
  return scatter_value(self, dim, index, src if src is not None else value, _OLD_REDUCE[reduce])
def scatter_add(self, dim, index, src): return scatter_value(self, dim, index, src, "sum", True, "scatter_add")
def scatter_reduce(self, dim, index, src, reduce, include_self=True):
  from alloy.tensor import Tensor
  if not isinstance(src, Tensor): raise TypeError(f"scatter_reduce: src must be a Tensor, got {type(src).__name__}")
  return scatter_value(self, dim, index, src, reduce, include_self, "scatter_reduce")

def scatter_(self, dim, index, src=None, value=None, reduce=None):
  return assign(self, scatter(current(self), dim, index, src, value, reduce), "scatter_")
def scatter_add_(self, dim, index, src): return assign(self, scatter_add(current(self), dim, index, src), "scatter_add_")
def scatter_reduce_(self, dim, index, src, reduce, include_self=True):
  return assign(self, scatter_reduce(current(self), dim, index, src, reduce, include_self), "scatter_reduce_")

def install(Tensor) -> None:
  for fn in (scatter, scatter_add, scatter_reduce, scatter_, scatter_add_, scatter_reduce_): setattr(Tensor, fn.__name__, fn)
