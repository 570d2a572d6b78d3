"""The normalization layers over nn.functional: BatchNorm1d/2d/3d (running statistics, momentum or a cumulative
average, eval mode), InstanceNorm1d/2d/3d (running statistics where tracked), LayerNorm, GroupNorm, RMSNorm, with
PyTorch's parameters (weight ones, bias zeros) and buffers."""
from __future__ import annotations
from alloy.tensor import Tensor
from alloy.nn.module import Module
from alloy.nn.parameter import Parameter, rebind
from alloy.nn import functional as F
from alloy import dtype as dt

def _shape(normalized_shape) -> tuple:
  return (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)

def _running_stats(m: Module, num_features: int, track: bool, dtype, device) -> None:
  """A norm layer's running statistics buffers, PyTorch's three, or None for each where it keeps none."""
  if track:
    m.register_buffer("running_mean", Tensor.zeros(num_features, dtype=dtype, device=device))
    m.register_buffer("running_var", Tensor.ones(num_features, dtype=dtype, device=device))
    m.register_buffer("num_batches_tracked", Tensor.zeros(1, dtype=dt.int64, device=device).reshape(()))
  else: m.running_mean = m.running_var = m.num_batches_tracked = None

def _momentum_factor(m: Module) -> float:
  """The weight of this batch's statistics in the running ones; counting the batch where the layer is training and
  keeps statistics (momentum None: a cumulative average, 1 / the batches seen)."""
  factor = 0.0 if m.momentum is None else m.momentum
  if m.training and m.track_running_stats:
    rebind(m.num_batches_tracked, (m.num_batches_tracked + 1).realize())
    if m.momentum is None: factor = 1.0 / float(m.num_batches_tracked.item())
  return factor

class _BatchNorm(Module):
  dims: tuple   # the input ranks the layer takes

  def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
               track_running_stats: bool = True, device=None, dtype=None):
    super().__init__()
    self.num_features, self.eps, self.momentum, self.affine, self.track_running_stats = num_features, eps, momentum, affine, track_running_stats
    self.weight = Parameter(Tensor.ones(num_features, dtype=dtype, device=device)) if affine else None
    self.bias = Parameter(Tensor.zeros(num_features, dtype=dtype, device=device)) if affine else None
    _running_stats(self, num_features, track_running_stats, dtype, device)

  def forward(self, x):
    if x.ndim not in self.dims:
      raise ValueError(f"{type(self).__name__}: expected a {' or '.join(f'{d}D' for d in self.dims)} input, got shape {tuple(x.shape)}")
    factor = _momentum_factor(self)
    use_batch = self.training or not self.track_running_stats
    stats = (self.running_mean, self.running_var) if not use_batch or self.track_running_stats else (None, None)
    return F.batch_norm(x, *stats, self.weight, self.bias, use_batch, factor, self.eps)
  def extra_repr(self):
    return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, track_running_stats={self.track_running_stats}"

class BatchNorm1d(_BatchNorm): dims = (2, 3)
class BatchNorm2d(_BatchNorm): dims = (4,)
class BatchNorm3d(_BatchNorm): dims = (5,)

class LayerNorm(Module):
  def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True, device=None, dtype=None):
    super().__init__()
    self.normalized_shape, self.eps, self.elementwise_affine = _shape(normalized_shape), eps, elementwise_affine
    self.weight = Parameter(Tensor.ones(*self.normalized_shape, dtype=dtype, device=device)) if elementwise_affine else None
    self.bias = Parameter(Tensor.zeros(*self.normalized_shape, dtype=dtype, device=device)) if elementwise_affine and bias else None
  def forward(self, x): return F.layer_norm(x, self.normalized_shape, self.weight, self.bias, self.eps)
  def extra_repr(self): return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"

class RMSNorm(Module):
  def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device=None, dtype=None):
    super().__init__()
    self.normalized_shape, self.eps, self.elementwise_affine = _shape(normalized_shape), eps, elementwise_affine
    self.weight = Parameter(Tensor.ones(*self.normalized_shape, dtype=dtype, device=device)) if elementwise_affine else None
  def forward(self, x): return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)
  def extra_repr(self): return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"

class GroupNorm(Module):
  def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device=None, dtype=None):
    super().__init__()
    if num_channels % num_groups: raise ValueError(f"GroupNorm: num_channels ({num_channels}) must be divisible by num_groups ({num_groups})")
    self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
    self.weight = Parameter(Tensor.ones(num_channels, dtype=dtype, device=device)) if affine else None
    self.bias = Parameter(Tensor.zeros(num_channels, dtype=dtype, device=device)) if affine else None
  def forward(self, x): return F.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)
  def extra_repr(self): return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"

class _InstanceNorm(Module):
  """Each sample's channels normalized over their own positions (nn.functional.instance_norm); affine adds a learned
  scale and shift per channel; track_running_stats keeps running statistics while training (by momentum; None leaves
  them, and num_batches_tracked, as they are) and normalizes by them in eval mode, as PyTorch's does."""
  dims: tuple
  def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
               track_running_stats: bool = False, device=None, dtype=None):
    super().__init__()
    self.num_features, self.eps, self.momentum, self.affine, self.track_running_stats = num_features, eps, momentum, affine, track_running_stats
    self.weight = Parameter(Tensor.ones(num_features, dtype=dtype, device=device)) if affine else None
    self.bias = Parameter(Tensor.zeros(num_features, dtype=dtype, device=device)) if affine else None
    _running_stats(self, num_features, track_running_stats, dtype, device)
  def forward(self, x):
    if x.ndim not in self.dims:
      raise ValueError(f"{type(self).__name__}: expected a {' or '.join(f'{d}D' for d in self.dims)} input, got shape {tuple(x.shape)}")
    unbatched = x.ndim == self.dims[0]
    factor = 0.0 if self.momentum is None else self.momentum   # torch's: None keeps the statistics, counts nothing
    y = F.instance_norm(x.unsqueeze(0) if unbatched else x, self.running_mean, self.running_var, self.weight, self.bias,
                        self.training or not self.track_running_stats, factor, self.eps)
    return y.squeeze(0) if unbatched else y
  def extra_repr(self):
    return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, track_running_stats={self.track_running_stats}"

class InstanceNorm1d(_InstanceNorm): dims = (2, 3)
class InstanceNorm2d(_InstanceNorm): dims = (3, 4)
class InstanceNorm3d(_InstanceNorm): dims = (4, 5)

class LocalResponseNorm(Module):
  def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0):
    super().__init__()
    self.size, self.alpha, self.beta, self.k = size, alpha, beta, k
  def forward(self, x): return F.local_response_norm(x, self.size, self.alpha, self.beta, self.k)
  def extra_repr(self): return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
