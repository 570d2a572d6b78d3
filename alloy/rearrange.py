"""Parts of a tensor and its dims rearranged, with PyTorch's signatures: narrow, select, unbind, tensor_split (slices),
roll (a cyclic shift), Tensor.unfold (sliding windows as a new last dimension), movedim, swapaxes, t, unflatten,
broadcast_to, broadcast_tensors, tile, repeat_interleave, diff, fliplr, flipud, rot90, meshgrid, atleast_1d/2d/3d,
hstack, vstack, dstack, column_stack. All are views or concatenations of views: lazy, no kernel of
their own, and their gradients come from those of shrink, cat and the window view."""
from __future__ import annotations
import numbers
from alloy import dtype as dt
from alloy.tensor import Tensor, cat, norm_axis

def _int(v, what: str, op: str) -> int:
  if isinstance(v, bool) or not isinstance(v, numbers.Integral): raise TypeError(f"{op}: {what} must be an int, got {type(v).__name__}")
  return int(v)

def narrow(input: Tensor, dim: int, start: int, length: int) -> Tensor:
  """torch.narrow: the length entries from start along dim (start < 0 counts from the end), a view."""
  d = norm_axis(dim, input.ndim)
  n, start, length = input.shape[d], _int(start, "start", "narrow"), _int(length, "length", "narrow")
  if not -n <= start <= n: raise IndexError(f"narrow: start {start} is out of range for dimension {d} of size {n}")
  start %= n if n else 1
  if length < 0 or start + length > n:
    raise ValueError(f"narrow: start ({start}) + length ({length}) exceeds dimension {d} of size {n}")
  return input[(slice(None),) * d + (slice(start, start + length),)]

def roll(input: Tensor, shifts, dims=None) -> Tensor:
  """torch.roll: entries shifted cyclically by shifts along dims (both ints or equal-length tuples); with dims None,
  along the flattened tensor, whose shape is then restored."""
  many = isinstance(shifts, (tuple, list))
  shifts = [_int(s, "shifts", "roll") for s in (shifts if many else (shifts,))]
  if dims is None:
    if len(shifts) != 1: raise ValueError(f"roll: with dims None, shifts must be one int, got {len(shifts)}")
    return roll(input.flatten(), shifts[0], 0).reshape(input.shape)
  dims = [_int(d, "dims", "roll") for d in (dims if isinstance(dims, (tuple, list)) else (dims,))]
  if len(shifts) != len(dims): raise ValueError(f"roll: shifts and dims must have the same length, got {len(shifts)} and {len(dims)}")
  out = input
  for s, dim in zip(shifts, dims):
    d = norm_axis(dim, input.ndim)
    n = input.shape[d]
    if n == 0 or s % n == 0: continue
    k = s % n   # the last k entries come first
    ends = [(n - k, n), (0, n - k)]
    out = cat([out.shrink(tuple(e if a == d else (0, m) for a, m in enumerate(out.shape))) for e in ends], d)
  return out

def movedim(input: Tensor, source, destination) -> Tensor:
  """torch.movedim (moveaxis): the dims at source moved to destination (ints or equal-length tuples), the others
  keeping their order; a view."""
  src = [_int(v, "source", "movedim") for v in (source if isinstance(source, (tuple, list)) else (source,))]
  dst = [_int(v, "destination", "movedim") for v in (destination if isinstance(destination, (tuple, list)) else (destination,))]
  if len(src) != len(dst): raise ValueError(f"movedim: source and destination must have the same length, got {len(src)} and {len(dst)}")
  src, dst = [norm_axis(v, input.ndim) for v in src], [norm_axis(v, input.ndim) for v in dst]
  if len(set(src)) != len(src) or len(set(dst)) != len(dst): raise ValueError(f"movedim: repeated dims in {source} or {destination}")
  order, rest = [None] * input.ndim, iter(a for a in range(input.ndim) if a not in src)
  for s, d in zip(src, dst): order[d] = s
  return input.permute(*[a if a is not None else next(rest) for a in order])

