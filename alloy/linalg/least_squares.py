"""torch.linalg's pinv, matrix_rank and lstsq, through the singular values (jacobi.py's svd; eigh for hermitian=True):
singular values at most max(atol, rtol * the largest) count as zero, rtol's default eps * max(m, n) where atol is
not given, so the pseudo-inverse and the least-squares solution are the minimum-norm ones."""
from __future__ import annotations
from collections import namedtuple
import numpy as np
from alloy import dtype as dt
from alloy.linalg.common import check_matrices
from alloy.linalg.jacobi import eigh, svd, svdvals
from alloy.tensor import Tensor, where

LstsqResult = namedtuple("LstsqResult", ["solution", "residuals", "rank", "singular_values"])
LSTSQ_DRIVERS = ("gels", "gelsy", "gelsd", "gelss")

def _tolerance(largest: Tensor, A: Tensor, atol, rtol) -> Tensor:
  """max(atol, rtol * largest), per matrix (...,), torch's defaults for rtol."""
  if rtol is None:   # eps * max(m, n), or 0 where a positive atol is given
    rtol = 0.0 if atol is not None and not (isinstance(atol, (int, float)) and atol <= 0) else float(np.finfo(A.dtype.np).eps) * max(A.shape[-2:])
  tol = largest * rtol
  return tol if atol is None else tol.maximum(atol if isinstance(atol, Tensor) else Tensor(float(atol), dtype=A.dtype, device=A.device))

def pinv(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
  """The Moore-Penrose pseudo-inverse: V diag(1/S) U^T over the singular values above the tolerance (for hermitian,
  the eigenvalues of magnitude above it, from eigh)."""
  check_matrices(A, "linalg.pinv")
  if hermitian:
    w, V = eigh(A)
    keep = w.abs() > _tolerance(w.abs().amax(-1), A, atol, rtol).unsqueeze(-1)
    return (V * where(keep, 1 / where(keep, w, 1.0), 0.0).unsqueeze(-2)) @ V.transpose(-1, -2)
  if 0 in A.shape[-2:]: return A.transpose(-1, -2)
  U, S, Vh = svd(A, full_matrices=False)
  keep = S > _tolerance(S[..., :1].squeeze(-1), A, atol, rtol).unsqueeze(-1)
  return (Vh.transpose(-1, -2) * where(keep, 1 / where(keep, S, 1.0), 0.0).unsqueeze(-2)) @ U.transpose(-1, -2)

def pinverse(A: Tensor, rcond: float = 1e-15) -> Tensor:
  """torch.pinverse (and Tensor.pinverse): pinv with singular values at most rcond * the largest counting as zero."""
  return pinv(A, rtol=rcond)

def matrix_rank(A: Tensor, *, atol=None, rtol=None, hermitian: bool = False) -> Tensor:
  """The number of singular values (eigenvalue magnitudes, for hermitian) above the tolerance, int64."""
  check_matrices(A, "linalg.matrix_rank")
  if 0 in A.shape[-2:]: return Tensor.zeros(*A.shape[:-2], dtype=dt.int64, device=A.device)
  sv = eigh(A).eigenvalues.abs() if hermitian else svdvals(A)
  return (sv > _tolerance(sv.amax(-1), A, atol, rtol).unsqueeze(-1)).cast(dt.int64).sum(-1)

def lstsq(A: Tensor, B: Tensor, rcond=None, *, driver: str | None = None) -> LstsqResult:
  """X minimizing ||A X - B|| (the minimum-norm one, singular values at most rcond * the largest counting as zero),
  with what torch.linalg.lstsq's driver returns beside it: the rank (gelsy, gelsd, gelss), the singular values
  (gelsd, gelss), and the squared residuals where m > n and (gelsd, gelss: every matrix of full rank; gels: always)
  (an empty tensor where not). Every driver is the same SVD solve here; gelsy is the default, as torch's on the CPU.
  The full-rank test of gelsd and gelss reads the ranks on the host."""
  check_matrices(A, "linalg.lstsq")
  if not isinstance(B, Tensor): raise TypeError(f"linalg.lstsq: expected B to be a Tensor, got {type(B).__name__}")
  if B.dtype is not A.dtype: raise TypeError(f"linalg.lstsq: expected A and B to have the same dtype, got {A.dtype.name} and {B.dtype.name}")
  driver = "gelsy" if driver is None else driver
  if driver not in LSTSQ_DRIVERS: raise ValueError(f"linalg.lstsq: driver must be one of {LSTSQ_DRIVERS}, got {driver!r}")
  m, n = A.shape[-2:]
  vector = B.ndim == A.ndim - 1
  Bm = B.unsqueeze(-1) if vector else B
  if Bm.ndim < 2 or Bm.shape[-2] != m:
    raise ValueError(f"linalg.lstsq: A's rows ({m}) and B's ({tuple(B.shape)}) must match, for A X = B")
  rtol = float(np.finfo(A.dtype.np).eps) * max(m, n) if rcond is None or rcond < 0 or driver == "gels" else rcond
  empty = Tensor.zeros(0, dtype=A.dtype, device=A.device)
  if 0 in (m, n):
    X = Tensor.zeros(*A.shape[:-2], n, Bm.shape[-1], dtype=A.dtype, device=A.device)
    S = Tensor.zeros(*A.shape[:-2], 0, dtype=A.dtype, device=A.device)
  else:
    U, S, Vh = svd(A, full_matrices=False)
    keep = S > (S[..., 0] * rtol).unsqueeze(-1)
    X = Vh.transpose(-1, -2) @ (where(keep, 1 / where(keep, S, 1.0), 0.0).unsqueeze(-1) * (U.transpose(-1, -2) @ Bm))
  rank = (S > (S[..., :1] * rtol)).cast(dt.int64).sum(-1) if min(m, n) else Tensor.zeros(*A.shape[:-2], dtype=dt.int64, device=A.device)
  residuals = empty
  if m > n and n and (driver == "gels" or (driver != "gelsy" and bool((rank.numpy() == n).all()))):
    residuals = ((A @ X - Bm) ** 2).sum(-2)
  return LstsqResult(X.squeeze(-1) if vector else X, residuals.squeeze(-1) if vector and residuals.numel() else residuals,
                     rank if driver != "gels" else Tensor.zeros(0, dtype=dt.int64, device=A.device),
                     S if driver in ("gelsd", "gelss") else empty)
