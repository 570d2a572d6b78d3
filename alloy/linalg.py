"""torch.linalg's det, slogdet, inv, solve, cholesky, qr and eigh (and torch's det, logdet, slogdet, inverse), batched over
leading dims, in float32 or float64; and its norms and products (vector_norm, matrix_norm, norm, matrix_power,
multi_dot, vecdot, diagonal), compositions of the Tensor ops.

Each is an elimination written in tensor ops, one step a column: Gaussian elimination with partial pivoting (the
pivot the largest magnitude left in its column, chosen on the device by argmax; rows swapped by selects, so no index
is read back), Gauss-Jordan for solve and inv, the Cholesky-Banachiewicz recurrence, and Householder reflections for qr
(LAPACK's: no reflection where a column is zero below its diagonal, so R's signs are torch's). A step reads its column and
row by selects against k rather than slices at k, so k is a kernel argument, and each step is realized: a step's few
kernels are compiled once for every k and every step (fused across steps, each depth of the chain was a kernel of its
own to compile: 8.3 s against 3.2 for the four functions at 2 x 5 x 5 the first time, 0.7 cached). Gradients come from
autograd through the steps. That suits the small and mid-size matrices models use (covariances, flows, 2x2 to a few
hundred); it is not a blocked LAPACK.

A singular matrix (an exactly zero pivot) makes inv and solve raise LinAlgError, as torch's do, and a matrix that is
not positive-definite makes cholesky raise; the check is bounds.in_bounds' (read on the host eagerly, on the device
under @jit)."""
from __future__ import annotations
from collections import namedtuple
import numpy as np
from alloy import dtype as dt
from alloy.bounds import in_bounds
from alloy.realize_tensors import realize as realize_all
from alloy.tensor import Tensor, broadcast_shape, stack, where
from alloy.vector_norm import vector_norm

class LinAlgError(RuntimeError):
  """A matrix the function cannot take: singular (inv, solve) or not positive-definite (cholesky); torch.linalg's."""

SlogdetResult = namedtuple("SlogdetResult", ["sign", "logabsdet"])
QRResult = namedtuple("QRResult", ["Q", "R"])

def _matrices(A, op: str) -> None:
  if not isinstance(A, Tensor): raise TypeError(f"{op}: expected a Tensor, got {type(A).__name__}")
  if A.ndim < 2: raise ValueError(f"{op}: the input tensor A must have at least 2 dimensions, got shape {tuple(A.shape)}")
  if A.dtype not in (dt.float32, dt.float64): raise TypeError(f"{op}: expected a float32 or float64 tensor, got {A.dtype.name}")

def _square(A, op: str) -> int:
  _matrices(A, op)
  if A.shape[-1] != A.shape[-2]: raise ValueError(f"{op}: A must be batches of square matrices, but they are {A.shape[-2]} by {A.shape[-1]} matrices")
  return A.shape[-1]

def _first(where_bad: Tensor, n: int) -> Tensor:
  """The least column k where where_bad (..., n) holds in any matrix, or n where it holds nowhere (a 0-d tensor)."""
  cols = Tensor.arange(n, dtype=dt.int32, device=where_bad.device)
  return where(where_bad, cols, n).min()

def _raise_at(first: Tensor, n: int, error) -> None:
  """error(k) for the first bad column k, unless there is none (first == n)."""
  in_bounds(first, n, n + 1, error)

def _column(M: Tensor, cols: Tensor, k: int) -> Tensor:
  """M[..., :, k] as a select over the columns: k is then a kernel argument, and one compiled kernel serves every step."""
  return where(cols == k, M, 0.0).sum(-1)

def _row(M: Tensor, rows: Tensor, k: int) -> Tensor:
  """M[..., k:k+1, :], as _column takes a column."""
  return where((rows == k).unsqueeze(-1), M, 0.0).sum(-2, keepdim=True)

