"""The Cholesky-Banachiewicz recurrence (cholesky: LinAlgError where a leading minor is not positive-definite) and
Householder reflections (qr: LAPACK's, with no reflection where a column is zero below its diagonal, so R's signs are
torch's), one column a step."""
from __future__ import annotations
from collections import namedtuple
from alloy import dtype as dt
from alloy.linalg.common import LinAlgError, check_matrices, check_square, column_of, first_bad, raise_at, row_of
from alloy.realize_tensors import realize as realize_all
from alloy.tensor import Tensor, stack, where

QRResult = namedtuple("QRResult", ["Q", "R"])

def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
  """L lower-triangular with L L^H = A, from A's lower triangle (upper=True: L^T); LinAlgError where a leading minor
  is not positive-definite."""
  n = check_square(A, "linalg.cholesky")
  rows = Tensor.arange(n, dtype=dt.int32, device=A.device)
  L, bad = A.zeros_like(), []
  for j in range(n):
    # column j of L below the diagonal (L's columns past j - 1 are still zero); its row j is s / sqrt(s)
    col = column_of(A, rows, j) - (L * row_of(L, rows, j)).sum(-1)
    s = where(rows == j, col, 0.0).sum(-1)
    bad.append(~(s > 0))
    col = col / where(s > 0, s, 1.0).sqrt().unsqueeze(-1)
    L = where((rows >= j).unsqueeze(-1) & (rows == j), col.unsqueeze(-1), L)
    L.realize()
  if n:
    raise_at(first_bad(stack(bad, -1), n), n, lambda k: LinAlgError(
      "linalg.cholesky: the factorization could not be completed because the input is not positive-definite "
      f"(the leading minor of order {int(k) + 1} is not positive-definite)"))
  return L.transpose(-1, -2) if upper else L

def qr(A: Tensor, mode: str = "reduced") -> QRResult:
  """A = Q R, Q with orthonormal columns, R upper-triangular: 'reduced' (Q m x k, R k x n, k = min(m, n)),
  'complete' (Q m x m, R m x n) or 'r' (R alone, Q empty), as torch.linalg.qr."""
  check_matrices(A, "linalg.qr")
  if mode not in ("reduced", "complete", "r"): raise ValueError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
  m, n = A.shape[-2:]
  rows, cols = (Tensor.arange(s, dtype=dt.int32, device=A.device) for s in (m, n))
  R, Q = A, Tensor.eye(m, dtype=A.dtype, device=A.device).expand(A.shape[:-2] + (m, m))
  for k in range(min(m, n)):
    x = where(rows >= k, column_of(R, cols, k), 0.0)
    below = where(rows > k, x, 0.0)
    xk = where(rows == k, x, 0.0).sum(-1, keepdim=True)
    tail = (below * below).sum(-1, keepdim=True)
    norm = (xk * xk + tail).sqrt()
    v = below + where(rows == k, xk + where(xk >= 0, norm, -norm), 0.0)   # x - alpha e_k, alpha = -sign(x_k) |x|
    vv = (v * v).sum(-1, keepdim=True)
    scale = where(tail == 0, 0.0, 2.0 / where(tail == 0, 1.0, vv))   # no reflection where the column is done
    sv = scale * v
    R = R - sv.unsqueeze(-1) * (v.unsqueeze(-1) * R).sum(-2, keepdim=True)
    Q = Q - (Q * v.unsqueeze(-2)).sum(-1, keepdim=True) * sv.unsqueeze(-2)
    realize_all([R, Q])
  R = where(rows.unsqueeze(-1) > cols, 0.0, R)   # what the reflections left below the diagonal is rounding
  if mode == "r": return QRResult(Tensor.zeros(0, dtype=A.dtype, device=A.device), R[..., :min(m, n), :])
  if mode == "complete" or m <= n: return QRResult(Q, R if mode == "complete" else R[..., :min(m, n), :])
  return QRResult(Q[..., :, :n], R[..., :n, :])

