"""float32 math as PTX instruction sequences, for the PTX renderer: exp, exp2, log, log2, tanh and erf.

PTX has ex2.approx and lg2.approx and nothing else transcendental; these build the rest on them and on FMA,
each within 3 ulps of the correctly rounded result over its whole range (test/runtime/test_ptx.py checks 2^20
values of each on the GPU). Each function takes the kernel being emitted (kernel.reg(cls) gives a register, kernel.emit(line)
writes an instruction), the output register and the input register.
"""
from __future__ import annotations
import math, struct
from alloy.ir.ops import Op

def float_literal(v: float, bits: int) -> str:
  if bits == 64: return "0d%016X" % struct.unpack("<Q", struct.pack("<d", v))[0]
  if not math.isfinite(v) or abs(v) <= 3.4028234663852886e38: return "0f%08X" % struct.unpack("<I", struct.pack("<f", v))[0]
  return "0f7F800000" if v > 0 else "0fFF800000"

def f32(v: float) -> str: return float_literal(v, 32)

# a polynomial of log1p(f) for f in [sqrt(1/2)-1, sqrt(2)-1]: log1p(f) = f - f^2/2 + f^3 * P(f) (Cephes' logf)
LOG1P_P = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1,
           -1.6668057665e-1, 2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
# tanh(x) = x + x^3 * P(x^2) for |x| < 0.625, within 0.9 ulp (least squares fit of the relative error)
TANH_P = (-0.005691935773938894, 0.02062624879181385, -0.05373530462384224, 0.13331380486488342, -0.3333328068256378)
# erf(x) = x + x * R(x^2) for |x| < 1 (within 1 ulp); erf(x) = 1 - e^(Q(x) - x^2) for 1 <= x <= 4 (within 1.2 ulp;
# beyond 4 it rounds to 1): both least squares fits, checked in float32 with FMA against math.erf
ERF_R = (7.847178494557738e-05, -0.0008008164586499333, 0.005188095849007368, -0.026853689923882484,
         0.1128358244895935, -0.3761262595653534, 0.12837916612625122)
ERFC_Q = (-6.582600775573155e-08, 3.0951405278756283e-06, -6.0068105085520074e-05, 0.0006733332993462682,
          -0.005021028686314821, 0.026999456807971, -0.11090735346078873, 0.3689110577106476, -1.1306043863296509,
           0.0004004916700068861)
LOG2E, LOG2E_LO = 1.4426950216293335, 1.92596298909109e-08   # float32(log2 e) and what it misses

def exp2(kernel, out: str, x: str) -> None: kernel.emit(f"ex2.approx.f32 {out}, {x};")

def exp(kernel, out: str, x: str) -> None:
  """e^x = 2^k * 2^f with k = round(x*log2(e)) kept to [-126, 127] (so 2^k is a normal float, built from its bits)
  and f = x*log2(e) - k carried to full precision (log2(e) in two parts): ex2.approx on f, and one exact (or, for
  subnormal results, once-rounded) multiply. inf, -inf and NaN come through ex2 itself. k is rounded by adding
  1.5*2^23, which leaves it in the low bits of the sum: no conversion instructions (a quarter of the FMA rate)."""
  t, m, f, scale = kernel.reg("f32"), kernel.reg("f32"), kernel.reg("f32"), kernel.reg("f32")
  bits = kernel.reg("b32")
  kernel.emit(f"mul.rn.f32 {t}, {x}, {f32(LOG2E)};")
  kernel.emit(f"max.f32 {t}, {t}, {f32(-126.0)};")   # NaN becomes -126 here; f stays NaN
  kernel.emit(f"min.f32 {t}, {t}, {f32(127.0)};")
  kernel.emit(f"add.rn.f32 {m}, {t}, {f32(12582912.0)};")
  kernel.emit(f"sub.rn.f32 {f}, {f32(12582912.0)}, {m};")   # -k, exactly
  kernel.emit(f"fma.rn.f32 {f}, {x}, {f32(LOG2E)}, {f};")
  kernel.emit(f"fma.rn.f32 {f}, {x}, {f32(LOG2E_LO)}, {f};")
  kernel.emit(f"ex2.approx.ftz.f32 {f}, {f};")
  kernel.emit(f"mov.b32 {bits}, {m};")
  kernel.emit(f"shl.b32 {bits}, {bits}, 23;")             # k's bits to the exponent field (the rest shifts out)
  kernel.emit(f"add.s32 {bits}, {bits}, 0x3F800000;")     # + the bias: 2^k
  kernel.emit(f"mov.b32 {scale}, {bits};")
  kernel.emit(f"mul.rn.f32 {out}, {f}, {scale};")