def _eliminate(M: Tensor, n: int, full: bool):
  """Partial-pivoting elimination of the first n columns of M (..., n, m): below each pivot (full=False: an LU's
  U, in the first n columns), or above it too with each pivot row divided by its pivot (full=True: Gauss-Jordan,
  the first n columns then the identity). Returns (M, the pivots (..., n), the permutation's sign (...))."""
  rows, cols = (Tensor.arange(s, dtype=dt.int32, device=M.device) for s in (n, M.shape[-1]))
  sign, pivots = Tensor.ones(*M.shape[:-2], dtype=M.dtype, device=M.device), []
  for k in range(n):
    col = _column(M, cols, k)
    p = where(rows >= k, col.abs(), -1.0).argmax(-1, keepdim=True).cast(dt.int32)   # (..., 1)
    is_p, is_k = rows == p, rows == k
    pivot, col_k = (where(c, col, 0.0).sum(-1, keepdim=True) for c in (is_p, is_k))   # M[p, k] and M[k, k], (..., 1)
    row_p = where(is_p.unsqueeze(-1), M, 0.0).sum(-2, keepdim=True)
    M = where(is_k.unsqueeze(-1), row_p, where(is_p.unsqueeze(-1), _row(M, rows, k), M))   # rows k and p swapped
    col = where(is_k, pivot, where(is_p, col_k, col))   # its column k
    sign = where(p.squeeze(-1) != k, -sign, sign)
    pivots.append(pivot.squeeze(-1))
    safe = where(pivot == 0, 1.0, pivot)   # a zero pivot's column is zero below it: nothing to eliminate
    factors = where(rows != k if full else rows > k, col / safe, 0.0).unsqueeze(-1)
    M = M - factors * row_p
    if full: M = where(is_k.unsqueeze(-1), M / safe.unsqueeze(-1), M)
    realize_all([M, sign])
  return M, stack(pivots, -1), sign

def slogdet(A: Tensor) -> SlogdetResult:
  """(sign, log|det A|): the sign 0 and the log -inf for a singular A."""
  n = _square(A, "linalg.slogdet")
  if n == 0: return SlogdetResult(*(f(*A.shape[:-2], dtype=A.dtype, device=A.device) for f in (Tensor.ones, Tensor.zeros)))
  _, pivots, sign = _eliminate(A, n, False)
  return SlogdetResult(sign * pivots.sign().prod(-1), pivots.abs().log().sum(-1))

def det(A: Tensor) -> Tensor:
  n = _square(A, "linalg.det")
  if n == 0: return Tensor.ones(*A.shape[:-2], dtype=A.dtype, device=A.device)
  _, pivots, sign = _eliminate(A, n, False)
  return sign * pivots.prod(-1)

def logdet(A: Tensor) -> Tensor:
  """torch.logdet: log det A, NaN where det A < 0, -inf where it is 0."""
  s, logabs = slogdet(A)
  return where(s < 0, float("nan"), logabs)

def solve(A: Tensor, B: Tensor, *, left: bool = True) -> Tensor:
  """X with A X = B (left) or X A = B; B is a batch of vectors where its shape is A's without the last dim (or it
  is 1-d), else of matrices; the batch dims broadcast."""
  n = _square(A, "linalg.solve")
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
  M, pivots, _ = _eliminate(A.cat(Bm, dim=-1), n, True)
  _raise_at(_first(pivots == 0, n), n, lambda k: LinAlgError("linalg.solve: the solver failed because the input matrix is singular "
                                                             f"(its pivot {int(k) + 1} is zero)"))
  X = M[..., n:]
  return X.squeeze(-1) if vector else X

def inv(A: Tensor) -> Tensor:
  n = _square(A, "linalg.inv")
  if n == 0: return A
  M, pivots, _ = _eliminate(A.cat(Tensor.eye(n, dtype=A.dtype, device=A.device).expand(A.shape), dim=-1), n, True)
  _raise_at(_first(pivots == 0, n), n, lambda k: LinAlgError(f"linalg.inv: the diagonal element {int(k) + 1} is zero, the inversion could "
                                                             "not be completed because the input matrix is singular"))
  return M[..., n:]

def cholesky(A: Tensor, *, upper: bool = False) -> Tensor:
  """L lower-triangular with L L^H = A, from A's lower triangle (upper=True: L^T); LinAlgError where a leading minor
  is not positive-definite."""
  n = _square(A, "linalg.cholesky")
  rows = Tensor.arange(n, dtype=dt.int32, device=A.device)
  L, bad = A.zeros_like(), []
  for j in range(n):
    # column j of L below the diagonal (L's columns past j - 1 are still zero); its row j is s / sqrt(s)
    col = _column(A, rows, j) - (L * _row(L, rows, j)).sum(-1)
    s = where(rows == j, col, 0.0).sum(-1)
    bad.append(~(s > 0))
    col = col / where(s > 0, s, 1.0).sqrt().unsqueeze(-1)
    L = where((rows >= j).unsqueeze(-1) & (rows == j), col.unsqueeze(-1), L)
    L.realize()
  if n:
    _raise_at(_first(stack(bad, -1), n), n, lambda k: LinAlgError(
      "linalg.cholesky: the factorization could not be completed because the input is not positive-definite "
      f"(the leading minor of order {int(k) + 1} is not positive-definite)"))
  return L.transpose(-1, -2) if upper else L

