"""Reading at indices along one dimension: gather, take_along_dim, index_select, one_hot, embedding, masked_scatter
(PyTorch's signatures). Each forward is one GATHER node (a lazy read at computed addresses: no copy of the input).

Indices given by the user are checked as getitem checks its own (alloy/bounds.py: read on the host at once
or at the next host read, or under a @jit capture after each call). Internal callers whose indices are in range by
construction (sort, topk) use `take` and skip that.

Backward: the gradient of a read at indices is a scatter-add of the output gradient at the same indices
(alloy/scatter_sum.py: one dense kernel for short rows, else sorted by index, O(n log^2 n + size(dim) log n)).
"""
from __future__ import annotations
import numpy as np
from alloy import dtype as dt, autograd
from alloy.bounds import check_index, in_bounds
from alloy.ir.node import Node
from alloy.ir.ops import Op
from alloy.ir.symbolic import INT32_MAX
from alloy.tensor import Tensor, broadcast_shape, where, norm_axis

def _index_arg(index, what: str, device: str) -> Tensor:
  if not isinstance(index, Tensor): index = Tensor(np.asarray(index), device=device)
  if not index.dtype.is_int:
    raise TypeError(f"{what}: index must be an integer tensor, got {index.dtype.name}")
  if index.device != device: raise ValueError(f"{what}: index is on {index.device}, the input on {device}")
  return index

def _positions(n: int, device: str) -> Tensor: return Tensor.arange(n, dtype=dt.int32, device=device)

def positions_along(shape: tuple, dim: int, device: str) -> list:
  """For take: each axis but dim's own position, broadcast to shape (None at dim); a caller taking many times with
  one shape builds them once."""
  return [None if a == dim else _positions(n, device).reshape(tuple(n if b == a else 1 for b in range(len(shape)))).expand(shape)
          for a, n in enumerate(shape)]

def take(x: Tensor, dim: int, index: Tensor, others: list | None = None) -> Tensor:
  """out[..., i, ...] = x[..., index[..., i, ...], ...]: index has x's rank and is at most x's size in the other dims,
  every value in [0, x.shape[dim]) (unchecked). `others`: positions_along(index.shape, dim). No autograd: callers
  record their own rule."""
  shape = index.shape
  if 0 in shape: return Tensor.zeros(*shape, dtype=x.dtype, device=x.device)
  picks = others or positions_along(shape, dim, x.device)
  picks = [index.cast(dt.int32 if x.shape[dim] <= INT32_MAX else dt.int64) if a == dim else p for a, p in enumerate(picks)]
  return x._new(Node(Op.GATHER, (x.node, *[p.node for p in picks]), tuple(range(x.ndim)), x.dtype, shape))

def one_hot_along(index: Tensor, dim: int, size: int, dtype) -> Tensor:
  """A new axis of `size` after dim: 1 where it equals index there, else 0 (lazy, never stored)."""
  shape = tuple(size if b == dim + 1 else 1 for b in range(index.ndim + 1))
  return (index.unsqueeze(dim + 1) == _positions(size, index.device).reshape(shape)).cast(dtype)

def _take_rule(out, g, dim, index, in_shape):
  from alloy.scatter_sum import scatter_add_rows
  return (scatter_add_rows(in_shape, dim, index, g),)

def read_at(x: Tensor, dim: int, index: Tensor) -> Tensor:
  """take, with its gradient (a scatter-add of the output's back to the indices): for indices in range by
  construction or already checked."""
  out = take(x.detach(), dim, index)
  return autograd.record(out, _take_rule, (x,), dim, index, x.shape) if x._ag is not None else out

def gather(input: Tensor, dim: int, index, *, sparse_grad: bool = False) -> Tensor:
  """torch.gather: out[i][j][k] = input[i][index[i][j][k]][k] for dim 1; index has input's rank and at most its
  size in every other dim."""
  if sparse_grad: raise NotImplementedError("gather: sparse_grad=True is not supported (alloy has no sparse tensors)")
  index = _index_arg(index, "gather", input.device)
  if index.ndim != input.ndim and not (index.ndim <= 1 and input.ndim <= 1):
    raise ValueError(f"gather: index has {index.ndim} dims, the input {input.ndim}; they must match")
  x = input.reshape(1) if input.ndim == 0 else input
  idx = index.reshape(1) if index.ndim == 0 else index
  d = norm_axis(dim, x.ndim)
  for a, (n, s) in enumerate(zip(idx.shape, x.shape)):
    if a != d and n > s: raise ValueError(f"gather: index {tuple(index.shape)} is larger than the input {tuple(input.shape)} in dim {a}")
  idx = check_index(idx, x.shape[d], "gather", d)
  out = read_at(x, d, idx)
  return out.reshape(index.shape) if index.ndim == 0 else out

def take_along_dim(input: Tensor, indices, dim=None) -> Tensor:
  """torch.take_along_dim: gather after broadcasting input and indices against each other (except along dim);
  with dim None, over the flattened input."""
  indices = _index_arg(indices, "take_along_dim", input.device)
  if dim is None: return gather(input.flatten(), 0, indices.flatten())
  if indices.ndim != input.ndim:
    raise ValueError(f"take_along_dim: input and indices must have the same number of dims, got {input.ndim} and {indices.ndim}")
  d = norm_axis(dim, input.ndim)
  rest = broadcast_shape(*[tuple(1 if a == d else s for a, s in enumerate(t.shape)) for t in (input, indices)])
  x = input.expand(tuple(input.shape[d] if a == d else s for a, s in enumerate(rest)))
  return gather(x, d, indices.expand(tuple(indices.shape[d] if a == d else s for a, s in enumerate(rest))))