def polynomial(kernel, coefs: tuple, t: str) -> str:
  """A register holding the polynomial with these coefficients (highest power first) at t, by Horner's rule."""
  p = kernel.reg("f32")
  kernel.emit(f"mov.f32 {p}, {f32(coefs[0])};")
  for c in coefs[1:]: kernel.emit(f"fma.rn.f32 {p}, {p}, {t}, {f32(c)};")
  return p

def tanh(kernel, out: str, x: str) -> None:
  """An odd polynomial near 0; elsewhere 1 - 2/(e^(2|x|) + 1) with x's sign (no cancellation once |x| >= 0.625)."""
  a, z, xz, small, e, big = (kernel.reg("f32") for _ in range(6))
  near = kernel.reg("pred")
  kernel.emit(f"abs.f32 {a}, {x};")
  kernel.emit(f"mul.rn.f32 {z}, {x}, {x};")
  p = polynomial(kernel, TANH_P, z)
  kernel.emit(f"mul.rn.f32 {xz}, {x}, {z};")
  kernel.emit(f"fma.rn.f32 {small}, {xz}, {p}, {x};")
  kernel.emit(f"add.rn.f32 {e}, {a}, {a};")
  exp(kernel, e, e)
  kernel.emit(f"add.rn.f32 {e}, {e}, 0f3F800000;")
  kernel.emit(f"div.rn.f32 {big}, 0f40000000, {e};")
  kernel.emit(f"sub.rn.f32 {big}, 0f3F800000, {big};")
  kernel.emit(f"copysign.f32 {big}, {x}, {big};")   # PTX's copysign takes the sign from its first operand
  kernel.emit(f"setp.lt.f32 {near}, {a}, {f32(0.625)};")
  kernel.emit(f"selp.f32 {out}, {small}, {big}, {near};")

def erf(kernel, out: str, x: str) -> None:
  """x + x*R(x^2) for |x| < 1; else 1 - e^(Q(|x|) - x^2) with x's sign, |x| clamped to 4 where erf is 1 in float."""
  a, z, small, e, big = (kernel.reg("f32") for _ in range(5))
  near, nan = kernel.reg("pred"), kernel.reg("pred")
  kernel.emit(f"abs.f32 {a}, {x};")
  kernel.emit(f"mul.rn.f32 {z}, {x}, {x};")
  r = polynomial(kernel, ERF_R, z)
  kernel.emit(f"fma.rn.f32 {small}, {x}, {r}, {x};")
  kernel.emit(f"min.f32 {a}, {a}, {f32(4.0)};")
  q = polynomial(kernel, ERFC_Q, a)
  kernel.emit(f"mul.rn.f32 {e}, {a}, {a};")
  kernel.emit(f"sub.rn.f32 {e}, {q}, {e};")
  exp(kernel, e, e)
  kernel.emit(f"sub.rn.f32 {big}, 0f3F800000, {e};")
  kernel.emit(f"copysign.f32 {big}, {x}, {big};")
  kernel.emit(f"setp.lt.f32 {near}, {a}, 0f3F800000;")
  kernel.emit(f"selp.f32 {out}, {small}, {big}, {near};")
  kernel.emit(f"setp.nan.f32 {nan}, {x}, {x};")   # the clamp to 4 took NaN's place
  kernel.emit(f"@{nan} mov.f32 {out}, {x};")

