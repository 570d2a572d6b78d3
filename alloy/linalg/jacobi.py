"""Parallel cyclic Jacobi: eigh and eigvalsh (two-sided, on the symmetric matrix), svd and svdvals (one-sided, Hestenes'
method: the columns of B = A V rotated until they are orthogonal; the singular values are their norms).

A round rotates n/2 disjoint pairs of columns (round-robin, so a sweep of n - 1 rounds meets every pair once), each by
the Jacobi rotation that zeroes its off-diagonal entry: of S for eigh, of the Gram matrix B^T B for svd, which is the
same rotation of the same 2 x 2 matrix, so both share `_rotation`. A round's rotations are one orthogonal matrix,
built from one-hot pair matrices, so nothing is read back and a round is a few matmuls; JACOBI_SWEEPS sweeps are
taken, and each round is realized (its kernels compiled once for every round): at 64 x 64 in float64 the singular
values come to 6e-15 of NumPy's relative to the largest, 2.6 s the first time (compiling) and 0.6 s cached on the CPU
device. Gradients come from autograd through the rounds. Each vector's sign is as the iteration leaves it (torch's
differ by a sign, the decomposition being unique up to one)."""
from __future__ import annotations
from collections import namedtuple
import numpy as np
from alloy.linalg.common import check_matrices, check_square, permutation_matrix
from alloy.linalg.factor import qr
from alloy.realize_tensors import realize as realize_all
from alloy.tensor import Tensor, where
from alloy.vector_norm import vector_norm

EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
SVDResult = namedtuple("SVDResult", ["U", "S", "Vh"])
JACOBI_SWEEPS = 10   # each sweep rotates every pair once; the off-diagonal mass falls quadratically once small

