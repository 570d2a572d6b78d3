"""Pooling with PyTorch's functional signatures: max_pool1d/2d/3d (the gradient to each window's first maximum, as
PyTorch routes it), avg_pool1d/2d/3d (count_include_pad, ceil_mode, divisor_override), adaptive_avg_pool1d/2d/3d,
adaptive_max_pool1d/2d/3d, lp_pool1d/2d/3d (an average pool of x^p) and max_unpool1d/2d/3d (a scatter at the indices
max_pool returned).
Each is a reduction over a window view of the padded input (alloy/functional/window.py); unfold and fold are that
view itself and its adjoint."""
from __future__ import annotations
import numpy as np
from alloy import autograd, dtype as dt
from alloy.bounds import check_index
from alloy.helpers import prod
from alloy.functional.conv import int_tuple
from alloy.functional.window import computed, out_size as window_count, pad_spatial, window_adjoint, windows

def _check_input(input, nd: int, op: str):
  from alloy.tensor import Tensor
  if not isinstance(input, Tensor): raise TypeError(f"{op}: input must be a Tensor, got {type(input).__name__}")
  if input.ndim not in (nd + 1, nd + 2):
    raise ValueError(f"{op}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, got shape {input.shape}")
  if any(s == 0 for s in input.shape[-nd:]): raise ValueError(f"{op}: the input's spatial sizes must be non-zero, got shape {input.shape}")

def out_size(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
  """PyTorch's pooling output size: with ceil_mode the last window may hang over the end, but must start inside
  the input or its left padding."""
  o = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
  if ceil_mode and (o - 1) * s >= n + p: o -= 1
  return o

def _args(input, kernel_size, stride, padding, dilation, ceil_mode, nd: int, op: str):
  _check_input(input, nd, op)
  kernel = int_tuple(kernel_size, nd, "kernel_size", op, 1)
  stride = kernel if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else int_tuple(stride, nd, "stride", op, 1)
  padding, dilation = int_tuple(padding, nd, "padding", op, 0), int_tuple(dilation, nd, "dilation", op, 1)
  for p, k, d in zip(padding, kernel, dilation):
    if p > (d * (k - 1) + 1) // 2:
      raise ValueError(f"{op}: pad should be at most half of effective kernel size, but got pad={p}, kernel_size={k} and dilation={d}")
  spatial = input.shape[-nd:]
  out = tuple(out_size(n, k, s, p, d, ceil_mode) for n, k, s, p, d in zip(spatial, kernel, stride, padding, dilation))
  if any(o <= 0 for o in out): raise ValueError(f"{op}: the output size {out} is too small for the input's {spatial}")
  # right padding that makes exactly `out` windows (more than `padding` under ceil_mode, or a crop)
  pads = tuple((p, (o - 1) * s + d * (k - 1) + 1 - n - p) for n, k, s, p, d, o in zip(spatial, kernel, stride, padding, dilation, out))
  return kernel, stride, padding, dilation, pads

def _kernel_position(kernel: tuple, device):
  """(*kernel) int32: each window element's flat position in its window."""
  from alloy.tensor import Tensor
  nd, flat = len(kernel), None
  for i, k in enumerate(kernel):
    t = Tensor.arange(k, device=device).reshape(tuple(k if j == i else 1 for j in range(nd))) * prod(kernel[i + 1:])
    flat = t if flat is None else flat + t
  return flat

def _first_max(xw, nd: int):
  """Each window's first maximum (a NaN wins, as in PyTorch), as its flat position in the window, (..., *out)."""
  from alloy.tensor import where
  kernel = xw.shape[-nd:]
  axes = tuple(range(xw.ndim - nd, xw.ndim))
  m = xw.amax(axes, keepdim=True)
  hit = (xw == m) | (xw != xw) if xw.dtype.is_float else xw == m
  return where(hit, _kernel_position(kernel, xw.device), prod(kernel)).amin(axes)

def _max_pool_rule(out, g, xw, pads, kernel, stride, dilation, in_shape):
  from alloy.tensor import where
  nd = len(kernel)
  first = _first_max(xw, nd)
  pick = _kernel_position(kernel, g.device) == first.reshape(first.shape + (1,) * nd)
  gw = where(pick, g.reshape(g.shape + (1,) * nd), 0)
  padded = window_adjoint(gw, tuple(n + b + a for n, (b, a) in zip(in_shape[-nd:], pads)), kernel, stride, dilation)
  return (pad_spatial(padded, tuple((-b, -a) for b, a in pads)),)

def max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, nd: int, op: str):
  kernel, stride, padding, dilation, pads = _args(input, kernel_size, stride, padding, dilation, ceil_mode, nd, op)
  unbatched = input.ndim == nd + 1
  x = input.unsqueeze(0) if unbatched else input
  with autograd.no_grad():
    xp = pad_spatial(computed(x.detach()), pads, value=dt.min_value(x.dtype))
    xw = windows(xp, kernel, stride, dilation)
    out = xw.amax(tuple(range(xw.ndim - nd, xw.ndim)))
  if x._ag is not None and autograd.is_grad_enabled():
    out = autograd.record(out, _max_pool_rule, (x,), xw, pads, kernel, stride, dilation, x.shape)
  if unbatched: out = out.squeeze(0)
  if not return_indices: return out
  with autograd.no_grad(): idx = _flat_input_index(_first_max(xw, nd), x.shape[-nd:], kernel, stride, padding, dilation)
  return out, (idx.squeeze(0) if unbatched else idx)