def log(kernel, out: str, x: str, base2: bool) -> None:
  """x = m * 2^e with m in [sqrt(1/2), sqrt(2)): log x = e*ln2 + log1p(m - 1); log2 x = e + log1p(m - 1)*log2(e).
  Subnormal x is scaled by 2^23 first; zero, negatives, inf and NaN are set at the end."""
  small, p = kernel.reg("pred"), kernel.reg("pred")
  xs, bias, e, m, f, z, y = (kernel.reg("f32") for _ in range(7))
  bits, k = kernel.reg("b32"), kernel.reg("b32")
  kernel.emit(f"setp.lt.f32 {small}, {x}, {f32(2.0 ** -126)};")
  kernel.emit(f"mul.rn.f32 {xs}, {x}, {f32(2.0 ** 23)};")
  kernel.emit(f"selp.f32 {xs}, {xs}, {x}, {small};")
  kernel.emit(f"selp.f32 {bias}, {f32(-23.0)}, 0f00000000, {small};")
  kernel.emit(f"mov.b32 {bits}, {xs};")
  kernel.emit(f"sub.s32 {k}, {bits}, 0x3F3504F3;")    # measured from sqrt(1/2)'s bits: m lands in [sqrt(1/2), sqrt(2))
  kernel.emit(f"shr.s32 {k}, {k}, 23;")
  kernel.emit(f"cvt.rn.f32.s32 {e}, {k};")
  kernel.emit(f"add.f32 {e}, {e}, {bias};")
  kernel.emit(f"shl.b32 {k}, {k}, 23;")
  kernel.emit(f"sub.s32 {k}, {bits}, {k};")
  kernel.emit(f"mov.b32 {m}, {k};")
  kernel.emit(f"sub.rn.f32 {f}, {m}, 0f3F800000;")     # exact: m is within a factor 2 of 1
  kernel.emit(f"mul.rn.f32 {z}, {f}, {f};")
  poly = polynomial(kernel, LOG1P_P, f)
  kernel.emit(f"mul.rn.f32 {poly}, {poly}, {f};")
  kernel.emit(f"mul.rn.f32 {poly}, {poly}, {z};")      # f^3 P(f)
  if not base2:
    kernel.emit(f"fma.rn.f32 {poly}, {e}, {f32(-2.12194440e-4)}, {poly};")   # ln2 in two parts: e*ln2 exact enough
    kernel.emit(f"fma.rn.f32 {poly}, {z}, 0fBF000000, {poly};")
    kernel.emit(f"add.rn.f32 {y}, {f}, {poly};")
    kernel.emit(f"fma.rn.f32 {y}, {e}, {f32(0.693359375)}, {y};")
  else:
    kernel.emit(f"fma.rn.f32 {poly}, {z}, 0fBF000000, {poly};")
    kernel.emit(f"add.rn.f32 {y}, {f}, {poly};")
    kernel.emit(f"fma.rn.f32 {y}, {y}, {f32(LOG2E)}, {e};")
  kernel.emit(f"setp.eq.f32 {p}, {x}, 0f00000000;"); kernel.emit(f"selp.f32 {y}, 0fFF800000, {y}, {p};")
  kernel.emit(f"setp.lt.f32 {p}, {x}, 0f00000000;"); kernel.emit(f"selp.f32 {y}, 0f7FFFFFFF, {y}, {p};")
  kernel.emit(f"setp.eq.f32 {p}, {x}, 0f7F800000;"); kernel.emit(f"selp.f32 {y}, 0f7F800000, {y}, {p};")
  kernel.emit(f"setp.nan.f32 {p}, {x}, {x};"); kernel.emit(f"selp.f32 {out}, {x}, {y}, {p};")


FLOAT32 = {Op.EXP: exp, Op.EXP2: exp2, Op.LOG: lambda kernel, out, x: log(kernel, out, x, base2=False),
           Op.LOG2: lambda kernel, out, x: log(kernel, out, x, base2=True), Op.TANH: tanh, Op.ERF: erf}
