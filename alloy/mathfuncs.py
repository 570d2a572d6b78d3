"""PyTorch's remaining elementwise functions, comparisons and nan-aware reductions, composed from the primitives:
log10, logit, xlogy, frac, fmod, signbit, nan_to_num, the logical_* and bitwise_* names, isclose, allclose, equal,
count_nonzero, nansum, nanmean, aminmax, and the other names of ops alloy has (true_divide, negative, absolute); the
float bit-level functions frexp, ldexp and nextafter, and the integer gcd and lcm."""
from __future__ import annotations
import collections, math
import numpy as np
from alloy import dtype as dt
from alloy.tensor import Tensor, where

LOG10_2 = math.log10(2.0)
MinMax = collections.namedtuple("MinMax", ["min", "max"])   # aminmax's result

def finite_max(d: dt.DType) -> float:
  """The largest finite value of a float dtype (bfloat16's: 0x7F7F as its top 16 bits)."""
  if d is dt.bfloat16: return float(np.array([0x7F7F0000], np.uint32).view(np.float32)[0])
  return float(np.finfo(d.np).max)

def float_operand(x: Tensor) -> tuple:
  """x in the dtype a composed float function computes in (16-bit floats in float32), and the dtype it returns (an
  integer input's: the default float)."""
  if not isinstance(x, Tensor): raise TypeError(f"expected a Tensor, got {type(x).__name__}")
  out = x.dtype if x.dtype.is_float else dt.default_float
  return x.cast(dt.float32 if out.itemsize < 4 else out), out

def horner(z: Tensor, coeffs) -> Tensor:
  """The polynomial coeffs[0] z^(n-1) + ... + coeffs[-1] at z (at least two coefficients)."""
  acc = z * coeffs[0] + coeffs[1]
  for c in coeffs[2:]: acc = acc * z + c
  return acc

def log10(input: Tensor) -> Tensor: return input.log2() * LOG10_2

def logit(input: Tensor, eps=None) -> Tensor:
  """log(p / (1 - p)), p clamped to [eps, 1 - eps] when eps is given."""
  p = input if eps is None else input.clamp(eps, 1 - eps)
  return (p / (1 - p)).log()

def xlogy(input: Tensor, other) -> Tensor:
  """input * log(other), 0 where input is 0 (unless other is nan), as PyTorch."""
  other = other if isinstance(other, Tensor) else Tensor.full((), other, dtype=dt.default_float, device=input.device)
  x = input if input.dtype.is_float else input.cast(dt.default_float)
  return where((x == 0) & (other == other), 0.0, x * other.log())

def frac(input: Tensor) -> Tensor: return input - input.trunc()

def fmod(input: Tensor, other) -> Tensor:
  """C's fmod: the remainder with the dividend's sign, |input| mod |other| (remainder of non-negative operands, exact)
  given input's sign."""
  if isinstance(other, Tensor): b = other.abs()
  else: b = abs(other)
  r = input.abs().remainder(b)
  neg = signbit(input) if r.dtype.is_float else input < 0
  return where(neg, -r, r)

def signbit(input: Tensor) -> Tensor:
  """True where the sign bit is set: negative numbers and -0.0 (1 / -0.0 is -inf), nan by its bit as PyTorch."""
  if not input.dtype.is_float: return input < 0 if not input.dtype.is_unsigned and not input.dtype.is_bool else input.zeros_like(dtype=dt.bool_)
  bits = {2: dt.int16, 4: dt.int32, 8: dt.int64}[input.dtype.itemsize]
  return input.bitcast(bits) < 0

def nan_to_num(input: Tensor, nan: float = 0.0, posinf=None, neginf=None) -> Tensor:
  """nan, +inf and -inf replaced (by default 0 and the dtype's largest and smallest finite values)."""
  if not input.dtype.is_float: return input
  big = finite_max(input.dtype)
  out = where(input != input, nan, input)
  out = where(out == float("inf"), big if posinf is None else posinf, out)
  return where(out == float("-inf"), -big if neginf is None else neginf, out)

