"""The rest of torch.nn.functional's common losses, composed from the primitives with PyTorch's formulas:
poisson_nll_loss, gaussian_nll_loss (the likelihood losses), margin_ranking_loss, hinge_embedding_loss,
soft_margin_loss, multilabel_soft_margin_loss, cosine_embedding_loss, triplet_margin_loss, multi_margin_loss (the
margin and embedding losses). loss.py holds the classification and regression ones and the shared helpers."""
from __future__ import annotations
import math
from alloy.functional.activation import logsigmoid
from alloy.functional.linear import pairwise_distance
from alloy.functional.loss import class_axis_view, picked_class, reduce_loss, reduction_arg
from alloy.tensor import Tensor, where

def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None, reduction="mean"):
  """exp(input) - target * input (log_input), or input - target * log(input + eps); full adds Stirling's term
  target * log(target) - target + log(2 pi target) / 2 where target > 1."""
  reduction = reduction_arg(size_average, reduce, reduction, "poisson_nll_loss")
  loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
  if full:
    big = target > 1
    t = where(big, target, 2.0)   # the term's logs never see the targets it leaves out
    loss = loss + where(big, t * t.log() - t + 0.5 * (2 * math.pi * t).log(), 0.0)
  return reduce_loss(loss, reduction)

def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
  """(log(var) + (input - target)^2 / var) / 2 (+ log(2 pi) / 2 with full); var clamped to eps in value but not in
  gradient, and broadcast from one fewer dim or a last dim of 1, as PyTorch."""
  reduction = reduction_arg(None, None, reduction, "gaussian_nll_loss")
  if not isinstance(var, Tensor): var = Tensor.full(input.shape, float(var), dtype=input.dtype, device=input.device)
  if var.shape != input.shape:
    if input.shape[:-1] == var.shape: var = var.unsqueeze(-1)
    elif not (input.shape[:-1] == var.shape[:-1] and var.shape[-1] == 1):
      raise ValueError(f"gaussian_nll_loss: var of shape {var.shape} does not match input {input.shape}")
  v = var + (var.clamp(min=eps) - var).detach()   # the clamp's value, the identity's gradient
  loss = 0.5 * (v.log() + (input - target) ** 2 / v)
  if full: loss = loss + 0.5 * math.log(2 * math.pi)
  return reduce_loss(loss, reduction)

def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
  reduction = reduction_arg(size_average, reduce, reduction, "margin_ranking_loss")
  return reduce_loss((-target * (input1 - input2) + margin).clamp(min=0), reduction)

def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
  """input where target is 1, max(0, margin - input) where it is -1 (both where it is neither, as PyTorch)."""
  reduction = reduction_arg(size_average, reduce, reduction, "hinge_embedding_loss")
  loss = where(target != 1, (margin - input).clamp(min=0), 0.0) + where(target != -1, input, 0.0)
  return reduce_loss(loss, reduction)

def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
  reduction = reduction_arg(size_average, reduce, reduction, "soft_margin_loss")
  return reduce_loss(-logsigmoid(target * input), reduction)   # log(1 + exp(-y x)), stable

def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
  """Per sample, the mean over classes of the binary cross-entropy of sigmoid(input) against target."""
  reduction = reduction_arg(size_average, reduce, reduction, "multilabel_soft_margin_loss")
  loss = -(target * logsigmoid(input) + (1 - target) * logsigmoid(-input))
  if weight is not None: loss = loss * weight
  return reduce_loss(loss.sum(-1) / input.shape[-1], reduction)

