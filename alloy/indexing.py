"""Tensor.__getitem__: ints, slices (any step), None, Ellipsis, integer tensors (gather) and boolean masks."""
from __future__ import annotations
import numpy as np
from alloy import dtype as dt, autograd
from alloy.ir.node import Node
from alloy.ir.ops import Op
from alloy.scalar import plain
from alloy.bounds import check_values, in_bounds
from alloy.helpers import remember
from alloy.ir.symbolic import INT32_MAX

def _is_advanced(x) -> bool:
  from alloy.tensor import Tensor
  return isinstance(x, (Tensor, list, np.ndarray))

def _is_mask(x) -> bool:
  from alloy.tensor import Tensor
  if isinstance(x, Tensor): return x.dtype.is_bool
  if isinstance(x, np.ndarray): return x.dtype == np.bool_
  return isinstance(x, list) and len(x) > 0 and all(isinstance(v, (bool, np.bool_)) for v in np.asarray(x, dtype=object).flat)

def _expand_masks(t, idx: tuple) -> tuple:
  """A boolean mask index stands for the integer arrays of its True positions (NumPy's and PyTorch's rule), over
  as many dims as it has. Its values are read on the host (the result's shape depends on them, as in PyTorch)."""
  from alloy.tensor import Tensor
  real = [1 if not _is_mask(i) else np.ndim(i) if not isinstance(i, Tensor) else i.ndim for i in idx]
  real = [0 if i is None or i is Ellipsis else r for i, r in zip(idx, real)]
  out, before = [], 0
  ellipsis_at = next((k for k, i in enumerate(idx) if i is Ellipsis), len(idx))
  for k, i in enumerate(idx):
    if _is_mask(i):
      mask = i.numpy() if isinstance(i, Tensor) else np.asarray(i, dtype=bool)
      pos = before if k < ellipsis_at else t.ndim - sum(real[k:])
      want = t.shape[pos:pos + mask.ndim]
      if mask.shape != want:
        raise IndexError(f"the shape of the mask {mask.shape} at index {pos} does not match the shape {want} of the indexed tensor "
                         f"{t.shape} there")
      out.extend(np.nonzero(mask))
    else: out.append(i)
    before += real[k]
  return tuple(out)

# (shape, basic_key of an index) -> _plan's answer: a loop indexes the same shapes the same ways, checked once here
_plans: dict = {}

def basic_key(idx: tuple):
  """A hashable stand-in for an index of plain ints, slices of plain ints, None and Ellipsis (a basic index, the
  commonest); None for any other (numbers of other types, tensors, masks: the full path reads them)."""
  key = []
  for i in idx:
    if type(i) is slice:
      a, b, c = i.start, i.stop, i.step
      if not ((a is None or type(a) is int) and (b is None or type(b) is int) and (c is None or type(c) is int)): return None
      key.append((a, b, c))
    elif type(i) is int or i is None or i is Ellipsis: key.append(i)
    else: return None
  return tuple(key)

