"""The activation modules: GELU, Sigmoid, Tanh, Softmax, LogSoftmax over the Tensor methods, PReLU (a learned slope),
and ReLU, SiLU, LeakyReLU, ELU, SELU, CELU, Softplus, Hardtanh, ReLU6, Threshold, Mish, Hardswish, Hardsigmoid,
Softmin, Softsign, Tanhshrink, GLU over nn.functional.
`inplace=True` is PyTorch's: the input itself takes the result and is returned (nn.functional's maybe_in_place),
refused on a leaf that requires grad while grad mode is on."""
from __future__ import annotations
from alloy.tensor import Tensor
from alloy.nn.module import Module
from alloy.nn.parameter import Parameter
from alloy.nn import functional as F

class InPlaceActivation(Module):
  """A module whose functional takes inplace=; repr shows it where it is set, as PyTorch's does."""
  def __init__(self, inplace: bool = False):
    super().__init__()
    self.inplace = inplace
  def extra_repr(self): return ", ".join(self.repr_fields() + (["inplace=True"] if self.inplace else []))
  def repr_fields(self) -> list[str]: return []

class ReLU(InPlaceActivation):
  def forward(self, x): return F.relu(x, self.inplace)

class SiLU(InPlaceActivation):
  def forward(self, x): return F.silu(x, self.inplace)

class GELU(Module):
  def __init__(self, approximate: str = "none"):
    super().__init__()
    if approximate not in ("none", "tanh"): raise ValueError(f"GELU: approximate must be 'none' or 'tanh', got {approximate!r}")
    self.approximate = approximate
  def forward(self, x): return x.gelu(approximate=self.approximate)
  def extra_repr(self): return f"approximate={self.approximate!r}"

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

class LeakyReLU(InPlaceActivation):
  def __init__(self, negative_slope: float = 0.01, inplace: bool = False):
    super().__init__(inplace)
    self.negative_slope = negative_slope
  def forward(self, x): return F.leaky_relu(x, self.negative_slope, self.inplace)
  def repr_fields(self): return [f"negative_slope={self.negative_slope}"]

class ELU(InPlaceActivation):
  def __init__(self, alpha: float = 1.0, inplace: bool = False):
    super().__init__(inplace)
    self.alpha = alpha
  def forward(self, x): return F.elu(x, self.alpha, self.inplace)
  def repr_fields(self): return [f"alpha={self.alpha}"]

class CELU(ELU):
  def forward(self, x): return F.celu(x, self.alpha, self.inplace)

class SELU(InPlaceActivation):
  def forward(self, x): return F.selu(x, self.inplace)

class Softplus(Module):
  def __init__(self, beta: float = 1.0, threshold: float = 20.0):
    super().__init__()
    self.beta, self.threshold = beta, threshold
  def forward(self, x): return F.softplus(x, self.beta, self.threshold)

class Hardtanh(InPlaceActivation):
  def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
    super().__init__(inplace)
    if min_val > max_val: raise ValueError(f"Hardtanh: min_val ({min_val}) cannot be greater than max_val ({max_val})")
    self.min_val, self.max_val = min_val, max_val
  def forward(self, x): return F.hardtanh(x, self.min_val, self.max_val, self.inplace)
  def repr_fields(self): return [f"min_val={self.min_val}", f"max_val={self.max_val}"]

class ReLU6(Hardtanh):
  def __init__(self, inplace: bool = False): super().__init__(0.0, 6.0, inplace)
  def repr_fields(self): return []

class Threshold(InPlaceActivation):
  def __init__(self, threshold: float, value: float, inplace: bool = False):
    super().__init__(inplace)
    self.threshold, self.value = threshold, value
  def forward(self, x): return F.threshold(x, self.threshold, self.value, self.inplace)
  def repr_fields(self): return [f"threshold={self.threshold}", f"value={self.value}"]

class Mish(InPlaceActivation):
  def forward(self, x): return F.mish(x, self.inplace)

class Hardswish(InPlaceActivation):
  def forward(self, x): return F.hardswish(x, self.inplace)
  def extra_repr(self): return ""   # PyTorch's repr leaves inplace out of these two

class Hardsigmoid(InPlaceActivation):
  def forward(self, x): return F.hardsigmoid(x, self.inplace)
  def extra_repr(self): return ""

class PReLU(Module):
  """max(0, x) + weight * min(0, x), one learned slope or one per channel (dim 1), initialized to init."""
  def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None):
    super().__init__()
    self.num_parameters = num_parameters
    self.weight = Parameter(Tensor.full((num_parameters,), init, dtype=dtype, device=device))
  def forward(self, x): return F.prelu(x, self.weight)
  def extra_repr(self): return f"num_parameters={self.num_parameters}"

class Softmin(Softmax):
  def forward(self, x): return F.softmin(x, self.dim)

class RReLU(Module):
  """Leaky ReLU with a random negative slope in [lower, upper] per element while training, their mean in eval."""
  def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False):
    super().__init__()
    self.lower, self.upper, self.inplace = lower, upper, inplace
  def forward(self, x): return F.rrelu(x, self.lower, self.upper, self.training, self.inplace)
  def extra_repr(self): return f"lower={self.lower}, upper={self.upper}"

class Softsign(Module):
  def forward(self, x): return F.softsign(x)

class Tanhshrink(Module):
  def forward(self, x): return F.tanhshrink(x)

class LogSigmoid(Module):
  def forward(self, x): return F.logsigmoid(x)

class Softshrink(Module):
  def __init__(self, lambd: float = 0.5):
    super().__init__()
    self.lambd = lambd
  def forward(self, x): return F.softshrink(x, self.lambd)
  def extra_repr(self): return f"{self.lambd}"

class Hardshrink(Softshrink):
  def forward(self, x): return F.hardshrink(x, self.lambd)

class Softmax2d(Module):
  """Softmax over the channels of (C, H, W) or (N, C, H, W)."""
  def forward(self, x):
    if x.ndim not in (3, 4): raise ValueError(f"Softmax2d: expected a 3-D or 4-D input, got shape {x.shape}")
    return x.softmax(-3)

class GLU(Module):
  def __init__(self, dim: int = -1):
    super().__init__()
    self.dim = dim
  def forward(self, x): return F.glu(x, self.dim)
  def extra_repr(self): return f"dim={self.dim}"
