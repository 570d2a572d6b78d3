"""Adding values at indices (a scatter-add): the adjoint of every read at indices (gather, take_along_dim,
index_select, embedding, getitem with integer tensors, topk, cummax/cummin) and the forward of scatter_add.

alloy has no atomic add, so a scatter-add is lowered as reads. Each row of R rows adds its n values at n indices
into S targets (each value a slice of D elements), by one of two ways:
- dense, where the work is small or one side is short: every index compared with every target, one fused kernel
  (a where summed over the n values; a one-hot matmul where the slices are long). n * S * D work per row: within
  DENSE_MAX_SIDE of the values' or the targets' count when either is that short;
- sorted, otherwise: the row's (index, value) pairs sorted by index (ordering.sort_rows), a segmented running sum
  over the sorted values (log2(n) stages, each adding the partial sum 2^s before where the index is the same), and
  each target's total read at its segment's last position, found by a binary search of the sorted indices (log2(n)
  stages over the targets). O(n log^2 n + S log n) per row (times D), with the sums in tree order. Nothing is read
  back to the host, so a @jit replay with new indices is right.
Repeated indices add up, in both. Each result records its own rule (the gradient of a scatter-add is a read at the
same indices), so create_graph differentiates through it.
"""
from __future__ import annotations
from math import prod
from alloy import dtype as dt, autograd
from alloy.gathering import positions_along, take
from alloy.tensor import Tensor, where

DENSE_MAX_SIDE = 32       # a row with at most this many values or targets takes the dense compare
DENSE_MAX_WORK = 1 << 16  # below this many compares per row one dense kernel beats the sorted path's ~log^2 n launches

def _positions(n: int, device: str) -> Tensor: return Tensor.arange(n, dtype=dt.int32, device=device)

def _dense(keys: Tensor, vals: Tensor, size: int) -> Tensor:
  rows, n, width = vals.shape
  hit = keys.reshape(rows, 1, n) == _positions(size, keys.device).reshape(1, size, 1)   # (R, S, n)
  if width > 1 and vals.dtype.is_float: return hit.cast(vals.dtype) @ vals   # at matmul speed
  return where(hit.reshape(rows, size, n, 1), vals.reshape(rows, 1, n, width), 0).sum(2, dtype=vals.dtype)

def _sorted(keys: Tensor, vals: Tensor, size: int) -> Tensor:
  from alloy.ordering import sort_rows
  rows, n, width = vals.shape
  dev = keys.device
  perm, _ = sort_rows(keys, False)
  picks = positions_along((rows, n), 1, dev)
  wide_picks = positions_along((rows, n, width), 1, dev)
  def wide(i): return i.reshape(i.shape + (1,)).expand(i.shape + (width,))
  ks = take(keys, 1, perm, picks).contiguous()
  vs = take(vals, 1, wide(perm), wide_picks).contiguous()
  col = _positions(n, dev).reshape(1, n).expand(rows, n)
  step = 1
  while step < n:   # vs[j]: the sum of the sorted values from max(j - 2*step + 1, the segment's start) to j
    back = (col - step).maximum(0)
    same = (col >= step) & (take(ks, 1, back, picks) == ks)
    vs = where(same.reshape(rows, n, 1), vs + take(vs, 1, wide(back), wide_picks), vs).contiguous()
    step *= 2
  target = _positions(size, dev).reshape(1, size).expand(rows, size)
  target_picks = positions_along((rows, size), 1, dev)
  count = Tensor.zeros(rows, size, dtype=dt.int32, device=dev)   # becomes the number of sorted indices <= target
  step = 1 << (n.bit_length() - 1)
  while step:
    probe = count + step
    fits = (probe <= n) & (take(ks, 1, (probe - 1).minimum(n - 1), target_picks) <= target)
    count = where(fits, probe, count).contiguous()
    step //= 2
  last = (count - 1).maximum(0)
  hit = (count > 0) & (take(ks, 1, last, target_picks) == target)
  return where(hit.reshape(rows, size, 1), take(vs, 1, wide(last), positions_along((rows, size, width), 1, dev)), 0)

def add_at(keys: Tensor, vals: Tensor, size: int) -> Tensor:
  """keys (R, n) integers in [0, size) (unchecked), vals (R, n, D) -> (R, size, D): out[r, t] is the sum of
  vals[r, j] over the j with keys[r, j] == t. No autograd (the callers record their rule)."""
  rows, n, width = vals.shape
  if n == 0 or rows * width == 0: return Tensor.zeros(rows, size, width, dtype=vals.dtype, device=vals.device)
  keys = keys.cast(dt.int32 if size <= dt.max_value(dt.int32) else dt.int64)
  if min(n, size) <= DENSE_MAX_SIDE or n * size <= DENSE_MAX_WORK: return _dense(keys, vals, size)
  return _sorted(keys, vals, size)

def _read_rows_rule(out, g, dim, index): return (take(g, dim, index),)

def scatter_add_rows(shape: tuple, dim: int, index: Tensor, src: Tensor) -> Tensor:
  """zeros(shape) with src[..., i, ...] added at [..., index[..., i, ...], ...] along dim (repeats add up): the
  gradient of take. src has index's shape, which may be smaller than shape in the other dims."""
  if src.ndim == 0: return src
  n, size = index.shape[dim], shape[dim]
  moved = index.transpose(dim, -1).shape   # the other dims, then dim
  rows = prod(moved[:-1])
  keys = index.transpose(dim, -1).reshape(rows, n)
  vals = src.detach().transpose(dim, -1).reshape(rows, n, 1)
  out = add_at(keys, vals, size).reshape(moved[:-1] + (size,)).transpose(dim, -1)
  if out.shape != tuple(shape): out = out.pad(tuple((0, s - k) for s, k in zip(shape, out.shape)))
  if src._ag is not None: out = autograd.record(out, _read_rows_rule, (src,), dim, index)
  return out

def _read_slices_rule(out, g, index):
  return (take(g, 0, index.reshape(index.shape + (1,) * (g.ndim - 1)).expand(index.shape + g.shape[1:])),)

def scatter_add_slices(size: int, index: Tensor, src: Tensor) -> Tensor:
  """zeros((size,) + src.shape[1:]) with src[j] added at row index[j] (index 1-D, repeats add up): the gradient of
  index_select, embedding and getitem's integer-tensor reads."""
  n, rest = index.shape[0], src.shape[1:]
  out = add_at(index.reshape(1, n), src.detach().reshape(1, n, prod(rest)), size).reshape((size,) + rest)
  if src._ag is not None: out = autograd.record(out, _read_slices_rule, (src,), index)
  return out
