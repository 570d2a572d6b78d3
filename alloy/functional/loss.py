"""Losses with PyTorch's functional signatures and reductions. Class targets pick their log-probability through a
comparison with the class index (a select, fused into the reduction), not a gather.

Target class indices outside [0, C) that are not ignore_index raise an IndexError, as PyTorch's do: they are checked
as a gather's indices are (alloy/bounds.py: on a GPU read at the next host read, no sync per loss; on the CPU
device at once; under @jit read after each call)."""
from __future__ import annotations
from alloy import dtype as dt
from alloy.bounds import in_bounds
from alloy.functional.activation import log_softmax

REDUCTIONS = ("none", "mean", "sum")

def reduction_arg(size_average, reduce, reduction: str, op: str) -> str:
  """PyTorch's legacy size_average / reduce flags mapped onto reduction, and reduction checked."""
  if size_average is not None or reduce is not None:
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    reduction = "none" if not reduce else "mean" if size_average else "sum"
  if reduction not in REDUCTIONS: raise ValueError(f"{op}: reduction must be one of {REDUCTIONS}, got {reduction!r}")
  return reduction

def reduce_loss(loss, reduction: str):
  return loss if reduction == "none" else loss.sum() if reduction == "sum" else loss.mean()

def _where(c, a, b):
  from alloy.tensor import where
  return where(c, a, b)

def _same_shape(input, target, op: str):
  from alloy.tensor import Tensor
  if not isinstance(target, Tensor): raise TypeError(f"{op}: target must be a Tensor, got {type(target).__name__}")
  if input.shape != target.shape:
    raise ValueError(f"{op}: target size {target.shape} must be the same as input size {input.shape}")

def class_axis_view(t, ndim: int):
  """A per-class (C,) tensor shaped to broadcast along axis 1 of an (N, C, d1, ...) input."""
  return t.reshape((1, t.shape[0]) + (1,) * (ndim - 2))

def _check_class_input(input, target, weight, op: str):
  from alloy.tensor import Tensor
  if not isinstance(target, Tensor): raise TypeError(f"{op}: target must be a Tensor, got {type(target).__name__}")
  if input.ndim < 1: raise ValueError(f"{op}: input must have at least one dimension (the classes), got a 0-d tensor")
  c = input.shape[1] if input.ndim > 1 else input.shape[0]
  if weight is not None and weight.shape != (c,): raise ValueError(f"{op}: weight must have shape ({c},), got {weight.shape}")
  return c

def picked_class(logp, target, c: int):
  """logp (N, C, ...) at each target class, (N, ...): a select against the class index, summed over the classes."""
  from alloy.tensor import Tensor
  classes = class_axis_view(Tensor.arange(c, device=logp.device), logp.ndim)
  return _where(target.unsqueeze(1) == classes, logp, 0).sum(1)

def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
  reduction = reduction_arg(size_average, reduce, reduction, "nll_loss")
  c = _check_class_input(input, target, weight, "nll_loss")
  if input.ndim == 1:
    out = nll_loss(input.unsqueeze(0), target.unsqueeze(0), weight, ignore_index=ignore_index, reduction=reduction)
    return out.squeeze(0) if reduction == "none" else out
  _check_target(input, target, c, ignore_index, "nll_loss")
  loss, w = _nll_parts(input, target, weight, ignore_index, c)
  if reduction == "none": return loss
  return loss.sum() if reduction == "sum" else loss.sum() / w.sum()

def _check_target(input, target, c: int, ignore_index: int, op: str):
  """The target's dtype and shape, and its classes: each in [0, c) unless it is ignore_index."""
  if target.dtype.is_float or target.dtype.is_bool:
    raise TypeError(f"{op}: class-index targets must be integers, got {target.dtype.name}")
  want = (input.shape[0],) + input.shape[2:]
  if target.shape != want: raise ValueError(f"{op}: expected a target of shape {want} for an input of shape {input.shape}, got {target.shape}")
  if dt.min_value(target.dtype) <= ignore_index <= dt.max_value(target.dtype): target = _where(target == ignore_index, 0, target)
  in_bounds(target, 0, c, lambda bad: IndexError(f"{op}: target {bad} is out of bounds for {c} classes"))

def _nll_parts(logp, target, weight, ignore_index: int, c: int):
  """(per-element loss -w[t] * logp[t], 0 where ignored; the per-element weight w[t], 0 where ignored)."""
  keep = target != ignore_index
  picked = picked_class(logp, target, c)
  if weight is None: w = keep.cast(logp.dtype)
  else: w = _where(keep, picked_class(class_axis_view(weight, logp.ndim).expand(logp.shape), target, c), 0)
  return -(picked * w), w

