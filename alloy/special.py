"""Special functions with PyTorch's names, composed from the primitives: lgamma (Lanczos' approximation, g = 7, with
the reflection formula below 1/2), digamma (the recurrence up past 6, then the asymptotic series; reflection below
1/2), polygamma (the Hurwitz zeta series as Cephes sums it: 9 + n terms, then Euler-Maclaurin with 12 Bernoulli
terms; below 1/2 the reflection formula, its n-th derivative of cot a polynomial in cot made on the host), mvlgamma,
erfinv (Giles' single-precision polynomials, then Newton steps on erf for float64), erfc (1 - erf below 1, else
Cephes' rational approximations times exp(-x^2), so its tail keeps its relative precision) and i0 (the power series to
30, the asymptotic series beyond). 16-bit floats compute
in float32. Branches a where() leaves out get safe inputs, so no NaN from them reaches a value or a gradient."""
from __future__ import annotations
import math
from alloy import dtype as dt
import numpy as np
from alloy.tensor import Tensor, where
from alloy.mathfuncs import float_operand, horner

LANCZOS_G = 7.0
LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059,
           12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7)
HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
# digamma's asymptotic series: log y - 1/(2y) - sum of B_2k / (2k y^2k), the Bernoulli-number terms from y^-2
DIGAMMA_SERIES = (1 / 12, -1 / 120, 1 / 252, -1 / 240, 1 / 132, -691 / 32760, 1 / 12)
GILES_SMALL = (2.81022636e-08, 3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
               0.246640727, 1.50140941)
GILES_LARGE = (-0.000200214257, 0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
               1.00167406, 2.83297682)

def _poles(x: Tensor) -> Tensor: return (x <= 0) & (x == x.floor())

def _off_integer(x: Tensor) -> Tensor:
  """x minus its nearest integer (exact): sin(pi x) and tan(pi x) up to sign from it keep their precision near the
  poles, where pi * x itself would lose it."""
  return x - x.round()

def _lgamma_right(x: Tensor) -> Tensor:
  """log Gamma(x) for x >= 1/2."""
  z = x - 1.0
  a = LANCZOS[0] + sum(c / (z + k) for k, c in enumerate(LANCZOS[1:], 1))
  t = z + LANCZOS_G + 0.5
  return HALF_LOG_2PI + (z + 0.5) * t.log() - t + a.log()

def lgamma(input: Tensor) -> Tensor:
  """log |Gamma(x)|: +inf at the poles (0, -1, -2, ...)."""
  x, out = float_operand(input)
  left = x < 0.5
  right = _lgamma_right(where(left, 1.0 - x, x))   # reflected where x < 1/2: log Gamma(1 - x)
  sin = (math.pi * _off_integer(where(left, x, 0.25))).sin().abs()
  reflected = math.log(math.pi) - where(_poles(x), 1.0, sin).log() - right
  return where(_poles(x) | (x.abs() == float("inf")), float("inf"), where(left, reflected, right)).cast(out)

def digamma(input: Tensor) -> Tensor:
  """d/dx log Gamma(x): -inf at 0, nan at the negative integers, as PyTorch."""
  x, out = float_operand(input)
  left = x < 0.5
  y = where(left, 1.0 - x, x)   # reflected where x < 1/2: psi(x) = psi(1 - x) - pi / tan(pi x)
  shift = 6 if x.dtype is not dt.float64 else 10
  acc = sum(1.0 / (y + k) for k in range(shift))
  y = y + shift
  inv2 = 1.0 / (y * y)
  series, power = 0.0, inv2
  for c in DIGAMMA_SERIES[:4 if x.dtype is not dt.float64 else 7]:
    series, power = series + c * power, power * inv2
  psi = y.log() - 0.5 / y - series - acc
  tan = (math.pi * _off_integer(where(left & ~_poles(x), x, 0.25))).tan()
  psi = where(left, psi - math.pi / tan, psi)
  return where(x == 0, float("-inf"), where(_poles(x), float("nan"), psi)).cast(out)

