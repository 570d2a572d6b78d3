"""torch.linalg's norms and products, compositions of the Tensor ops: matrix_norm and norm (vector_norm is
alloy.vector_norm's; the spectral and nuclear norms from the singular values), cond, matrix_power, multi_dot, vecdot and
diagonal."""
from __future__ import annotations
from alloy.linalg.common import check_matrices, check_square
from alloy.linalg.elimination import inv, inv_ex
from alloy.linalg.jacobi import svdvals
from alloy.tensor import Tensor, where
from alloy.vector_norm import vector_norm

def matrix_norm(A: Tensor, ord="fro", dim=(-2, -1), keepdim: bool = False) -> Tensor:
  """'fro'; the largest (1, inf) or least (-1, -inf) absolute column (1) or row (inf) sum over the two dims; the largest
  (2) or least (-2) singular value, or their sum ('nuc')."""
  check_matrices(A, "linalg.matrix_norm")
  if not (isinstance(dim, (tuple, list)) and len(dim) == 2): raise ValueError(f"linalg.matrix_norm: dim must be a 2-tuple, got {dim!r}")
  r, c = (d % A.ndim for d in dim)
  if r == c: raise ValueError(f"linalg.matrix_norm: dims must be different, got {dim!r}")
  if ord == "fro": return vector_norm(A, 2, (r, c), keepdim)
  if ord in (2, -2, "nuc"):
    sv = svdvals(A.movedim((r, c), (-2, -1)))
    out = sv.sum(-1) if ord == "nuc" else sv[..., 0] if ord == 2 else sv[..., -1]
    return out.unsqueeze(min(r, c)).unsqueeze(max(r, c)) if keepdim else out
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
  size = check_square(A, "linalg.matrix_power")
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


def cond(A: Tensor, p=None) -> Tensor:
  """The condition number in the p-norm: the ratio of the extreme singular values for p None, 2 or -2, else
  matrix_norm(A, p) * matrix_norm(inv(A), p) (square A), inf where A is singular, as torch.linalg.cond."""
  check_matrices(A, "linalg.cond")
  if p in (None, 2, -2):
    sv = svdvals(A)
    big, small = sv[..., 0], sv[..., -1]
    return big / small if p != -2 else small / big
  check_square(A, "linalg.cond")
  inverse, info = inv_ex(A)
  return where(info != 0, float("inf"), matrix_norm(A, p) * matrix_norm(where((info != 0).unsqueeze(-1).unsqueeze(-1), 0.0, inverse), p))
