"""torch.<name>(input, ...) for Tensor methods: PyTorch code calls most ops both ways (torch.exp(x) and x.exp()), so
alloy has both; each function here calls its first argument's method, so the two never differ. torch.max and
torch.min given a second tensor are maximum and minimum, as in PyTorch."""
from __future__ import annotations
from alloy.tensor import Tensor

METHODS = ("abs", "neg", "exp", "exp2", "log", "log2", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "erf",
           "floor", "ceil", "round", "trunc", "sign", "square", "reciprocal", "sum", "mean", "prod", "amax", "amin", "argmax",
           "argmin", "std", "var", "all", "any", "cumsum", "logsumexp", "softmax", "log_softmax", "clamp", "clip", "reshape",
           "permute", "transpose", "squeeze", "unsqueeze", "flatten", "chunk", "split", "flip", "dot", "pow", "add", "sub", "mul",
           "div", "remainder", "floor_divide", "eq", "ne", "lt", "le", "gt", "ge", "masked_fill", "isnan", "isinf", "isfinite",
           "lerp", "addcmul", "addcdiv", "logical_not", "numel", "clone", "detach", "nonzero", "index_add", "index_copy", "index_fill",
           "index_put", "index_put_", "scatter_add", "scatter_reduce", "fill_", "zero_", "abs_", "neg_", "exp_", "log_", "sqrt_",
           "sigmoid_", "relu_", "clamp_", "clip_")

def _function(name: str):
  def call(input, *args, **kwargs):
    if not isinstance(input, Tensor): raise TypeError(f"{name}: expected a Tensor, got {type(input).__name__}")
    return getattr(input, name)(*args, **kwargs)
  call.__name__ = call.__qualname__ = name
  call.__doc__ = f"torch.{name}(input, ...): input.{name}(...)"
  return call

def _extreme(name: str, elementwise: str):
  method = _function(name)
  def call(input, *args, **kwargs):
    if args and isinstance(args[0], Tensor): return getattr(input, elementwise)(*args)   # torch.max(a, b)
    return method(input, *args, **kwargs)
  call.__name__ = call.__qualname__ = name
  call.__doc__ = f"torch.{name}: over dims as input.{name}(...), or with a second tensor input.{elementwise}(other)"
  return call

FUNCTIONS = {**{name: _function(name) for name in METHODS}, "max": _extreme("max", "maximum"), "min": _extreme("min", "minimum")}
