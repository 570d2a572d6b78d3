"""sort, argsort and topk (PyTorch's signatures and tie rules), forward and backward; kthvalue, median and
nanmedian through sort; searchsorted and bucketize (a compare and count against the sorted sequence); unique and
unique_consecutive (on the host: their size depends on the values); mode (a count of each value in its row).

Every sort here is stable: elements compare by (value, original index), a total order, so the result is the one
stable order whatever the network. NaN sorts as the largest value (last ascending, first descending) and -0.0 ties
with 0.0, as in PyTorch. Each value first becomes an integer key with the same order (a float's bits with the
negative ones' magnitude bits flipped; descending: the key's complement). A key of 32 bits or less (every dtype but
int64 and float64) is packed with the element's index into one int64, key * 2^32 + index: the items then compare
with one integer `<`, and the network moves the items themselves. 64-bit keys are sorted as a permutation whose
comparisons read the keys at the permuted positions (GATHERs) and break ties by index.

The rows (the sorted dim, the others flattened into a batch) are sorted by one of two algorithms:
- rows of at most RANK_MAX_LENGTH: each item's rank is the count of items before it (one fused reduction, n^2
  compares per row), and the permutation is read back from the ranks (a second one). Two kernels.
- longer rows: a bitonic network over the row padded to a power of two N (the padding sorts last),
  log2(N)(log2(N)+1)/2 stages. A stage is one kernel over R*N items: each position reads its partner (index ^ j)
  and keeps the one its place in the block wants. j and the block size are kernel arguments, so the stages share
  a compiled kernel. A row of 4096 is 78 launches of O(N) work each: O(N log^2 N) per row.

Backward: sort's gradient is the output gradient read at the inverse permutation (an argsort of the permutation,
only computed when backward runs); topk's is scattered to its k indices (alloy/scatter_sum.py).
"""
from __future__ import annotations
import numpy as np
from alloy import dtype as dt, autograd
from alloy.gathering import positions_along, take
from alloy.tensor import MaxResult, Tensor, where, norm_axis

RANK_MAX_LENGTH = 64
SortResult = MaxResult   # (values, indices), as torch.return_types

def sort_key(v: Tensor, descending: bool) -> Tensor:
  """int32 (int64 for 64-bit dtypes) keys ordered as v's values: NaN largest, -0.0 equal to 0.0."""
  if v.dtype.is_float:
    x = v.cast(dt.float32) if v.dtype.itemsize < 4 else v
    x = where(x == 0, 0.0, x)
    it = dt.int32 if x.dtype is dt.float32 else dt.int64
    bits = x.bitcast(it)
    key = where(x != x, dt.max_value(it), where(bits < 0, bits ^ dt.max_value(it), bits))
  else: key = v.cast(dt.int64 if v.dtype.itemsize >= 4 and v.dtype is not dt.int32 else dt.int32)
  return ~key if descending else key

def _rank_perm(before) -> tuple[Tensor, Tensor]:
  """(permutation, ranks) from before(j-axis items, i-axis items) -> [r, i, j]: item j sorts before item i."""
  rank = before.cast(dt.int32).sum(2, dtype=dt.int32).contiguous()
  n = rank.shape[1]
  pos = Tensor.arange(n, dtype=dt.int32, device=rank.device)
  perm = where(rank.unsqueeze(1) == pos.reshape(1, n, 1), pos.reshape(1, 1, n), 0).sum(2, dtype=dt.int32)
  return perm.contiguous(), rank

def _network(items: Tensor, less) -> Tensor:
  """items (R, N), N a power of 2, sorted along the rows by less(a, b) (a strict total order) in a bitonic network."""
  rows, size = items.shape
  col = Tensor.arange(size, dtype=dt.int32, device=items.device).reshape(1, size).expand(rows, size)
  picks = positions_along((rows, size), 1, items.device)
  k = 2
  while k <= size:
    j = k // 2
    while j >= 1:
      other = take(items, 1, col ^ j, picks)
      want_first = ((col & j) == 0) == ((col & k) == 0)   # the lower slot of an ascending block takes the first
      items = where(less(items, other) == want_first, items, other).contiguous()
      j //= 2
    k *= 2
  return items

def _padded(t: Tensor, size: int) -> Tensor:
  """Rows padded to size with the largest int64: the padding sorts after every item."""
  return t.pad(((0, 0), (0, size - t.shape[1])), value=dt.max_value(dt.int64)) if size != t.shape[1] else t

