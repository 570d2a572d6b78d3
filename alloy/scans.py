"""cumprod, cummax, cummin and logcumsumexp (PyTorch's signatures and tie rules), forward and backward, over one
running scan.

A scan along the last axis is, for rows of at most TRIANGLE_MAX_LENGTH, one fused reduction over a lazy (n, n)
triangle (out[j] reduces x[k] for k <= j, the rest the identity; n^2 work, one kernel); for longer rows a log-step
scan (Hillis-Steele): log2(n) kernels, stage s combining each element with the one 2^s before it, O(n log n) work.
The offset is a kernel argument, so the stages share a compiled kernel.

cummax/cummin: each value becomes the integer key ordering.sort_key gives it (NaN largest), packed with its index
as key * 2^32 + index (cummin: the key's complement, NaN kept largest), so one running max gives the running
extreme with the latest index among ties, and NaN propagating with its own index (PyTorch's rules). int64 and
float64 keys do not fit; they take the triangle at every length. The gradient goes to that index alone (a scatter-add,
scatter_sum.scatter_add_rows).
logcumsumexp: the triangle's reduction is a logsumexp (its row maximum subtracted), a log-step stage a logaddexp, so
no prefix underflows where its terms are far below the row's largest. Its gradient, sum over t >= k of
g[t] exp(x[k] - out[t]), is taken in log space, g's positive and negative parts apart, as PyTorch does.
cumprod's gradient is right at zeros: with z the first zero of a row, positions before z get
rev_cumsum(g * out) / x (x is non-zero there), z itself gets rev_cumsum(g * cumprod(x with x[z] = 1)), and the
positions after z get 0 (every product they enter holds x[z]).
"""
from __future__ import annotations
from alloy import dtype as dt, autograd
from alloy.gathering import positions_along, take
from alloy.scatter_sum import scatter_add_rows
from alloy.ordering import sort_key
from alloy.tensor import MaxResult, Tensor, where, norm_axis
from alloy.logexp import logaddexp

TRIANGLE_MAX_LENGTH = 64
_COMBINE = {"prod": Tensor.mul, "sum": Tensor.add, "amax": Tensor.maximum, "amin": Tensor.minimum, "logsumexp": logaddexp}

def _triangle(n: int, device: str) -> Tensor:
  """(n, n) bool, [j, k] = k <= j."""
  pos = Tensor.arange(n, dtype=dt.int32, device=device)
  return pos.reshape(1, n) <= pos.reshape(n, 1)

def running(t: Tensor, reduce: str, identity, log_step: bool | None = None) -> Tensor:
  """out[..., j] = reduce(t[..., k] for k <= j) along the last axis; reduce is 'prod', 'sum', 'amax', 'amin' or
  'logsumexp'."""
  n = t.shape[-1]
  if not (n > TRIANGLE_MAX_LENGTH if log_step is None else log_step):
    return getattr(where(_triangle(n, t.device), t.unsqueeze(-2), identity), reduce)(-1)
  rows = t.reshape(-1, n).contiguous()
  col = Tensor.arange(n, dtype=dt.int32, device=t.device).reshape(1, n).expand(rows.shape)
  picks = positions_along(rows.shape, 1, t.device)
  step = 1
  while step < n:
    before = take(rows, 1, (col - step).maximum(0), picks)
    rows = where(col >= step, _COMBINE[reduce](rows, before), rows).contiguous()
    step *= 2
  return rows.reshape(t.shape)

def _moved(input: Tensor, dim, what: str) -> tuple[Tensor, int]:
  if not isinstance(input, Tensor): raise TypeError(f"{what}: expected a Tensor, got {type(input).__name__}")
  d = norm_axis(dim, input.ndim)
  return (input.reshape(1) if input.ndim == 0 else input.transpose(d, -1)), d

def _back(t: Tensor, input: Tensor, d: int) -> Tensor: return t.reshape(()) if input.ndim == 0 else t.transpose(d, -1)

def _reverse_cumsum(t: Tensor) -> Tensor: return running(t.flip(-1), "sum", 0).flip(-1)

def _cumprod_rule(out, g, x):
  zero = x == 0
  seen = running(zero.cast(dt.int32), "sum", 0)
  before, first = seen == 0, zero & (seen == 1)
  g_before = _reverse_cumsum(g * out) / where(before, x, 1)
  g_first = _reverse_cumsum(g * running(where(first, 1, x), "prod", 1))
  return (where(before, g_before, where(first, g_first, 0)),)

