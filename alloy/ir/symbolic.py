"""Integer index algebra: small immutable expressions over loop variables, each with a known range.

Simplifications only use facts that hold for C's truncating division too: a division or modulo
is rewritten only when its numerator is known to be non-negative.
"""
from __future__ import annotations
import functools, math

class Expr:
  __slots__ = ("min", "max")
  def __add__(self, o): return add(self, o)
  def __radd__(self, o): return add(o, self)
  def __sub__(self, o): return add(self, mul(o, -1))
  def __rsub__(self, o): return add(o, mul(self, -1))
  def __mul__(self, o): return mul(self, o)
  def __rmul__(self, o): return mul(self, o)
  def __floordiv__(self, o): return div(self, o)
  def __mod__(self, o): return mod(self, o)
  def __neg__(self): return mul(self, -1)
  def __lt__(self, o): return lt(self, o)
  def __ge__(self, o): return logical_not(lt(self, o))
  def vars(self) -> set: return set()

def _c(x) -> "Expr": return x if isinstance(x, Expr) else Const(int(x))

class Const(Expr):
  __slots__ = ("v",)
  def __init__(self, v: int): self.v = self.min = self.max = int(v)
  def key(self): return ("c", self.v)
  def __eq__(self, o): return isinstance(o, Const) and o.v == self.v
  def __hash__(self): return hash(("c", self.v))
  def __repr__(self): return str(self.v)

class Var(Expr):
  """A loop or thread index in [min, max]."""
  __slots__ = ("name",)
  def __init__(self, name: str, lo: int, hi: int): self.name, self.min, self.max = name, lo, hi
  def key(self): return ("v", self.name, self.min, self.max)
  def __eq__(self, o): return isinstance(o, Var) and o.key() == self.key()
  def __hash__(self): return hash(self.key())
  def __repr__(self): return self.name
  def vars(self): return {self}

class Opaque(Expr):
  """A value computed at run time (e.g. a loaded index), with a range from its dtype."""
  __slots__ = ("ref",)
  def __init__(self, ref, lo: int, hi: int): self.ref, self.min, self.max = ref, lo, hi
  def key(self): return ("o", id(self.ref))
  def __eq__(self, o): return isinstance(o, Opaque) and o.ref is self.ref
  def __hash__(self): return hash(self.key())
  def __repr__(self): return f"<{self.ref}>"

class Sum(Expr):
  """const + sum(coef * term); terms are non-Const, non-Sum expressions."""
  __slots__ = ("terms", "const")
  def __init__(self, terms: tuple, const: int):
    self.terms, self.const = terms, const
    self.min = const + sum(c * (t.min if c > 0 else t.max) for t, c in terms)
    self.max = const + sum(c * (t.max if c > 0 else t.min) for t, c in terms)
  def key(self): return ("s", self.terms, self.const)
  def __eq__(self, o): return isinstance(o, Sum) and o.key() == self.key()
  def __hash__(self): return hash(self.key())
  def __repr__(self):
    parts = [(repr(t) if c == 1 else f"{t}*{c}") for t, c in self.terms] + ([str(self.const)] if self.const else [])
    return "(" + " + ".join(parts) + ")"
  def vars(self): return set().union(*(t.vars() for t, _ in self.terms))

class Div(Expr):
  __slots__ = ("a", "d")
  def __init__(self, a: Expr, d: int):
    self.a, self.d = a, d
    self.min, self.max = a.min // d, a.max // d
  def key(self): return ("/", self.a, self.d)
  def __eq__(self, o): return isinstance(o, Div) and o.key() == self.key()
  def __hash__(self): return hash(self.key())
  def __repr__(self): return f"({self.a}//{self.d})"
  def vars(self): return self.a.vars()

