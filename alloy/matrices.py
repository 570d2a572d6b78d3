"""Matrix products and diagonals with PyTorch's signatures: mm, bmm, mv, outer, inner, addmm, baddbmm, addmv,
tensordot, kron (all through matmul, broadcasting and reshapes, so they fuse as matmul does), cdist (a fused
reduction), diagonal and trace (a
view reading only the diagonal), diag and diag_embed (a select against the diagonal's positions)."""
from __future__ import annotations
from alloy.tensor import Tensor, where, norm_axis
from alloy.rearrange import movedim

def _ranks(op: str, *pairs) -> None:
  for name, t, want in pairs:
    if not isinstance(t, Tensor): raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
    if t.ndim != want: raise ValueError(f"{op}: {name} must be {want}-D, got shape {t.shape}")

def mm(input: Tensor, mat2: Tensor) -> Tensor:
  _ranks("mm", ("input", input, 2), ("mat2", mat2, 2))
  return input.matmul(mat2)

def bmm(input: Tensor, mat2: Tensor) -> Tensor:
  _ranks("bmm", ("input", input, 3), ("mat2", mat2, 3))
  if input.shape[0] != mat2.shape[0]: raise ValueError(f"bmm: batch sizes differ: {input.shape} and {mat2.shape}")
  return input.matmul(mat2)

def mv(input: Tensor, vec: Tensor) -> Tensor:
  _ranks("mv", ("input", input, 2), ("vec", vec, 1))
  return input.matmul(vec)

def outer(input: Tensor, vec2: Tensor) -> Tensor:
  _ranks("outer", ("input", input, 1), ("vec2", vec2, 1))
  return input.unsqueeze(1) * vec2.unsqueeze(0)

def inner(input: Tensor, other: Tensor) -> Tensor:
  """torch.inner: sums over the last dims; the result has input's other dims, then other's."""
  if input.ndim == 0 or other.ndim == 0: return input * other
  if input.shape[-1] != other.shape[-1]: raise ValueError(f"inner: the last dims differ: {input.shape} and {other.shape}")
  k = input.shape[-1]
  return (input.reshape(-1, k) @ other.reshape(-1, k).T).reshape(input.shape[:-1] + other.shape[:-1])

def addmm(input: Tensor, mat1: Tensor, mat2: Tensor, *, beta=1, alpha=1) -> Tensor:
  """beta * input + alpha * (mat1 @ mat2), input broadcast; beta 0 ignores input (nan included), as PyTorch."""
  return _scaled_sum(input, mm(mat1, mat2), beta, alpha)

def baddbmm(input: Tensor, batch1: Tensor, batch2: Tensor, *, beta=1, alpha=1) -> Tensor:
  return _scaled_sum(input, bmm(batch1, batch2), beta, alpha)

def addmv(input: Tensor, mat: Tensor, vec: Tensor, *, beta=1, alpha=1) -> Tensor:
  return _scaled_sum(input, mv(mat, vec), beta, alpha)

def _scaled_sum(input: Tensor, product: Tensor, beta, alpha) -> Tensor:
  product = product if alpha == 1 else product * alpha
  if beta == 0: return product + input.zeros_like()   # input's shape broadcast, its nan and inf not propagated
  return product + (input if beta == 1 else input * beta)

def tensordot(a: Tensor, b: Tensor, dims=2) -> Tensor:
  """torch.tensordot: a's dims dims[0] contracted with b's dims[1] (an int n: a's last n with b's first n)."""
  if isinstance(dims, int):
    if dims < 0: raise ValueError(f"tensordot: dims must be non-negative, got {dims}")
    da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
  else: da, db = [[norm_axis(d, t.ndim) for d in (ds if isinstance(ds, (tuple, list)) else (ds,))] for ds, t in zip(dims, (a, b))]
  if len(da) != len(db) or any(a.shape[i] != b.shape[j] for i, j in zip(da, db)):
    raise ValueError(f"tensordot: the contracted dims of {a.shape} ({da}) and {b.shape} ({db}) differ")
  ra, rb = [d for d in range(a.ndim) if d not in da], [d for d in range(b.ndim) if d not in db]
  k = 1
  for d in da: k *= a.shape[d]
  left = a.permute(*ra, *da).reshape(-1, k)
  right = b.permute(*db, *rb).reshape(k, -1)
  return (left @ right).reshape(tuple(a.shape[d] for d in ra) + tuple(b.shape[d] for d in rb))

def kron(a: Tensor, b: Tensor) -> Tensor:
  """torch.kron: the Kronecker product; the lower-rank operand gets leading ones."""
  n = max(a.ndim, b.ndim)
  a, b = a.reshape((1,) * (n - a.ndim) + a.shape), b.reshape((1,) * (n - b.ndim) + b.shape)
  inter = lambda t, first: t.reshape(tuple(x for s in t.shape for x in ((s, 1) if first else (1, s))))
  return (inter(a, True) * inter(b, False)).reshape(tuple(p * q for p, q in zip(a.shape, b.shape)))

