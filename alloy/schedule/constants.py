"""Constants as kernel arguments: which graph constants a kernel takes as scalar arguments (lifted) and which stay
literal in its code, and a constant's part of the schedule's structure key. A lifted constant's value does not shape
the code, so a new value reuses the kernel (schedule/fusion.py keys schedules by structure, constants value-free)."""
from __future__ import annotations
from alloy.ir.node import Node, constant_signature
from alloy.ir.ops import Op

MAX_KERNEL_VARS = 8        # lifted constants per kernel (at most 16 int32 words); the ones beyond stay literal
PLAIN = (float, int, bool)
VALUE_OPS = {Op.SHL, Op.SHR, Op.IDIV, Op.MOD, Op.POW}

def forced(n: Node) -> bool:
  """A constant whose value is not a plain Python number (a jit replay argument): always a kernel argument."""
  return type(n.arg) not in PLAIN

def lifted(n: Node) -> bool:
  """Whether a constant becomes a kernel argument unless a consumer reads its value (literal_use). Bools and
  0, 1, -1 stay literal: the C compiler folds them away (x*1, x+0 on integers, selects against 0)."""
  return forced(n) or not (n.dtype.is_bool or n.arg in (0, 1, -1))

def literal_use(n: Node, k: int) -> bool:
  """Whether source k of n is a plain constant whose value n's code depends on: a shift amount, an integer divisor
  (division by a constant is a multiply), an integral exponent (the compiler unrolls it)."""
  s = n.src[k]
  if k != 1 or s.op is not Op.CONST or forced(s): return False
  if n.op is Op.SHL or n.op is Op.SHR: return True
  if n.op is Op.POW: return float(s.arg).is_integer()
  return (n.op is Op.IDIV or n.op is Op.MOD) and not s.dtype.is_float

def constant_part(n: Node) -> int:
  """A constant's part of the structure key, kept as its sig: value-free where its kernels may take it as an argument
  (lifted, spelled out: every realize of a new constant comes here)."""
  a = n.arg
  n.sig = sig = constant_signature(n, with_value=type(a) in PLAIN and (n.dtype.kind == "b" or a == 0 or a == 1 or a == -1))
  return sig
