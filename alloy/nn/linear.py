"""Linear and Identity, with PyTorch's default initialization (init.default_weight_and_bias_)."""
from __future__ import annotations
from alloy.tensor import Tensor
from alloy.nn.module import Module
from alloy.nn.parameter import Parameter
from alloy.nn import init

class Identity(Module):
  """Returns its input; takes (and ignores) any constructor arguments, as PyTorch's does."""
  def __init__(self, *args, **kwargs): super().__init__()
  def forward(self, x): return x

class Linear(Module):
  """y = x @ weight.T + bias, weight of shape (out_features, in_features)."""
  def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None):
    super().__init__()
    for name, n in (("in_features", in_features), ("out_features", out_features)):
      if isinstance(n, bool) or not isinstance(n, int) or n < 0: raise ValueError(f"Linear: {name} must be a non-negative int, got {n!r}")
    self.in_features, self.out_features = in_features, out_features
    self.weight = Parameter(Tensor.empty(out_features, in_features, dtype=dtype, device=device))
    self.bias = Parameter(Tensor.empty(out_features, dtype=dtype, device=device)) if bias else None
    self.reset_parameters()
  def reset_parameters(self): init.default_weight_and_bias_(self.weight, self.bias)
  def forward(self, x: Tensor) -> Tensor:
    if x.shape[-1:] != (self.in_features,):
      raise ValueError(f"Linear: the input's last dimension must be in_features={self.in_features}, got shape {tuple(x.shape)}")
    y = x.matmul(self.weight.T)
    return y if self.bias is None else y + self.bias
  def extra_repr(self): return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