def qr(A: Tensor, mode: str = "reduced") -> QRResult:
  """A = Q R, Q with orthonormal columns, R upper-triangular: 'reduced' (Q m x k, R k x n, k = min(m, n)),
  'complete' (Q m x m, R m x n) or 'r' (R alone, Q empty), as torch.linalg.qr."""
  _matrices(A, "linalg.qr")
  if mode not in ("reduced", "complete", "r"): raise ValueError(f"linalg.qr: mode must be 'reduced', 'complete' or 'r', got {mode!r}")
  m, n = A.shape[-2:]
  rows, cols = (Tensor.arange(s, dtype=dt.int32, device=A.device) for s in (m, n))
  R, Q = A, Tensor.eye(m, dtype=A.dtype, device=A.device).expand(A.shape[:-2] + (m, m))
  for k in range(min(m, n)):
    x = where(rows >= k, _column(R, cols, k), 0.0)
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

# ---- norms and products, compositions of the Tensor ops (vector_norm is alloy.vector_norm's)

def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False) -> Tensor:
  """'fro', or the largest (1, inf) or least (-1, -inf) absolute column (1) or row (inf) sum over the two dims."""
  _matrices(A, "linalg.matrix_norm")
  if not (isinstance(dim, (tuple, list)) and len(dim) == 2): raise ValueError(f"linalg.matrix_norm: dim must be a 2-tuple, got {dim!r}")
  r, c = (d % A.ndim for d in dim)
  if r == c: raise ValueError(f"linalg.matrix_norm: dims must be different, got {dim!r}")
  if ord == "fro": return vector_norm(A, 2, (r, c), keepdim)
  if ord in (2, -2, "nuc"):
    raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} needs the singular values (svd), which alloy does not have yet")
  if ord not in (1, -1, float("inf"), float("-inf")):
    raise ValueError(f"linalg.matrix_norm: ord must be 'fro', 'nuc', inf, -inf, 1, -1, 2 or -2, got {ord!r}")
  sums = A.abs().sum(r if ord in (1, -1) else c, keepdim=True)
  other = c if ord in (1, -1) else r
  out = sums.amax(other, keepdim=True) if ord > 0 else sums.amin(other, keepdim=True)
  return out if keepdim else out.squeeze(max(r, c)).squeeze(min(r, c))

def norm(A: Tensor, ord=None, dim=None, keepdim: bool = False) -> Tensor:
  """torch.linalg.norm: a vector norm over one dim (or the flattened tensor where ord and dim are None), a matrix
  norm over two (or a 2-d tensor's, where ord is given and dim is None)."""
  if isinstance(dim, int) or (dim is None and (ord is None or A.ndim == 1)):
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim)
  if dim is None:
    if A.ndim != 2: raise ValueError(f"linalg.norm: with ord={ord!r} and no dim, the input must be 1-D or 2-D, got shape {tuple(A.shape)}")
    dim = (-2, -1)
  return matrix_norm(A, "fro" if ord is None else ord, dim, keepdim)

def matrix_power(A: Tensor, n: int) -> Tensor:
  """A^n by repeated squaring; A^-n is inv(A)^n; A^0 the identity."""
  size = _square(A, "linalg.matrix_power")
  if isinstance(n, bool) or not isinstance(n, int): raise TypeError(f"linalg.matrix_power: n must be an int, got {n!r}")
  base, out = (inv(A) if n < 0 else A), None
  for bit in bin(abs(n))[2:]:   # the most significant bit first
    out = out @ out if out is not None else None
    if bit == "1": out = base if out is None else out @ base
  return out if out is not None else Tensor.eye(size, dtype=A.dtype, device=A.device).expand(A.shape)

def multi_dot(tensors) -> Tensor:
  """The product of a chain of matrices (the first and last may be vectors), multiplied in the order that costs the
  fewest multiply-adds, as torch.linalg.multi_dot orders it."""
  ts = list(tensors)
  if len(ts) < 2: raise ValueError(f"linalg.multi_dot: expected at least 2 tensors, got {len(ts)}")
  first, last = ts[0].ndim == 1, ts[-1].ndim == 1
  ts = [ts[0].unsqueeze(0) if first else ts[0], *ts[1:-1], ts[-1].unsqueeze(-1) if last else ts[-1]]
  for i, t in enumerate(ts):
    if t.ndim != 2: raise ValueError(f"linalg.multi_dot: tensor {i} must be 2-D (the first and last may be 1-D), got shape {tuple(t.shape)}")
  dims = [ts[0].shape[0]] + [t.shape[1] for t in ts]
  n = len(ts)
  cost = [[0] * n for _ in range(n)]
  split = [[0] * n for _ in range(n)]
  for length in range(1, n):   # the matrix-chain order: cost[i][j] the fewest multiply-adds for ts[i..j]
    for i in range(n - length):
      j = i + length
      cost[i][j], split[i][j] = min((cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1], k) for k in range(i, j))
  def product(i: int, j: int) -> Tensor: return ts[i] if i == j else product(i, split[i][j]) @ product(split[i][j] + 1, j)
  out = product(0, n - 1)
  return out.squeeze(0).squeeze(-1) if first and last else out.squeeze(0) if first else out.squeeze(-1) if last else out

