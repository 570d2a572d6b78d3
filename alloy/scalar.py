"""Python numbers inside Tensor graphs: how a scalar becomes a constant's value (cast_number), and Scalar, a number
argument of a @jit function traced through its capture.

At capture the jit passes each int, float and bool argument in as a Scalar. Python arithmetic on one (+ - * / // % **,
unary - and +, abs(), with plain numbers or other Scalars) gives a Scalar that remembers how it was computed from the
arguments; a Tensor op taking a Scalar makes a constant whose value is a traced number (TracedFloat, TracedInt) naming
it, which the schedule always makes a kernel argument. A replay computes each such argument again from the call's own
numbers (Scalar.evaluate), so a new learning rate or step count replays the captured kernels. A *live* Scalar
(Scalar.live, made by jit.live) is a number the function reads from host state, such as an optimizer's learning rate
and step count: a replay calls its reader again.

Any other use of a Scalar's value (float(), int(), an index or a size, a comparison, bool(), hashing, NumPy) gives the
plain number and *bakes* the arguments it came from: the capture depends on their values in a way it cannot replay,
and a replay with another value for one of them raises (jit.py). str(), repr() and format() show the value and bake
nothing. Not a float or int subclass on purpose: C code reads those without asking (math.sqrt(x), 0.9 ** x), and the
value would be baked unnoticed.
"""
from __future__ import annotations
import math, operator
import numpy as np
from alloy.dtype import DType, max_value, min_value

def cast_number(v, d: DType):
  """A Python number as the value of a constant of dtype d (a Scalar's: a traced number naming it)."""
  if type(v) in TRACED: return v.constant(d)
  if d.kind == "f": return v if type(v) is float else float(v)
  if d.is_bool: return bool(v)
  # an integer dtype: out-of-range values wrap as NumPy's cast does
  if isinstance(v, float) and not math.isfinite(v): raise ValueError(f"cannot convert {v} to integer dtype {d.name}")
  iv = int(v)
  lo, hi = min_value(d), max_value(d)
  if not lo <= iv <= hi:
    wrapped = np.array(iv & ((1 << (8 * d.itemsize)) - 1), dtype=np.uint64) if iv >= 0 else np.array(iv, dtype=np.int64)
    iv = int(wrapped.astype(d.np))
  return iv

_PLAIN = (int, float, bool)

