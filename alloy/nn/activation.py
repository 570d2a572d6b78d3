"""The activation modules over the Tensor methods: ReLU, GELU, SiLU, Sigmoid, Tanh, Softmax, LogSoftmax.
(The ones needing nn.functional, LeakyReLU, ELU and the like, come with it.)"""
from __future__ import annotations
from alloy.nn.module import Module

class ReLU(Module):
  def __init__(self, inplace: bool = False): super().__init__()   # inplace is accepted and means nothing: values are new
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
