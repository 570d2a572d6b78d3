"""cumprod, cummax and cummin (PyTorch's signatures and tie rules), forward and backward.

Like cumsum, each is one fused reduction over a lazy (n, n) triangle per row: out[j] reduces x[k] for k <= j, the
rest filled with the reduction's identity. O(n^2) work per row, nothing stored but the result.

cummax/cummin return the latest index of the running extreme (PyTorch's rule for ties), and NaN propagates with
its own index; their gradient goes to that index alone (a one-hot scatter, gathering.scatter_add_rows).
cumprod's gradient is right at zeros: with z the first zero of a row, positions before z get
rev_cumsum(g * out) / x (x is non-zero there), z itself gets rev_cumsum(g * cumprod(x with x[z] = 1)), and the
positions after z get 0 (every product they enter holds x[z]).
"""
from __future__ import annotations
from alloy import dtype as dt, autograd
from alloy.gathering import scatter_add_rows
from alloy.tensor import MaxResult, Tensor, where, norm_axis

def _triangle(n: int, device: str) -> Tensor:
  """(n, n) bool, [j, k] = k <= j."""
  pos = Tensor.arange(n, dtype=dt.int32, device=device)
  return pos.reshape(1, n) <= pos.reshape(n, 1)

def _running(t: Tensor, fill, reduce: str) -> Tensor:
  """out[..., j] = reduce(t[..., k] for k <= j) along the last axis."""
  n = t.shape[-1]
  return getattr(where(_triangle(n, t.device), t.unsqueeze(-2), fill), reduce)(-1)

def _moved(input: Tensor, dim, what: str) -> tuple[Tensor, int]:
  if not isinstance(input, Tensor): raise TypeError(f"{what}: expected a Tensor, got {type(input).__name__}")
  d = norm_axis(dim, input.ndim)
  return (input.reshape(1) if input.ndim == 0 else input.transpose(d, -1)), d

def _back(t: Tensor, input: Tensor, d: int) -> Tensor: return t.reshape(()) if input.ndim == 0 else t.transpose(d, -1)

def _reverse_cumsum(t: Tensor) -> Tensor: return t.flip(-1).cumsum(-1).flip(-1)

def _cumprod_rule(out, g, x):
  zero = x == 0
  seen = zero.cast(dt.int32).cumsum(-1)
  before, first = seen == 0, zero & (seen == 1)
  g_before = _reverse_cumsum(g * out) / where(before, x, 1)
  g_first = _reverse_cumsum(g * _running(where(first, 1, x), 1, "prod"))
  return (where(before, g_before, where(first, g_first, 0)),)

def cumprod(input: Tensor, dim: int, dtype=None) -> Tensor:
  """torch.cumprod: running products along dim (integers and bools in int64, as PyTorch)."""
  t, d = _moved(input, dim, "cumprod")
  out_dtype = dt.to_dtype(dtype) if dtype is not None else dt.int64 if not input.dtype.is_float else input.dtype
  t = t.cast(out_dtype)
  if t.shape[-1] == 0: return input.cast(out_dtype)
  out = _running(t.detach(), 1, "prod")
  if t._ag is not None: out = autograd.record(out, _cumprod_rule, (t,), t.detach())
  return _back(out, input, d)

def _cum_extreme(input: Tensor, dim, largest: bool) -> MaxResult:
  what = "cummax" if largest else "cummin"
  t, d = _moved(input, dim, what)
  n = t.shape[-1]
  if n == 0: return MaxResult(input.clone(), Tensor.zeros(*input.shape, dtype=dt.int64, device=input.device))
  v = t.detach()
  if v.dtype.is_bool: fill = not largest
  else: fill = float("-inf" if largest else "inf") if v.dtype.is_float else (dt.min_value if largest else dt.max_value)(v.dtype)
  values = _running(v, fill, "amax" if largest else "amin")
  hit = v.unsqueeze(-2) == values.unsqueeze(-1)   # [.., j, k]: x[k] is row j's running extreme
  if v.dtype.is_float: hit = hit | ((v != v).unsqueeze(-2) & (values != values).unsqueeze(-1))
  pos = Tensor.arange(n, dtype=dt.int32, device=v.device)
  indices = where(_triangle(n, v.device) & hit, pos.reshape(1, n), -1).amax(-1).cast(dt.int64)
  if t._ag is not None: values = autograd.record(values, _cum_extreme_rule, (t,), indices, t.shape)
  return MaxResult(_back(values, input, d), _back(indices, input, d))

def _cum_extreme_rule(out, g, indices, shape): return (scatter_add_rows(shape, len(shape) - 1, indices, g),)

def cummax(input: Tensor, dim: int) -> MaxResult:
  """torch.cummax: (running maxima, int64 index of each: the latest among ties) along dim."""
  return _cum_extreme(input, dim, True)

def cummin(input: Tensor, dim: int) -> MaxResult:
  """torch.cummin: (running minima, int64 index of each: the latest among ties) along dim."""
  return _cum_extreme(input, dim, False)