class Scalar:
  """A number computed from a jitted function's number arguments: `value` at capture; `op` applied to `operands`
  (Scalars and plain numbers), or argument number `index` where op is None. `baked` is the capture's
  {argument number: why its value was baked}, shared by its Scalars."""
  __slots__ = ("value", "op", "operands", "index", "baked", "consts")
  def __init__(self, value, op, operands: tuple, index: int, baked: dict):
    self.value, self.op, self.operands, self.index, self.baked = value, op, operands, index, baked
    self.consts: dict = {}   # dtype -> the traced number of this Scalar as a constant of that dtype

  @staticmethod
  def argument(value, index: int, baked: dict) -> "Scalar": return Scalar(value, None, (), index, baked)

  @staticmethod
  def live(read, key: int, baked: dict) -> "Scalar":
    """A number the captured function reads from host state (jit.live): read() now, and again on every replay. Its
    key (negative, unlike an argument's number) names it in `baked`."""
    return Scalar(read(), read, (), key, baked)

  def arguments(self) -> set:
    """The numbers of the arguments (negative: the live numbers) this Scalar is computed from."""
    if self.op is None or not self.operands: return {self.index}
    return set().union(*[o.arguments() for o in self.operands if type(o) is Scalar])

  def evaluate(self, values: list, memo: dict):
    """This Scalar's value for the argument numbers `values` (a live number: its read() now, once per memo)."""
    if self.op is None: return values[self.index]
    if (hit := memo.get(id(self))) is None:
      hit = memo[id(self)] = self.op(*[o.evaluate(values, memo) if type(o) is Scalar else o for o in self.operands])
    return hit

  def constant(self, d: DType):
    """The traced number that is this Scalar's value as a constant of dtype d (one per dtype, so equal uses hash-cons)."""
    if (c := self.consts.get(d)) is None:
      c = self.consts[d] = (TracedFloat if d.kind == "f" else TracedInt)(cast_number(self.value, d))
      c.source = self
    return c

  def bake(self, why: str):
    for k in self.arguments(): self.baked.setdefault(k, why)
    return self.value

  # arithmetic gives Scalars; anything but numbers and Scalars is left to the other operand (a Tensor's reflected op)
  def _apply(self, op, *operands):
    if not all(type(o) is Scalar or type(o) in _PLAIN for o in operands): return NotImplemented
    return Scalar(op(*[o.value if type(o) is Scalar else o for o in operands]), op, operands, -1, self.baked)
  def __add__(self, o): return self._apply(operator.add, self, o)
  def __radd__(self, o): return self._apply(operator.add, o, self)
  def __sub__(self, o): return self._apply(operator.sub, self, o)
  def __rsub__(self, o): return self._apply(operator.sub, o, self)
  def __mul__(self, o): return self._apply(operator.mul, self, o)
  def __rmul__(self, o): return self._apply(operator.mul, o, self)
  def __truediv__(self, o): return self._apply(operator.truediv, self, o)
  def __rtruediv__(self, o): return self._apply(operator.truediv, o, self)
  def __floordiv__(self, o): return self._apply(operator.floordiv, self, o)
  def __rfloordiv__(self, o): return self._apply(operator.floordiv, o, self)
  def __mod__(self, o): return self._apply(operator.mod, self, o)
  def __rmod__(self, o): return self._apply(operator.mod, o, self)
  def __pow__(self, o): return self._apply(operator.pow, self, o)
  def __rpow__(self, o): return self._apply(operator.pow, o, self)
  def __divmod__(self, o): return (self // o, self % o)
  def __rdivmod__(self, o): return (o // self, o % self)
  def __neg__(self): return self._apply(operator.neg, self)
  def __pos__(self): return self
  def __abs__(self): return self._apply(abs, self)

  # the value as a plain number: baked
  def __float__(self): return float(self.bake("float()"))
  def __int__(self): return int(self.bake("int()"))
  def __index__(self): return operator.index(self.bake("an index or size"))
  def __bool__(self): return bool(self.bake("bool() or a condition"))
  def __complex__(self): return complex(self.bake("complex()"))
  def __round__(self, n=None): return round(self.bake("round()"), n)
  def __trunc__(self): return math.trunc(self.bake("math.trunc()"))
  def __floor__(self): return math.floor(self.bake("math.floor()"))
  def __ceil__(self): return math.ceil(self.bake("math.ceil()"))
  def __hash__(self): return hash(self.bake("hashing"))
  def __array__(self, dtype=None, copy=None): return np.asarray(self.bake("NumPy"), dtype=dtype)
  def __eq__(self, o): return self.bake("a comparison") == (o.bake("a comparison") if type(o) is Scalar else o)
  def __ne__(self, o): return self.bake("a comparison") != (o.bake("a comparison") if type(o) is Scalar else o)
  def __lt__(self, o): return self.bake("a comparison") < (o.bake("a comparison") if type(o) is Scalar else o)
  def __le__(self, o): return self.bake("a comparison") <= (o.bake("a comparison") if type(o) is Scalar else o)
  def __gt__(self, o): return self.bake("a comparison") > (o.bake("a comparison") if type(o) is Scalar else o)
  def __ge__(self, o): return self.bake("a comparison") >= (o.bake("a comparison") if type(o) is Scalar else o)
  def __getattr__(self, name: str):   # anything else a number has (.real, .is_integer(), ...): the plain value's, baked
    if name.startswith("__") or not hasattr(self.value, name): raise AttributeError(name)
    return getattr(self.bake(f".{name}"), name)
  def scalar_category(self) -> str: return "b" if type(self.value) is bool else "i" if type(self.value) is int else "f"
  # shown, not baked
  def __repr__(self): return repr(self.value)
  def __str__(self): return str(self.value)
  def __format__(self, spec: str) -> str: return format(self.value, spec)

# A constant's value that is a traced Scalar's: equal only to itself, so a graph never shares its node with a plain
# constant or another Scalar's of the same value (the schedule makes every one a kernel argument of its own).
class Traced:
  """What TracedFloat and TracedInt add to their number type: identity equality and the Scalar they stand for."""
  source: Scalar
  def __eq__(self, o): return self is o
  def __ne__(self, o): return self is not o
  def __hash__(self): return id(self)
  def constant(self, d: DType): return self.source.constant(d)

class TracedFloat(Traced, float): pass
class TracedInt(Traced, int): pass

TRACED = (Scalar, TracedFloat, TracedInt)

def plain(x):
  """x, or a Scalar's value (baked) where only a plain number will do: a size, a dimension, an index."""
  return operator.index(x) if type(x) is Scalar else x
