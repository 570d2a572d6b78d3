"""Unrolling: an innermost loop of a short body runs its body 4 (or 2) times per iteration, so several iterations'
loads are in flight at once.

It runs on the symbolic form, before index.py: copy k of the body reads the counter as counter*u + k, so its
addresses differ from copy 0's by constants, which index.py leaves to the access instructions' offsets and
strength.py to one stepped pointer. Only where u divides the count (no remainder loop). C compilers and NVVM unroll
themselves; ptxas does not, so the CUDA device's caps ask for it (DeviceCaps.codegen_loops).
"""
from __future__ import annotations
from alloy.ir import symbolic as sym
from alloy.codegen.program import Instr, Kind

MAX_BODY = 64   # instructions: a longer body has work enough in flight already, and would cost registers
FACTORS = (4, 2)
_BARRIERS = (Kind.RANGE, Kind.SHUFFLE, Kind.BARRIER, Kind.LOCAL, Kind.SPECIAL, Kind.HANDOFF)

class _Copy:
  """Copy k of a loop body unrolled by `factor`: the counter var reads outer*factor + k."""
  def __init__(self, var: sym.Var, outer: sym.Var, factor: int, k: int):
    self.var, self.outer, self.factor, self.k = var, outer, factor, k
    self.value = outer * factor + k
    self.refs: dict = {}   # id(body instruction) -> its copy

  def touched(self, e: sym.Expr) -> bool:
    """Whether e reads var or a named index (Opaque) of the body: only then is it rebuilt (rebuilding is costly)."""
    if isinstance(e, sym.Var): return e.name == self.var.name   # loop variables' names are the kernel's own, one each
    if isinstance(e, sym.Opaque): return id(e.ref) in self.refs
    if isinstance(e, sym.Sum): return any(self.touched(t) for t, _ in e.terms)
    if isinstance(e, (sym.Div, sym.Mod)): return self.touched(e.a)
    return False

  def expr(self, e: sym.Expr) -> sym.Expr:
    """e with var replaced and each named index of the body by its copy's."""
    if not self.touched(e): return e
    if isinstance(e, sym.Var): return self.value
    if isinstance(e, sym.Opaque): return sym.Opaque(self.refs[id(e.ref)], e.min, e.max)
    if isinstance(e, sym.Sum):
      changed = [(t, c) for t, c in e.terms if self.touched(t)]
      if changed == [(self.var, c) for _, c in changed]:   # the counter itself: same place in the order (same name)
        c = changed[0][1]
        return sym.Sum(tuple((self.outer, c * self.factor) if t == self.var else (t, k) for t, k in e.terms), e.const + c * self.k)
      out = e
      for t, c in changed: out = out + (self.expr(t) - t) * c
      return out
    if isinstance(e, sym.Div): return sym.div(self.expr(e.a), e.d)
    return sym.mod(self.expr(e.a), e.d)

  def cond(self, c: sym.Cond) -> sym.Cond:
    out = sym.Cond()
    for clause in c.clauses:
      if clause == ("false",): return sym.FALSE
      kind, e, bound = clause
      e = self.expr(e)
      out = out & (sym.in_range(e, bound, 1 << 62) if kind == "ge" else sym.in_range(e, -(1 << 62), bound))
    return out

  def instr(self, ins: Instr) -> Instr:
    arg, op = ins.arg, ins.op
    if op in (Kind.LOAD, Kind.STORE): arg = (self.expr(arg[0]), self.cond(arg[1]))
    elif op in (Kind.VLOAD, Kind.VSTORE): arg = (self.expr(arg[0]), arg[1])
    elif op is Kind.INDEX: arg = self.expr(arg)
    elif op in (Kind.COND, Kind.IF): arg = self.cond(arg)
    out = Instr(op, ins.dtype, tuple(self.refs.get(id(s), s) for s in ins.src), arg)
    self.refs[id(ins)] = out
    return out

def unroll(instrs: list) -> list:
  out, i = [], 0
  while i < len(instrs):
    ins = instrs[i]
    out.append(ins)
    i += 1
    if ins.op is not Kind.RANGE: continue
    end = i
    while instrs[end].op not in (Kind.RANGE, Kind.ENDRANGE): end += 1
    if instrs[end].op is Kind.RANGE: continue   # not the innermost loop: its children are visited in turn
    var, parallel = ins.arg
    body, count = instrs[i:end], var.max + 1
    factor = next((u for u in FACTORS if count % u == 0 and count >= 2 * u), 1)
    if parallel or factor == 1 or len(body) > MAX_BODY or any(b.op in _BARRIERS for b in body): continue
    outer = sym.Var(var.name, 0, count // factor - 1)
    out[-1] = Instr(Kind.RANGE, ins.dtype, (), (outer, parallel))
    for k in range(factor):
      copy = _Copy(var, outer, factor, k)
      out.extend(copy.instr(b) for b in body)
    i = end
  return out
