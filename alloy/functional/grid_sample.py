"""affine_grid and grid_sample with PyTorch's signatures, for 4-D (N, C, H, W) and 5-D (N, C, D, H, W) inputs:
the spatial-transformer pair. A grid's coordinates in [-1, 1] are unnormalized to pixel positions (align_corners:
-1 and 1 the corner pixels' centres, else their outer edges), folded into range by the padding mode, and read
bilinearly (each of the 2^d neighbours, its weight the product of the per-axis distances) or at the nearest
pixel (halves to even, as PyTorch's nearbyint). Each tap is one read at computed flat indices (gathering.read_at),
its weight zero where the tap falls outside for padding 'zeros'; gradients reach the input through the reads and
the grid through the weights. bicubic is not supported."""
from __future__ import annotations
import itertools
from alloy import dtype as dt
from alloy.gathering import read_at
from alloy.helpers import prod
from alloy.tensor import Tensor, stack, where

MODES, PADDINGS = ("bilinear", "nearest"), ("zeros", "border", "reflection")

def _base_coords(n: int, align_corners: bool, like: Tensor) -> Tensor:
  if n == 1: return Tensor.zeros(1, dtype=like.dtype, device=like.device)
  steps = Tensor.arange(n, device=like.device).cast(like.dtype)
  return steps * (2.0 / (n - 1)) - 1.0 if align_corners else (steps * 2.0 + 1.0) / n - 1.0

def affine_grid(theta: Tensor, size, align_corners: bool = False) -> Tensor:
  """The sampling grid (N, *spatial, d) of affine maps theta (N, d, d + 1) over an output of size (N, C, *spatial)."""
  size = tuple(size)
  d = len(size) - 2
  if d not in (2, 3) or theta.ndim != 3 or tuple(theta.shape) != (size[0], d, d + 1):
    raise ValueError(f"affine_grid: theta must be (N, {d}, {d + 1}) for a size of {len(size)} dims {size}, got {tuple(theta.shape)}")
  if not theta.dtype.is_float: raise TypeError(f"affine_grid: theta must be a float tensor, got {theta.dtype.name}")
  spatial = size[2:]
  axes = []   # x varies along the last spatial dim, y the one before, ...
  for i, n in enumerate(reversed(spatial)):
    shape = [1] * d
    shape[d - 1 - i] = n
    axes.append(_base_coords(n, align_corners, theta).reshape(shape).expand(*spatial))
  base = stack([*axes, Tensor.ones(*spatial, dtype=theta.dtype, device=theta.device)], -1).reshape(1, -1, d + 1)
  return (base @ theta.transpose(1, 2)).reshape(size[0], *spatial, d)

def _reflect(c: Tensor, low2: float, high2: float) -> Tensor:
  """c folded into [low2 / 2, high2 / 2] by reflections at its ends."""
  if low2 == high2: return c.zeros_like()
  low, span = low2 / 2, (high2 - low2) / 2
  c = (c - low).abs()
  flips, extra = (c / span).floor(), c - (c / span).floor() * span
  return where(flips - (flips * 0.5).floor() * 2 == 0, extra + low, span - extra + low)

def _source(c: Tensor, n: int, padding_mode: str, align_corners: bool) -> Tensor:
  """Grid coordinates c in [-1, 1] along an axis of n pixels as pixel positions, folded by the padding mode."""
  c = (c + 1) * 0.5 * (n - 1) if align_corners else ((c + 1) * n - 1) * 0.5
  if padding_mode == "reflection": c = _reflect(c, 0.0, 2.0 * (n - 1)) if align_corners else _reflect(c, -1.0, 2.0 * n - 1)
  if padding_mode in ("border", "reflection"): c = c.clamp(0, n - 1)
  return c

def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear", padding_mode: str = "zeros", align_corners=None) -> Tensor:
  """input (N, C, *spatial) read at grid (N, *out, d) (x, y[, z] in [-1, 1]): (N, C, *out)."""
  if mode not in MODES: raise NotImplementedError(f"grid_sample: mode must be one of {MODES} (bicubic is not supported), got {mode!r}")
  if padding_mode not in PADDINGS: raise ValueError(f"grid_sample: padding_mode must be one of {PADDINGS}, got {padding_mode!r}")
  d = input.ndim - 2
  if d not in (2, 3) or grid.ndim != input.ndim or grid.shape[0] != input.shape[0] or grid.shape[-1] != d:
    raise ValueError(f"grid_sample: expected a 4-D or 5-D input and a grid (N, *out, {d}) of its rank, "
                     f"got {tuple(input.shape)} and {tuple(grid.shape)}")
  if grid.dtype is not input.dtype: raise TypeError(f"grid_sample: input and grid must have one dtype, got {input.dtype.name} and {grid.dtype.name}")
  align_corners = bool(align_corners)
  n, c, spatial, out = input.shape[0], input.shape[1], input.shape[2:], grid.shape[1:-1]
  flat = input.reshape(n, c, prod(spatial))
  # per spatial axis (outermost first): the source positions; grid's last entry is x, the innermost axis
  pos = [_source(grid[..., d - 1 - a], spatial[a], padding_mode, align_corners) for a in range(d)]
  if mode == "nearest": taps = [[(p.round(), None)] for p in pos]
  else: taps = [[(p.floor(), 1.0 - (p - p.floor())), (p.floor() + 1, p - p.floor())] for p in pos]
  total = None
  for combo in itertools.product(*taps):
    index, weight, inside = None, None, None
    for a, (i, w) in enumerate(combo):
      ok = (i >= 0) & (i <= spatial[a] - 1)
      inside = ok if inside is None else inside & ok
      weight = w if weight is None else (weight if w is None else weight * w)
      k = i.clamp(0, spatial[a] - 1).cast(dt.int64)
      index = k if index is None else index * spatial[a] + k
    picked = read_at(flat, 2, index.reshape(n, 1, -1).expand(n, c, prod(out))).reshape(n, c, *out)
    term = where(inside.unsqueeze(1), picked if weight is None else picked * weight.unsqueeze(1), 0.0)
    total = term if total is None else total + term
  return total
