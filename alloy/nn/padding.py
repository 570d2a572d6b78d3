"""The padding modules over nn.functional.pad: ZeroPad, ConstantPad, ReflectionPad, ReplicationPad and CircularPad
in 1, 2 and 3 dims, with PyTorch's padding argument (an int for every side, or (left, right, top, bottom, ...))."""
from __future__ import annotations
from alloy.nn.module import Module
from alloy.nn import functional as F

class _Pad(Module):
  mode, dims = "constant", 1
  def __init__(self, padding, value: float = 0.0):
    super().__init__()
    self.padding = (padding,) * (2 * self.dims) if isinstance(padding, int) else tuple(padding)
    if len(self.padding) != 2 * self.dims: raise ValueError(f"{type(self).__name__}: padding must be an int or {2 * self.dims} ints, got {padding}")
    self.value = value
  def forward(self, x): return F.pad(x, self.padding, self.mode, self.value if self.mode == "constant" else None)
  def extra_repr(self): return f"{self.padding}" + (f", value={self.value}" if self.mode == "constant" and self.value else "")

class ConstantPad1d(_Pad): dims = 1
class ConstantPad2d(_Pad): dims = 2
class ConstantPad3d(_Pad): dims = 3

class ZeroPad1d(ConstantPad1d):
  def __init__(self, padding): super().__init__(padding, 0.0)
class ZeroPad2d(ConstantPad2d):
  def __init__(self, padding): super().__init__(padding, 0.0)
class ZeroPad3d(ConstantPad3d):
  def __init__(self, padding): super().__init__(padding, 0.0)

class ReflectionPad1d(_Pad): mode, dims = "reflect", 1
class ReflectionPad2d(_Pad): mode, dims = "reflect", 2
class ReflectionPad3d(_Pad): mode, dims = "reflect", 3
class ReplicationPad1d(_Pad): mode, dims = "replicate", 1
class ReplicationPad2d(_Pad): mode, dims = "replicate", 2
class ReplicationPad3d(_Pad): mode, dims = "replicate", 3
class CircularPad1d(_Pad): mode, dims = "circular", 1
class CircularPad2d(_Pad): mode, dims = "circular", 2
class CircularPad3d(_Pad): mode, dims = "circular", 3