def erfinv(input: Tensor) -> Tensor:
  """The inverse of erf on [-1, 1]: +-inf at +-1, nan beyond."""
  x, out = float_operand(input)
  inside = x.abs() < 1
  s = where(inside, x, 0.0)
  w = -((1.0 - s) * (1.0 + s)).log()
  small = w < 5.0
  y = where(small, horner(where(small, w, 5.0) - 2.5, GILES_SMALL), horner(where(small, 5.0, w).sqrt() - 3.0, GILES_LARGE)) * s
  for _ in range(2 if x.dtype is dt.float64 else 0):   # Newton on erf(y) = s: float32's polynomial is within its rounding already
    y = y - (y.erf() - s) / ((2.0 / math.sqrt(math.pi)) * (-(y * y)).exp())
  edge = where(x > 0, float("inf"), float("-inf"))
  return where(inside, y, where(x.abs() == 1, edge, float("nan"))).cast(out)

# B_2j / (2j)!, j = 1.., for the Hurwitz zeta's Euler-Maclaurin tail
BERNOULLI_OVER_FACTORIAL = tuple(b / math.factorial(2 * j) for j, b in enumerate(
  (1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798, -174611 / 330, 854513 / 138,
   -236364091 / 2730), 1))

def _zeta_right(s: int, y: Tensor) -> Tensor:
  """The Hurwitz zeta sum over k >= 0 of (y + k)^-s for y >= 1/2 and an integer s >= 2: 9 + s terms summed, then
  Euler-Maclaurin's tail at y + 9 + s."""
  shift = 9 + s
  acc = sum((1.0 / (y + k)) ** s for k in range(shift))
  y = y + shift
  inv = 1.0 / y
  tail = inv ** (s - 1) / (s - 1) + 0.5 * inv ** s
  rising, power = float(s), inv ** (s + 1)   # s (s + 1) ... (s + 2j - 2), y^(-s - 2j + 1)
  for j, c in enumerate(BERNOULLI_OVER_FACTORIAL, 1):
    tail = tail + (c * rising) * power
    rising, power = rising * (s + 2 * j - 1) * (s + 2 * j), power * inv * inv
  return acc + tail

def _cot_derivative(n: int) -> tuple:
  """Coefficients (highest degree first) of Q_n with d^n/dx^n cot(pi x) = pi^n Q_n(cot(pi x)): Q_0(c) = c,
  Q_(k+1)(c) = -Q_k'(c) (1 + c^2)."""
  q = np.polynomial.Polynomial([0.0, 1.0])
  for _ in range(n): q = -q.deriv() * np.polynomial.Polynomial([1.0, 0.0, 1.0])
  return tuple(float(c) for c in q.coef[::-1])

def polygamma(n: int, input: Tensor) -> Tensor:
  """The n-th derivative of digamma: (-1)^(n+1) n! zeta(n + 1, x), and below 1/2 the reflection
  psi_n(x) = (-1)^n psi_n(1 - x) - pi d^n/dx^n cot(pi x); at the poles (0, -1, ...) inf, -inf for even n, as PyTorch."""
  if isinstance(n, bool) or not isinstance(n, int) or n < 0: raise ValueError(f"polygamma: n must be a non-negative int, got {n!r}")
  if n == 0: return digamma(input)
  x, out = float_operand(input)
  left = x < 0.5
  right = ((-1) ** (n + 1) * math.factorial(n)) * _zeta_right(n + 1, where(left, 1.0 - x, x))
  off = _off_integer(where(left & ~_poles(x), x, 0.25))   # in [-1/2, 1/2]: cot(pi x) = cot(pi off)
  near = off.abs() < 0.25   # near a pole 1 / tan(pi off); near a zero of cot, tan of the distance to it (exact at 1/2)
  cot = where(near, 1.0 / (math.pi * where(near, off, 0.25)).tan(), off.sign() * (math.pi * (0.5 - where(near, 0.25, off.abs()))).tan())
  reflected = (-1) ** n * right - math.pi ** (n + 1) * horner(cot, _cot_derivative(n))
  return where(_poles(x), float("inf") if n % 2 else float("-inf"), where(left, reflected, right)).cast(out)