def cumprod(input: Tensor, dim: int, dtype=None) -> Tensor:
  """torch.cumprod: running products along dim (integers and bools in int64, as PyTorch)."""
  t, d = _moved(input, dim, "cumprod")
  out_dtype = dt.to_dtype(dtype) if dtype is not None else dt.int64 if not input.dtype.is_float else input.dtype
  t = t.cast(out_dtype)
  if t.shape[-1] == 0: return input.cast(out_dtype)
  out = running(t.detach(), "prod", 1)
  if t._ag is not None: out = autograd.record(out, _cumprod_rule, (t,), t.detach())
  return _back(out, input, d)

def _running_extreme_64(v: Tensor, largest: bool) -> tuple[Tensor, Tensor]:
  """(values, latest indices) of the running max/min of 64-bit v along the last axis, by the triangle."""
  n = v.shape[-1]
  if v.dtype.is_float: fill = float("-inf" if largest else "inf")
  else: fill = (dt.min_value if largest else dt.max_value)(v.dtype)
  values = running(v, "amax" if largest else "amin", fill, log_step=False)
  hit = v.unsqueeze(-2) == values.unsqueeze(-1)   # [.., j, k]: x[k] is row j's running extreme
  if v.dtype.is_float: hit = hit | ((v != v).unsqueeze(-2) & (values != values).unsqueeze(-1))
  pos = Tensor.arange(n, dtype=dt.int32, device=v.device)
  return values, where(_triangle(n, v.device) & hit, pos.reshape(1, n), -1).amax(-1)

def _cum_extreme(input: Tensor, dim, largest: bool) -> MaxResult:
  t, d = _moved(input, dim, "cummax" if largest else "cummin")
  n = t.shape[-1]
  if n == 0: return MaxResult(input.clone(), Tensor.zeros(*input.shape, dtype=dt.int64, device=input.device))
  v = t.detach()
  key = sort_key(v, False)
  if key.dtype is dt.int32:
    if not largest: key = where(v != v, key, ~key) if v.dtype.is_float else ~key   # NaN (the largest key) still wins
    pos = Tensor.arange(n, dtype=dt.int32, device=v.device).cast(dt.int64)
    best = running(key.cast(dt.int64) * (1 << 32) + pos, "amax", dt.min_value(dt.int64))
    indices = best & 0xFFFFFFFF
    values = take(v, v.ndim - 1, indices)
  else: values, indices = _running_extreme_64(v, largest)
  indices = indices.cast(dt.int64)
  if t._ag is not None: values = autograd.record(values, _cum_extreme_rule, (t,), indices, t.shape)
  return MaxResult(_back(values, input, d), _back(indices, input, d))

def _cum_extreme_rule(out, g, indices, shape): return (scatter_add_rows(shape, len(shape) - 1, indices, g),)

def cummax(input: Tensor, dim: int) -> MaxResult:
  """torch.cummax: (running maxima, int64 index of each: the latest among ties) along dim."""
  return _cum_extreme(input, dim, True)

def cummin(input: Tensor, dim: int) -> MaxResult:
  """torch.cummin: (running minima, int64 index of each: the latest among ties) along dim."""
  return _cum_extreme(input, dim, False)

def _logcumsumexp_rule(out, g, x):
  """d out[t] / d x[k] = exp(x[k] - out[t]) for k <= t: the sum over t >= k, g's signs apart, each a reverse
  logcumsumexp of log|g| - out (a zero part is -inf, exp 0)."""
  def part(h): return running((h.log() - out).flip(-1), "logsumexp", float("-inf")).flip(-1)
  return ((x + part(g.maximum(0))).exp() - (x + part((-g).maximum(0))).exp(),)

def logcumsumexp(input: Tensor, dim: int) -> Tensor:
  """torch.logcumsumexp: log of the running sum of exp along dim, without overflow or underflow."""
  t, d = _moved(input, dim, "logcumsumexp")
  if not t.dtype.is_float: t = t.cast(dt.default_float)
  if t.shape[-1] == 0: return input.cast(t.dtype)
  out = running(t.detach(), "logsumexp", float("-inf"))
  if t._ag is not None: out = autograd.record(out, _logcumsumexp_rule, (t,), t.detach())
  return _back(out, input, d)
