"""scatter, scatter_add and scatter_reduce (sum, prod, mean, amax, amin; include_self), with their in-place forms.

Lowered with the existing IR, no new kernel kind: every one combines src at the index through alloy/scatter_sum.py
(one dense compare for short rows, else sorted by index, O(n log^2 n) per row), and their gradients are PyTorch's:
src's is the output gradient read at the index (for amax/amin, split evenly among the values equal to the result,
self's included; for prod, the product of the other factors, exact at zeros; for scatter, only where the value
landed, as finite differences see it, where PyTorch hands every repeat of an index the gradient), self's passes
where nothing was written. The index's bounds are checked as __getitem__ checks its own (alloy/bounds.py: read back
at once or at the next host read, or under a @jit capture after each call).
"""
from __future__ import annotations
import numpy as np
from alloy import dtype as dt, autograd
from alloy.bounds import check_index
from alloy.inplace import norm_dim
from alloy.assign import assign, current, setitem_value
from alloy.scatter_sum import scatter_add_rows, scatter_rows

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
  return d, check_index(index, self.shape[d], what, d), src

def _combined(sub, d: int, index, vals, reduce: str, include_self: bool, written=None):
  """The new value of sub from the values combined at index (no autograd)."""
  from alloy.tensor import where
  ext, landed = scatter_rows(sub.shape, d, index, vals.detach(), reduce)
  written = landed if written is None else written
  if not include_self: return where(written, ext, sub), written
  both = {"prod": sub * ext, "amax": sub.maximum(ext), "amin": sub.minimum(ext)}[reduce]
  return where(written, both, sub), written

def _product_rule(out, g, d, index, include_self, written, sub, vals):
  """PyTorch's prod rule, exact at zeros: each factor's gradient is the product of the others (where a target's
  product holds one zero, the zero's is the product of the rest; with two or more, every one is 0)."""
  from alloy.gathering import take
  from alloy.tensor import where
  zero_self = sub == 0
  masked_self = where(zero_self, 1, sub)
  g_self = g * _combined(masked_self, d, index, vals, "prod", include_self, written)[0] / masked_self
  if not include_self: g_self = where(written, 0, g_self)
  zero = vals == 0
  zeros_at = take(scatter_add_rows(sub.shape, d, index, zero.cast(g.dtype)), d, index)
  single = zero & (zeros_at == 1)
  others = _combined(sub, d, index, where(single, 1, vals), "prod", include_self, written)[0]   # the lone zero left out
  g_src = where(single, take(g * others, d, index), take(g * out, d, index) / where(zero, 1, vals))
  return g_self, g_src

def _extreme_rule(out, g, d, index, include_self, written, sub, vals):
  """PyTorch's amax/amin rule: the gradient splits evenly among the values equal to the result (self's included
  where include_self); a target nothing reached passes it to self. (Without include_self PyTorch still counts a self
  equal to the result in the split, so its src gradient sums to less than the output's; this counts the values
  combined only.)"""
  from alloy.gathering import take
  from alloy.tensor import where
  src_hit = vals == take(out, d, index)
  count = scatter_add_rows(out.shape, d, index, src_hit.cast(g.dtype))
  self_hit = written & (sub == out)
  if include_self: count = count + self_hit.cast(g.dtype)
  share = g / count.maximum(1)
  g_self = where(written, where(self_hit, share, 0) if include_self else 0, g)
  return g_self, where(src_hit, take(share, d, index), 0)

def scatter_value(self, dim, index, src, reduce, include_self: bool = True, what: str = "scatter"):
  """The new value of self: reduce None for scatter (the last of repeated indices wins), else one of REDUCTIONS."""
  from alloy.tensor import Tensor, where
  if reduce is not None and reduce not in REDUCTIONS: raise ValueError(f"{what}: reduce must be one of {REDUCTIONS}, got {reduce!r}")
  d, index, src = _args(self, dim, index, src, what)
  if index.numel() == 0: return self
  sub_shape = index.shape[:d] + (self.shape[d],) + index.shape[d + 1:]
  sub = self if sub_shape == self.shape else self.shrink(tuple((0, k) for k in sub_shape))
  vals = src if isinstance(src, Tensor) else Tensor.full(index.shape, src, dtype=self.dtype, device=self.device)
  if reduce in ("prod", "amax", "amin"):
    with autograd.no_grad(): out, written = _combined(sub, d, index, vals, reduce, include_self)
    if sub._ag is not None or vals._ag is not None:
      rule = _product_rule if reduce == "prod" else _extreme_rule
      out = autograd.record(out, rule, (sub, vals), d, index, include_self, written, sub.detach(), vals.detach())
  else:   # the sums and the last value: their gradients are reads at index
    new, written = scatter_rows(sub_shape, d, index, vals, "last" if reduce is None else "sum")
    if reduce is None: out = where(written, new, sub)
    elif reduce == "sum": out = sub + new if include_self else where(written, new, sub)
    else:
      count = scatter_add_rows(sub_shape, d, index, Tensor.ones(*index.shape, dtype=dt.int32, device=self.device)) + (1 if include_self else 0)
      top = sub + new if include_self else new
      mean = top / count if self.dtype.is_float else top.floor_divide(count.maximum(1))
      out = where(count > 0, mean, sub)
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
