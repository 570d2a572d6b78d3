"""The inverse trigonometric and the hyperbolic functions (PyTorch's names), composed from the primitives: atan by
range reduction and a polynomial (Cephes' float32 minimax one; its rational one for float64), atan2, asin and acos
from it; sinh, cosh, asinh, acosh, atanh from exp, expm1, log and log1p, each in the form that neither cancels nor
overflows where the value is representable. 16-bit floats compute in float32. Branches that a where() leaves out get
safe inputs, so no NaN from them reaches a gradient."""
from __future__ import annotations
import math
from alloy import dtype as dt
from alloy.tensor import Tensor, where
from alloy.mathfuncs import float_operand, horner, signbit

TAN_3PI_8, TAN_PI_8 = 2.414213562373095, 0.41421356237309503
F32_ATAN = (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1)   # z (= x^2) polynomial, highest first
F64_ATAN_P = (-8.750608600031904122785e-1, -1.615753718733365076637e1, -7.500855792314704667340e1, -1.228866684490136173410e2,
              -6.485021904942025371773e1)
F64_ATAN_Q = (2.485846490142306297962e1, 1.650270098316988542046e2, 4.328810604912902668951e2, 4.853903996359136964868e2,
              1.945506571482613964425e2)
LN2 = math.log(2.0)

def _atan_reduced(x: Tensor) -> Tensor:
  """atan of x >= 0 (inf included): reduced to [0, tan(pi/8)] through pi/2 - atan(1/x) and pi/4 + atan((x-1)/(x+1))."""
  big, mid = x > TAN_3PI_8, x > TAN_PI_8
  safe = where(big, x, 1.0)   # 1/x only where x is large; (x-1)/(x+1) is finite everywhere but at inf
  r = where(big, -1.0 / safe, where(mid, (x - 1.0) / where(big, 1.0, x + 1.0), x))
  const = lambda v: Tensor.full((), v, dtype=x.dtype, device=x.device)   # a bare number would be a float32 constant
  base = where(big, const(math.pi / 2), where(mid, const(math.pi / 4), const(0.0)))
  z = r * r
  if x.dtype is dt.float64: return base + (r + r * z * horner(z, F64_ATAN_P) / horner(z, (1.0,) + F64_ATAN_Q))
  return base + (r + r * z * horner(z, F32_ATAN))

def atan(input: Tensor) -> Tensor:
  x, out = float_operand(input)
  a = _atan_reduced(x.abs())
  return where(x < 0, -a, a).cast(out)

def atan2(input: Tensor, other) -> Tensor:
  """torch.atan2(y, x): the angle of (x, y) in [-pi, pi], with the signs of zeros and the infinities as C's atan2."""
  y, out = float_operand(input)
  x = other.cast(y.dtype) if isinstance(other, Tensor) else Tensor.full((), other, dtype=y.dtype, device=y.device)
  ax, ay = x.abs(), y.abs()
  both_inf = (ax == float("inf")) & (ay == float("inf"))
  hi, lo = ax.maximum(ay), ax.minimum(ay)
  ratio = where(both_inf, 1.0, lo / where(hi == 0, 1.0, hi))   # 0/0 and inf/inf kept out: 0 and 1
  a = _atan_reduced(where(hi == 0, 0.0, ratio))
  a = where(ay > ax, math.pi / 2 - a, a)
  a = where(signbit(x), math.pi - a, a)
  return where(signbit(y), -a, a).cast(out)

def asin(input: Tensor) -> Tensor:
  x, out = float_operand(input)
  return atan2(x, ((1.0 - x) * (1.0 + x)).sqrt()).cast(out)   # nan beyond [-1, 1] through the root

def acos(input: Tensor) -> Tensor:
  x, out = float_operand(input)
  return atan2(((1.0 - x) * (1.0 + x)).sqrt(), x).cast(out)

def _half_exp(ax: Tensor) -> Tensor:
  """e^ax / 2 for ax >= 0, finite up to the float's largest sinh (e^ax alone overflows ln 2 sooner)."""
  near = ax < 80.0
  return where(near, where(near, ax, 0.0).exp() * 0.5, (ax - LN2).exp())

def sinh(input: Tensor) -> Tensor:
  x, out = float_operand(input)
  ax = x.abs()
  small = ax < 1.0
  s = where(small, x, 0.0)
  h = _half_exp(where(small, 1.0, ax))
  return where(small, (s.expm1() - (-s).expm1()) * 0.5, where(x < 0, -1.0, 1.0) * (h - 0.25 / h)).cast(out)

def cosh(input: Tensor) -> Tensor:
  x, out = float_operand(input)
  h = _half_exp(x.abs())
  return (h + 0.25 / h).cast(out)

def asinh(input: Tensor) -> Tensor:
  """sign(x) log1p(|x| + x^2 / (1 + sqrt(1 + x^2))); log|x| + ln 2 where x^2 would overflow."""
  x, out = float_operand(input)
  ax = x.abs()
  huge = ax > 1e18
  s = where(huge, 1.0, ax)
  a = where(huge, ax.log() + LN2, (s + s * s / (1.0 + (1.0 + s * s).sqrt())).log1p())
  return where(x < 0, -a, a).cast(out)

def acosh(input: Tensor) -> Tensor:
  """log1p((x - 1) + sqrt((x - 1)(x + 1))) (exact near 1); log x + ln 2 where x^2 would overflow; nan below 1."""
  x, out = float_operand(input)
  huge = x > 1e18
  s = where(huge, 2.0, x)
  t = s - 1.0
  return where(huge, x.log() + LN2, (t + (t * (s + 1.0)).sqrt()).log1p()).cast(out)

def atanh(input: Tensor) -> Tensor:
  """sign(x) log1p(2|x| / (1 - |x|)) / 2 (1 - |x| is exact near 1, where 1 + x is not): +-inf at +-1, nan beyond."""
  x, out = float_operand(input)
  ax = x.abs()
  a = (2.0 * ax / (1.0 - ax)).log1p() * 0.5
  return where(x < 0, -a, a).cast(out)