class Mod(Expr):
  __slots__ = ("a", "d")
  def __init__(self, a: Expr, d: int):
    self.a, self.d = a, d
    self.min, self.max = 0, d - 1
  def key(self): return ("%", self.a, self.d)
  def __eq__(self, o): return isinstance(o, Mod) and o.key() == self.key()
  def __hash__(self): return hash(self.key())
  def __repr__(self): return f"({self.a}%{self.d})"
  def vars(self): return self.a.vars()

def _terms(e: Expr) -> tuple[dict, int]:
  if isinstance(e, Const): return {}, e.v
  if isinstance(e, Sum): return dict(e.terms), e.const
  return {e: 1}, 0

def _fold_div_mod(terms: dict) -> None:
  """c*d*(x//d) + c*(x%d) == c*x: recombine an unraveled index."""
  for t in [t for t in terms if isinstance(t, Mod)]:
    c = terms.get(t, 0)
    partner = Div(t.a, t.d)
    if c and t.a.min >= 0 and terms.get(partner, 0) == c * t.d:
      del terms[t]; del terms[partner]
      for x, k in _terms(t.a)[0].items(): terms[x] = terms.get(x, 0) + k * c
      terms[Const(0)] = terms.get(Const(0), 0) + _terms(t.a)[1] * c

def _order(e: Expr) -> str:
  """A term's place in a Sum: its repr with run-time values blanked (an Opaque's repr names an instruction by id()),
  so the order, and the source printed from it, is the same in every process; equal keys keep insertion order."""
  if isinstance(e, Opaque): return "<>"
  if isinstance(e, Sum): return "+".join(f"{_order(t)}*{c}" for t, c in e.terms) + f"+{e.const}"
  if isinstance(e, Div): return f"({_order(e.a)}//{e.d})"
  if isinstance(e, Mod): return f"({_order(e.a)}%{e.d})"
  return repr(e)

def _make_sum(terms: dict, const: int) -> Expr:
  _fold_div_mod(terms)
  if Const(0) in terms: const += terms.pop(Const(0))
  items = tuple(sorted(((t, c) for t, c in terms.items() if c != 0), key=lambda tc: _order(tc[0])))
  if not items: return Const(const)
  if len(items) == 1 and items[0][1] == 1 and const == 0: return items[0][0]
  return Sum(items, const)

def add(a, b) -> Expr:
  a, b = _c(a), _c(b)
  ta, ca = _terms(a)
  tb, cb = _terms(b)
  for t, c in tb.items(): ta[t] = ta.get(t, 0) + c
  return _make_sum(ta, ca + cb)

def mul(a, k) -> Expr:
  a = _c(a)
  if isinstance(k, Expr):
    if isinstance(k, Const): k = k.v
    elif isinstance(a, Const): a, k = k, a.v
    else: raise TypeError("index algebra multiplies by constants only")
  if k == 0: return Const(0)
  if k == 1: return a
  t, c = _terms(a)
  return _make_sum({x: v * k for x, v in t.items()}, c * k)

