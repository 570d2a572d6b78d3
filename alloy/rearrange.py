"""Parts of a tensor along one dimension and dims moved, with PyTorch's signatures: narrow (a slice), roll (a cyclic
shift), Tensor.unfold (sliding windows as a new last dimension) and movedim. All are views or concatenations of views: lazy, no kernel of
their own, and their gradients come from those of shrink, cat and the window view."""
from __future__ import annotations
import numbers
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