def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
  """Per sample, the sum over its target classes j (target's leading entries, up to the first -1) and the other classes
  i of max(0, 1 - (x[j] - x[i])), over the number of classes."""
  reduction = reduction_arg(size_average, reduce, reduction, "multilabel_margin_loss")
  if target.shape != input.shape or target.dtype.is_float:
    raise ValueError(f"multilabel_margin_loss: target must be integer class indices of the input's shape {input.shape}, "
                     f"got {target.dtype.name} {target.shape}")
  c = input.shape[-1]
  listed = (target != -1).cast(dtype=target.dtype).cumprod(-1) > 0   # the entries before the first -1
  classes = Tensor.arange(c, device=input.device)
  is_target = ((target.unsqueeze(-1) == classes) & listed.unsqueeze(-1)).any(-2)   # (..., C)
  margins = (1 - input.unsqueeze(-1) + input.unsqueeze(-2)).relu()   # [j, i]: 1 - (x_j - x_i)
  pairs = is_target.unsqueeze(-1) & ~is_target.unsqueeze(-2)
  loss = (margins * pairs.cast(input.dtype)).sum((-2, -1)) / c
  return reduce_loss(loss, reduction)

def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
  """1 - cos(x1, x2) where target is 1, max(0, cos - margin) where it is -1 (cos with 1e-12 added to each squared
  norm, as PyTorch)."""
  reduction = reduction_arg(size_average, reduce, reduction, "cosine_embedding_loss")
  d = 1 if input1.ndim == 2 else 0
  cos = (input1 * input2).sum(d) / (((input1 * input1).sum(d) + 1e-12) * ((input2 * input2).sum(d) + 1e-12)).sqrt()
  loss = where(target == 1, 1 - cos, 0.0) + where(target == -1, (cos - margin).clamp(min=0), 0.0)
  return reduce_loss(loss, reduction)

def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None, reduce=None,
                        reduction="mean"):
  """max(0, margin + d(a, p) - d(a, n)), d the p-norm pairwise distance; swap takes min(d(a, n), d(p, n))."""
  reduction = reduction_arg(size_average, reduce, reduction, "triplet_margin_loss")
  return _triplet(anchor, positive, negative, lambda a, b: pairwise_distance(a, b, p, eps), margin, swap, reduction)

def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False, reduction="mean"):
  """triplet_margin_loss with any distance (a function of two tensors; pairwise_distance by default)."""
  reduction = reduction_arg(None, None, reduction, "triplet_margin_with_distance_loss")
  if margin <= 0: raise ValueError(f"triplet_margin_with_distance_loss: margin must be positive, got {margin}")
  return _triplet(anchor, positive, negative, distance_function or pairwise_distance, margin, swap, reduction)

def _triplet(anchor, positive, negative, distance, margin, swap: bool, reduction: str):
  d_ap, d_an = distance(anchor, positive), distance(anchor, negative)
  if swap: d_an = d_an.minimum(distance(positive, negative))
  return reduce_loss((margin + d_ap - d_an).clamp(min=0), reduction)

def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None, reduction="mean"):
  """Per sample, the sum over classes i other than the target y of max(0, margin - x[y] + x[i]) ** p (times
  weight[y]), over the class count."""
  reduction = reduction_arg(size_average, reduce, reduction, "multi_margin_loss")
  if p not in (1, 2): raise ValueError(f"multi_margin_loss: p must be 1 or 2, got {p}")
  if input.ndim not in (1, 2) or tuple(target.shape) != tuple(input.shape[:-1]):
    raise ValueError(f"multi_margin_loss: expected input (N, C) or (C,) and target (N,) or (), got {input.shape} and {target.shape}")
  x = input if input.ndim > 1 else input.unsqueeze(0)
  t = target if input.ndim > 1 else target.reshape(1)
  c = x.shape[1]
  picked = picked_class(x, t, c)
  others = t.unsqueeze(1) != class_axis_view(Tensor.arange(c, device=x.device), 2)
  z = (margin - picked.unsqueeze(1) + x).clamp(min=0)
  z = z * z if p == 2 else z
  if weight is not None: z = z * picked_class(class_axis_view(weight, 2).expand(x.shape), t, c).unsqueeze(1)
  loss = where(others, z, 0.0).sum(1) / c
  return reduce_loss(loss if input.ndim > 1 else loss.squeeze(0), reduction)
