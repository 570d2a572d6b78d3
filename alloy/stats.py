"""PyTorch's statistics over tensors, composed from the primitives: std_mean and var_mean, cov and corrcoef (with
frequency and analytic weights), quantile and nanquantile (through sort; every interpolation mode), bincount (its
length is data: the greatest value is read on the host, as PyTorch's CUDA bincount syncs too), histogram (equal bins
over the data's range or given edges; each value's bin computed, then added with index_add), the trapezoid rule
(trapezoid, cumulative_trapezoid) and gradient (central differences inside, one- or two-sided second-order at the
edges, uniform or at given coordinates)."""
from __future__ import annotations
from collections import namedtuple
from alloy import dtype as dt
from alloy.ordering import searchsorted
from alloy.tensor import Tensor, stack, where

def var_mean(input: Tensor, dim=None, *, correction=1, keepdim: bool = False, unbiased=None) -> tuple:
  return input.var(dim, keepdim, correction, unbiased), input.mean(dim, keepdim)

def std_mean(input: Tensor, dim=None, *, correction=1, keepdim: bool = False, unbiased=None) -> tuple:
  return input.std(dim, keepdim, correction, unbiased), input.mean(dim, keepdim)

def cov(input: Tensor, *, correction: int = 1, fweights=None, aweights=None) -> Tensor:
  """The covariance of the variables in input's rows (a 1-D input is one variable) over its columns' observations,
  each observation weighted by fweights (integer repeats) times aweights; divided by the weights' sum less
  `correction` of them (numpy.cov's normalization)."""
  if input.ndim > 2: raise ValueError(f"cov: expected input to have two or fewer dimensions, got {input.ndim}")
  x = input.reshape(1, -1) if input.ndim < 2 else input
  x = x if x.dtype.is_float else x.cast(dt.default_float)
  n = x.shape[1]
  w = None
  for given, name in ((fweights, "fweights"), (aweights, "aweights")):
    if given is None: continue
    if given.ndim > 1 or given.numel() != n:
      raise ValueError(f"cov: {name} must be 1-D with {n} elements (one per observation), got shape {given.shape}")
    if name == "fweights" and given.dtype.is_float: raise TypeError("cov: fweights must be integers")
    w = given.cast(x.dtype) if w is None else w * given.cast(x.dtype)
  if w is None: total, norm = n, n - correction
  else:
    total = w.sum()
    norm = total - correction * (w * aweights.cast(x.dtype)).sum() / total if aweights is not None else total - correction
  centered = x - (x.mean(1, keepdim=True) if w is None else (x * w).sum(1, keepdim=True) / total)
  out = ((centered if w is None else centered * w) @ centered.T) / (norm if w is None else where(norm > 0, norm, 0.0))
  return out.reshape(()) if x.shape[0] == 1 else out   # one variable: a 0-d tensor, as torch

def corrcoef(input: Tensor) -> Tensor:
  """Pearson's correlation of input's rows: cov / (std_i std_j), clipped to [-1, 1] as numpy.corrcoef."""
  c = cov(input)
  if c.ndim == 0: return c / c
  d = c.diagonal(0, -2, -1).sqrt()
  return (c / d.unsqueeze(1) / d.unsqueeze(0)).clamp(-1.0, 1.0)

INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")

def _quantile(input: Tensor, q, dim, keepdim: bool, interpolation: str, ignore_nan: bool, op: str) -> Tensor:
  if interpolation not in INTERPOLATIONS: raise ValueError(f"{op}: interpolation must be one of {INTERPOLATIONS}, got {interpolation!r}")
  if not input.dtype.is_float: raise TypeError(f"{op}: input must be a float tensor, got {input.dtype.name}")
  scalar_q = not isinstance(q, Tensor)
  qs = Tensor(float(q), dtype=input.dtype, device=input.device) if scalar_q else q.cast(input.dtype)
  if qs.ndim > 1: raise ValueError(f"{op}: q must be a scalar or 1-D tensor, got shape {qs.shape}")
  if scalar_q and not 0 <= q <= 1: raise ValueError(f"{op}: q must be in [0, 1], got {q}")
  x = input.reshape(-1) if dim is None else input
  d = 0 if dim is None else dim % max(x.ndim, 1)
  if x.ndim == 0: x, d = x.reshape(1), 0
  n = x.shape[d]
  if n == 0: raise ValueError(f"{op}: input tensor cannot be empty along the reduced dimension")
  ordered = x.movedim(d, -1).sort(-1).values   # NaN sorts last
  nan = ordered.isnan()
  valid = (~nan).cast(dt.int64).sum(-1, keepdim=True) if ignore_nan else None
  last = (valid - 1).maximum(0).cast(x.dtype) if ignore_nan else float(n - 1)
  pos = qs.reshape(-1, *[1] * ordered.ndim) * last   # (Q, ..., 1)
  lo, hi = pos.floor(), pos.ceil()
  if interpolation == "nearest": lo = hi = pos.round()   # half to even, as torch
  elif interpolation == "lower": hi = lo
  elif interpolation == "higher": lo = hi
  shape = (qs.numel(),) + ordered.shape[:-1] + (1,)
  at = lambda p: ordered.unsqueeze(0).expand(*shape[:-1], n).gather(-1, p.cast(dt.int64).expand(*shape))
  a, b = at(lo), at(hi)
  frac = 0.5 if interpolation == "midpoint" else (pos - lo) if interpolation == "linear" else 0.0
  out = (a + (b - a) * frac).squeeze(-1) if interpolation in ("linear", "midpoint") else a.squeeze(-1)
  if ignore_nan: out = where((valid == 0).squeeze(-1), float("nan"), out)
  else: out = where(nan.any(-1), float("nan"), out)   # a NaN in the slice makes its quantiles NaN
  if keepdim:
    out = out.unsqueeze(-1).movedim(-1, d + 1) if dim is not None else out.reshape(out.shape[0], *[1] * input.ndim)
  return out.squeeze(0) if scalar_q or qs.ndim == 0 else out