def logical_and(input: Tensor, other) -> Tensor: return input.cast(dt.bool_) & _bool(other, input)
def logical_or(input: Tensor, other) -> Tensor: return input.cast(dt.bool_) | _bool(other, input)
def logical_xor(input: Tensor, other) -> Tensor: return input.cast(dt.bool_) ^ _bool(other, input)
def _bool(x, like: Tensor) -> Tensor:
  return x.cast(dt.bool_) if isinstance(x, Tensor) else Tensor.full((), bool(x), dtype=dt.bool_, device=like.device)

def bitwise_and(input: Tensor, other) -> Tensor: return input & other
def bitwise_or(input: Tensor, other) -> Tensor: return input | other
def bitwise_xor(input: Tensor, other) -> Tensor: return input ^ other
def bitwise_not(input: Tensor) -> Tensor: return ~input
def true_divide(input: Tensor, other) -> Tensor: return input / other
def negative(input: Tensor) -> Tensor: return -input
def absolute(input: Tensor) -> Tensor: return input.abs()

def isclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Tensor:
  """|input - other| <= atol + rtol * |other|, equal infinities close, nan close to nan only with equal_nan."""
  close = (input == other) | ((input - other).abs() <= atol + rtol * (other.abs() if isinstance(other, Tensor) else abs(other)))
  if equal_nan: close = close | ((input != input) & (other != other))
  return close