def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
  """torch.diagonal: the entries [i, i + offset] of dims dim1 and dim2, as a last dim (a view: a square block of L x L
  laid flat and read every L + 1 entries)."""
  d1, d2 = norm_axis(dim1, input.ndim), norm_axis(dim2, input.ndim)
  if d1 == d2: raise ValueError(f"diagonal: dim1 and dim2 must differ, got {dim1} and {dim2}")
  x = movedim(input, (d1, d2), (-2, -1))
  rows, cols = x.shape[-2:]
  lead = ((0, s) for s in x.shape[:-2])
  r0, c0 = (0, offset) if offset >= 0 else (-offset, 0)
  n = max(0, min(rows - r0, cols - c0))
  x = x.shrink(tuple(lead) + ((min(r0, rows), min(r0, rows) + n), (min(c0, cols), min(c0, cols) + n)))
  if n <= 1: return x.reshape(x.shape[:-2] + (n,))
  flat = x.reshape(x.shape[:-2] + (n * n,))
  return flat.pad(((0, 0),) * (flat.ndim - 1) + ((0, n),)).reshape(x.shape[:-2] + (n, n + 1))[..., 0]

def trace(input: Tensor) -> Tensor:
  _ranks("trace", ("input", input, 2))
  return diagonal(input).sum()

def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
  """torch.diag_embed: input's last dim on the offset diagonal of new dims dim1, dim2 (zeros elsewhere)."""
  n = input.shape[-1]
  size = n + abs(offset)
  rows = Tensor.arange(size, device=input.device).reshape(size, 1)
  cols = Tensor.arange(size, device=input.device).reshape(1, size)
  on = cols - rows == offset
  # entry (r, c) of the diagonal is input[min(r, c)]: pad input to size so both offsets index it alike
  vals = input.pad(((0, 0),) * (input.ndim - 1) + ((0, abs(offset)),))
  by_row = vals.unsqueeze(-1) if offset >= 0 else vals.unsqueeze(-2)   # offset >= 0: the row's entry, else the column's
  out = where(on, by_row, 0)
  nd = out.ndim
  return movedim(out, (nd - 2, nd - 1), (norm_axis(dim1, nd), norm_axis(dim2, nd)))

_diagonal_of = diagonal   # diag's argument takes the name

def diag(input: Tensor, diagonal: int = 0) -> Tensor:
  """torch.diag: a vector onto the diagonal of a square matrix, or a matrix's diagonal as a vector."""
  if input.ndim == 1: return diag_embed(input, diagonal)
  if input.ndim == 2: return _diagonal_of(input, diagonal)
  raise ValueError(f"diag: expects a 1-D or 2-D tensor, got shape {input.shape}")

def cdist(x1: Tensor, x2: Tensor, p: float = 2.0, compute_mode=None) -> Tensor:
  """torch.cdist: the p-norm distance between each row of x1 (..., P, M) and each of x2 (..., R, M), (..., P, R),
  computed directly (a fused reduction over M, exact where the matmul form cancels). Where two rows are equal the
  gradient is 0, as PyTorch's, not the nan of the root's derivative at 0."""
  if x1.ndim < 2 or x2.ndim < 2 or x1.shape[-1] != x2.shape[-1]:
    raise ValueError(f"cdist: expects (..., P, M) and (..., R, M) with the same M, got {x1.shape} and {x2.shape}")
  if p < 0: raise ValueError(f"cdist: p must be non-negative, got {p}")
  d = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs()
  if p == 0: return (d != 0).cast(x1.dtype).sum(-1)
  if p == float("inf"): return d.amax(-1)
  if p == 1: return d.sum(-1)
  s = (d * d if p == 2 else d ** p).sum(-1)
  zero = s == 0
  root = where(zero, 1.0, s)   # the root's derivative is infinite at 0: it never sees 0
  return where(zero, 0.0, root.sqrt() if p == 2 else root ** (1.0 / p))

def cross(input: Tensor, other: Tensor, dim=None) -> Tensor:
  """torch.cross: the cross product of 3-vectors along dim (None: the first dim of size 3, as torch.cross; -1 is
  torch.linalg.cross's), input and other broadcast."""
  from alloy.tensor import broadcast_shape
  shape = broadcast_shape(input.shape, other.shape)
  if dim is None: dim = next((k for k, s in enumerate(shape) if s == 3), None)
  if dim is None or shape[norm_axis(dim, len(shape))] != 3:
    raise ValueError(f"cross: expected a dim of size 3, got shapes {input.shape} and {other.shape}")
  a, b = input.expand(*shape), other.expand(*shape)
  d = norm_axis(dim, len(shape))
  # (a1 b2 - a2 b1, a2 b0 - a0 b2, a0 b1 - a1 b0): a rolled by -1 times b rolled by -2, minus the other way
  return a.roll(-1, d) * b.roll(-2, d) - a.roll(-2, d) * b.roll(-1, d)
