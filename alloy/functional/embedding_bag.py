"""torch.nn.functional.embedding_bag: the sum, mean or max of each bag of embedding rows, bags being the rows of a 2-D
input or the runs of a 1-D input that offsets start. Each row's bag is found on the device (searchsorted of its
position among the offsets), and the rows are added (index_add) or maxed (scatter_reduce) into their bags: no value
is read back. padding_idx's rows count in no bag; an empty bag is zeros, as PyTorch's. With include_last_offset the
last offset ends the last bag (PyTorch documents it as the input's length; given less, its modes disagree)."""
from __future__ import annotations
from alloy import dtype as dt
from alloy.gathering import embedding
from alloy.ordering import searchsorted
from alloy.tensor import Tensor, where

MODES = ("sum", "mean", "max")

def embedding_bag(input: Tensor, weight: Tensor, offsets=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None) -> Tensor:
  if mode not in MODES: raise ValueError(f"embedding_bag: mode must be one of {MODES}, got {mode!r}")
  if per_sample_weights is not None and mode != "sum":
    raise ValueError(f"embedding_bag: per_sample_weights is only supported for mode='sum', got mode={mode!r}")
  if input.ndim == 2:
    if offsets is not None: raise ValueError("embedding_bag: offsets must be None for a 2-D input (each row is a bag)")
    bags, length = input.shape
    starts = Tensor.arange(0, bags * length, max(length, 1), device=input.device)[:bags]
    input = input.reshape(-1)
    if per_sample_weights is not None: per_sample_weights = per_sample_weights.reshape(-1)
  elif input.ndim == 1:
    if offsets is None or offsets.ndim != 1: raise ValueError("embedding_bag: a 1-D input needs 1-D offsets (where each bag starts)")
    starts = offsets[:-1] if include_last_offset else offsets
    bags = starts.shape[0]
  else: raise ValueError(f"embedding_bag: input must be 1-D (with offsets) or 2-D, got shape {tuple(input.shape)}")
  if per_sample_weights is not None and tuple(per_sample_weights.shape) != tuple(input.shape):
    raise ValueError(f"embedding_bag: per_sample_weights must have the input's shape {tuple(input.shape)}, got {tuple(per_sample_weights.shape)}")
  rows = embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)   # (n, D), checked indices
  n, d = input.shape[0], weight.shape[1]
  positions = Tensor.arange(n, device=input.device)
  bag = searchsorted(starts.cast(dt.int64), positions, right=True) - 1   # each row's bag; -1 before the first offset
  keep = bag >= 0
  if include_last_offset: keep = keep & (positions < offsets[-1])
  if padding_idx is not None: keep = keep & (input != padding_idx % weight.shape[0])
  bag = where(keep, bag, 0)   # a row kept out adds 0 to bag 0, or is -inf to its max
  count = Tensor.zeros(bags, dtype=weight.dtype, device=weight.device).index_add(0, bag, keep.cast(weight.dtype))
  if mode == "max":
    lowest = where(keep.unsqueeze(-1), rows, float("-inf"))
    out = Tensor.zeros(bags, d, dtype=weight.dtype, device=weight.device).scatter_reduce(0, bag.unsqueeze(-1).expand(n, d), lowest, "amax",
                                                                                         include_self=False)
    return where((count == 0).unsqueeze(-1), 0.0, out)
  scale = keep.cast(weight.dtype) if per_sample_weights is None else where(keep, per_sample_weights.cast(weight.dtype), 0.0)
  out = Tensor.zeros(bags, d, dtype=weight.dtype, device=weight.device).index_add(0, bag, rows * scale.unsqueeze(-1))
  return out / count.maximum(1).unsqueeze(-1) if mode == "mean" else out
