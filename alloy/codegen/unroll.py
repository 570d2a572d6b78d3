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
_BARRIERS = (Kind.RANGE, Kind.GROUP_REDUCE, Kind.LOCAL, Kind.SPECIAL)

def _rebuild(e: sym.Expr, var: sym.Var, value: sym.Expr, refs: dict) -> sym.Expr:
  """e with var replaced by value and each named index (Opaque) of the body by its copy's."""
  if isinstance(e, sym.Var): return value if e == var else e
  if isinstance(e, sym.Const): return e
  if isinstance(e, sym.Opaque): return sym.Opaque(refs.get(id(e.ref), e.ref), e.min, e.max) if id(e.ref) in refs else e
  if isinstance(e, sym.Sum):
    out = sym.Const(e.const)
    for t, c in e.terms: out = out + _rebuild(t, var, value, refs) * c
    return out
  if isinstance(e, sym.Div): return sym.div(_rebuild(e.a, var, value, refs), e.d)
  if isinstance(e, sym.Mod): return sym.mod(_rebuild(e.a, var, value, refs), e.d)
  raise TypeError(e)

def _rebuild_cond(c: sym.Cond, var, value, refs) -> sym.Cond:
  out = sym.Cond()
  for clause in c.clauses:
    if clause == ("false",): return sym.FALSE
    kind, e, bound = clause
    e = _rebuild(e, var, value, refs)
    out = out & (sym.in_range(e, bound, 1 << 62) if kind == "ge" else sym.in_range(e, -(1 << 62), bound))
  return out

def _copy(ins: Instr, var, value, refs: dict) -> Instr:
  arg, op = ins.arg, ins.op
  def ex(e): return _rebuild(e, var, value, refs)
  if op in (Kind.LOAD, Kind.STORE): arg = (ex(arg[0]), _rebuild_cond(arg[1], var, value, refs))
  elif op in (Kind.VLOAD, Kind.VSTORE): arg = (ex(arg[0]), arg[1])
  elif op is Kind.INDEX: arg = ex(arg)
  elif op in (Kind.COND, Kind.IF): arg = _rebuild_cond(arg, var, value, refs)
  out = Instr(op, ins.dtype, tuple(refs.get(id(s), s) for s in ins.src), arg)
  refs[id(ins)] = out
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
      refs: dict = {}
      out.extend(_copy(b, var, outer * factor + k, refs) for b in body)
    i = end
  return out