def _plan(shape: tuple, idx: tuple) -> tuple:
  """(the shrink or None, the steps or None, the shape after dropping int axes and adding None ones; per axis of that
  shape, the axis it reads ('new' for a None); the (axis, index) of each advanced index) for t[idx] of a tensor of
  this shape, or the error of an index that does not fit it."""
  ndim = len(shape)
  for i in idx:
    if not (i is None or i is Ellipsis or isinstance(i, (int, np.integer, slice)) or _is_advanced(i)):
      raise TypeError(f"unsupported index {i!r} of type {type(i).__name__}")
    if isinstance(i, bool): raise TypeError("boolean indices are not supported")
  n_real = sum(1 for i in idx if i is not None and i is not Ellipsis)
  if sum(1 for i in idx if i is Ellipsis) > 1: raise IndexError("an index can only have a single ellipsis ('...')")
  if n_real > ndim: raise IndexError(f"too many indices for tensor of dimension {ndim}: got {n_real}")
  if Ellipsis in [i for i in idx if not _is_advanced(i)]:
    pos = next(k for k, i in enumerate(idx) if i is Ellipsis)
    idx = idx[:pos] + (slice(None),) * (ndim - n_real) + idx[pos + 1:]
  else:
    idx = idx + (slice(None),) * (ndim - n_real)
  # basic indexing: shrink/stride per axis, drop int axes, insert None axes
  shrink, steps, advanced = [], [], []
  dim = 0
  out_dims = []      # per output dim of the basic result: index into the intermediate (None -> 'new')
  for i in idx:
    if i is None:
      out_dims.append("new"); continue
    size = shape[dim]
    if isinstance(i, (int, np.integer)):
      i = int(i)
      if not -size <= i < size: raise IndexError(f"index {i} is out of bounds for dimension {dim} with size {size}")
      i %= size
      shrink.append((i, i + 1)); steps.append(1)
    elif isinstance(i, slice):
      start, stop, step = i.indices(size)
      if step == 0: raise ValueError("slice step cannot be zero")
      if step > 0:
        stop = max(stop, start)
        shrink.append((start, stop)); steps.append(step)
      else:
        # walk backwards from start down to stop (exclusive)
        lo, hi = stop + 1, start + 1
        if hi <= lo: lo = hi = min(max(start + 1, 0), size)
        shrink.append((lo, hi)); steps.append(step)
      out_dims.append(dim)
    else:
      shrink.append((0, size)); steps.append(1)
      advanced.append((dim, i)); out_dims.append(dim)
    dim += 1
  shrunk = tuple(e - b for b, e in shrink)
  strided = tuple((n + abs(k) - 1) // abs(k) for n, k in zip(shrunk, steps))   # View.stride's sizes
  new_shape = tuple(1 if d == "new" else strided[d] for d in out_dims)
  return (tuple(shrink) if any(s != (0, n) for s, n in zip(shrink, shape)) else None,
          tuple(steps) if any(s != 1 for s in steps) else None, new_shape, out_dims, advanced)

def _basic(t, shrink, steps, new_shape):
  """t shrunk, strided and reshaped as _plan says: the steps are no views of t of their own (getitem's caller notes
  the result as one)."""
  x = t._view("shrink", shrink, note=False) if shrink is not None else t
  if steps is not None: x = x._view("stride", steps, note=False)
  return x if new_shape == x.node.shape else x._view("reshape", new_shape, note=False)

def getitem(t, idx):
  from alloy.tensor import Tensor, broadcast_shape, where
  if not isinstance(idx, tuple): idx = (idx,)
  if (key := basic_key(idx)) is not None:
    if (plan := _plans.get(k := (t.node.shape, key))) is None: plan = remember(_plans, k, _plan(t.shape, idx))
    return _basic(t, *plan[:3])
  idx = tuple(plain(i) for i in idx)   # a jit's traced number indexes as a plain one (and is baked)
  if any(_is_mask(i) for i in idx): idx = _expand_masks(t, idx)
  shrink, steps, new_shape, out_dims, advanced = _plan(t.shape, idx)
  x = _basic(t, shrink, steps, new_shape)
  if not advanced: return x
  # advanced indexing: positions of the advanced axes in x
  adv_pos = [k for k, d in enumerate(out_dims) if d != "new" and any(d == a for a, _ in advanced)]
  idx_tensors = []
  for (d, ix), pos in zip(advanced, adv_pos):
    it = ix if isinstance(ix, Tensor) else Tensor(np.asarray(ix), device=t.device)
    if it.dtype.is_float or it.dtype.is_bool:
      raise IndexError(f"tensors used as indices must be integer tensors, got {it.dtype.name}")
    if it.device != t.device: raise ValueError(f"index tensor on {it.device} for a tensor on {t.device}")
    size = x.shape[pos]
    def error(bad, d=d, size=size): return IndexError(f"index {bad} is out of bounds for dimension {d} with size {size}")
    if isinstance(ix, Tensor): it = in_bounds(it, -size, size, error)
    else: check_values(np.asarray(ix), -size, size, error)
    it = it.cast(dt.int32 if size <= INT32_MAX else dt.int64)   # it + size below must not wrap
    idx_tensors.append(where(it < 0, it + size, it))
  b_shape = broadcast_shape(*[i.shape for i in idx_tensors])
  idx_tensors = [i._broadcast_to(b_shape) for i in idx_tensors]
  rest = [s for k, s in enumerate(x.shape) if k not in adv_pos]
  node = Node(Op.GATHER, (x.node,) + tuple(i.node for i in idx_tensors), tuple(adv_pos), x.dtype, b_shape + tuple(rest))
  out = x._new(node)
  if x._ag is not None: out = autograd.record(out, autograd.gather_rule, (x,), tuple(adv_pos), x.shape)
  # NumPy rule: adjacent advanced indices put their dims where the first one stood
  if adv_pos == list(range(adv_pos[0], adv_pos[0] + len(adv_pos))) and adv_pos[0] > 0:
    nb, first = len(b_shape), adv_pos[0]
    order = list(range(nb, nb + first)) + list(range(nb)) + list(range(nb + first, out.ndim))
    out = out.permute(order)
  return out
