"""What every alloy.linalg function shares: the input checks, torch.linalg's LinAlgError and how it is raised (the
first bad column read on the host eagerly, as torch's linalg syncs for it; on the device under @jit), and a matrix's
column or row taken by a select against k rather than a slice at k, so that k is a kernel argument and one compiled
kernel serves every step of an elimination."""
from __future__ import annotations
from alloy import dtype as dt
from alloy.bounds import in_bounds
from alloy.tensor import Tensor, where

class LinAlgError(RuntimeError):
  """A matrix the function cannot take: singular (inv, solve) or not positive-definite (cholesky); torch.linalg's."""

def check_matrices(A, op: str) -> None:
  if not isinstance(A, Tensor): raise TypeError(f"{op}: expected a Tensor, got {type(A).__name__}")
  if A.ndim < 2: raise ValueError(f"{op}: the input tensor A must have at least 2 dimensions, got shape {tuple(A.shape)}")
  if A.dtype not in (dt.float32, dt.float64): raise TypeError(f"{op}: expected a float32 or float64 tensor, got {A.dtype.name}")

def check_square(A, op: str) -> int:
  check_matrices(A, op)
  if A.shape[-1] != A.shape[-2]: raise ValueError(f"{op}: A must be batches of square matrices, but they are {A.shape[-2]} by {A.shape[-1]} matrices")
  return A.shape[-1]

def first_bad(where_bad: Tensor, n: int) -> Tensor:
  """The least column k where where_bad (..., n) holds in any matrix, or n where it holds nowhere (a 0-d tensor)."""
  cols = Tensor.arange(n, dtype=dt.int32, device=where_bad.device)
  return where(where_bad, cols, n).min()

def raise_at(first: Tensor, n: int, error) -> None:
  """error(k) for the first bad column k, unless there is none (first == n)."""
  in_bounds(first, n, n + 1, error, deferred=False)   # torch syncs to raise these too

def column_of(M: Tensor, cols: Tensor, k: int) -> Tensor:
  """M[..., :, k] as a select over the columns: k is then a kernel argument, and one compiled kernel serves every step."""
  return where(cols == k, M, 0.0).sum(-1)

def row_of(M: Tensor, rows: Tensor, k: int) -> Tensor:
  """M[..., k:k+1, :], as column_of takes a column."""
  return where((rows == k).unsqueeze(-1), M, 0.0).sum(-2, keepdim=True)


def permutation_matrix(order: Tensor, n: int) -> Tensor:
  """The one-hot matrix P (booleans) with (M @ P)[..., j] = M[..., order[j]]: columns reordered by a matmul, nothing
  read back."""
  return order.unsqueeze(-2) == Tensor.arange(n, device=order.device).unsqueeze(-1)
