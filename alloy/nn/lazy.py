"""The lazy layers (LazyLinear, LazyConv1d/2d/3d, LazyConvTranspose1d/2d/3d, LazyBatchNorm1d/2d/3d,
LazyInstanceNorm1d/2d/3d), PyTorch's: a layer built without its input size, which it reads from its first input. That
call builds the layer it stands for in place (its class becomes that layer's, its parameters initialized as that layer
initializes them) and runs it. Parameters go to the device given to the constructor or to .to(), else to the first
input's, and take the dtype given, else the default float. Hooks and train/eval mode set before the first call stay.
As in PyTorch, an optimizer sees the parameters only once a first call has made them."""
from __future__ import annotations
from alloy.nn.module import Module
from alloy.nn.linear import Linear
from alloy.nn.conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from alloy.nn.norm import BatchNorm1d, BatchNorm2d, BatchNorm3d, InstanceNorm1d, InstanceNorm2d, InstanceNorm3d
from alloy.runtime.registry import canonical_device

KEPT = ("training", "_forward_pre_hooks", "_forward_hooks", "_backward_pre_hooks", "_backward_hooks")

class LazyModule(Module):
  becomes: type   # the layer built at the first call
  def __init__(self, *args, device=None, dtype=None, **kwargs):
    super().__init__()
    object.__setattr__(self, "_lazy", [args, kwargs, device, dtype])
  def in_size(self, x) -> int: return x.shape[1]   # (N, C, ...): a channel count
  def has_uninitialized_params(self) -> bool: return True
  def to(self, device=None, dtype=None):
    if isinstance(device, str): self._lazy[2] = canonical_device(device)
    if dtype is not None: self._lazy[3] = dtype
    return self
  def forward(self, x, *rest, **kw):
    args, kwargs, device, dtype = self._lazy
    kept, size = {name: getattr(self, name) for name in KEPT}, self.in_size(x)
    object.__delattr__(self, "_lazy")
    self.__class__ = self.becomes   # first: the layer's __init__ (its super() calls) needs an instance of it
    self.__init__(size, *args, device=device or x.device, dtype=dtype, **kwargs)
    for name, value in kept.items(): object.__setattr__(self, name, value)
    return self.forward(x, *rest, **kw)
  def extra_repr(self): return "uninitialized: its input size is read from its first input"

class LazyLinear(LazyModule):
  becomes = Linear
  def in_size(self, x) -> int: return x.shape[-1]

class _LazyUnbatchable(LazyModule):
  """Channels at dim 1 of a batch, dim 0 of an unbatched input (nd + 1 dims)."""
  nd: int
  def in_size(self, x) -> int: return x.shape[0] if x.ndim == self.nd + 1 else x.shape[1]

class LazyConv1d(_LazyUnbatchable): becomes, nd = Conv1d, 1
class LazyConv2d(_LazyUnbatchable): becomes, nd = Conv2d, 2
class LazyConv3d(_LazyUnbatchable): becomes, nd = Conv3d, 3
class LazyConvTranspose1d(_LazyUnbatchable): becomes, nd = ConvTranspose1d, 1
class LazyConvTranspose2d(_LazyUnbatchable): becomes, nd = ConvTranspose2d, 2
class LazyConvTranspose3d(_LazyUnbatchable): becomes, nd = ConvTranspose3d, 3
class LazyBatchNorm1d(LazyModule): becomes = BatchNorm1d
class LazyBatchNorm2d(LazyModule): becomes = BatchNorm2d
class LazyBatchNorm3d(LazyModule): becomes = BatchNorm3d

class _LazyInstanceNorm(_LazyUnbatchable):
  """PyTorch's lazy instance norms default to affine and tracked statistics, unlike InstanceNorm's own defaults."""
  def __init__(self, eps: float = 1e-5, momentum=0.1, affine: bool = True, track_running_stats: bool = True, device=None, dtype=None):
    super().__init__(eps, momentum, affine, track_running_stats, device=device, dtype=dtype)

class LazyInstanceNorm1d(_LazyInstanceNorm): becomes, nd = InstanceNorm1d, 1
class LazyInstanceNorm2d(_LazyInstanceNorm): becomes, nd = InstanceNorm2d, 2
class LazyInstanceNorm3d(_LazyInstanceNorm): becomes, nd = InstanceNorm3d, 3
