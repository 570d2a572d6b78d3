"""LU factorization with partial pivoting and the triangular solves (torch.linalg's lu_factor, lu, lu_solve,
solve_triangular; torch's cholesky_solve and cholesky_inverse). lu_factor is elimination.py's elimination keeping each
column's multipliers below its pivot, so LU and pivots are LAPACK's packed form (pivots 1-based, int32, each step's
row swap). A triangular solve is substitution, one row a step (a select against k, so one kernel serves every step),
reading only A's triangle; a zero on the diagonal gives inf or nan, as torch's solve_triangular does."""
from __future__ import annotations
from collections import namedtuple
from alloy import dtype as dt
from alloy.linalg.common import check_matrices, check_square, permutation_matrix, row_of
from alloy.linalg.elimination import eliminate
from alloy.tensor import Tensor, broadcast_shape, where

LUFactorResult = namedtuple("LUFactorResult", ["LU", "pivots"])
LUResult = namedtuple("LUResult", ["P", "L", "U"])

def lu_factor(A: Tensor, *, pivot: bool = True) -> LUFactorResult:
  """A = P L U packed: U on and above the diagonal, L's multipliers below it (its unit diagonal implied), and the
  1-based row each step swapped in."""
  check_matrices(A, "linalg.lu_factor")
  if not pivot: raise NotImplementedError("linalg.lu_factor: pivot=False (LU without pivoting) is not supported; it is unstable")
  k = min(A.shape[-2:])
  if k == 0: return LUFactorResult(A, Tensor.zeros(*A.shape[:-2], 0, dtype=dt.int32, device=A.device))
  LU, _, _, swaps = eliminate(A, k, False, keep_l=True)
  return LUFactorResult(LU, (swaps + 1).cast(dt.int32))

def _pivot_matrix(pivots: Tensor, m: int, like: Tensor) -> Tensor:
  """The m x m matrix P (like's dtype) with A = P L U for LAPACK pivots: the identity's rows swapped step by step."""
  rows = Tensor.arange(m, dtype=dt.int32, device=like.device)
  order = rows.expand(*pivots.shape[:-1], m)   # order[i]: the original row now at place i
  for k in range(pivots.shape[-1]):
    p = (pivots[..., k:k + 1] - 1).cast(dt.int32)
    at_k, at_p = (where(rows == j, order, 0).sum(-1, keepdim=True) for j in (k, p))
    order = where(rows == k, at_p, where(rows == p, at_k, order))
  return permutation_matrix(order, m).cast(like.dtype)   # P[order[j], j] = 1: row j of P L U is A's row order[j]

def lu(A: Tensor, *, pivot: bool = True) -> LUResult:
  """P (m x m), L (m x k, unit lower) and U (k x n) with A = P L U, k = min(m, n)."""
  LU, pivots = lu_factor(A, pivot=pivot)
  m, n = A.shape[-2:]
  k = min(m, n)
  from alloy.triangular import tril, triu
  L = tril(LU[..., :, :k], -1) + Tensor.eye(m, k, dtype=A.dtype, device=A.device)
  return LUResult(_pivot_matrix(pivots, m, A), L, triu(LU[..., :k, :]))

def solve_triangular(A: Tensor, B: Tensor, *, upper: bool, left: bool = True, unitriangular: bool = False) -> Tensor:
  """X with A X = B (left) or X A = B, A triangular (only its upper or lower triangle is read; unitriangular: its
  diagonal taken as ones); batch dims broadcast."""
  n = check_square(A, "linalg.solve_triangular")
  if not isinstance(B, Tensor) or B.ndim < 2: raise ValueError(f"linalg.solve_triangular: B must be a tensor of at least 2 dimensions, got {B!r}")
  if B.dtype is not A.dtype: raise TypeError(f"linalg.solve_triangular: A and B must have one dtype, got {A.dtype.name} and {B.dtype.name}")
  if not left:   # X A = B is A^T X^T = B^T, the triangle flipped
    return solve_triangular(A.transpose(-1, -2), B.transpose(-1, -2), upper=not upper, unitriangular=unitriangular).transpose(-1, -2)
  if B.shape[-2] != n: raise ValueError(f"linalg.solve_triangular: A is {n} x {n} and B has {B.shape[-2]} rows, for A X = B")
  batch = broadcast_shape(tuple(A.shape[:-2]), tuple(B.shape[:-2]))
  A, B = A.expand(*batch, n, n), B.expand(*batch, *B.shape[-2:])
  rows = Tensor.arange(n, dtype=dt.int32, device=A.device)
  X = B.zeros_like()
  for k in (reversed(range(n)) if upper else range(n)):
    a = row_of(A, rows, k)   # (..., 1, n)
    done = rows > k if upper else rows < k
    rhs = row_of(B, rows, k) - where(done, a, 0.0) @ X
    x = rhs if unitriangular else rhs / where(rows == k, a, 0.0).sum(-1, keepdim=True)
    X = where((rows == k).unsqueeze(-1), x, X)
    X.realize()
  return X

def lu_solve(LU: Tensor, pivots: Tensor, B: Tensor, *, left: bool = True, adjoint: bool = False) -> Tensor:
  """X with A X = B (or X A = B; adjoint: A^H in place of A) from lu_factor's LU and pivots."""
  n = check_square(LU, "linalg.lu_solve")
  P = _pivot_matrix(pivots, n, LU)
  if not left:   # X A = B is A^T X^T = B^T
    return lu_solve(LU, pivots, B.transpose(-1, -2), adjoint=not adjoint).transpose(-1, -2)
  if adjoint:    # A^T = U^T L^T P^T: solve U^T, then L^T, then apply P
    Y = solve_triangular(LU.transpose(-1, -2), B, upper=False)
    return P @ solve_triangular(LU.transpose(-1, -2), Y, upper=True, unitriangular=True)
  Y = solve_triangular(LU, P.transpose(-1, -2) @ B, upper=False, unitriangular=True)
  return solve_triangular(LU, Y, upper=True)

def cholesky_solve(B: Tensor, L: Tensor, upper: bool = False) -> Tensor:
  """X with A X = B for A = L L^T (upper: A = U^T U), from its Cholesky factor."""
  if upper: return solve_triangular(L, solve_triangular(L.transpose(-1, -2), B, upper=False), upper=True)
  return solve_triangular(L.transpose(-1, -2), solve_triangular(L, B, upper=False), upper=True)

def cholesky_inverse(L: Tensor, upper: bool = False) -> Tensor:
  """A^-1 for A = L L^T (upper: U^T U), from its Cholesky factor."""
  n = check_square(L, "cholesky_inverse")
  return cholesky_solve(Tensor.eye(n, dtype=L.dtype, device=L.device).expand(L.shape), L, upper)