def _flat_input_index(first, spatial: tuple, kernel: tuple, stride, padding, dilation):
  """The flat position in the input's spatial dims of each window's element at flat window position `first`."""
  from alloy.tensor import Tensor
  nd = len(kernel)
  out_shape = first.shape[-nd:]
  first = first.cast(dt.int64)
  flat = None
  for i in range(nd):
    k = (first // prod(kernel[i + 1:])) % kernel[i]
    o = Tensor.arange(out_shape[i], dtype=dt.int64, device=first.device).reshape(tuple(out_shape[i] if j == i else 1 for j in range(nd)))
    pos = (o * stride[i] - padding[i] + k * dilation[i]) * prod(spatial[i + 1:])
    flat = pos if flat is None else flat + pos
  return flat

def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
  return max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 1, "max_pool1d")
def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
  return max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 2, "max_pool2d")
def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
  return max_pool(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 3, "max_pool3d")

def _window_counts(n: int, k: int, s: int, p: int, o: int, include_pad: bool) -> np.ndarray:
  """Elements each of the o windows averages along one axis: PyTorch counts the padding (include_pad) but never
  the part of a ceil_mode window past the right padding."""
  start = np.arange(o) * s - p
  end = np.minimum(start + k, n + p)
  if not include_pad: start, end = np.maximum(start, 0), np.minimum(end, n)
  return end - start

def avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, nd: int, op: str):
  from alloy.tensor import Tensor
  kernel, stride, padding, _, pads = _args(input, kernel_size, stride, padding, 1, ceil_mode, nd, op)
  if not input.dtype.is_float: raise TypeError(f"{op}: input must be floating point, got {input.dtype.name}")
  if divisor_override is not None and divisor_override <= 0: raise ValueError(f"{op}: divisor_override must be positive, got {divisor_override}")
  xw = windows(pad_spatial(computed(input), pads), kernel, stride, (1,) * nd)
  total = xw.sum(tuple(range(xw.ndim - nd, xw.ndim)))
  if divisor_override is not None: return total / divisor_override
  out = total.shape[-nd:]
  counts = [_window_counts(n, k, s, p, o, count_include_pad) for n, k, s, p, o in zip(input.shape[-nd:], kernel, stride, padding, out)]
  divisor = np.ones(out, dtype=np.float64)
  for i, c in enumerate(counts): divisor = divisor * c.reshape(tuple(-1 if j == i else 1 for j in range(nd)))
  if np.all(divisor == divisor.flat[0]): return total / float(divisor.flat[0])
  return total / Tensor(divisor.astype(np.float32), device=input.device).cast(total.dtype)

def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
  return avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, None, 1, "avg_pool1d")
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
  return avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 2, "avg_pool2d")
def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True, divisor_override=None):
  return avg_pool(input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override, 3, "avg_pool3d")

def adaptive_sizes(input, output_size, nd: int, op: str) -> tuple:
  sizes = (output_size,) * nd if isinstance(output_size, int) else tuple(output_size)
  if len(sizes) != nd: raise ValueError(f"{op}: output_size must be an int or {nd} sizes, got {output_size!r}")
  sizes = tuple(n if o is None else o for o, n in zip(sizes, input.shape[-nd:]))
  if any(not isinstance(o, int) or o <= 0 for o in sizes): raise ValueError(f"{op}: output sizes must be positive ints, got {output_size!r}")
  return sizes

