"""sort, argsort and topk (PyTorch's signatures and tie rules), forward and backward.

Every sort here is stable: elements compare by (value, original index), a total order, so the result is the one
stable order whatever the network. NaN sorts as the largest value (last ascending, first descending), as in PyTorch.
The rows (the sorted dim, the others flattened into a batch) are sorted by one of two algorithms:

- rows of at most RANK_MAX_LENGTH: each element's rank is the count of elements that sort before it (one fused
  reduction, n^2 compares per row), and the permutation is read back from the ranks (a second one). Two kernels.
- longer rows: a bitonic network over the row padded to a power of two N, log2(N)(log2(N)+1)/2 stages. A stage is
  one kernel over R*N elements that sorts only the permutation: each position reads its partner (index ^ j) and
  the two values at the permuted positions (GATHERs from the input), and keeps the one its place in the block
  wants. j and the block size are kernel arguments, so every stage after the first runs the same compiled kernel.
  A row of 4096 is 78 launches of O(N) work each: O(N log^2 N) per row.

Backward: sort's gradient is the output gradient read at the inverse permutation (an argsort of the permutation,
only computed when backward runs); topk's is scattered to its k indices (O(k n) per row, one kernel).
"""
from __future__ import annotations
from alloy import dtype as dt, autograd
from alloy.gathering import take, scatter_add_rows
from alloy.tensor import MaxResult, Tensor, where, norm_axis

RANK_MAX_LENGTH = 64
SortResult = MaxResult   # (values, indices), as torch.return_types

def _precedes(va: Tensor, ia: Tensor, vb: Tensor, ib: Tensor, descending: bool) -> Tensor:
  """Whether (va, ia) sorts before (vb, ib): by value (NaN largest), ties by the original index."""
  first = va > vb if descending else va < vb
  eq = va == vb
  if va.dtype.is_float:
    na, nb = va != va, vb != vb
    first = first | (na & ~nb) if descending else first | (nb & ~na)
    eq = eq | (na & nb)
  return first | (eq & (ia < ib))

def _rank_perm(v: Tensor, descending: bool) -> tuple[Tensor, Tensor]:
  """(permutation, ranks) of the rows of v, (R, n), by counting: rank[i] = #{j sorting before i}."""
  n = v.shape[1]
  pos = Tensor.arange(n, dtype=dt.int32, device=v.device)
  before = _precedes(v.unsqueeze(1), pos.reshape(1, 1, n), v.unsqueeze(2), pos.reshape(1, n, 1), descending)
  rank = before.cast(dt.int32).sum(2, dtype=dt.int32).contiguous()           # [r, i]: j runs along the last axis
  perm = where(rank.unsqueeze(1) == pos.reshape(1, n, 1), pos.reshape(1, 1, n), 0).sum(2, dtype=dt.int32)
  return perm.contiguous(), rank

def _bitonic_perm(v: Tensor, descending: bool) -> Tensor:
  """The permutation sorting each row of v, (R, n), through a bitonic network on a row padded to a power of 2."""
  rows, n = v.shape
  size = 1 << max(0, (n - 1).bit_length())
  col = Tensor.arange(size, dtype=dt.int32, device=v.device).reshape(1, size).expand(rows, size)
  perm = col
  def value_at(p: Tensor) -> Tensor: return take(v, 1, p.minimum(n - 1))
  k = 2
  while k <= size:
    j = k // 2
    while j >= 1:
      other = take(perm, 1, col ^ j)
      a_first = _precedes(value_at(perm), perm, value_at(other), other, descending)
      a_first = where((perm >= n) | (other >= n), perm < other, a_first)   # padding sorts last, in index order
      want_first = ((col & j) == 0) == ((col & k) == 0)   # the lower slot of an ascending block takes the first
      perm = where(a_first == want_first, perm, other).contiguous()
      j //= 2
    k *= 2
  return perm if size == n else perm[:, :n].contiguous()

def sort_rows(v: Tensor, descending: bool) -> tuple[Tensor, object]:
  """(int32 permutation of each row of v (R, n), a function giving the inverse permutation)."""
  if v.dtype.is_bool: v = v.cast(dt.uint8)
  v = v.contiguous()
  if v.shape[1] <= RANK_MAX_LENGTH:
    perm, rank = _rank_perm(v, descending)
    return perm, lambda: rank
  perm = _bitonic_perm(v, descending)
  return perm, lambda: _bitonic_perm(perm, False)

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

def _topk_rule(out, g, idx, in_shape): return (scatter_add_rows(in_shape, 1, idx, g),)

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