def _round_robin(n: int) -> list:
  """n - 1 rounds (n even) in which every pair of 0..n-1 meets once, each round n/2 disjoint pairs."""
  ring, rounds = list(range(n)), []
  for _ in range(n - 1):
    rounds.append([(ring[i], ring[n - 1 - i]) for i in range(n // 2)])
    ring = [ring[0], ring[-1], *ring[1:-1]]
  return rounds

def _pair_selectors(m: int, like: Tensor) -> list:
  """Per round, (mp, mq): m x m/2 one-hot matrices whose column i picks pair i's first (mp) and second (mq) index."""
  rounds = []
  for pairs in _round_robin(m):
    mp, mq = (np.zeros((m, m // 2), dtype=like.dtype.np) for _ in range(2))
    for i, (p, q) in enumerate(pairs): mp[p, i], mq[q, i] = 1, 1
    rounds.append(tuple(Tensor(x, device=like.device) for x in (mp, mq)))
  return rounds

def _rotation(pp: Tensor, qq: Tensor, pq: Tensor, mp: Tensor, mq: Tensor) -> Tensor:
  """The orthogonal m x m matrix J of a round: for each pair (p, q), with [[pp, pq], [pq, qq]] the 2 x 2 symmetric
  matrix its rotation diagonalizes (..., m/2 each), J[p, p] = J[q, q] = c, J[p, q] = s, J[q, p] = -s (the smaller
  angle; none where pq is 0)."""
  off = pq != 0
  tau = (qq - pp) / (2 * where(off, pq, 1.0))
  t = where(off, where(tau >= 0, 1.0, -1.0) / (tau.abs() + (tau * tau + 1).sqrt()), 0.0)
  c = (t * t + 1).rsqrt().unsqueeze(-2)
  s = t.unsqueeze(-2) * c
  return (mp * c) @ mp.T + (mq * c) @ mq.T + (mp * s) @ mq.T - (mq * s) @ mp.T

def _padded(M: Tensor, rows: int, cols: int) -> Tensor:
  """M with zero rows and columns appended up to rows x cols (an odd size's isolated extra index: no rotation
  touches it, its pair's off-diagonal entry being 0)."""
  if cols != M.shape[-1]: M = M.cat(M.zeros_like()[..., :, :1].expand(*M.shape[:-1], cols - M.shape[-1]), dim=-1)
  if rows != M.shape[-2]: M = M.cat(M.zeros_like()[..., :1, :].expand(*M.shape[:-2], rows - M.shape[-2], M.shape[-1]), dim=-2)
  return M

def eigh(A: Tensor, UPLO: str = "L") -> EighResult:
  """Eigenvalues (ascending) and orthonormal eigenvectors (columns) of symmetric matrices, from their lower (UPLO
  'L') or upper triangle."""
  n = check_square(A, "linalg.eigh")
  if UPLO not in ("L", "U"): raise ValueError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
  from alloy.triangular import tril, triu
  half = tril(A) if UPLO == "L" else triu(A)
  S = half + (tril(A, -1) if UPLO == "L" else triu(A, 1)).transpose(-1, -2)
  m = n + n % 2
  S = _padded(S, m, m)
  V, rounds = Tensor.eye(m, dtype=A.dtype, device=A.device).expand(S.shape), _pair_selectors(m, A)
  for _ in range(JACOBI_SWEEPS if m > 1 else 0):
    for mp, mq in rounds:
      a_p, a_q = S @ mp, S @ mq
      J = _rotation((mp * a_p).sum(-2), (mq * a_q).sum(-2), (mp * a_q).sum(-2), mp, mq)
      S = J.transpose(-1, -2) @ S @ J
      V = V @ J
      realize_all([S, V])
  values = S.diagonal(0, -2, -1)
  if m != n: values, V = values[..., :n], V[..., :n, :n]
  values, order = values.sort(-1)
  return EighResult(values, V @ permutation_matrix(order, n).cast(A.dtype))

def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
  return eigh(A, UPLO).eigenvalues

def _orthogonal_columns(A: Tensor) -> tuple[Tensor, Tensor]:
  """(B, V): V orthogonal (n x n), B = A V (m x n, m >= n) with mutually orthogonal columns."""
  n = A.shape[-1]
  m = n + n % 2
  B = _padded(A, A.shape[-2], m)
  V, rounds = Tensor.eye(m, dtype=A.dtype, device=A.device).expand(*A.shape[:-2], m, m), _pair_selectors(m, A)
  for _ in range(JACOBI_SWEEPS if m > 1 else 0):
    for mp, mq in rounds:
      b_p, b_q = B @ mp, B @ mq   # (..., rows, m/2): each pair's columns
      J = _rotation((b_p * b_p).sum(-2), (b_q * b_q).sum(-2), (b_p * b_q).sum(-2), mp, mq)
      B, V = B @ J, V @ J
      realize_all([B, V])
  return B[..., :, :n], V[..., :n, :n]

def svd(A: Tensor, full_matrices: bool = True) -> SVDResult:
  """A = U diag(S) Vh, the singular values S descending (k = min(m, n) of them), U's and Vh's rows and columns
  orthonormal: U m x m and Vh n x n (full_matrices), or U m x k and Vh k x n, as torch.linalg.svd. U's columns past
  the rank (and past k) complete an orthonormal basis, by Householder QR of the rotated columns."""
  check_matrices(A, "linalg.svd")
  m, n = A.shape[-2:]
  if m < n:   # A^T = V S U^T
    U, S, Vh = svd(A.transpose(-1, -2), full_matrices)
    return SVDResult(Vh.transpose(-1, -2), S, U.transpose(-1, -2))
  if n == 0:
    U = Tensor.eye(m, dtype=A.dtype, device=A.device).expand(*A.shape[:-2], m, m) if full_matrices else A
    return SVDResult(U, Tensor.zeros(*A.shape[:-2], 0, dtype=A.dtype, device=A.device), A[..., :0, :].transpose(-1, -2))
  B, V = _orthogonal_columns(A)
  S, order = vector_norm(B, 2, -2).sort(-1, descending=True)
  P = permutation_matrix(order, n).cast(A.dtype)
  B, V = B @ P, V @ P
  Q, R = qr(B, mode="complete" if full_matrices else "reduced")
  signs = where(R.diagonal(0, -2, -1) < 0, -1.0, 1.0)   # Q's column j is b_j / S_j up to that sign
  if full_matrices and m > n: signs = signs.cat(signs.ones_like()[..., :1].expand(*signs.shape[:-1], m - n), dim=-1)
  return SVDResult(Q * signs.unsqueeze(-2), S, V.transpose(-1, -2))

def svdvals(A: Tensor) -> Tensor:
  """The singular values, descending: the norms of the rotated columns, with no U."""
  check_matrices(A, "linalg.svdvals")
  if A.shape[-2] < A.shape[-1]: A = A.transpose(-1, -2)
  if A.shape[-1] == 0: return Tensor.zeros(*A.shape[:-2], 0, dtype=A.dtype, device=A.device)
  return vector_norm(_orthogonal_columns(A)[0], 2, -2).sort(-1, descending=True).values

TorchSVDResult = namedtuple("TorchSVDResult", ["U", "S", "V"])

def torch_svd(A: Tensor, some: bool = True, compute_uv: bool = True) -> TorchSVDResult:
  """torch.svd (and Tensor.svd): V rather than Vh, `some` for reduced; without compute_uv, U and V are zeros of shapes
  m x m and n x n."""
  if not compute_uv:
    m, n = A.shape[-2:]
    U, V = (Tensor.zeros(*A.shape[:-2], s, s, dtype=A.dtype, device=A.device) for s in (m, n))
    return TorchSVDResult(U, svdvals(A), V)
  U, S, Vh = svd(A, full_matrices=not some)
  return TorchSVDResult(U, S, Vh.transpose(-1, -2))
