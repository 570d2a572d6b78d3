"""Gaussian elimination with partial pivoting, one step a column: det, slogdet, logdet (an LU's pivots), solve and inv
(Gauss-Jordan). The pivot is the largest magnitude left in its column, chosen on the device by argmax; rows are swapped
by selects, so no index is read back. A zero pivot makes solve and inv raise LinAlgError, as torch's do."""
from __future__ import annotations
from collections import namedtuple
from alloy import dtype as dt
from alloy.linalg.common import LinAlgError, check_square, column_of, first_bad, raise_at, row_of
from alloy.realize_tensors import realize as realize_all
from alloy.tensor import Tensor, broadcast_shape, stack, where

SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
InvExResult = namedtuple("InvExResult", ["inverse", "info"])

def eliminate(M: Tensor, n: int, full: bool, keep_l: bool = False):
  """Partial-pivoting elimination of the first n columns of M (..., rows, m): below each pivot (full=False: an LU's
  U), or above it too with each pivot row divided by its pivot (full=True: Gauss-Jordan, the first n columns then the
  identity). keep_l: each column's multipliers are kept below its pivot (LAPACK's packed LU, rows swapped with the
  rest). Returns (M, the pivots (..., n), the permutation's sign (...), each step's pivot row (..., n) int32)."""
  rows, cols = (Tensor.arange(s, dtype=dt.int32, device=M.device) for s in (M.shape[-2], M.shape[-1]))
  sign, pivots, swaps = Tensor.ones(*M.shape[:-2], dtype=M.dtype, device=M.device), [], []
  for k in range(n):
    col = column_of(M, cols, k)
    p = where(rows >= k, col.abs(), -1.0).argmax(-1, keepdim=True).cast(dt.int32)   # (..., 1)
    is_p, is_k = rows == p, rows == k
    pivot, col_k = (where(c, col, 0.0).sum(-1, keepdim=True) for c in (is_p, is_k))   # M[p, k] and M[k, k], (..., 1)
    row_p = where(is_p.unsqueeze(-1), M, 0.0).sum(-2, keepdim=True)
    M = where(is_k.unsqueeze(-1), row_p, where(is_p.unsqueeze(-1), row_of(M, rows, k), M))   # rows k and p swapped
    col = where(is_k, pivot, where(is_p, col_k, col))   # its column k
    sign = where(p.squeeze(-1) != k, -sign, sign)
    pivots.append(pivot.squeeze(-1))
    swaps.append(p.squeeze(-1))
    safe = where(pivot == 0, 1.0, pivot)   # a zero pivot's column is zero below it: nothing to eliminate
    factors = where(rows != k if full else rows > k, col / safe, 0.0).unsqueeze(-1)
    M = M - factors * (where(cols >= k, row_p, 0.0) if keep_l else row_p)   # kept multipliers (columns < k) stay
    if full: M = where(is_k.unsqueeze(-1), M / safe.unsqueeze(-1), M)
    if keep_l: M = where((cols == k) & (rows > k).unsqueeze(-1), factors, M)   # below the pivot: its multipliers
    realize_all([M, sign])
  return M, stack(pivots, -1), sign, stack(swaps, -1)

def slogdet(A: Tensor) -> SlogdetResult:
  """(sign, log|det A|): the sign 0 and the log -inf for a singular A."""
  n = check_square(A, "linalg.slogdet")
  if n == 0: return SlogdetResult(*(f(*A.shape[:-2], dtype=A.dtype, device=A.device) for f in (Tensor.ones, Tensor.zeros)))
  _, pivots, sign, _ = eliminate(A, n, False)
  return SlogdetResult(sign * pivots.sign().prod(-1), pivots.abs().log().sum(-1))

def det(A: Tensor) -> Tensor:
  n = check_square(A, "linalg.det")
  if n == 0: return Tensor.ones(*A.shape[:-2], dtype=A.dtype, device=A.device)
  _, pivots, sign, _ = eliminate(A, n, False)
  return sign * pivots.prod(-1)

def logdet(A: Tensor) -> Tensor:
  """torch.logdet: log det A, NaN where det A < 0, -inf where it is 0."""
  s, logabs = slogdet(A)
  return where(s < 0, float("nan"), logabs)

def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
  """X with A X = B (left) or X A = B; B is a batch of vectors where its shape is A's without the last dim (or it
  is 1-d), else of matrices; the batch dims broadcast."""
  n = check_square(A, "linalg.solve")
  if not isinstance(B, Tensor): raise TypeError(f"linalg.solve: expected B to be a Tensor, got {type(B).__name__}")
  if B.dtype is not A.dtype: raise TypeError(f"linalg.solve: expected A and B to have the same dtype, got {A.dtype.name} and {B.dtype.name}")
  if not left: return solve(A.transpose(-1, -2), B.transpose(-1, -2)).transpose(-1, -2)
  vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and tuple(B.shape) == tuple(A.shape[:-1]))
  Bm = B.unsqueeze(-1) if vector else B
  if Bm.ndim < 2 or Bm.shape[-2] != n:
    raise ValueError(f"linalg.solve: incompatible shapes of A and B for the equation AX = B ({A.shape[-2]}x{A.shape[-1]} and {tuple(B.shape)})")
  try: batch = broadcast_shape(tuple(A.shape[:-2]), tuple(Bm.shape[:-2]))
  except ValueError as e: raise ValueError(f"linalg.solve: the batch dims of A {tuple(A.shape)} and B {tuple(B.shape)} do not broadcast") from e
  A, Bm = A.expand(batch + (n, n)), Bm.expand(batch + tuple(Bm.shape[-2:]))
  if n == 0: return Bm.squeeze(-1) if vector else Bm
  M, pivots, _, _ = eliminate(A.cat(Bm, dim=-1), n, True)
  raise_at(first_bad(pivots == 0, n), n, lambda k: LinAlgError("linalg.solve: the solver failed because the input matrix is singular "
                                                             f"(its pivot {int(k) + 1} is zero)"))
  X = M[..., n:]
  return X.squeeze(-1) if vector else X

def inv_ex(A: Tensor, *, check_errors: bool = False) -> InvExResult:
  """(the inverse, info): info (int32, per matrix) is 0, or k + 1 for the first zero pivot k of a singular matrix,
  whose inverse is then not finite; check_errors raises as inv does."""
  n = check_square(A, "linalg.inv_ex")
  if n == 0: return InvExResult(A, Tensor.zeros(*A.shape[:-2], dtype=dt.int32, device=A.device))
  M, pivots, _, _ = eliminate(A.cat(Tensor.eye(n, dtype=A.dtype, device=A.device).expand(A.shape), dim=-1), n, True)
  cols = Tensor.arange(1, n + 1, dtype=dt.int32, device=A.device)
  info = where(pivots == 0, cols, n + 1).amin(-1)
  if check_errors: _singular(pivots, n, "linalg.inv_ex")
  return InvExResult(M[..., n:], where(info > n, 0, info))

def _singular(pivots: Tensor, n: int, op: str) -> None:
  raise_at(first_bad(pivots == 0, n), n, lambda k: LinAlgError(f"{op}: the diagonal element {int(k) + 1} is zero, the inversion could "
                                                             "not be completed because the input matrix is singular"))

def inv(A: Tensor) -> Tensor:
  n = check_square(A, "linalg.inv")
  if n == 0: return A
  M, pivots, _, _ = eliminate(A.cat(Tensor.eye(n, dtype=A.dtype, device=A.device).expand(A.shape), dim=-1), n, True)
  _singular(pivots, n, "linalg.inv")
  return M[..., n:]

