"""Normalization with PyTorch's functional signatures: layer_norm, rms_norm, group_norm, batch_norm (training and
eval, running statistics updated as PyTorch updates them), instance_norm and local_response_norm (dropout is in
dropout.py). Statistics of 16-bit inputs are computed in float32, as PyTorch does."""
from __future__ import annotations
from alloy import autograd, dtype as dt
from alloy.helpers import prod

MACHINE_EPS = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7, "float32": 2.0 ** -23, "float64": 2.0 ** -52}

def _stats_input(x):
  return x.cast(dt.float32) if x.dtype in (dt.float16, dt.bfloat16) else x

def _normalized(x, axes: tuple, eps: float):
  """(x - mean) / sqrt(biased var + eps) over axes, in x's statistics dtype; also (mean, biased var)."""
  t = _stats_input(x)
  mean = t.mean(axes, keepdim=True)
  d = t - mean
  var = (d * d).mean(axes, keepdim=True)
  return d * (var + eps).rsqrt(), mean, var

def _shape_arg(normalized_shape) -> tuple:
  return (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)

def _check_affine(t, shape: tuple, what: str, op: str):
  if t is not None and tuple(t.shape) != shape: raise ValueError(f"{op}: {what} must have shape {shape}, got {tuple(t.shape)}")

def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
  shape = _shape_arg(normalized_shape)
  if tuple(input.shape[input.ndim - len(shape):]) != shape or len(shape) > input.ndim:
    raise ValueError(f"layer_norm: normalized_shape {shape} must match the trailing dims of the input's shape {input.shape}")
  _check_affine(weight, shape, "weight", "layer_norm")
  _check_affine(bias, shape, "bias", "layer_norm")
  y, _, _ = _normalized(input, tuple(range(input.ndim - len(shape), input.ndim)), eps)
  if weight is not None: y = y * weight
  if bias is not None: y = y + bias
  return y.cast(input.dtype)

def rms_norm(input, normalized_shape, weight=None, eps=None):
  shape = _shape_arg(normalized_shape)
  if tuple(input.shape[input.ndim - len(shape):]) != shape or len(shape) > input.ndim:
    raise ValueError(f"rms_norm: normalized_shape {shape} must match the trailing dims of the input's shape {input.shape}")
  _check_affine(weight, shape, "weight", "rms_norm")
  if eps is None: eps = MACHINE_EPS.get(input.dtype.name, MACHINE_EPS["float32"])   # torch.finfo(input.dtype).eps
  t = _stats_input(input)
  y = t * ((t * t).mean(tuple(range(input.ndim - len(shape), input.ndim)), keepdim=True) + eps).rsqrt()
  if weight is not None: y = y * weight
  return y.cast(input.dtype)

def _channel_view(t, ndim: int):
  return t.reshape((1, t.shape[0]) + (1,) * (ndim - 2))

def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
  if input.ndim < 2: raise ValueError(f"group_norm: expected an input with at least 2 dims (N, C, ...), got shape {input.shape}")
  n, c = input.shape[:2]
  if num_groups <= 0 or c % num_groups: raise ValueError(f"group_norm: num_groups ({num_groups}) must be positive and divide the {c} channels")
  _check_affine(weight, (c,), "weight", "group_norm")
  _check_affine(bias, (c,), "bias", "group_norm")
  y, _, _ = _normalized(input.reshape(n, num_groups, -1), (2,), eps)
  y = y.reshape(input.shape)
  if weight is not None: y = y * _channel_view(weight, input.ndim)
  if bias is not None: y = y + _channel_view(bias, input.ndim)
  return y.cast(input.dtype)

def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True, momentum=0.1, eps=1e-5):
  """Each sample's channels normalized over their positions (use_input_stats), the running statistics, where given,
  moved toward the batch's average of the per-instance means and unbiased variances, as PyTorch moves them; or, with
  use_input_stats=False, normalized by the running statistics (an InstanceNorm's eval mode)."""
  if input.ndim < 3: raise ValueError(f"instance_norm: expected an input with at least 3 dims (N, C, L, ...), got shape {input.shape}")
  n, c = input.shape[:2]
  for name, t in (("running_mean", running_mean), ("running_var", running_var)): _check_affine(t, (c,), name, "instance_norm")
  if not use_input_stats:
    if running_mean is None or running_var is None:
      raise ValueError("instance_norm: running_mean and running_var must be given when use_input_stats=False")
    return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
  y = group_norm(input, c, weight, bias, eps)
  if running_mean is not None or running_var is not None:
    count = prod(input.shape[2:])
    if count <= 1: raise ValueError(f"instance_norm: expected more than 1 spatial element when training, got input size {input.shape}")
    _, mean, var = _normalized(input.reshape(n, c, count), (2,), eps)
    with autograd.no_grad():
      if running_mean is not None: running_mean.copy_(running_mean * (1 - momentum) + mean.mean((0, 2)) * momentum)
      if running_var is not None: running_var.copy_(running_var * (1 - momentum) + var.mean((0, 2)) * (momentum * count / (count - 1)))
  return y

def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
  if input.ndim < 2: raise ValueError(f"batch_norm: expected an input with at least 2 dims (N, C, ...), got shape {input.shape}")
  c = input.shape[1]
  for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
    _check_affine(t, (c,), name, "batch_norm")
  axes = (0,) + tuple(range(2, input.ndim))
  if training:
    count = prod(input.shape[a] for a in axes)
    if count <= 1: raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got input size {input.shape}")
    y, mean, var = _normalized(input, axes, eps)
    if running_mean is not None or running_var is not None:
      with autograd.no_grad():
        if running_mean is not None: running_mean.copy_(running_mean * (1 - momentum) + mean.reshape(c) * momentum)   # in place, as PyTorch
        # the running variance is the unbiased one, as in PyTorch
        if running_var is not None: running_var.copy_(running_var * (1 - momentum) + var.reshape(c) * (momentum * count / (count - 1)))
  else:
    if running_mean is None or running_var is None:
      raise ValueError("batch_norm: running_mean and running_var must be given when training=False")
    t = _stats_input(input)
    y = (t - _channel_view(running_mean, input.ndim)) * (_channel_view(running_var, input.ndim) + eps).rsqrt()
  if weight is not None: y = y * _channel_view(weight, input.ndim)
  if bias is not None: y = y + _channel_view(bias, input.ndim)
  return y.cast(input.dtype)

def local_response_norm(input, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
  """x / (k + alpha * mean of x^2 over `size` neighbouring channels)^beta, the window (size // 2 before, (size - 1) // 2
  after) zero-padded at the ends, as PyTorch's."""
  if input.ndim < 3: raise ValueError(f"local_response_norm: expected an input of 3 or more dimensions (N, C, ...), got {tuple(input.shape)}")
  c = input.shape[1]
  sq = input * input
  padded = sq.pad(((0, 0), (size // 2, (size - 1) // 2)) + ((0, 0),) * (input.ndim - 2))
  window = sum(padded.narrow(1, j, c) for j in range(size))
  return input / (window * (alpha / size) + k).pow(beta)