def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean",
                  label_smoothing=0.0):
  reduction = reduction_arg(size_average, reduce, reduction, "cross_entropy")
  c = _check_class_input(input, target, weight, "cross_entropy")
  if not 0.0 <= label_smoothing <= 1.0: raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
  if input.ndim == 1:
    out = cross_entropy(input.unsqueeze(0), target.unsqueeze(0), weight, ignore_index=ignore_index, reduction=reduction,
                        label_smoothing=label_smoothing)
    return out.squeeze(0) if reduction == "none" else out
  logp = log_softmax(input, 1)
  if target.dtype.is_float:   # class probabilities, the input's shape
    _same_shape(input, target, "cross_entropy")
    t = target * (1 - label_smoothing) + label_smoothing / c if label_smoothing else target
    lw = logp * class_axis_view(weight, input.ndim) if weight is not None else logp
    loss = -(lw * t).sum(1)
    if reduction == "none": return loss
    return loss.sum() if reduction == "sum" else loss.sum() / (input.numel() // c)
  _check_target(input, target, c, ignore_index, "cross_entropy")
  nll, w = _nll_parts(logp, target, weight, ignore_index, c)
  if not label_smoothing:
    if reduction == "none": return nll
    return nll.sum() if reduction == "sum" else nll.sum() / w.sum()
  # PyTorch's smoothing: (1 - eps) * nll + eps / C * (-sum over classes of w[c] * logp[c]), 0 where ignored
  lw = logp * class_axis_view(weight, input.ndim) if weight is not None else logp
  smooth = _where(target != ignore_index, -lw.sum(1), 0)
  if reduction == "none": return nll * (1 - label_smoothing) + smooth * (label_smoothing / c)
  if reduction == "sum": return nll.sum() * (1 - label_smoothing) + smooth.sum() * (label_smoothing / c)
  denom = w.sum()
  return (nll.sum() * (1 - label_smoothing) + smooth.sum() * (label_smoothing / c)) / denom

def _weighted(loss, weight, reduction: str, op: str, mean_by_weight=True):
  """PyTorch's optional elementwise weight of the regression losses: mse's and l1's mean divides by the weights'
  sum, huber's by the element count."""
  if weight is None: return reduce_loss(loss, reduction)
  if weight.shape != loss.shape: raise ValueError(f"{op}: weights and input must have the same size, got {weight.shape} and {loss.shape}")
  loss = loss * weight
  if reduction != "mean" or not mean_by_weight: return reduce_loss(loss, reduction)
  return loss.sum() / weight.sum()

def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
  reduction = reduction_arg(size_average, reduce, reduction, "mse_loss")
  _same_shape(input, target, "mse_loss")
  d = input - target
  return _weighted(d * d, weight, reduction, "mse_loss")

def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
  reduction = reduction_arg(size_average, reduce, reduction, "l1_loss")
  _same_shape(input, target, "l1_loss")
  return _weighted((input - target).abs(), weight, reduction, "l1_loss")

def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
  reduction = reduction_arg(size_average, reduce, reduction, "smooth_l1_loss")
  _same_shape(input, target, "smooth_l1_loss")
  if beta < 0: raise ValueError(f"smooth_l1_loss: beta must be non-negative, got {beta}")
  d = (input - target).abs()
  if beta == 0: return reduce_loss(d, reduction)
  return reduce_loss(_where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta), reduction)

def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
  reduction = reduction_arg(None, None, reduction, "huber_loss")
  _same_shape(input, target, "huber_loss")
  if delta <= 0: raise ValueError(f"huber_loss: delta must be positive, got {delta}")
  d = (input - target).abs()
  return _weighted(_where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta), weight, reduction, "huber_loss", mean_by_weight=False)

def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
  reduction = reduction_arg(size_average, reduce, reduction, "binary_cross_entropy")
  _same_shape(input, target, "binary_cross_entropy")
  # PyTorch clamps each log at -100, so a probability of exactly 0 or 1 gives a finite loss
  loss = -(target * input.log().maximum(-100) + (1 - target) * (1 - input).log().maximum(-100))
  if weight is not None: loss = loss * weight
  return reduce_loss(loss, reduction)

def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None):
  reduction = reduction_arg(size_average, reduce, reduction, "binary_cross_entropy_with_logits")
  _same_shape(input, target, "binary_cross_entropy_with_logits")
  # log(1 + exp(-x)) computed as max(-x, 0) + log(1 + exp(-|x|)): no overflow for large |x|
  log_sig_neg = (-input).maximum(0) + ((-input.abs()).exp() + 1).log()
  if pos_weight is None: loss = (1 - target) * input + log_sig_neg
  else: loss = (1 - target) * input + (1 + (pos_weight - 1) * target) * log_sig_neg
  if weight is not None: loss = loss * weight
  return reduce_loss(loss, reduction)

def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
  reduction = reduction_arg(size_average, reduce, reduction, "kl_div") if reduction != "batchmean" else "batchmean"
  _same_shape(input, target, "kl_div")
  loss = target.exp() * (target - input) if log_target else _xlogy(target) - target * input
  if reduction == "batchmean": return loss.sum() / (input.shape[0] if input.ndim else 1)
  return reduce_loss(loss, reduction)

def _xlogy(t):
  """t * log(t), 0 where t == 0 (PyTorch's xlogy)."""
  return _where(t == 0, 0, t * _where(t == 0, 1, t).log())
