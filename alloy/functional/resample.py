"""interpolate with PyTorch's signature: nearest, nearest-exact, linear/bilinear/trilinear (align_corners) and area.
Each spatial axis is resampled in turn by a small (out, in) matrix computed on the host as PyTorch computes its
source indices (nearest: a selection, so values pass exactly; linear: two weights per output); an integer nearest
upscale is a broadcast view instead."""
from __future__ import annotations
import math
import numpy as np
from alloy import dtype as dt
from alloy.functional.pool import adaptive_avg_pool, apply_along

LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}
MODES = ("nearest", "nearest-exact", "area", "bicubic") + tuple(LINEAR)

def _out_sizes(input, size, scale_factor, nd: int) -> tuple[tuple, tuple]:
  """(output sizes, the scale factors given per axis or None each)."""
  if (size is None) == (scale_factor is None): raise ValueError("interpolate: exactly one of size and scale_factor must be given")
  spatial = input.shape[-nd:]
  if size is not None:
    sizes = (size,) * nd if isinstance(size, int) else tuple(size)
    if len(sizes) != nd: raise ValueError(f"interpolate: size {size!r} must have {nd} entries for a {input.ndim}-D input")
    if any(not isinstance(s, int) or s <= 0 for s in sizes): raise ValueError(f"interpolate: sizes must be positive ints, got {size!r}")
    return sizes, (None,) * nd
  scales = (scale_factor,) * nd if isinstance(scale_factor, (int, float)) else tuple(scale_factor)
  if len(scales) != nd: raise ValueError(f"interpolate: scale_factor {scale_factor!r} must have {nd} entries for a {input.ndim}-D input")
  if any(s <= 0 for s in scales): raise ValueError(f"interpolate: scale factors must be positive, got {scale_factor!r}")
  sizes = tuple(int(math.floor(n * s)) for n, s in zip(spatial, scales))
  if any(s <= 0 for s in sizes): raise ValueError(f"interpolate: the output size {sizes} is empty")
  return sizes, tuple(float(s) for s in scales)

def _nearest_index(n: int, o: int, scale, exact: bool, ftype) -> np.ndarray:
  r = ftype(1.0 / scale) if scale is not None else ftype(n) / ftype(o)
  dst = np.arange(o, dtype=ftype)
  src = np.floor((dst + ftype(0.5)) * r) if exact else np.floor(dst * r)
  return np.minimum(src.astype(np.int64), n - 1)

def _linear_matrix(n: int, o: int, scale, align_corners: bool, ftype) -> np.ndarray:
  dst = np.arange(o, dtype=ftype)
  if align_corners: src = dst * (ftype(n - 1) / ftype(o - 1)) if o > 1 else np.zeros(o, dtype=ftype)
  else:
    r = ftype(1.0 / scale) if scale is not None else ftype(n) / ftype(o)
    src = np.maximum((dst + ftype(0.5)) * r - ftype(0.5), ftype(0))
  i0 = np.minimum(np.floor(src).astype(np.int64), n - 1)
  i1 = np.minimum(i0 + 1, n - 1)
  lam = (src - i0).astype(ftype)
  m = np.zeros((o, n), dtype=ftype)
  m[np.arange(o), i0] += ftype(1) - lam
  m[np.arange(o), i1] += lam
  return m

def _select_along(x, axis: int, index: np.ndarray):
  """x[..., index, ...] along axis, for host indices: a broadcast view where each source repeats k times in order,
  else a selection summed over the source axis (exact: the other terms are selected away, not multiplied by 0)."""
  from alloy.tensor import Tensor, where
  n, o = x.shape[axis], len(index)
  if o % n == 0 and np.array_equal(index, np.arange(o) // (o // n)):
    k = o // n
    t = x.unsqueeze(axis + 1)
    return t.expand(t.shape[:axis + 1] + (k,) + t.shape[axis + 2:]).reshape(x.shape[:axis] + (o,) + x.shape[axis + 1:])
  pick = Tensor(index.reshape(o, 1), dtype=dt.int32, device=x.device) == Tensor.arange(n, device=x.device).reshape(1, n)
  t = x.transpose(axis, -1).unsqueeze(-2)
  return where(pick, t, 0).sum(-1).transpose(axis, -1)

def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None, recompute_scale_factor=None, antialias=False):
  from alloy.tensor import Tensor
  if not isinstance(input, Tensor): raise TypeError(f"interpolate: input must be a Tensor, got {type(input).__name__}")
  if mode not in MODES: raise ValueError(f"interpolate: mode must be one of {MODES}, got {mode!r}")
  if input.ndim < 3: raise ValueError(f"interpolate: expected a 3-D, 4-D or 5-D input (N, C, *spatial), got shape {input.shape}")
  nd = input.ndim - 2
  if align_corners is not None and mode not in LINEAR and mode != "bicubic":
    raise ValueError("interpolate: align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | trilinear")
  if mode in LINEAR and LINEAR[mode] != nd:
    raise NotImplementedError(f"interpolate: got a {input.ndim}-D input, but {mode} mode needs a {LINEAR[mode] + 2}-D input")
  if mode == "bicubic": raise NotImplementedError("interpolate: mode 'bicubic' is not supported yet")
  if antialias: raise NotImplementedError("interpolate: antialias=True is not supported yet")
  if not input.dtype.is_float and mode != "nearest":
    raise TypeError(f"interpolate: mode {mode!r} needs a floating point input, got {input.dtype.name}")
  sizes, scales = _out_sizes(input, size, scale_factor, nd)
  if recompute_scale_factor: scales = (None,) * nd
  if mode == "area": return adaptive_avg_pool(input, sizes, nd, "interpolate")
  ftype = np.float64 if input.dtype is dt.float64 else np.float32   # linear source indices in the input's float width
  out = input
  for i, (n, o, s) in enumerate(zip(input.shape[2:], sizes, scales)):
    if mode in LINEAR: out = apply_along(out, 2 + i, _linear_matrix(n, o, s, bool(align_corners), ftype))
    else: out = _select_along(out, 2 + i, _nearest_index(n, o, s, mode == "nearest-exact", np.float32))   # always float, as PyTorch
  return out

def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
  return interpolate(input, size, scale_factor, mode, align_corners)
def upsample_nearest(input, size=None, scale_factor=None): return interpolate(input, size, scale_factor, "nearest")
def upsample_bilinear(input, size=None, scale_factor=None):   # align_corners=True, as PyTorch's
  return interpolate(input, size, scale_factor, "bilinear", align_corners=True)
