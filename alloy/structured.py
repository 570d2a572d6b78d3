"""Tensors built from others by a fixed pattern, PyTorch's: cartesian_prod, combinations, block_diag, diagflat, vander,
tril_indices and triu_indices (index patterns made on the host, where they are known before any data), and the
selections whose size is data (masked_select, argwhere: the mask is read on the host, as nonzero reads it), isin, and
torch.take (x.reshape(-1)[index])."""
from __future__ import annotations
import itertools
import numpy as np
from alloy import dtype as dt
from alloy.tensor import Tensor, broadcast_shape, stack

def _check(tensors, op: str) -> list:
  if not tensors: raise ValueError(f"{op}: expected at least one tensor")
  for t in tensors:
    if not isinstance(t, Tensor): raise TypeError(f"{op}: expected Tensors, got {type(t).__name__}")
  return list(tensors)

def cartesian_prod(*tensors: Tensor) -> Tensor:
  """Every tuple of one element from each 1-D tensor, in order, (N, len(tensors)); a single tensor is returned as is."""
  ts = _check(tensors, "cartesian_prod")
  for t in ts:
    if t.ndim != 1: raise ValueError(f"cartesian_prod: expected 1-D tensors, got shape {t.shape}")
  if len(ts) == 1: return ts[0]
  grids = [t.reshape(*[t.shape[0] if j == i else 1 for j in range(len(ts))]).expand(*[u.shape[0] for u in ts]) for i, t in enumerate(ts)]
  return stack([g.reshape(-1) for g in grids], 1)

def combinations(input: Tensor, r: int = 2, with_replacement: bool = False) -> Tensor:
  """itertools.combinations (or combinations_with_replacement) of a 1-D tensor's elements, (N, r)."""
  if input.ndim != 1: raise ValueError(f"combinations: expected a 1-D tensor, got shape {input.shape}")
  if r < 0: raise ValueError(f"combinations: r must be non-negative, got {r}")
  if r == 0: return Tensor.empty(0, dtype=input.dtype, device=input.device)
  make = itertools.combinations_with_replacement if with_replacement else itertools.combinations
  places = np.array(list(make(range(input.shape[0]), r)), dtype=np.int64).reshape(-1, r)
  if places.size == 0: return Tensor.empty(0, r, dtype=input.dtype, device=input.device)
  return input[Tensor(places, device=input.device)]

def block_diag(*tensors: Tensor) -> Tensor:
  """The tensors (0-d, 1-d as a row, or 2-d) placed along the diagonal of one matrix, zeros elsewhere."""
  ts = [t.reshape(1, 1) if t.ndim == 0 else t.reshape(1, -1) if t.ndim == 1 else t for t in _check(tensors, "block_diag")]
  for t in ts:
    if t.ndim != 2: raise ValueError(f"block_diag: expected tensors of at most 2 dimensions, got shape {t.shape}")
  out_dtype = dt.promote_types(*[t.dtype for t in ts])
  cols = sum(t.shape[1] for t in ts)
  rows, left = [], 0
  for t in ts:
    rows.append(t.cast(out_dtype).pad(((0, 0), (left, cols - left - t.shape[1]))))
    left += t.shape[1]
  return rows[0].cat(*rows[1:], dim=0) if len(rows) > 1 else rows[0]

def diagflat(input: Tensor, offset: int = 0) -> Tensor:
  """The flattened input as the offset diagonal of a square matrix."""
  return input.reshape(-1).diag_embed(offset)

def vander(x: Tensor, N=None, increasing: bool = False) -> Tensor:
  """Columns of powers of a 1-D x: x^(N-1) ... x^0 (or increasing), N columns (default len(x))."""
  if x.ndim != 1: raise ValueError(f"vander: x must be a one-dimensional tensor, got shape {x.shape}")
  n = x.shape[0] if N is None else N
  if n < 0: raise ValueError(f"vander: N must be non-negative, got {n}")
  if n == 0: return Tensor.empty(x.shape[0], 0, dtype=x.dtype, device=x.device)
  powers = [x.ones_like()] + [None] * (n - 1)
  for k in range(1, n): powers[k] = powers[k - 1] * x
  return stack(powers if increasing else powers[::-1], 1)

def _triangle_indices(row: int, col: int, offset: int, lower: bool, dtype, device) -> Tensor:
  r, c = np.tril_indices(row, offset, col) if lower else np.triu_indices(row, offset, col)
  return Tensor(np.stack([r, c]).astype(np.int64), device=device).cast(dtype)

def tril_indices(row: int, col: int, offset: int = 0, *, dtype=dt.int64, device=None) -> Tensor:
  """The (2, N) row and column indices of a row x col matrix's lower triangle (below the offset diagonal), row-major."""
  return _triangle_indices(row, col, offset, True, dtype, device)

def triu_indices(row: int, col: int, offset: int = 0, *, dtype=dt.int64, device=None) -> Tensor:
  return _triangle_indices(row, col, offset, False, dtype, device)

def masked_select(input: Tensor, mask: Tensor) -> Tensor:
  """The elements of input (broadcast with mask) where mask is True, flattened in order; the mask is read on the host."""
  if not mask.dtype.is_bool: raise TypeError(f"masked_select: mask must be a bool tensor, got {mask.dtype.name}")
  shape = broadcast_shape(tuple(input.shape), tuple(mask.shape))
  picks = np.flatnonzero(mask.expand(*shape).numpy())
  return input.expand(*shape).reshape(-1)[Tensor(picks.astype(np.int64), device=input.device)]

def argwhere(input: Tensor) -> Tensor:
  """torch.argwhere: the (N, ndim) indices of the non-zero elements, nonzero's."""
  return input.nonzero()

def isin(elements, test_elements, *, assume_unique: bool = False, invert: bool = False) -> Tensor:
  """Whether each of elements is among test_elements (either may be a number): a compare against every test value."""
  like = elements if isinstance(elements, Tensor) else test_elements
  e = elements if isinstance(elements, Tensor) else Tensor(elements, device=like.device)
  t = test_elements if isinstance(test_elements, Tensor) else Tensor(test_elements, device=like.device)
  if t.numel() == 0: hit = e.zeros_like(dtype=dt.bool_)
  else: hit = (e.unsqueeze(-1) == t.reshape(-1)).any(-1)
  return ~hit if invert else hit

def flat_take(input: Tensor, index: Tensor) -> Tensor:
  """torch.take: input read as 1-D at index (any shape; negative counts from the end), in index's shape; checked and
  differentiated as x[index] is."""
  if not isinstance(index, Tensor) or index.dtype.is_float or index.dtype.is_bool:
    raise TypeError(f"take: index must be an integer tensor, got {getattr(index, 'dtype', type(index).__name__)}")
  return input.reshape(-1)[index]