def sort_rows(v: Tensor, descending: bool) -> tuple[Tensor, object]:
  """(int32 permutation sorting each row of v (R, n), a function giving the inverse permutation)."""
  key = sort_key(v, descending).contiguous()
  rows, n = key.shape
  size = 1 << max(0, (n - 1).bit_length())
  pos = Tensor.arange(n, dtype=dt.int32, device=v.device).reshape(1, n)
  if key.dtype is dt.int32:
    items = key.cast(dt.int64) * (1 << 32) + pos.cast(dt.int64)   # unique, ordered as (key, index)
    if n <= RANK_MAX_LENGTH: perm, rank = _rank_perm(items.contiguous().unsqueeze(1) < items.unsqueeze(2))
    else: perm = (_network(_padded(items, size), lambda a, b: a < b)[:, :n] & 0xFFFFFFFF).cast(dt.int32).contiguous()
  elif n <= RANK_MAX_LENGTH:
    ka, kb = key.unsqueeze(1), key.unsqueeze(2)
    perm, rank = _rank_perm((ka < kb) | ((ka == kb) & (pos.unsqueeze(1) < pos.reshape(1, n, 1))))
  else:
    padded, picks = _padded(key, size), positions_along((rows, size), 1, v.device)
    def less(a, b):
      ka, kb = take(padded, 1, a, picks), take(padded, 1, b, picks)
      return (ka < kb) | ((ka == kb) & (a < b))
    col = Tensor.arange(size, dtype=dt.int32, device=v.device).reshape(1, size).expand(rows, size)
    perm = _network(col, less)[:, :n].contiguous()
  if n <= RANK_MAX_LENGTH: return perm, lambda: rank
  return perm, lambda: sort_rows(perm, False)[0]

def _rows_of(x: Tensor, d: int) -> Tensor:
  t = x.transpose(d, -1)
  return t.reshape(-1, x.shape[d]) if x.shape[d] else t.reshape(t.numel(), 0)

def _restore(rows: Tensor, x: Tensor, d: int, n: int) -> Tensor:
  moved = x.transpose(d, -1).shape[:-1] + (n,)
  return rows.reshape(moved).transpose(d, -1)

def _sort_rule(out, g, inverse): return (take(g, 1, inverse()),)

def sort(input: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False) -> SortResult:
  """torch.sort: (values, int64 indices) along dim; always stable (the `stable` flag is accepted for PyTorch's
  signature), so equal elements keep their order."""
  if not isinstance(input, Tensor): raise TypeError(f"sort: expected a Tensor, got {type(input).__name__}")
  if input.ndim == 0:
    norm_axis(dim, 0)
    return SortResult(input.clone(), Tensor.zeros((), dtype=dt.int64, device=input.device))
  d = norm_axis(dim, input.ndim)
  n = input.shape[d]
  if input.numel() == 0: return SortResult(input.clone(), Tensor.zeros(*input.shape, dtype=dt.int64, device=input.device))
  rows = _rows_of(input, d)
  perm, inverse = sort_rows(rows.detach(), descending)
  values = take(rows.detach(), 1, perm)
  if rows._ag is not None: values = autograd.record(values, _sort_rule, (rows,), inverse)
  return SortResult(_restore(values, input, d, n), _restore(perm.cast(dt.int64), input, d, n))

def argsort(input: Tensor, dim: int = -1, descending: bool = False, *, stable: bool = False) -> Tensor:
  """torch.argsort: the indices that sort input along dim (stable)."""
  return sort(input.detach(), dim, descending).indices

def _topk_rule(out, g, idx, in_shape):
  from alloy.scatter_sum import scatter_add_rows   # scatter_sum sorts with this module's sort_rows
  return (scatter_add_rows(in_shape, 1, idx, g),)