def mvlgamma(input: Tensor, p: int) -> Tensor:
  """The multivariate log-gamma of dimension p: p (p - 1) / 4 log pi + the sum of lgamma(x - j / 2), j < p; every
  element must exceed (p - 1) / 2 (PyTorch checks that too, on the host)."""
  if isinstance(p, bool) or not isinstance(p, int) or p < 1: raise ValueError(f"mvlgamma: p must be a positive int, got {p!r}")
  x, out = float_operand(input)
  if x.numel() and not bool((x > (p - 1) / 2).all().item()):
    raise ValueError(f"mvlgamma: all elements must be greater than (p-1)/2 = {(p - 1) / 2}")
  return (p * (p - 1) / 4 * math.log(math.pi) + sum(lgamma(x - j / 2) for j in range(p))).cast(out)

# Cephes' erfc: exp(-x^2) P(x) / Q(x) for 1 <= x < 8, exp(-x^2) R(x) / S(x) beyond
ERFC_P = (2.46196981473530512524e-10, 5.64189564831068821977e-1, 7.46321056442269912687e0, 4.86371970985681366614e1, 1.96520832956077098242e2,
          5.26445194995477358631e2, 9.34528527171957607540e2, 1.02755188689515710272e3, 5.57535335369399327526e2)
ERFC_Q = (1.0, 1.32281951154744992508e1, 8.67072140885989742329e1, 3.54937778887819891062e2, 9.75708501743205489753e2, 1.82390916687909736289e3,
          2.24633760818710981792e3, 1.65666309194161350182e3, 5.57535340817727675546e2)
ERFC_R = (5.64189583547755073984e-1, 1.27536670759978104416e0, 5.01905042251180477414e0, 6.16021097993053585195e0, 7.40974269950448939160e0,
          2.97886665372100240670e0)
ERFC_S = (1.0, 2.26052863220117276590e0, 9.39603524938001434673e0, 1.20489539808096656605e1, 1.70814450747565897222e1, 9.60896809063285878198e0,
          3.36907645100081516050e0)

def erfc(input: Tensor) -> Tensor:
  """1 - erf(x), precise in the tail where 1 - erf would round to 0."""
  x, out = float_operand(input)
  a = x.abs()
  mid, far = where(a < 8.0, a, 1.0), where(a < 8.0, 8.0, a.minimum(1e6))   # past 27 (float64) the tail is 0 anyway
  ratio = where(a < 8.0, horner(mid, ERFC_P) / horner(mid, ERFC_Q), horner(far, ERFC_R) / horner(far, ERFC_S))
  tail = (-(x * x)).exp() * ratio
  tail = where(x < 0, 2.0 - tail, tail)
  return where(a < 1.0, 1.0 - x.erf(), where(x != x, x, tail)).cast(out)

I0_TERMS, I0_ASYMPTOTIC = 80, 30.0   # (x^2 / 4)^k / (k!)^2 to k = 80: past |x| = 30 its terms still matter

def i0(input: Tensor) -> Tensor:
  """The modified Bessel function of the first kind, order 0: sum of (x^2 / 4)^k / (k!)^2 up to |x| = 30, beyond
  e^|x| / sqrt(2 pi |x|) times its asymptotic series (12 terms)."""
  x, out = float_operand(input)
  a = x.abs()
  y = where(a <= I0_ASYMPTOTIC, a, 0.0) ** 2 * 0.25
  series, term = 1.0, 1.0
  for k in range(1, I0_TERMS + 1):   # each term from the last: (k!)^2 itself leaves float32's range at k = 21
    term = term * y * (1.0 / (k * k))
    series = series + term
  far = where(a <= I0_ASYMPTOTIC, I0_ASYMPTOTIC + 1, a)
  terms, c = 1.0, 1.0
  for k in range(1, 13):
    c = c * ((2 * k - 1) ** 2 / (8 * k))
    terms = terms + c / far ** k
  asymptotic = far.exp() * (2 * math.pi * far).rsqrt() * terms
  return where(a <= I0_ASYMPTOTIC, series, asymptotic).cast(out)
