"""Random draws beyond Tensor.rand/randn, with PyTorch's signatures, on the device (no host read, so each replays
under @jit with fresh random keys): multinomial, bernoulli, randperm (the order of random keys), normal.

multinomial: category indices drawn from rows of non-negative weights.

With replacement, a draw is the first category whose running sum of weights reaches u * total, u uniform in (0, 1]:
the draws are compared with the running sums and the smaller ones counted (a reduction, no search loop). Without
replacement, the Gumbel top-k: the k largest of log(w) + Gumbel noise are distributed as k draws one at a time, each
from the weights left. The weights are not checked (that would read them back): a row with a negative weight, or
with fewer positive weights than draws without replacement, gives unspecified indices, as on PyTorch's GPU.
"""
from __future__ import annotations
import numbers
from alloy import dtype as dt
from alloy.tensor import Tensor
from alloy.ordering import topk

HALF_STEP = 1.0 / (1 << 25)   # Tensor.rand draws multiples of 2^-24 in [0, 1): + half a step is strictly inside (0, 1)

def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
  """(C,) or (R, C) weights -> (num_samples,) or (R, num_samples) int64 category indices."""
  if generator is not None: raise NotImplementedError("multinomial: generator= is not supported; use alloy.manual_seed")
  if not isinstance(input, Tensor): raise TypeError(f"multinomial: expected a Tensor, got {type(input).__name__}")
  if not input.dtype.is_float: raise TypeError(f"multinomial: the weights must be floating point, got {input.dtype.name}")
  if input.ndim not in (1, 2): raise ValueError(f"multinomial: the weights must be 1-D or 2-D, got shape {input.shape}")
  if isinstance(num_samples, bool) or not isinstance(num_samples, numbers.Integral) or num_samples < 1:
    raise ValueError(f"multinomial: num_samples must be a positive int, got {num_samples!r}")
  rows, c = (1,) + input.shape if input.ndim == 1 else input.shape
  if c == 0: raise ValueError("multinomial: the weights have no categories")
  if not replacement and num_samples > c:
    raise ValueError(f"multinomial: cannot draw {num_samples} samples from {c} categories without replacement")
  w = input.reshape(rows, c).cast(dt.float32)
  if replacement:
    running = w.cumsum(1)
    u = (1.0 - Tensor.rand(rows, num_samples, 1, device=input.device)) * running[:, c - 1:].reshape(rows, 1, 1)
    # rounding may put u a hair above the last running sum: the last category then
    picks = (running.reshape(rows, 1, c) < u).cast(dt.int32).sum(2).minimum(c - 1)
  else:
    gumbel = -(-(Tensor.rand(rows, c, device=input.device) + HALF_STEP).log()).log()
    picks = topk(w.log() + gumbel, num_samples, 1).indices
  picks = picks.cast(dt.int64)
  return picks.reshape(num_samples) if input.ndim == 1 else picks

def bernoulli(input: Tensor, p=None) -> Tensor:
  """torch.bernoulli: 1 with probability input (or p), else 0, in input's dtype."""
  prob = input if p is None else p
  return (Tensor.rand(*input.shape, device=input.device) < prob).cast(input.dtype)

def randperm(n: int, *, dtype=None, device=None) -> Tensor:
  """torch.randperm: a random permutation of 0..n-1 (the order of n random keys, on the device)."""
  if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0: raise ValueError(f"randperm: n must be a non-negative int, got {n!r}")
  from alloy.ordering import argsort
  if n == 0: return Tensor.zeros(0, dtype=dtype or dt.int64, device=device)
  keys = Tensor._random_bits((n,), device)   # ties (equal keys) keep index order: still a permutation
  return argsort(keys.cast(dt.int64)).cast(dtype or dt.int64)

def normal(mean, std=1.0, size=None, *, device=None) -> Tensor:
  """torch.normal: draws with the given mean and std (tensors broadcast, or numbers with size)."""
  if isinstance(mean, Tensor) or isinstance(std, Tensor):
    like = mean if isinstance(mean, Tensor) else std
    shape = like.shape if not (isinstance(mean, Tensor) and isinstance(std, Tensor)) else (mean + std).shape
    return Tensor.randn(*shape, device=like.device) * std + mean
  if size is None: raise ValueError("normal: with a number mean and std, give size")
  return Tensor.randn(*size, device=device) * std + mean