def topk(input: Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True) -> SortResult:
  """torch.topk: the k largest (or smallest) along dim, in sorted order (also when sorted=False); ties go to the
  earlier index."""
  if not isinstance(input, Tensor): raise TypeError(f"topk: expected a Tensor, got {type(input).__name__}")
  if isinstance(k, bool) or not isinstance(k, int): raise TypeError(f"topk: k must be an int, got {type(k).__name__}")
  d = norm_axis(dim, input.ndim)
  n = input.shape[d] if input.ndim else 1
  if not 0 <= k <= n: raise ValueError(f"topk: k ({k}) is out of range for dimension {d} of size {n}")
  if input.ndim == 0: return sort(input)
  if k == 0 or input.numel() == 0:
    shape = tuple(k if a == d else s for a, s in enumerate(input.shape))
    return SortResult(Tensor.zeros(*shape, dtype=input.dtype, device=input.device), Tensor.zeros(*shape, dtype=dt.int64, device=input.device))
  rows = _rows_of(input, d)
  perm, _ = sort_rows(rows.detach(), largest)
  idx = perm[:, :k]
  values = take(rows.detach(), 1, idx)
  if rows._ag is not None: values = autograd.record(values, _topk_rule, (rows,), idx, rows.shape)
  return SortResult(_restore(values, input, d, k), _restore(idx.cast(dt.int64), input, d, k))

def kthvalue(input: Tensor, k: int, dim: int = -1, keepdim: bool = False) -> SortResult:
  """torch.kthvalue: the k-th smallest (1-based) along dim and its index (NaN counts as the largest)."""
  d = norm_axis(dim, max(input.ndim, 1))
  n = input.shape[d] if input.ndim else 1
  if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= n:
    raise ValueError(f"kthvalue: k ({k!r}) is out of range for dimension {d} of size {n}")
  values, indices = sort(input, d)
  pick = (slice(None),) * d + (slice(k - 1, k) if keepdim else k - 1,)
  return SortResult(values[pick], indices[pick]) if input.ndim else SortResult(values, indices)

