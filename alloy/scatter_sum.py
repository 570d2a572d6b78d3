"""Combining values at indices (a scatter-add, and scatter's other reductions): the adjoint of every read at indices
(gather, take_along_dim, index_select, embedding, getitem with integer tensors, topk, cummax/cummin) and the forward
of scatter, scatter_add and scatter_reduce's sum, mean, amax and amin.

alloy has no atomic add, so a scatter is lowered as reads. Each row of R rows combines its n values at n indices
into S targets (each value a slice of D elements), by one of two ways:
- dense, where the work is small (DENSE_MAX_WORK) or one side is short (DENSE_MAX_SIDE): every index compared with
  every target, one fused kernel (a where reduced over the n values; a one-hot matmul where the slices of a sum are
  long). n * S * D work per row: within DENSE_MAX_SIDE times the values' or the targets' when either is that short;
- sorted, otherwise: the row's (index, value) pairs sorted by index (ordering.sort_rows), a segmented running
  combine over the sorted values (log2(n) stages, each combining the partial result 2^s before where the index is
  the same; none for "last", the sort being stable), and each target's result read at its segment's last position,
  found by a binary search of the sorted indices (log2(n) stages over the targets). O(n log^2 n + S log n) per row
  (times D), with the sums in tree order. Nothing is read back to the host, so a @jit replay with new indices is
  right.
A sum (and "last") records its own rule (the gradient of a scatter-add is a read at the same indices), so
create_graph differentiates through it.
"""
from __future__ import annotations
from math import prod
from alloy import dtype as dt, autograd
from alloy.gathering import positions_along, take
from alloy.tensor import Tensor, where

DENSE_MAX_SIDE = 32       # rows of at most this many values or targets take the dense compare
# up to this many compares in all, one dense kernel (about a millisecond or a few on a CPU core) beats the sorted
# path's ~log2(n)^2 / 2 + 2 log2(n) launches of tens of microseconds each
DENSE_MAX_WORK = 1 << 22

def _positions(n: int, device: str) -> Tensor: return Tensor.arange(n, dtype=dt.int32, device=device)

def identity(how: str, d):
  """The value a target no index reaches gets from combining nothing."""
  if how == "prod": return 1
  if how in ("amax", "amin"):
    if d.is_float: return float("-inf") if how == "amax" else float("inf")
    return dt.min_value(d) if how == "amax" else dt.max_value(d)
  return 0

_COMBINE = {"sum": Tensor.add, "prod": Tensor.mul, "amax": Tensor.maximum, "amin": Tensor.minimum}

def _dense(keys: Tensor, vals: Tensor, size: int, how: str) -> tuple:
  rows, n, width = vals.shape
  hit = keys.reshape(rows, 1, n) == _positions(size, keys.device).reshape(1, size, 1)   # (R, S, n)
  written = hit.any(2).reshape(rows, size, 1)
  if how == "sum" and width > 1 and vals.dtype.is_float: return hit.cast(vals.dtype) @ vals, written   # at matmul speed
  h4, v4 = hit.reshape(rows, size, n, 1), vals.reshape(rows, 1, n, width)
  if how == "last":   # the last of the values at each target
    j = _positions(n, keys.device).reshape(1, 1, n)
    last = where(hit, j, -1).amax(2, keepdim=True)
    return where((hit & (j == last)).reshape(rows, size, n, 1), v4, 0).sum(2, dtype=vals.dtype), written
  picked = where(h4, v4, identity(how, vals.dtype))
  if how == "sum": return picked.sum(2, dtype=vals.dtype), written
  if how == "prod": return picked.prod(2, dtype=vals.dtype), written
  return (picked.amax(2) if how == "amax" else picked.amin(2)), written

def _sorted(keys: Tensor, vals: Tensor, size: int, how: str) -> tuple:
  from alloy.ordering import sort_rows
  rows, n, width = vals.shape
  dev = keys.device
  perm, _ = sort_rows(keys, False)   # stable: among equal indices the original order stays, so a segment ends with its last value
  picks = positions_along((rows, n), 1, dev)
  wide_picks = positions_along((rows, n, width), 1, dev)
  def wide(i): return i.reshape(i.shape + (1,)).expand(i.shape + (width,))
  ks = take(keys, 1, perm, picks).contiguous()
  vs = take(vals, 1, wide(perm), wide_picks).contiguous()
  col = _positions(n, dev).reshape(1, n).expand(rows, n)
  step = 1
  while how != "last" and step < n:   # vs[j]: the values from max(j - 2*step + 1, the segment's start) to j combined
    back = (col - step).maximum(0)
    same = (col >= step) & (take(ks, 1, back, picks) == ks)
    vs = where(same.reshape(rows, n, 1), _COMBINE[how](vs, take(vs, 1, wide(back), wide_picks)), vs).contiguous()
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
  written = ((count > 0) & (take(ks, 1, last, target_picks) == target)).reshape(rows, size, 1)
  at_end = take(vs, 1, wide(last), positions_along((rows, size, width), 1, dev))
  return where(written, at_end, identity(how, vals.dtype)), written

