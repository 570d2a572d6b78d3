"""log1p, expm1, logaddexp and logaddexp2: the log and exp forms that stay accurate where the plain ones round away
(x near 0, or two exponentials far apart), built from log and exp, with their own gradient rules.

log1p(x) = log(u) * x / (u - 1) with u = 1 + x (x itself where u rounds to 1): the rounding error of u cancels
(Goldberg's method). expm1(x) = (u - 1) * x / log(u) with u = exp(x) (Kahan's). Both compute 16-bit floats in
float32. Their gradients are g / (1 + x) and g * exp(x): differentiating the formulas themselves would bring the
rounding back. logaddexp(a, b) = max + log1p(exp(-|a - b|)), exact at a == b (also both infinite); its gradient
is g * sigmoid(a - b) for a, as in PyTorch (half each at a tie).
"""
from __future__ import annotations
import math
from alloy import dtype as dt, autograd
from alloy.tensor import Tensor, broadcast_shape, where

def _float(x: Tensor) -> tuple[Tensor, dt.DType]:
  """x in the dtype it is computed in (16-bit floats in float32, integers in the default float), and the result's."""
  out = x.dtype if x.dtype.is_float else dt.default_float
  return x.detach().cast(dt.float32 if out in (dt.float16, dt.bfloat16) else out), out

def _log1p_rule(out, g, x): return (g / (x + 1),)
def _expm1_rule(out, g, x): return (g * x.exp(),)

def log1p(input: Tensor) -> Tensor:
  """torch.log1p: log(1 + x), accurate for small x."""
  t, out_dtype = _float(input)
  u = t + 1
  out = where((u == 1) | (u == float("inf")), t, u.log() * (t / (u - 1))).cast(out_dtype)
  return autograd.record(out, _log1p_rule, (input,), input.detach()) if input._ag is not None else out

def expm1(input: Tensor) -> Tensor:
  """torch.expm1: exp(x) - 1, accurate for small x."""
  t, out_dtype = _float(input)
  u = t.exp()
  out = where(u == 1, t, (u - 1) * (t / u.log()))
  out = where(u == float("inf"), u, where(u == 0, -1.0, out)).cast(out_dtype)
  return autograd.record(out, _expm1_rule, (input,), input.detach()) if input._ag is not None else out

def _pair(a: Tensor, b, what: str) -> tuple[Tensor, Tensor]:
  if not isinstance(a, Tensor) or not isinstance(b, Tensor):
    raise TypeError(f"{what}: expected two Tensors, got {type(a).__name__} and {type(b).__name__}")
  if a.device != b.device: raise ValueError(f"{what}: expected both tensors on the same device, got {a.device} and {b.device}")
  d = dt.promote_types(a.dtype, b.dtype)
  shape = broadcast_shape(a.shape, b.shape)
  return a.cast(d).expand(shape), b.cast(d).expand(shape)

def _logaddexp_rule(out, g, a, b, base_e: bool):
  diff = (a - b) * (1.0 if base_e else math.log(2))
  return g * diff.sigmoid(), g * (-diff).sigmoid()

def _logaddexp(a: Tensor, b, base_e: bool, what: str) -> Tensor:
  a, b = _pair(a, b, what)
  x, out_dtype = _float(a)
  y, _ = _float(b)
  m, gap = x.maximum(y), -(x - y).abs()
  tail = log1p(gap.exp()) if base_e else log1p(gap.exp2()) * (1 / math.log(2))
  out = where(x == y, x + (math.log(2) if base_e else 1.0), m + tail).cast(out_dtype)
  if a._ag is None and b._ag is None: return out
  return autograd.record(out, _logaddexp_rule, (a, b), a.detach(), b.detach(), base_e)

def logaddexp(input: Tensor, other: Tensor) -> Tensor:
  """torch.logaddexp: log(exp(a) + exp(b)) without overflow."""
  return _logaddexp(input, other, True, "logaddexp")

def logaddexp2(input: Tensor, other: Tensor) -> Tensor:
  """torch.logaddexp2: log2(2**a + 2**b) without overflow."""
  return _logaddexp(input, other, False, "logaddexp2")