def quantile(input: Tensor, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear") -> Tensor:
  """The q-th quantiles of input along dim (of the flattened input for None): q a float or a 1-D tensor (its values
  first in the result); NaN where the slice has a NaN."""
  return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")

def nanquantile(input: Tensor, q, dim=None, keepdim: bool = False, *, interpolation: str = "linear") -> Tensor:
  """quantile over the values that are not NaN; NaN where a slice has none."""
  return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")

def bincount(input: Tensor, weights=None, minlength: int = 0) -> Tensor:
  """The count (or the weights' sum) of each value of a 1-D non-negative integer tensor, max(max + 1, minlength)
  long: int64 counts, or weights' dtype (float32 and float64) sums."""
  if input.ndim != 1 or input.dtype.is_float or input.dtype.is_bool:
    raise ValueError(f"bincount: input must be a 1-D integer tensor, got {input.dtype.name} of shape {input.shape}")
  if minlength < 0: raise ValueError(f"bincount: minlength must be non-negative, got {minlength}")
  if weights is not None and tuple(weights.shape) != tuple(input.shape):
    raise ValueError(f"bincount: weights must have the input's shape {input.shape}, got {weights.shape}")
  length = minlength
  if input.numel():
    low, high = (int(v) for v in stack([input.min(), input.max()]).numpy())   # one read
    if low < 0: raise ValueError(f"bincount: input must be non-negative, got {low}")
    length = max(length, high + 1)
  out_dtype = dt.int64 if weights is None else (weights.dtype if weights.dtype in (dt.float32, dt.float64) else dt.float64)
  values = Tensor.ones(input.shape[0], dtype=out_dtype, device=input.device) if weights is None else weights.cast(out_dtype)
  return Tensor.zeros(length, dtype=out_dtype, device=input.device).index_add(0, input, values)

def _spacing(y: Tensor, x, dx, dim: int) -> Tensor:
  if x is None: return dx
  if x.ndim == 1:
    shape = [1] * y.ndim
    shape[dim] = x.shape[0]
    x = x.reshape(shape)
  return x.narrow(dim, 1, x.shape[dim] - 1) - x.narrow(dim, 0, x.shape[dim] - 1)

def trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
  """The trapezoid rule's integral of y along dim, at points x (a tensor: 1-D, or y's shape) or spacing dx (default 1)."""
  if x is not None and dx is not None: raise ValueError("trapezoid: give x or dx, not both")
  d = dim % y.ndim
  n = y.shape[d]
  if n == 0: return y.sum(d)
  mids = (y.narrow(d, 1, n - 1) + y.narrow(d, 0, n - 1)) * 0.5
  return (mids * _spacing(y, x, 1.0 if dx is None else dx, d)).sum(d)

def cumulative_trapezoid(y: Tensor, x=None, *, dx=None, dim: int = -1) -> Tensor:
  """The running trapezoid-rule integrals of y along dim (one fewer than y's points)."""
  if x is not None and dx is not None: raise ValueError("cumulative_trapezoid: give x or dx, not both")
  d = dim % y.ndim
  n = y.shape[d]
  mids = (y.narrow(d, 1, max(n - 1, 0)) + y.narrow(d, 0, max(n - 1, 0))) * 0.5
  return (mids * _spacing(y, x, 1.0 if dx is None else dx, d)).cumsum(d)

HistogramResult = namedtuple("HistogramResult", ["hist", "bin_edges"])

def histogram(input: Tensor, bins=100, *, range=None, weight=None, density: bool = False) -> HistogramResult:
  """Counts (or weight sums) of input's values in bins equal bins over range (default: the data's least and greatest,
  widened by 1/2 each way where they are equal) or between the edges of a 1-D bins tensor; the last bin includes its
  right edge, values outside are left out; density divides by the total and the bin widths."""
  if not input.dtype.is_float: raise TypeError(f"histogram: input must be a float tensor, got {input.dtype.name}")
  x = input.reshape(-1)
  if isinstance(bins, Tensor):
    edges = bins.cast(x.dtype)
    if edges.ndim != 1 or edges.shape[0] < 2: raise ValueError(f"histogram: bins as a tensor must be 1-D edges (at least 2), got {tuple(bins.shape)}")
    count = edges.shape[0] - 1
    at = searchsorted(edges, x, right=True) - 1
    inside = (x >= edges[0]) & (x <= edges[-1])
  else:
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
      raise ValueError(f"histogram: bins must be a positive int or a tensor, got {bins!r}")
    count = bins
    if range is not None:
      if range[0] > range[1]: raise ValueError(f"histogram: range's min {range[0]} is greater than its max {range[1]}")
      lo, hi = (Tensor(float(v), dtype=x.dtype, device=x.device) for v in range)
    elif x.numel(): lo, hi = x.amin(), x.amax()
    else: lo, hi = (Tensor(float(v), dtype=x.dtype, device=x.device) for v in (0.0, 1.0))
    same = lo == hi
    lo, hi = where(same, lo - 0.5, lo), where(same, hi + 0.5, hi)
    edges = lo + (hi - lo) * (Tensor.arange(bins + 1, device=x.device).cast(x.dtype) / bins)
    at = ((x - lo) * (bins / (hi - lo))).floor()
    inside = (x >= lo) & (x <= hi)
  at = where(inside, at.cast(dt.int64).clamp(0, count - 1), 0)
  values = inside.cast(x.dtype) if weight is None else where(inside, weight.reshape(-1).cast(x.dtype), 0.0)
  hist = Tensor.zeros(count, dtype=x.dtype, device=x.device).index_add(0, at, values)
  if density: hist = hist / (hist.sum() * (edges[1:] - edges[:-1]))
  return HistogramResult(hist, edges)

def _gradient_along(f: Tensor, d: int, h, edge_order: int) -> Tensor:
  """f's derivative along d: h a number (uniform spacing) or a 1-D tensor of coordinates."""
  n = f.shape[d]
  at = lambda start, length: f.narrow(d, start, length)
  if not isinstance(h, Tensor):
    inner = (at(2, n - 2) - at(0, n - 2)) / (2 * h)
    if edge_order == 1: first, last = (at(1, 1) - at(0, 1)) / h, (at(n - 1, 1) - at(n - 2, 1)) / h
    else:
      first = (at(0, 1) * -3 + at(1, 1) * 4 - at(2, 1)) / (2 * h)
      last = (at(n - 1, 1) * 3 - at(n - 2, 1) * 4 + at(n - 3, 1)) / (2 * h)
    return first.cat(inner, last, dim=d)
  if h.ndim != 1 or h.shape[0] != n: raise ValueError(f"gradient: coordinates along dim {d} must be 1-D with {n} entries, got {tuple(h.shape)}")
  shape = [1] * f.ndim
  def along(t): return t.reshape(*shape[:d], t.shape[0], *shape[d + 1:])
  steps = h.cast(f.dtype)[1:] - h.cast(f.dtype)[:-1]
  left, right = along(steps[:-1]), along(steps[1:])
  inner = (at(0, n - 2) * (-right / (left * (left + right))) + at(1, n - 2) * ((right - left) / (left * right))
           + at(2, n - 2) * (left / (right * (left + right))))
  if edge_order == 1: first, last = (at(1, 1) - at(0, 1)) / along(steps[:1]), (at(n - 1, 1) - at(n - 2, 1)) / along(steps[-1:])
  else:
    h1, h2 = along(steps[:1]), along(steps[1:2])
    first = at(0, 1) * (-(2 * h1 + h2) / (h1 * (h1 + h2))) + at(1, 1) * ((h1 + h2) / (h1 * h2)) - at(2, 1) * (h1 / (h2 * (h1 + h2)))
    h1, h2 = along(steps[-2:-1]), along(steps[-1:])
    last = at(n - 3, 1) * (h2 / (h1 * (h1 + h2))) - at(n - 2, 1) * ((h1 + h2) / (h1 * h2)) + at(n - 1, 1) * ((2 * h2 + h1) / (h2 * (h1 + h2)))
  return first.cat(inner, last, dim=d)

def gradient(input: Tensor, *, spacing=1, dim=None, edge_order: int = 1) -> tuple:
  """torch.gradient: the derivative along each of dim (all dims for None) by differences, spacing a number, one per
  dim, or one coordinates tensor per dim; a tuple, one tensor per dim."""
  if edge_order not in (1, 2): raise ValueError(f"gradient: edge_order must be 1 or 2, got {edge_order}")
  dims = tuple(range(input.ndim)) if dim is None else (dim,) if isinstance(dim, int) else tuple(dim)
  dims = tuple(d % input.ndim for d in dims)
  spacings = list(spacing) if isinstance(spacing, (list, tuple)) else [spacing] * len(dims)
  if len(spacings) != len(dims): raise ValueError(f"gradient: {len(spacings)} spacings for {len(dims)} dims")
  f = input if input.dtype.is_float else input.cast(dt.default_float)
  for d in dims:
    if f.shape[d] < edge_order + 1:
      raise ValueError(f"gradient: each dim must have at least edge_order + 1 = {edge_order + 1} points, dim {d} has {f.shape[d]}")
  return tuple(_gradient_along(f, d, h, edge_order) for d, h in zip(dims, spacings))
