"""Index lowering: every symbolic index and guard of a linear program becomes integer instructions (IALU), once, here.

Before this pass an access holds its element index as an ir.symbolic expression and each renderer printed it in its
own syntax; after it, every renderer prints the same instructions. An access becomes a PTR (the address of an element)
and a constant element offset, so neighbouring accesses (the lanes of a tile, the copies of an unrolled loop) share
one address and differ in the offset a load or store instruction carries for free. A guard that always holds is
dropped here (a load's valid, an IF and its ENDIF), so no renderer tests a constant.

The width: int32 as the C renderers' `int`, or int64 where sym.fits_int32 says a value on the way may pass 2^31, or a
variable it uses is held in 64 bits. A sum adds its terms in the order of the loops they depend on, outermost first,
so its partial sums are loop-invariant where they can be and hoist.py moves them out of the loops that do not need them.
"""
from __future__ import annotations
from alloy import dtype as dt
from alloy.ir import symbolic as sym
from alloy.codegen.program import Instr, Kind

class _Lowering:
  def __init__(self):
    self.out: list = []
    self.vars: dict = {}       # sym.Var -> the RANGE or SPECIAL that defines it
    self.depth: dict = {}      # id(instr) -> blocks open where it is defined
    self.level = 0
    self.scopes: list = [{}]   # per open block: what it computed, by (kind, dtype, operands, arg)
    self.replaced: dict = {}   # id(INDEX or COND) -> the value standing for it
    self.ifs: list = []        # per open IF: its condition's value, None where it was dropped

  def new(self, op, dtype, src=(), arg=None) -> Instr:
    key = (op, dtype, tuple(id(s) for s in src), (type(arg), arg))
    for scope in reversed(self.scopes):
      if (hit := scope.get(key)) is not None: return hit
    ins = Instr(op, dtype, tuple(src), arg)
    self.out.append(ins)
    self.depth[id(ins)] = self.level
    self.scopes[-1][key] = ins
    return ins
  def const(self, v, d) -> Instr: return self.new(Kind.CONST, d, (), v)
  def ref(self, ins) -> Instr: return self.replaced.get(id(ins), ins)

  def deepest(self, e: sym.Expr) -> int:
    """How deep the innermost definition that e reads sits."""
    if isinstance(e, sym.Var): return self.depth[id(self.vars[e])]
    if isinstance(e, sym.Opaque): return self.depth.get(id(self.ref(e.ref)), 0)
    if isinstance(e, sym.Sum): return max((self.deepest(t) for t, _ in e.terms), default=0)
    if isinstance(e, (sym.Div, sym.Mod)): return self.deepest(e.a)
    return 0
  def width(self, e: sym.Expr) -> dt.DType:
    wide = not sym.fits_int32(e) or any(self.vars[v].dtype.itemsize == 8 for v in e.vars())
    return dt.int64 if wide else dt.int32
  def resized(self, v: Instr, d: dt.DType) -> Instr:
    if v.dtype == d: return v
    if v.op is Kind.CONST: return self.const(int(v.arg), d)
    return self.new(Kind.CAST, d, (v,))   # C's (int) or (int64_t) of a value used as an index

  def value(self, e: sym.Expr, d: dt.DType) -> Instr:
    """An instruction holding e computed in d (int32 or int64)."""
    if isinstance(e, sym.Const): return self.const(e.v, d)
    if isinstance(e, sym.Var): return self.resized(self.vars[e], d)
    if isinstance(e, sym.Opaque): return self.resized(self.ref(e.ref), d)
    if isinstance(e, sym.Sum):
      total = None
      for term, coef in sorted(e.terms, key=lambda tc: self.deepest(tc[0])):   # outer loops' terms first (stable)
        v = self.value(term, d)
        if total is None: total = v if coef == 1 else self.new(Kind.IALU, d, (v, self.const(coef, d)), "mul")
        elif coef == 1: total = self.new(Kind.IALU, d, (total, v), "add")
        else: total = self.new(Kind.IALU, d, (v, self.const(coef, d), total), "mad")
      if total is None: return self.const(e.const, d)
      return self.new(Kind.IALU, d, (total, self.const(e.const, d)), "add") if e.const else total
    if isinstance(e, (sym.Div, sym.Mod)):
      return self.new(Kind.IALU, d, (self.value(e.a, d), self.const(e.d, d)), "div" if isinstance(e, sym.Div) else "mod")
    raise TypeError(e)

  def cond(self, c: sym.Cond) -> Instr | None:
    """A bool instruction: whether every clause of c holds; None where each always does."""
    if c.is_false: return self.const(False, dt.bool_)
    out = None
    for kind, e, bound in c.clauses:
      if isinstance(e, sym.Const):
        if (e.v >= bound) if kind == "ge" else (e.v < bound): continue
        return self.const(False, dt.bool_)
      d = dt.int64 if abs(bound) > sym.INT32_MAX else self.width(e)
      p = self.new(Kind.IALU, dt.bool_, (self.value(e, d), self.const(bound, d)), kind)
      out = p if out is None else self.new(Kind.IALU, dt.bool_, (out, p), "and")
    return out

  def address(self, buf: Instr, flat: sym.Expr) -> tuple:
    """(PTR, element offset): a non-negative constant part of flat is left to the access instruction."""
    offset = flat.v if isinstance(flat, sym.Const) else flat.const if isinstance(flat, sym.Sum) else 0
    offset = max(offset, 0)
    d = self.width(flat)
    return self.new(Kind.PTR, buf.dtype, (buf, self.value(flat - offset, d))), offset

  def instr(self, ins: Instr) -> None:
    ins.src = tuple(self.ref(s) for s in ins.src)
    op = ins.op
    if op in (Kind.LOAD, Kind.STORE):
      flat, valid = ins.arg
      ptr, offset = self.address(ins.src[0], flat)
      guard = None if op is Kind.STORE or valid.is_true else self.cond(valid)
      ins.src, ins.arg = (ptr,) + ins.src[1:] + (() if guard is None else (guard,)), offset
    elif op in (Kind.VLOAD, Kind.VSTORE):
      flat, width = ins.arg
      ptr, offset = self.address(ins.src[0], flat)
      ins.src, ins.arg = (ptr,) + ins.src[1:], (offset, width)
    elif op is Kind.INDEX:
      self.replaced[id(ins)] = self.resized(self.value(ins.arg, self.width(ins.arg)), ins.dtype)
      return
    elif op is Kind.COND:
      self.replaced[id(ins)] = self.cond(ins.arg) or self.const(True, dt.bool_)
      return
    elif op is Kind.IF:
      self.ifs.append(c := self.cond(ins.arg))
      if c is None: return   # a guard that always holds (an unrolled copy's, say) is no block: its ENDIF goes too
      ins.src, ins.arg = (c,), None
    elif op is Kind.ENDIF and self.ifs.pop() is None: return
    elif op is Kind.SPECIAL: self.vars[ins.arg[0]] = ins
    if op in (Kind.ENDRANGE, Kind.ENDIF):
      self.scopes.pop()
      self.level -= 1
    self.out.append(ins)
    self.depth[id(ins)] = self.level
    if op in (Kind.RANGE, Kind.IF):
      self.scopes.append({})
      self.level += 1
    if op is Kind.RANGE:
      self.vars[ins.arg[0]] = ins
      self.depth[id(ins)] = self.level   # the counter is defined inside its loop

def lower_indices(instrs: list) -> list:
  """The program with every index, address and guard as instructions (see the module's docstring)."""
  lowering = _Lowering()
  for ins in instrs: lowering.instr(ins)
  return lowering.out