def vecdot(x: Tensor, y: Tensor, *, dim: int = -1) -> Tensor:
  return (x * y).sum(dim)

def diagonal(A: Tensor, *, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
  """torch.linalg.diagonal: torch.diagonal over the last two dims by default."""
  return A.diagonal(offset, dim1, dim2)

# ---- symmetric eigendecomposition: parallel cyclic Jacobi
EighResult = namedtuple("EighResult", ["eigenvalues", "eigenvectors"])
JACOBI_SWEEPS = 10   # each sweep rotates every pair once; the off-diagonal mass falls quadratically once small

def _round_robin(n: int) -> list:
  """n - 1 rounds (n even) in which every pair of 0..n-1 meets once, each round n/2 disjoint pairs."""
  ring, rounds = list(range(n)), []
  for _ in range(n - 1):
    rounds.append([(ring[i], ring[n - 1 - i]) for i in range(n // 2)])
    ring = [ring[0], ring[-1], *ring[1:-1]]
  return rounds

def eigh(A: Tensor, UPLO: str = "L") -> EighResult:
  """Eigenvalues (ascending) and orthonormal eigenvectors (columns) of symmetric matrices, from their lower (UPLO
  'L') or upper triangle: parallel cyclic Jacobi, each round n/2 disjoint rotations applied as one orthogonal matrix
  (built from one-hot pair matrices, so nothing is read back), JACOBI_SWEEPS sweeps of n - 1 rounds. Each column's
  sign is as the iteration leaves it; torch's differ by a sign per column (the decomposition is unique up to one)."""
  n = _square(A, "linalg.eigh")
  if UPLO not in ("L", "U"): raise ValueError(f"linalg.eigh: UPLO must be 'L' or 'U', got {UPLO!r}")
  from alloy.triangular import tril, triu
  half = tril(A) if UPLO == "L" else triu(A)
  S = half + (tril(A, -1) if UPLO == "L" else triu(A, 1)).transpose(-1, -2)
  m = n + n % 2   # an odd size gets an isolated extra row and column, which no rotation touches (its pair's a_pq is 0)
  if m != n:
    S = S.cat(S.zeros_like()[..., :, :1], dim=-1)
    S = S.cat(S.zeros_like()[..., :1, :], dim=-2)
  V = Tensor.eye(m, dtype=A.dtype, device=A.device).expand(S.shape)
  rounds = []
  for pairs in _round_robin(m):
    mp, mq = (np.zeros((m, m // 2), dtype=A.dtype.np) for _ in range(2))
    for i, (p, q) in enumerate(pairs): mp[p, i], mq[q, i] = 1, 1
    rounds.append(tuple(Tensor(x, device=A.device) for x in (mp, mq)))
  for _ in range(JACOBI_SWEEPS if m > 1 else 0):
    for mp, mq in rounds:
      a_p, a_q = S @ mp, S @ mq
      pp, qq, pq = (mp * a_p).sum(-2), (mq * a_q).sum(-2), (mp * a_q).sum(-2)   # (..., m/2)
      off = pq != 0
      tau = (qq - pp) / (2 * where(off, pq, 1.0))
      t = where(off, where(tau >= 0, 1.0, -1.0) / (tau.abs() + (tau * tau + 1).sqrt()), 0.0)
      c = (t * t + 1).rsqrt().unsqueeze(-2)
      s = (t.unsqueeze(-2) * c)
      J = (mp * c) @ mp.T + (mq * c) @ mq.T + (mp * s) @ mq.T - (mq * s) @ mp.T
      S = J.transpose(-1, -2) @ S @ J
      V = V @ J
      realize_all([S, V])
  values = S.diagonal(0, -2, -1)
  if m != n: values, V = values[..., :n], V[..., :n, :n]
  values, order = values.sort(-1)
  cols = Tensor.arange(n, device=A.device)
  return EighResult(values, V @ (order.unsqueeze(-2) == cols.unsqueeze(-1)).cast(A.dtype))

def eigvalsh(A: Tensor, UPLO: str = "L") -> Tensor:
  return eigh(A, UPLO).eigenvalues