def apply_along(x, axis: int, matrix: np.ndarray):
  """x with its `axis` replaced by matrix (O, L) applied to it: out[..., o, ...] = sum_l matrix[o, l] * x[..., l, ...]."""
  from alloy.tensor import Tensor
  m = Tensor(matrix, device=x.device).cast(x.dtype)
  t = x.transpose(axis, -1)
  return (t.unsqueeze(-2) * m).sum(-1).transpose(axis, -1)

def adaptive_avg_pool(input, output_size, nd: int, op: str):
  _check_input(input, nd, op)
  if not input.dtype.is_float: raise TypeError(f"{op}: input must be floating point, got {input.dtype.name}")
  sizes = adaptive_sizes(input, output_size, nd, op)
  spatial = input.shape[-nd:]
  if all(n % o == 0 for n, o in zip(spatial, sizes)):   # equal bins: a plain average pool
    k = tuple(n // o for n, o in zip(spatial, sizes))
    return avg_pool(input, k, k, 0, False, True, None, nd, op)
  out = input
  for i, (n, o) in enumerate(zip(spatial, sizes)):
    start, end = (np.arange(o) * n) // o, -((-(np.arange(o) + 1) * n) // o)   # PyTorch's bins: floor and ceil
    m = np.zeros((o, n), dtype=np.float64)
    for r, (b, e) in enumerate(zip(start, end)): m[r, b:e] = 1.0 / (e - b)
    out = apply_along(out, input.ndim - nd + i, m.astype(np.float32 if input.dtype is not dt.float64 else np.float64))
  return out

def adaptive_avg_pool1d(input, output_size): return adaptive_avg_pool(input, output_size, 1, "adaptive_avg_pool1d")
def adaptive_avg_pool2d(input, output_size): return adaptive_avg_pool(input, output_size, 2, "adaptive_avg_pool2d")
def adaptive_avg_pool3d(input, output_size): return adaptive_avg_pool(input, output_size, 3, "adaptive_avg_pool3d")


def lp_pool(input, norm_type: float, kernel_size, stride, ceil_mode: bool, nd: int, op: str):
  """(sum over each window of x^p)^(1/p), as PyTorch computes it: an average pool of x^p times the window's size, its
  negative part clipped to 0 before the root."""
  kernel = int_tuple(kernel_size, nd, "kernel_size", op, 1)
  out = avg_pool(input.pow(norm_type), kernel, stride, 0, ceil_mode, True, None, nd, op)
  return (out.sign() * out.abs().relu() * prod(kernel)).pow(1.0 / norm_type)

def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
  return lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 1, "lp_pool1d")
def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
  return lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 2, "lp_pool2d")
def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
  return lp_pool(input, norm_type, kernel_size, stride, ceil_mode, 3, "lp_pool3d")

def max_unpool(input, indices, kernel_size, stride, padding, output_size, nd: int, op: str):
  """Zeros of the pooled-from size with input's values put at indices (flat in the spatial dims), as max_pool's
  return_indices gives them; output_size (the spatial dims, or with the leading ones) where the size was ambiguous."""
  from alloy.tensor import Tensor
  _check_input(input, nd, op)
  if tuple(indices.shape) != tuple(input.shape): raise ValueError(f"{op}: indices must have the input's shape {input.shape}, got {indices.shape}")
  kernel = int_tuple(kernel_size, nd, "kernel_size", op, 1)
  stride, padding = int_tuple(stride if stride is not None else kernel, nd, "stride", op, 1), int_tuple(padding, nd, "padding", op, 0)
  spatial = tuple((n - 1) * s - 2 * p + k for n, s, p, k in zip(input.shape[-nd:], stride, padding, kernel))
  if output_size is not None:
    spatial = tuple(output_size)[-nd:]
    if len(spatial) != nd: raise ValueError(f"{op}: output_size must have {nd} spatial sizes, got {output_size!r}")
  lead = input.shape[:-nd]
  flat_in, flat_at = input.reshape(*lead, -1), check_index(indices.reshape(*lead, -1), prod(spatial), op, input.ndim - nd)   # named for op
  out = Tensor.zeros(*lead, prod(spatial), dtype=input.dtype, device=input.device).scatter(len(lead), flat_at, flat_in)
  return out.reshape(*lead, *spatial)