def median(input: Tensor, dim=None, keepdim: bool = False):
  """torch.median: the lower median ((n - 1) // 2-th smallest); NaN where a NaN is present, as PyTorch. With dim,
  (values, indices); without, the value over all entries."""
  if dim is None: return median(input.flatten(), 0).values
  d = norm_axis(dim, max(input.ndim, 1))
  n = input.shape[d] if input.ndim else 1
  if n == 0: raise ValueError(f"median: dimension {d} is empty")
  values, indices = kthvalue(input, (n - 1) // 2 + 1, d, keepdim)
  if not input.dtype.is_float: return SortResult(values, indices)
  nan = input != input
  has_nan, first_nan = nan.any(d, keepdim=keepdim), nan.cast(dt.int32).argmax(d, keepdim=keepdim)
  return SortResult(where(has_nan, float("nan"), values), where(has_nan, first_nan, indices))

def nanmedian(input: Tensor, dim=None, keepdim: bool = False):
  """torch.nanmedian: the lower median of the entries that are not NaN (NaN where all are)."""
  if dim is None: return nanmedian(input.flatten(), 0).values
  if not input.dtype.is_float: return median(input, dim, keepdim)
  d = norm_axis(dim, max(input.ndim, 1))
  if input.ndim == 0 or input.shape[d] == 0: return median(input, dim, keepdim)
  values, indices = sort(input, d)   # NaN last: the median of the rest is at (valid - 1) // 2
  valid = (input == input).cast(dt.int64).sum(d, keepdim=True)
  at = ((valid - 1) // 2).maximum(0)
  picked, where_at = values.gather(d, at), indices.gather(d, at)
  if not keepdim: picked, where_at = picked.squeeze(d), where_at.squeeze(d)
  return SortResult(picked, where_at)

def searchsorted(sorted_sequence: Tensor, values, *, out_int32: bool = False, right: bool = False, side=None, sorter=None) -> Tensor:
  """torch.searchsorted: for each value, the count of sequence entries below it (right: at most it) along the last
  dim (a fused compare and count, O(n) per value; NaN as the largest)."""
  if sorter is not None: raise NotImplementedError("searchsorted: sorter= is not supported; sort the sequence first")
  if side is not None:
    if side not in ("left", "right"): raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    right = side == "right"
  v = values if isinstance(values, Tensor) else Tensor.full((), values, dtype=sorted_sequence.dtype, device=sorted_sequence.device)
  seq = sorted_sequence
  if seq.ndim > 1 and seq.shape[:-1] != v.shape[:-1]:
    raise ValueError(f"searchsorted: the leading dims of the sequence {seq.shape} and the values {v.shape} must match")
  n = seq.shape[-1]
  s = seq.unsqueeze(-2) if seq.ndim > 1 else seq
  below = (s <= v.unsqueeze(-1)) if right else (s < v.unsqueeze(-1))
  if seq.dtype.is_float: below = below | ((v.unsqueeze(-1) != v.unsqueeze(-1)) & (s == s))   # a NaN value goes past every number
  count = below.cast(dt.int32 if out_int32 else dt.int64).sum(-1)
  return count.cast(dt.int32 if out_int32 else dt.int64) if n else Tensor.zeros(*v.shape, dtype=dt.int32 if out_int32 else dt.int64, device=v.device)

def bucketize(input: Tensor, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
  """torch.bucketize: the bucket of each input among the 1-D boundaries (right: a value equal to a boundary goes past it)."""
  if boundaries.ndim != 1: raise ValueError(f"bucketize: boundaries must be 1-D, got shape {boundaries.shape}")
  return searchsorted(boundaries, input, out_int32=out_int32, right=right)

def unique(input: Tensor, sorted: bool = True, return_inverse: bool = False, return_counts: bool = False, dim=None):
  """torch.unique: the distinct values (or slices along dim), sorted; with the inverse (each entry's place among
  them) and the counts when asked. The result's size depends on the values: they are read on the host (a sync),
  as in PyTorch. NaNs are each distinct, as PyTorch's."""
  vals = input.numpy()
  d = None if dim is None else norm_axis(dim, input.ndim)
  host = vals if input.dtype is not dt.bfloat16 else dt.bfloat16_bits_to_float32(vals)
  kw = {"equal_nan": False} if host.dtype.kind == "f" else {}
  out, inverse, counts = np.unique(host, return_inverse=True, return_counts=True, axis=d, **kw)
  result = Tensor(out, dtype=input.dtype, device=input.device)
  extra = []
  if return_inverse: extra.append(Tensor(inverse.reshape(input.shape if d is None else (-1,)).astype(np.int64), device=input.device))
  if return_counts: extra.append(Tensor(counts.astype(np.int64), device=input.device))
  return (result, *extra) if extra else result

def unique_consecutive(input: Tensor, return_inverse: bool = False, return_counts: bool = False, dim=None):
  """torch.unique_consecutive: each run of equal consecutive values (or slices along dim) kept once; read on the
  host as unique is."""
  vals = input.numpy()
  d = None if dim is None else norm_axis(dim, input.ndim)
  x = vals.reshape(-1) if d is None else np.moveaxis(vals, d, 0)
  n = x.shape[0]
  if n == 0: starts = np.zeros(0, bool)
  else:
    differs = (x[1:] != x[:-1]).reshape(n - 1, -1).any(1) if x.ndim > 1 else x[1:] != x[:-1]
    starts = np.concatenate([[True], differs])
  kept = x[starts]
  out = Tensor(np.ascontiguousarray(kept if d is None else np.moveaxis(kept, 0, d)), dtype=input.dtype, device=input.device)
  extra = []
  if return_inverse:
    inverse = np.cumsum(starts) - 1
    extra.append(Tensor(inverse.reshape(input.shape if d is None else (-1,)).astype(np.int64), device=input.device))
  if return_counts: extra.append(Tensor(np.diff(np.append(np.flatnonzero(starts), n)).astype(np.int64), device=input.device))
  return (out, *extra) if extra else out

def mode(input: Tensor, dim: int = -1, keepdim: bool = False) -> SortResult:
  """torch.mode: the most frequent value along dim (the smallest of equally frequent ones) and the index of its last
  occurrence. Each value's count compares the row with itself: O(n^2) per row, in one fused reduction."""
  d = norm_axis(dim, max(input.ndim, 1))
  x = input.reshape(1) if input.ndim == 0 else input
  rows = x.movedim(d, -1)
  n = rows.shape[-1]
  if n == 0: raise ValueError(f"mode: dimension {d} is empty")
  counts = (rows.unsqueeze(-1) == rows.unsqueeze(-2)).cast(dt.int32).sum(-1)
  best = counts == counts.amax(-1, keepdim=True)
  beyond = float("inf") if rows.dtype.is_float else dt.max_value(rows.dtype)
  values = where(best, rows, beyond).amin(-1)
  positions = Tensor.arange(n, device=rows.device)
  indices = where(best & (rows == values.unsqueeze(-1)), positions, -1).amax(-1).cast(dt.int64)
  if keepdim: values, indices = values.unsqueeze(d), indices.unsqueeze(d)
  if input.ndim == 0: values, indices = values.reshape(()), indices.reshape(())
  return SortResult(values, indices)