def allclose(input: Tensor, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
  return bool(isclose(input, other, rtol, atol, equal_nan).all().item())

def equal(input: Tensor, other: Tensor) -> bool:
  """True when both have the same shape and the same values (a host read)."""
  return input.shape == other.shape and bool((input == other).all().item())

def count_nonzero(input: Tensor, dim=None) -> Tensor: return (input != 0).sum(dim)

def nansum(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
  return where(input != input, 0, input).sum(dim, keepdim, dtype=dtype)

def nanmean(input: Tensor, dim=None, keepdim: bool = False, *, dtype=None) -> Tensor:
  """The mean of the entries that are not nan (nan where all are)."""
  if not input.dtype.is_float: raise TypeError(f"nanmean: expected a floating point tensor, got {input.dtype.name}")
  kept = input == input
  return nansum(input, dim, keepdim, dtype=dtype) / kept.sum(dim, keepdim).cast(dtype or input.dtype)

def aminmax(input: Tensor, *, dim=None, keepdim: bool = False):
  """(min, max) over dim (all entries when None), PyTorch's named pair."""
  return MinMax(input.amin(dim, keepdim), input.amax(dim, keepdim))

def histc(input: Tensor, bins: int = 100, min: float = 0, max: float = 0) -> Tensor:
  """torch.histc: counts in bins equal-width bins over [min, max] (the data's own range when both are 0, widened by 1
  each way when that is a single value); values outside are left out, max goes to the last bin. Each value is
  compared with every bin (O(n * bins), one fused reduction); no host read."""
  if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1: raise ValueError(f"histc: bins must be a positive int, got {bins!r}")
  if min > max: raise ValueError(f"histc: min ({min}) must not be greater than max ({max})")
  x = (input if input.dtype.is_float else input.cast(dt.default_float)).reshape(-1)
  if min == max == 0: lo, hi = x.amin(), x.amax()
  else: lo, hi = Tensor.full((), float(min), dtype=x.dtype, device=x.device), Tensor.full((), float(max), dtype=x.dtype, device=x.device)
  same = lo == hi
  lo, hi = where(same, lo - 1, lo), where(same, hi + 1, hi)
  inside = (x >= lo) & (x <= hi)
  at = ((x - lo) * bins / (hi - lo)).floor().cast(dt.int32).minimum(bins - 1)
  hits = (at.unsqueeze(-1) == Tensor.arange(bins, dtype=dt.int32, device=x.device)) & inside.unsqueeze(-1)
  return hits.cast(x.dtype).sum(0)

def sgn(input: Tensor) -> Tensor: return input.sign()   # PyTorch's sign extended to complex numbers: for reals, sign
def positive(input: Tensor) -> Tensor: return input
def deg2rad(input: Tensor) -> Tensor: return input * (math.pi / 180.0)
def rad2deg(input: Tensor) -> Tensor: return input * (180.0 / math.pi)
def isposinf(input: Tensor) -> Tensor: return input == float("inf") if input.dtype.is_float else input.zeros_like(dtype=dt.bool_)
def isneginf(input: Tensor) -> Tensor: return input == float("-inf") if input.dtype.is_float else input.zeros_like(dtype=dt.bool_)
def isreal(input: Tensor) -> Tensor: return input.ones_like(dtype=dt.bool_)   # alloy has no complex dtypes

def sinc(input: Tensor) -> Tensor:
  """sin(pi x) / (pi x), 1 at 0."""
  x = input if input.dtype.is_float else input.cast(dt.default_float)
  zero = x == 0
  px = math.pi * where(zero, 1.0, x)
  return where(zero, 1.0, px.sin() / px)

def hypot(input: Tensor, other) -> Tensor:
  """sqrt(a^2 + b^2) without overflow or underflow in the squares: the larger magnitude times sqrt(1 + r^2)."""
  a, b = input.abs(), other.abs() if isinstance(other, Tensor) else abs(other)
  hi, lo = a.maximum(b), a.minimum(b)
  r = lo / where(hi == 0, 1.0, hi)
  return where(hi == float("inf"), float("inf"), hi * (1.0 + r * r).sqrt())

def copysign(input: Tensor, other) -> Tensor:
  """|input| with the sign (bit) of other: -0.0 and negative nan count as negative, as PyTorch."""
  o = other if isinstance(other, Tensor) else Tensor.full((), float(other), device=input.device)
  x = input if input.dtype.is_float else input.cast(dt.default_float)
  negative = signbit(o.cast(x.dtype)) if o.dtype.is_float else o < 0
  return where(negative, -x.abs(), x.abs())

def heaviside(input: Tensor, values: Tensor) -> Tensor:
  """0 below 0, 1 above, values where input is 0."""
  return where(input == 0, values, (input > 0).cast(input.dtype)).cast(input.dtype)

def float_power(input: Tensor, exponent) -> Tensor:
  """input ** exponent in float64 (where the device has it), as PyTorch."""
  e = exponent.cast(dt.float64) if isinstance(exponent, Tensor) else float(exponent)
  return input.cast(dt.float64) ** e

def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor: return where(input.abs() > lambd, input, 0.0)

def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
  if lambd < 0: raise ValueError(f"softshrink: lambd must be non-negative, got {lambd}")
  return where(input > lambd, input - lambd, where(input < -lambd, input + lambd, 0.0))

def renorm(input: Tensor, p: float, dim: int, maxnorm: float) -> Tensor:
  """Each slice along dim whose p-norm exceeds maxnorm scaled down to it (by maxnorm / (norm + 1e-7), as PyTorch)."""
  from alloy.tensor import norm_axis
  d = norm_axis(dim, input.ndim)
  others = tuple(a for a in range(input.ndim) if a != d)
  norms = input.norm(p, others, keepdim=True) if others else input.abs()
  return input * where(norms > maxnorm, maxnorm / (norms + 1e-7), 1.0)

def clamp_min(input: Tensor, min) -> Tensor: return input.clamp(min=min)
def clamp_max(input: Tensor, max) -> Tensor: return input.clamp(max=max)
def fix(input: Tensor) -> Tensor: return input.trunc()

def ldexp(input: Tensor, other) -> Tensor:
  """input * 2^other (exact while the result is in range)."""
  x, out = float_operand(input)
  e = other if isinstance(other, Tensor) else Tensor(other, device=x.device)
  return (x * e.cast(x.dtype).exp2()).cast(out)

def frexp(input: Tensor):
  """(mantissa, exponent) with input = mantissa * 2^exponent, |mantissa| in [0.5, 1) (int32 exponents); zero, inf
  and NaN give themselves and 0, as C's frexp."""
  if not input.dtype.is_float: raise TypeError(f"frexp: expected a floating point tensor, got {input.dtype.name}")
  x = input if input.dtype.itemsize >= 4 else input.cast(dt.float32)
  finite = (x != 0) & x.isfinite()
  a = where(finite, x.abs(), 1.0)
  def scaled(e): return a * (-(e * 0.5).floor()).exp2() * (-(e - (e * 0.5).floor())).exp2()   # a 2^-e in two steps: both in range
  e = a.log2().floor() + 1   # log2 may round across a power of two: one correcting step each way
  m = scaled(e)
  e = where(m >= 1, e + 1, where(m < 0.5, e - 1, e))
  m = scaled(e)
  mantissa = where(finite, m * x.sign(), x).cast(input.dtype)
  return mantissa, where(finite, e, 0).cast(dt.int32)

def nextafter(input: Tensor, other) -> Tensor:
  """The next representable value after input toward other (other itself where they are equal, NaN where either is)."""
  if input.dtype not in (dt.float32, dt.float64): raise TypeError(f"nextafter: expected float32 or float64 tensors, got {input.dtype.name}")
  y = other if isinstance(other, Tensor) else Tensor(float(other), dtype=input.dtype, device=input.device)
  bits_dtype = dt.int32 if input.dtype is dt.float32 else dt.int64
  bits = input.bitcast(bits_dtype)
  away = (input < y) == (input > 0)   # away from zero: the bit pattern grows
  stepped = where(away, bits + 1, bits - 1).bitcast(input.dtype)
  tiny = Tensor(1, dtype=bits_dtype, device=input.device).bitcast(input.dtype)   # the least subnormal
  from_zero = where(y > 0, tiny, -tiny)
  out = where(input == 0, from_zero, stepped)
  return where((input != input) | (y != y), float("nan"), where(input == y, y, out))

def _integers(input: Tensor, other, op: str) -> tuple:
  b = other if isinstance(other, Tensor) else Tensor(other, dtype=input.dtype, device=input.device)
  if input.dtype.is_float or input.dtype.is_bool or b.dtype.is_float or b.dtype.is_bool:
    raise TypeError(f"{op}: expected integer tensors, got {input.dtype.name} and {b.dtype.name}")
  return input, b

def gcd(input: Tensor, other) -> Tensor:
  """The greatest common divisor, elementwise, non-negative (gcd(0, 0) = 0): Euclid's steps, as many as the dtype's
  worst case (consecutive Fibonacci numbers) needs, each a select, so the whole is one fused kernel."""
  a, b = _integers(input, other, "gcd")
  out = dt.promote_types(a.dtype, b.dtype)
  wide = dt.promote_types(out, dt.int32)   # narrower ints in int32, as C++ promotes them: |-128| is 128 there
  a, b = a.cast(wide).abs(), b.cast(wide).abs()
  steps = {1: 12, 2: 24, 4: 47, 8: 93}[out.itemsize]
  for _ in range(steps):
    nonzero = b != 0
    a, b = where(nonzero, b, a), where(nonzero, a % where(nonzero, b, 1), 0)
  return a.cast(out)

def lcm(input: Tensor, other) -> Tensor:
  """The least common multiple, elementwise, non-negative (0 where either is 0)."""
  a, b = _integers(input, other, "lcm")
  g = gcd(a, b)
  wide = dt.promote_types(a.dtype, b.dtype, dt.int32)   # narrower ints multiply in int32 and wrap after abs, as C++ promotes them
  product = (a.cast(wide) // where(g == 0, 1, g).cast(wide) * b.cast(wide)).abs()
  return where(g == 0, 0, product).cast(dt.promote_types(a.dtype, b.dtype))
