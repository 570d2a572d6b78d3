"""Linear and Identity, with PyTorch's default initialization (init.default_weight_and_bias_)."""
from __future__ import annotations
import math
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

class Bilinear(Module):
  """y = x1^T A x2 + b per output feature, weight (out, in1, in2) and bias initialized uniform in +-1/sqrt(in1), as PyTorch."""
  def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, device=None, dtype=None):
    super().__init__()
    self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
    self.weight = Parameter(Tensor.empty(out_features, in1_features, in2_features, dtype=dtype, device=device))
    self.bias = Parameter(Tensor.empty(out_features, dtype=dtype, device=device)) if bias else None
    bound = 1 / math.sqrt(in1_features) if in1_features else 0.0
    init.uniform_(self.weight, -bound, bound)
    if self.bias is not None: init.uniform_(self.bias, -bound, bound)
  def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
    if x1.shape[-1] != self.in1_features or x2.shape[-1] != self.in2_features:
      raise ValueError(f"Bilinear: inputs must end in {self.in1_features} and {self.in2_features} features, "
                       f"got {tuple(x1.shape)} and {tuple(x2.shape)}")
    # x1 times each output's (in1, in2) matrix as one matmul: (..., in1) @ (in1, out * in2), then the dot with x2
    y = x1 @ self.weight.permute(1, 0, 2).reshape(self.in1_features, -1)
    y = y.reshape(x1.shape[:-1] + (self.out_features, self.in2_features))
    y = (y * x2.unsqueeze(-2)).sum(-1)
    return y if self.bias is None else y + self.bias
  def extra_repr(self):
    return f"in1_features={self.in1_features}, in2_features={self.in2_features}, out_features={self.out_features}, bias={self.bias is not None}"