def div(a, d: int) -> Expr:
  a = _c(a)
  if d == 1: return a
  if isinstance(a, Const): return Const(a.v // d)
  if a.min >= 0 and a.max < d: return Const(0)
  if isinstance(a, Div) and a.a.min >= 0: return div(a.a, a.d * d)
  if isinstance(a, Sum):
    terms, const = _terms(a)
    whole = {t: c // d for t, c in terms.items() if c % d == 0}
    rest = _make_sum({t: c for t, c in terms.items() if c % d != 0}, const % d)
    if rest.min >= 0 and (whole or const >= d):
      return add(_make_sum(whole, const // d), div(rest, d))
    g = functools.reduce(math.gcd, [c for c in terms.values()] + [const, d])
    if g > 1 and a.min >= 0: return div(_make_sum({t: c // g for t, c in terms.items()}, const // g), d // g)
  return Div(a, d)

def mod(a, d: int) -> Expr:
  a = _c(a)
  if d == 1: return Const(0)
  if isinstance(a, Const): return Const(a.v % d)
  if a.min >= 0 and a.max < d: return a
  if isinstance(a, Sum) and a.min >= 0:
    terms, const = _terms(a)
    rest = _make_sum({t: c for t, c in terms.items() if c % d != 0}, const % d)
    if rest.min >= 0 and rest is not a and _terms(rest) != (terms, const): return mod(rest, d)
  if isinstance(a, Mod) and a.d % d == 0: return mod(a.a, d)
  return Mod(a, d)

# --- boolean conditions (validity of masked views): a conjunction of `expr < bound` / `expr >= bound`

class Cond:
  """Conjunction of comparisons `lo <= expr < hi`; True when empty."""
  __slots__ = ("clauses",)
  def __init__(self, clauses: tuple = ()): self.clauses = clauses
  def __and__(self, o: "Cond") -> "Cond":
    if o.is_false or self.is_false: return FALSE
    return Cond(tuple(dict.fromkeys(self.clauses + o.clauses)))
  @property
  def is_true(self): return not self.clauses
  @property
  def is_false(self): return any(c == ("false",) for c in self.clauses)
  def __repr__(self): return " && ".join(map(str, self.clauses)) or "true"
  def __eq__(self, o): return isinstance(o, Cond) and o.clauses == self.clauses
  def __hash__(self): return hash(self.clauses)

FALSE = Cond((("false",),))

def in_range(e: Expr, lo: int, hi: int) -> Cond:
  """lo <= e < hi, simplified by e's known range."""
  if e.min >= lo and e.max < hi: return Cond()
  if e.max < lo or e.min >= hi: return FALSE
  clauses = []
  if e.min < lo: clauses.append(("ge", e, lo))
  if e.max >= hi: clauses.append(("lt", e, hi))
  return Cond(tuple(clauses))

def lt(a: Expr, b: int) -> Cond: return in_range(a, a.min, b) if a.min < b else FALSE
def logical_not(c: Cond) -> Cond: raise NotImplementedError("negation of index conditions is not needed")

# --- the width of index arithmetic: 32-bit (faster on GPUs) wherever every value met on the way fits

INT32_MAX = (1 << 31) - 1

def magnitude(e: Expr) -> int:
  """A bound on |v| for e and every intermediate of its evaluation as the renderers print it: each term times its
  coefficient, each partial sum (at most the sum of those), and whatever the terms and a division's operand meet."""
  own = max(abs(e.min), abs(e.max))
  if isinstance(e, Sum):
    return max([sum(abs(c) * max(abs(t.min), abs(t.max)) for t, c in e.terms) + abs(e.const)] + [magnitude(t) for t, _ in e.terms])
  if isinstance(e, (Div, Mod)): return max(own, magnitude(e.a), e.d)
  return own

def fits_int32(e: Expr) -> bool:
  """Whether e can be computed in int32 arithmetic without overflow; else it needs 64-bit integers."""
  return magnitude(e) <= INT32_MAX

def substitute(e: Expr, mapping: dict) -> Expr:
  """Replace variables by expressions (used to unroll an upcast axis)."""
  if isinstance(e, Var): return mapping.get(e, e)
  if isinstance(e, (Const, Opaque)): return e
  if isinstance(e, Sum):
    out = Const(e.const)
    for t, c in e.terms: out = add(out, mul(substitute(t, mapping), c))
    return out
  if isinstance(e, Div): return div(substitute(e.a, mapping), e.d)
  if isinstance(e, Mod): return mod(substitute(e.a, mapping), e.d)
  raise TypeError(e)

def substitute_cond(c: Cond, mapping: dict) -> Cond:
  out = Cond()
  for cl in c.clauses:
    if cl == ("false",): return FALSE
    kind, e, bound = cl
    e = substitute(e, mapping)
    out = out & (in_range(e, bound, 1 << 62) if kind == "ge" else in_range(e, -(1 << 62), bound))
  return out