def unfold(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
  """Tensor.unfold: every window of size entries along dimension, step apart, as a new last dimension; dimension's
  own size becomes the window count (a view of input: the kernels reading it index input directly)."""
  from alloy.functional.window import computed, windows
  d = norm_axis(dimension, max(input.ndim, 1))
  x = input.reshape(1) if input.ndim == 0 else input
  size, step = _int(size, "size", "unfold"), _int(step, "step", "unfold")
  if step <= 0: raise ValueError(f"unfold: step must be positive, got {step}")
  if not 0 <= size <= x.shape[d]: raise ValueError(f"unfold: size {size} is out of range for dimension {d} of size {x.shape[d]}")
  return movedim(windows(movedim(computed(x), d, -1), (size,), (step,), (1,)), -2, d)

def swapaxes(input: Tensor, axis0: int, axis1: int) -> Tensor:
  """torch.swapaxes (swapdims): transpose's other names."""
  return input.transpose(axis0, axis1)

def t(input: Tensor) -> Tensor:
  """Tensor.t: the transpose of a matrix; a vector or a scalar as it is."""
  if input.ndim > 2: raise ValueError(f"t: expects a tensor of at most 2 dimensions, got {input.ndim}; use transpose or mT")
  return input.transpose(0, 1) if input.ndim == 2 else input

def select(input: Tensor, dim: int, index: int) -> Tensor:
  """torch.select: the slice at index along dim, that dim removed (a view)."""
  d = norm_axis(dim, input.ndim)
  return input[(slice(None),) * d + (_int(index, "index", "select"),)]

def unbind(input: Tensor, dim: int = 0) -> tuple:
  """torch.unbind: the slices along dim, each without it."""
  d = norm_axis(dim, input.ndim)
  return tuple(select(input, d, i) for i in range(input.shape[d]))

def unflatten(input: Tensor, dim: int, sizes) -> Tensor:
  """torch.unflatten: dim split into sizes (one of them may be -1)."""
  d = norm_axis(dim, input.ndim)
  return input.reshape(input.shape[:d] + tuple(sizes) + input.shape[d + 1:])

def broadcast_to(input: Tensor, shape) -> Tensor: return input.expand(*shape)

def broadcast_tensors(*tensors: Tensor) -> tuple:
  """torch.broadcast_tensors: each expanded to the shape they broadcast to."""
  from alloy.tensor import broadcast_shape
  shape = broadcast_shape(*[x.shape for x in tensors])
  return tuple(x.expand(*shape) for x in tensors)

def tile(input: Tensor, dims) -> Tensor:
  """torch.tile: repeat, with ones prepended to dims where it has fewer than the tensor's dims."""
  dims = tuple(dims) if isinstance(dims, (tuple, list)) else (dims,)
  return input.repeat(*((1,) * (input.ndim - len(dims)) + dims))

def tensor_split(input: Tensor, indices_or_sections, dim: int = 0) -> tuple:
  """torch.tensor_split: n near-equal parts (the first n % size one longer), or the parts between the given indices."""
  d = norm_axis(dim, input.ndim)
  n = input.shape[d]
  if isinstance(indices_or_sections, (tuple, list)):
    bounds = [min(max(_int(i, "index", "tensor_split") + (n if i < 0 else 0), 0), n) for i in indices_or_sections]
  else:
    k = _int(indices_or_sections, "sections", "tensor_split")
    if k < 1: raise ValueError(f"tensor_split: sections must be a positive int, got {k}")
    bounds = [i * (n // k) + min(i, n % k) for i in range(1, k)]
  starts, ends = [0] + bounds, bounds + [n]
  return tuple(input.shrink(tuple((s, max(s, e)) if a == d else (0, m) for a, m in enumerate(input.shape))) for s, e in zip(starts, ends))

def repeat_interleave(input: Tensor, repeats, dim=None) -> Tensor:
  """torch.repeat_interleave with an int repeats: each entry repeated in place along dim (the flattened tensor when
  None). A tensor of per-entry repeats would make the shape depend on its values: not supported."""
  if isinstance(repeats, Tensor): raise NotImplementedError("repeat_interleave: per-entry repeats (a Tensor) are not supported; pass an int")
  r = _int(repeats, "repeats", "repeat_interleave")
  if r < 0: raise ValueError(f"repeat_interleave: repeats must be non-negative, got {r}")
  x = input.flatten() if dim is None else input
  d = norm_axis(0 if dim is None else dim, x.ndim)
  s = x.shape
  return x.unsqueeze(d + 1).expand(*s[:d + 1], r, *s[d + 1:]).reshape(s[:d] + (s[d] * r,) + s[d + 1:])

def diff(input: Tensor, n: int = 1, dim: int = -1, prepend=None, append=None) -> Tensor:
  """torch.diff: the n-th forward difference along dim, after prepend and append are joined on."""
  d = norm_axis(dim, input.ndim)
  x = cat([p for p in (prepend, input, append) if p is not None], d) if prepend is not None or append is not None else input
  for _ in range(_int(n, "n", "diff")):
    m = x.shape[d]
    if m == 0: break
    part = lambda lo, hi: x.shrink(tuple((lo, hi) if a == d else (0, k) for a, k in enumerate(x.shape)))
    x = part(1, m) - part(0, m - 1) if x.dtype is not dt.bool_ else part(1, m) != part(0, m - 1)
  return x

def fliplr(input: Tensor) -> Tensor:
  if input.ndim < 2: raise ValueError(f"fliplr: the tensor must have at least 2 dimensions, got {input.ndim}")
  return input.flip(1)

def flipud(input: Tensor) -> Tensor:
  if input.ndim < 1: raise ValueError("flipud: the tensor must have at least 1 dimension")
  return input.flip(0)

def rot90(input: Tensor, k: int = 1, dims=(0, 1)) -> Tensor:
  """torch.rot90: k quarter turns from dims[0] towards dims[1]."""
  a, b = (norm_axis(v, input.ndim) for v in dims)
  if a == b: raise ValueError(f"rot90: the two dims must differ, got {dims}")
  k = _int(k, "k", "rot90") % 4
  if k == 1: return input.flip(b).transpose(a, b)
  if k == 2: return input.flip((a, b))
  if k == 3: return input.transpose(a, b).flip(b)
  return input

def meshgrid(*tensors, indexing: str = "ij") -> tuple:
  """torch.meshgrid: 1-D tensors expanded to a grid of their lengths ('ij'; 'xy' swaps the first two axes of the grid)."""
  if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)): tensors = tuple(tensors[0])
  if indexing not in ("ij", "xy"): raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
  if any(x.ndim > 1 for x in tensors): raise ValueError(f"meshgrid: expects 0-D or 1-D tensors, got shapes {[x.shape for x in tensors]}")
  vecs = [x.reshape(-1) for x in tensors]
  order = list(range(len(vecs)))
  if indexing == "xy" and len(vecs) > 1: order[0], order[1] = 1, 0
  shape = tuple(vecs[k].shape[0] for k in order)
  return tuple(v.reshape(tuple(-1 if order[a] == k else 1 for a in range(len(vecs)))).expand(*shape) for k, v in enumerate(vecs))

def _rank1(x: Tensor) -> Tensor: return x.reshape(1) if x.ndim == 0 else x
def _rank2(x: Tensor) -> Tensor: return x.reshape((1,) * (2 - x.ndim) + x.shape) if x.ndim < 2 else x
def _rank3(x: Tensor) -> Tensor:
  """A 0-D tensor becomes (1, 1, 1), a vector (1, n, 1), a matrix (m, n, 1), as NumPy and PyTorch."""
  return x.reshape(1, 1, 1) if x.ndim == 0 else x.reshape(1, -1, 1) if x.ndim == 1 else x.unsqueeze(-1) if x.ndim == 2 else x

def _each(up, tensors: tuple):
  """up applied to each tensor (given as arguments or as one list); one tensor comes back alone, as PyTorch."""
  out = tuple(up(x) for x in (tuple(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)) else tensors))
  return out[0] if len(out) == 1 else out

def atleast_1d(*tensors): return _each(_rank1, tensors)
def atleast_2d(*tensors): return _each(_rank2, tensors)
def atleast_3d(*tensors): return _each(_rank3, tensors)

def hstack(tensors) -> Tensor:
  ts = [_rank1(x) for x in tensors]
  return cat(ts, 0 if ts[0].ndim == 1 else 1)
def vstack(tensors) -> Tensor: return cat([_rank2(x) for x in tensors], 0)
def dstack(tensors) -> Tensor: return cat([_rank3(x) for x in tensors], 2)

def column_stack(tensors) -> Tensor:
  """Vectors (and 0-D tensors) as columns, matrices as they are, side by side."""
  return cat([x.reshape(-1, 1) if x.ndim < 2 else x for x in tensors], 1)
