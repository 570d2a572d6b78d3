"""The activation modules: ReLU, GELU, SiLU, Sigmoid, Tanh, Softmax, LogSoftmax over the Tensor methods, and
LeakyReLU, ELU, SELU, Softplus, Hardtanh, ReLU6, Mish, Hardswish, Hardsigmoid over nn.functional. `inplace` is
accepted and means nothing: every result is a new value."""
from __future__ import annotations
from alloy.nn.module import Module
from alloy.nn import functional as F

class ReLU(Module):
  def __init__(self, inplace: bool = False): super().__init__()
  def forward(self, x): return x.relu()

class GELU(Module):
  def __init__(self, approximate: str = "none"):
    super().__init__()
    if approximate not in ("none", "tanh"): raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
    self.approximate = approximate
  def forward(self, x): return x.gelu(approximate=self.approximate)
  def extra_repr(self): return f"approximate={self.approximate!r}"

class SiLU(Module):
  def __init__(self, inplace: bool = False): super().__init__()
  def forward(self, x): return x.silu()

class Sigmoid(Module):
  def forward(self, x): return x.sigmoid()

class Tanh(Module):
  def forward(self, x): return x.tanh()

class Softmax(Module):
  def __init__(self, dim: int | None = None):
    super().__init__()
    if dim is None: raise ValueError("Softmax: pass dim (the implicit choice of dim is deprecated in PyTorch and not supported here)")
    self.dim = dim
  def forward(self, x): return x.softmax(self.dim)
  def extra_repr(self): return f"dim={self.dim}"

class LogSoftmax(Softmax):
  def forward(self, x): return x.log_softmax(self.dim)

class LeakyReLU(Module):
  def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
    super().__init__()
    self.negative_slope = negative_slope
  def forward(self, x): return F.leaky_relu(x, self.negative_slope)
  def extra_repr(self): return f"negative_slope={self.negative_slope}"

class ELU(Module):
  def __init__(self, alpha: float = 1.0, inplace: bool = False):
    super().__init__()
    self.alpha = alpha
  def forward(self, x): return F.elu(x, self.alpha)

class Softplus(Module):
  def __init__(self, beta: float = 1.0, threshold: float = 20.0):
    super().__init__()
    self.beta, self.threshold = beta, threshold
  def forward(self, x): return F.softplus(x, self.beta, self.threshold)

class Hardtanh(Module):
  def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    super().__init__()
    self.min_val, self.max_val = min_val, max_val
  def forward(self, x): return F.hardtanh(x, self.min_val, self.max_val)

class ReLU6(Hardtanh):
  def __init__(self, inplace: bool = False): super().__init__(0.0, 6.0)

class Mish(Module):
  def forward(self, x): return F.mish(x)

class Hardswish(Module):
  def forward(self, x): return F.hardswish(x)

class Hardsigmoid(Module):
  def forward(self, x): return F.hardsigmoid(x)

class SELU(Module):
  def forward(self, x): return F.selu(x)