def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
  return max_unpool(input, indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d")
def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
  return max_unpool(input, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d")
def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
  return max_unpool(input, indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d")

def adaptive_max_pool(input, output_size, return_indices: bool, nd: int, op: str):
  """The max of PyTorch's adaptive bins (floor(i n / o) to ceil((i + 1) n / o)), one axis at a time, the last first:
  a box's max is the max of its rows' maxes, and the first max in row-major order is the first row's first, so the
  indices (into the flattened spatial dims) are PyTorch's. A bin shorter than the longest repeats its last element."""
  from alloy.tensor import Tensor
  _check_input(input, nd, op)
  sizes = adaptive_sizes(input, output_size, nd, op)
  values, flat, inner = input, None, 1   # flat: each value's index within the axes done so far (inner elements)
  for i in reversed(range(nd)):
    axis, n, o = input.ndim - nd + i, input.shape[input.ndim - nd + i], sizes[i]
    start, end = (np.arange(o) * n) // o, -((-(np.arange(o) + 1) * n) // o)
    k = int((end - start).max())
    at = Tensor(np.minimum(start[:, None] + np.arange(k), end[:, None] - 1).astype(np.int64), device=input.device)   # (o, k)
    best = values.movedim(axis, -1)[..., at].max(-1)   # (..., o) over each bin's k
    choice = best.indices.unsqueeze(-1)
    def chosen(w): return w.gather(-1, choice).squeeze(-1)   # (..., o, k) at each bin's max
    picked = chosen(at.expand(*best.indices.shape, k)) * inner
    if flat is not None: picked = picked + chosen(flat.movedim(axis, -1)[..., at])
    values, flat, inner = best.values.movedim(-1, axis), picked.movedim(-1, axis), inner * n
  return (values, flat) if return_indices else values

def adaptive_max_pool1d(input, output_size, return_indices=False):
  return adaptive_max_pool(input, output_size, return_indices, 1, "adaptive_max_pool1d")
def adaptive_max_pool2d(input, output_size, return_indices=False):
  return adaptive_max_pool(input, output_size, return_indices, 2, "adaptive_max_pool2d")
def adaptive_max_pool3d(input, output_size, return_indices=False):
  return adaptive_max_pool(input, output_size, return_indices, 3, "adaptive_max_pool3d")

def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
  """PyTorch's im2col, asked for explicitly: (N, C, H, W) -> (N, C * kh * kw, L), L the window positions; the window
  view made contiguous."""
  if input.ndim != 4: raise ValueError(f"unfold: expected a 4-D input (N, C, H, W), got shape {input.shape}")
  kernel, dilation = int_tuple(kernel_size, 2, "kernel_size", "unfold", 1), int_tuple(dilation, 2, "dilation", "unfold", 1)
  padding, stride = int_tuple(padding, 2, "padding", "unfold", 0), int_tuple(stride, 2, "stride", "unfold", 1)
  xw = windows(pad_spatial(computed(input), tuple((p, p) for p in padding)), kernel, stride, dilation)   # (N, C, *O, *K)
  n, c, oh, ow = xw.shape[:4]
  if oh <= 0 or ow <= 0: raise ValueError(f"unfold: the kernel {kernel} does not fit the (padded) input {input.shape[2:]}")
  return xw.permute(0, 1, 4, 5, 2, 3).reshape(n, c * kernel[0] * kernel[1], oh * ow)

def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
  """unfold's adjoint (col2im): (N, C * kh * kw, L) -> (N, C, *output_size), overlapping window elements summed."""
  size = int_tuple(output_size, 2, "output_size", "fold", 1)
  kernel, dilation = int_tuple(kernel_size, 2, "kernel_size", "fold", 1), int_tuple(dilation, 2, "dilation", "fold", 1)
  padding, stride = int_tuple(padding, 2, "padding", "fold", 0), int_tuple(stride, 2, "stride", "fold", 1)
  o = tuple(window_count(n + 2 * p, k, s, d) for n, p, k, s, d in zip(size, padding, kernel, stride, dilation))
  if input.ndim != 3 or input.shape[1] % (kernel[0] * kernel[1]) or input.shape[2] != o[0] * o[1]:
    raise ValueError(f"fold: expected an input (N, C * {kernel[0] * kernel[1]}, {o[0] * o[1]}) for these sizes, got shape {input.shape}")
  n, c = input.shape[0], input.shape[1] // (kernel[0] * kernel[1])
  g = input.reshape(n, c, kernel[0], kernel[1], o[0], o[1]).permute(0, 1, 4, 5, 2, 3)
  padded = window_adjoint(g, tuple(s + 2 * p for s, p in zip(size, padding)), kernel, stride, dilation)
  return pad_spatial(padded, tuple((-p, -p) for p in padding))