def combine_at(keys: Tensor, vals: Tensor, size: int, how: str = "sum") -> tuple:
  """keys (R, n) integers in [0, size) (unchecked), vals (R, n, D) -> (out (R, size, D), written (R, size, 1)):
  out[r, t] combines the vals[r, j] with keys[r, j] == t by how ("sum", "prod", "amax", "amin", or "last": the
  last of them), identity(how) where none; written says where some were. No autograd (the callers record theirs)."""
  rows, n, width = vals.shape
  if n == 0 or rows * width == 0:
    return (Tensor.full((rows, size, width), identity(how, vals.dtype), dtype=vals.dtype, device=vals.device),
            Tensor.full((rows, size, 1), False, dtype=dt.bool_, device=vals.device))
  keys = keys.cast(dt.int32 if size <= dt.max_value(dt.int32) else dt.int64)
  if min(n, size) <= DENSE_MAX_SIDE or rows * n * size * width <= DENSE_MAX_WORK: return _dense(keys, vals, size, how)
  return _sorted(keys, vals, size, how)

def _read_rows_rule(out, g, dim, index): return (take(g, dim, index),)

def _read_winners_rule(out, g, dim, index):
  """"last": only the value that landed gets a gradient (the last of each index's repeats: what finite differences
  see; PyTorch's scatter hands every repeat the gradient), found as the last position along dim at each target."""
  n = index.shape[dim]
  pos = _positions(n, index.device).reshape(tuple(n if a == dim else 1 for a in range(index.ndim))).expand(index.shape)
  landed = scatter_rows(out.shape, dim, index, pos, "last")[0]
  return (where(take(landed, dim, index) == pos, take(g, dim, index), 0),)

def scatter_rows(shape: tuple, dim: int, index: Tensor, src: Tensor, how: str = "sum") -> tuple:
  """(out, written) of shape: src[..., i, ...] combined by how (combine_at's) at [..., index[..., i, ...], ...]
  along dim, identity(how) and False where nothing lands. src has index's shape, which may be smaller than shape in
  the other dims. For "sum" the gradient of src is the output gradient read at index (PyTorch's rule for
  scatter_add), for "last" the same where the value landed; the callers of the others record their own."""
  n, size = index.shape[dim], shape[dim]
  moved = index.transpose(dim, -1).shape   # the other dims, then dim
  rows = prod(moved[:-1])
  keys = index.transpose(dim, -1).reshape(rows, n)
  vals = src.detach().transpose(dim, -1).reshape(rows, n, 1)
  out, written = combine_at(keys, vals, size, how)
  out, written = (t.reshape(moved[:-1] + (size,)).transpose(dim, -1) for t in (out, written.reshape(rows, size)))
  if out.shape != tuple(shape):
    pads = tuple((0, s - k) for s, k in zip(shape, out.shape))
    out, written = out.pad(pads, value=identity(how, src.dtype)), written.pad(pads, value=False)
  if src._ag is not None and how in ("sum", "last"):
    out = autograd.record(out, _read_rows_rule if how == "sum" else _read_winners_rule, (src,), dim, index)
  return out, written

def scatter_add_rows(shape: tuple, dim: int, index: Tensor, src: Tensor) -> Tensor:
  """zeros(shape) with src[..., i, ...] added at [..., index[..., i, ...], ...] along dim (repeats add up): the
  gradient of take."""
  return src if src.ndim == 0 else scatter_rows(shape, dim, index, src)[0]

def _read_slices_rule(out, g, index):
  return (take(g, 0, index.reshape(index.shape + (1,) * (g.ndim - 1)).expand(index.shape + g.shape[1:])),)

def scatter_add_slices(size: int, index: Tensor, src: Tensor) -> Tensor:
  """zeros((size,) + src.shape[1:]) with src[j] added at row index[j] (index 1-D, repeats add up): the gradient of
  index_select, embedding and getitem's integer-tensor reads."""
  n, rest = index.shape[0], src.shape[1:]
  out = combine_at(index.reshape(1, n), src.detach().reshape(1, n, prod(rest)), size)[0].reshape((size,) + rest)
  if src._ag is not None: out = autograd.record(out, _read_slices_rule, (src,), index)
  return out
