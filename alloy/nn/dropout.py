"""Dropout: zeroes elements with probability p while training (alloy's random stream), the identity in eval mode;
Dropout1d/2d/3d zero whole channels."""
from __future__ import annotations
from alloy.tensor import Tensor
from alloy.nn.module import Module
from alloy.nn import functional as F

class Dropout(Module):
  def __init__(self, p: float = 0.5, inplace: bool = False):
    super().__init__()
    if not 0.0 <= p <= 1.0: raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    self.p, self.inplace = p, inplace
  def forward(self, x): return F.dropout(x, self.p, self.training, self.inplace)
  def extra_repr(self): return f"p={self.p}, inplace={self.inplace}"

class _ChannelDropout(Module):
  """Zeroes whole channels (dim 1 of (N, C, ...), dim 0 unbatched) with probability p while training, scaling the
  others by 1 / (1 - p); the identity in eval mode."""
  dims: tuple
  def __init__(self, p: float = 0.5, inplace: bool = False):
    super().__init__()
    if not 0.0 <= p <= 1.0: raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    self.p, self.inplace = p, inplace
  def forward(self, x):
    if x.ndim not in self.dims:
      raise ValueError(f"{type(self).__name__}: expected a {' or '.join(f'{d}D' for d in self.dims)} input, got {tuple(x.shape)}")
    if not self.training or self.p == 0: return x
    lead = 2 if x.ndim == self.dims[1] else 1
    if self.p == 1: return x * 0
    keep = (Tensor.rand(*x.shape[:lead], device=x.device) >= self.p).cast(x.dtype).reshape(x.shape[:lead] + (1,) * (x.ndim - lead))
    out = x * keep * (1.0 / (1.0 - self.p))
    return x.copy_(out) if self.inplace else out
  def extra_repr(self): return f"p={self.p}, inplace={self.inplace}"

class Dropout1d(_ChannelDropout): dims = (2, 3)
class Dropout2d(_ChannelDropout): dims = (3, 4)
class Dropout3d(_ChannelDropout): dims = (4, 5)
