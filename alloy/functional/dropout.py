"""Dropout in PyTorch's forms, each drawn from alloy's random stream (alloy.manual_seed makes it repeatable) and the
input itself when not training: dropout (elements), dropout1d/2d/3d (whole channels: dim 1 of a batch, dim 0 of an
unbatched input), and alpha_dropout and feature_alpha_dropout, which set dropped values to SELU's negative saturation
and rescale so that a zero-mean, unit-variance input keeps its mean and variance."""
from __future__ import annotations
import math
from alloy.tensor import Tensor, where

SELU_SATURATION = -1.0507009873554805 * 1.6732632423543772   # SELU's limit at -inf: -scale * alpha

def _check_p(p: float, op: str) -> None:
  if not 0.0 <= p <= 1.0: raise ValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p}")

def dropout(input, p=0.5, training=True, inplace=False):
  """Zeroes each element with probability p, scaling the rest by 1 / (1 - p)."""
  from alloy.functional.activation import maybe_in_place
  _check_p(p, "dropout")
  if not training or p == 0: return input
  if p == 1: return maybe_in_place(input, inplace, "dropout", lambda x: x * 0)
  keep = Tensor.rand(*input.shape, device=input.device) >= p
  return maybe_in_place(input, inplace, "dropout", lambda x: where(keep, x * (1.0 / (1 - p)), 0))

def _channel_keep(input: Tensor, p: float, ranks: tuple, op: str) -> Tensor:
  """A keep mask (booleans) per channel, broadcast over the rest: ranks (unbatched, batched) the input may have."""
  if input.ndim not in ranks: raise ValueError(f"{op}: expected a {' or '.join(f'{d}D' for d in ranks)} input, got {tuple(input.shape)}")
  lead = 2 if input.ndim == ranks[1] else 1
  return (Tensor.rand(*input.shape[:lead], device=input.device) >= p).reshape(input.shape[:lead] + (1,) * (input.ndim - lead))

def _channel_dropout(input, p, training, inplace, ranks: tuple, op: str):
  from alloy.functional.activation import maybe_in_place
  _check_p(p, op)
  if not training or p == 0:
    if input.ndim not in ranks: raise ValueError(f"{op}: expected a {' or '.join(f'{d}D' for d in ranks)} input, got {tuple(input.shape)}")
    return input
  keep = _channel_keep(input, p, ranks, op)
  return maybe_in_place(input, inplace, op, lambda x: x * 0 if p == 1 else where(keep, x * (1.0 / (1 - p)), 0))

def dropout1d(input, p=0.5, training=True, inplace=False): return _channel_dropout(input, p, training, inplace, (2, 3), "dropout1d")
def dropout2d(input, p=0.5, training=True, inplace=False): return _channel_dropout(input, p, training, inplace, (3, 4), "dropout2d")
def dropout3d(input, p=0.5, training=True, inplace=False): return _channel_dropout(input, p, training, inplace, (4, 5), "dropout3d")

def _alpha(input, p, training, inplace, keep_of, op: str):
  from alloy.functional.activation import maybe_in_place
  _check_p(p, op)
  if not training or p == 0: return input
  if p == 1: return maybe_in_place(input, inplace, op, lambda x: x * 0)
  a = 1.0 / math.sqrt((1 - p) * (1 + p * SELU_SATURATION ** 2))
  b = -a * SELU_SATURATION * p
  keep = keep_of(input)
  return maybe_in_place(input, inplace, op, lambda x: where(keep, x * a + b, a * SELU_SATURATION + b))

def alpha_dropout(input, p=0.5, training=False, inplace=False):
  """Elements dropped to SELU's saturation, then a x + b so mean and variance stay those of a standard input."""
  return _alpha(input, p, training, inplace, lambda x: Tensor.rand(*x.shape, device=x.device) >= p, "alpha_dropout")

def feature_alpha_dropout(input, p=0.5, training=False, inplace=False):
  """alpha_dropout of whole channels (dim 1 of (N, C, ...))."""
  def keep(x):
    if x.ndim < 2: raise ValueError(f"feature_alpha_dropout: expected an input with a channel dim (N, C, ...), got {tuple(x.shape)}")
    return (Tensor.rand(*x.shape[:2], device=x.device) >= p).reshape(x.shape[:2] + (1,) * (x.ndim - 2))
  return _alpha(input, p, training, inplace, keep, "feature_alpha_dropout")
