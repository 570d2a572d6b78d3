"""tril and triu (torch's): the lower or upper triangle of the last two dims, from a diagonal offset; the rest 0."""
from __future__ import annotations
from alloy import dtype as dt
from alloy.tensor import Tensor, where

def _triangle(input: Tensor, diagonal: int, lower: bool, what: str) -> Tensor:
  if not isinstance(input, Tensor): raise TypeError(f"{what}: expected a Tensor, got {type(input).__name__}")
  if input.ndim < 2: raise ValueError(f"{what}: input must have at least 2 dims, got shape {tuple(input.shape)}")
  if isinstance(diagonal, bool) or not isinstance(diagonal, int): raise TypeError(f"{what}: diagonal must be an int, got {diagonal!r}")
  n, m = input.shape[-2:]
  offset = Tensor.arange(m, dtype=dt.int32, device=input.device).reshape(1, m) - Tensor.arange(n, dtype=dt.int32, device=input.device).reshape(n, 1)
  keep = offset <= diagonal if lower else offset >= diagonal
  return where(keep, input, False if input.dtype.is_bool else 0)

def tril(input: Tensor, diagonal: int = 0) -> Tensor:
  """torch.tril: elements on and below the diagonal-th diagonal (0 main, > 0 above it, < 0 below it) are kept."""
  return _triangle(input, diagonal, True, "tril")

def triu(input: Tensor, diagonal: int = 0) -> Tensor:
  """torch.triu: elements on and above the diagonal-th diagonal are kept."""
  return _triangle(input, diagonal, False, "triu")