def _select_rule(out, g, dim, index, in_shape):
  """g has the input's shape with len(index) at dim: its slices added back at their indices."""
  from alloy.scatter_sum import scatter_add_slices
  moved = scatter_add_slices(in_shape[dim], index, g.transpose(0, dim) if dim else g)
  return (moved.transpose(0, dim) if dim else moved,)

def index_select(input: Tensor, dim: int, index) -> Tensor:
  """torch.index_select: the entries at a 1-D (or 0-d) index along dim."""
  index = _index_arg(index, "index_select", input.device)
  if index.ndim > 1: raise ValueError(f"index_select: index must be 0-d or 1-D, got shape {tuple(index.shape)}")
  x = input.reshape(1) if input.ndim == 0 else input
  d = norm_axis(dim, x.ndim)
  idx = index.reshape(-1)
  idx = check_index(idx, x.shape[d], "index_select", d)
  if idx.numel() == 0: out = Tensor.zeros(*(0 if a == d else s for a, s in enumerate(x.shape)), dtype=x.dtype, device=x.device)
  else:
    moved = x.detach().transpose(0, d) if d else x.detach()
    picked = moved._new(Node(Op.GATHER, (moved.node, idx.cast(dt.int32 if x.shape[d] <= INT32_MAX else dt.int64).node), (0,),
                             x.dtype, idx.shape + moved.shape[1:]))
    out = picked.transpose(0, d) if d else picked
  if input._ag is not None: out = autograd.record(out, _select_rule, (x,), d, idx, x.shape)
  return out.reshape(()) if input.ndim == 0 else out

def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
  """torch.nn.functional.one_hot: int64, a last axis of num_classes (max + 1 when -1; that reads the values)."""
  if not isinstance(tensor, Tensor) or not tensor.dtype.is_int:
    raise TypeError(f"one_hot: expected an integer tensor, got {getattr(tensor.dtype, 'name', type(tensor).__name__)}")
  vals = tensor.numpy() if tensor.numel() else np.zeros(0, np.int64)
  if vals.size and vals.min() < 0: raise ValueError(f"one_hot: class values must be non-negative, got {vals.min()}")
  if num_classes == -1:
    if not vals.size: raise ValueError("one_hot: cannot infer num_classes of an empty tensor; pass num_classes")
    num_classes = int(vals.max()) + 1
  if num_classes < 1: raise ValueError(f"one_hot: num_classes must be positive or -1, got {num_classes}")
  if vals.size and vals.max() >= num_classes:
    raise ValueError(f"one_hot: class value {vals.max()} is not smaller than num_classes {num_classes}")
  return one_hot_along(tensor, tensor.ndim - 1, num_classes, dt.int64)

def embedding(input: Tensor, weight: Tensor, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False) -> Tensor:
  """torch.nn.functional.embedding: weight's rows at input's indices; the padding_idx row gets no gradient."""
  if max_norm is not None: raise NotImplementedError("embedding: max_norm (renormalizing weight in place) is not supported yet")
  if scale_grad_by_freq or sparse: raise NotImplementedError("embedding: scale_grad_by_freq and sparse are not supported")
  if not isinstance(weight, Tensor) or weight.ndim != 2:
    raise ValueError(f"embedding: weight must be a 2-D Tensor, got {getattr(weight, 'shape', weight)}")
  input = _index_arg(input, "embedding", weight.device)
  if padding_idx is not None:
    if not -weight.shape[0] <= padding_idx < weight.shape[0]:
      raise ValueError(f"embedding: padding_idx {padding_idx} is out of range for {weight.shape[0]} rows")
    padding_idx %= weight.shape[0]
  rows = index_select(weight, 0, input.reshape(-1)).reshape(input.shape + (weight.shape[1],))
  if padding_idx is None or weight._ag is None: return rows
  return where((input == padding_idx).unsqueeze(-1), rows.detach(), rows)   # the same values; no gradient at padding

def masked_scatter(input: Tensor, mask: Tensor, source: Tensor) -> Tensor:
  """torch.masked_scatter: input with the positions where mask (broadcast) is True taken, in order, from source's
  leading elements. Each position's place in source is the running count of Trues before it (on the device); a source
  with fewer elements than Trues is an IndexError, checked as an index (alloy/bounds.py: read on the host at once or at
  the next host read, or under @jit after each call). Gradients go to input where mask is False and to the source elements taken."""
  if not mask.dtype.is_bool: raise TypeError(f"masked_scatter: mask must be a bool tensor, got {mask.dtype.name}")
  if source.dtype != input.dtype: raise TypeError(f"masked_scatter: source has dtype {source.dtype.name}, input {input.dtype.name}")
  shape = broadcast_shape(input.shape, mask.shape)
  m = mask.expand(*shape).reshape(-1)
  flat = source.reshape(-1)
  running = m.cast(dt.int32).cumsum(0)   # its last entry is the count of Trues
  def error(bad): return IndexError(f"masked_scatter: the mask has {bad} True entries, the source only {flat.numel()} elements")
  in_bounds(running[-1:], 0, flat.numel() + 1, error)
  if flat.numel() == 0: return input.expand(*shape) + 0
  at = (running - 1).maximum(0).minimum(flat.numel() - 1)
  picked = read_at(flat, 0, at)
  return where(m.reshape(shape), picked.reshape(shape), input.expand(*shape))
