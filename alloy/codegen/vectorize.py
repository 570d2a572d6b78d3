"""Runs of scalar loads and stores at consecutive addresses become vector loads and stores.

Unrolled lanes (an upcast axis, a tiny kernel's elements) read and write neighbours; a 4-wide
access moves them in one instruction. GPUs need the vector aligned to its size, so there a run
must start at a multiple of the width; the C vector types used on the CPU take any address.
"""
from __future__ import annotations
from alloy.ir import symbolic as sym
from alloy.codegen.program import Instr

def _split(flat: sym.Expr) -> tuple:
  """flat = sum of (term * coefficient) + a constant offset: (the terms, the offset)."""
  if isinstance(flat, sym.Const): return (), flat.v
  if isinstance(flat, sym.Sum): return tuple(flat.terms), flat.const
  return ((flat, 1),), 0

def _multiple_of(e: sym.Expr, width: int) -> bool:
  """Whether e is a multiple of width: here, a named index whose every term is."""
  if not (isinstance(e, sym.Opaque) and getattr(e.ref, "op", None) == "index"): return False
  terms, off = _split(e.ref.arg)
  return off % width == 0 and all(c % width == 0 for _, c in terms)

def _scopes(instrs: list) -> list:
  """For each instruction, the block it sits in (a number per opened loop or if)."""
  out, stack, fresh = [], [0], 0
  for ins in instrs:
    if ins.op in ("endrange", "endif"): stack.pop()
    out.append(stack[-1])
    if ins.op in ("range", "if"): fresh += 1; stack.append(fresh)
  return out

def vectorize(instrs: list, width: int, dtypes: set, aligned: bool) -> tuple[list, tuple]:
  """(new instruction list, the vector widths used)."""
  if width <= 1: return instrs, ()
  scopes = _scopes(instrs)
  groups: dict = {}
  for pos, ins in enumerate(instrs):
    if ins.op in ("load", "store") and (ins.dtype if ins.op == "load" else ins.src[0].dtype).name in dtypes:
      flat, valid = ins.arg
      if not valid.is_true: continue
      terms, off = _split(flat)
      if aligned and not all(c % width == 0 or _multiple_of(t, width) for t, c in terms): continue
      groups.setdefault((ins.op, id(ins.src[0]), scopes[pos], terms), {}).setdefault(off, pos)
  replace: dict[int, Instr] = {}    # position -> vector instruction placed there
  drop: set[int] = set()
  for (op, _, _, _), by_off in groups.items():
    for start in sorted(o for o in by_off if o % width == 0):
      run = [by_off.get(start + k) for k in range(width)]
      if any(p is None for p in run) or any(p in drop or p in replace for p in run): continue
      members = [instrs[p] for p in run]
      flat = members[0].arg[0]
      if op == "load":
        at = min(run)
        vec = Instr("vload", members[0].dtype, (members[0].src[0],), (flat, width))
        replace[at] = vec
        for k, m in enumerate(members):   # each scalar load becomes a lane of the vector, in place
          m.op, m.src, m.arg = "gep", (vec,), k
      else:
        at = max(run)
        replace[at] = Instr("vstore", None, (members[0].src[0],) + tuple(m.src[1] for m in members), (flat, width))
        drop.update(p for p in run if p != at)
  if not replace: return instrs, ()
  out = []
  for pos, ins in enumerate(instrs):
    if pos in drop: continue
    if pos in replace:
      out.append(replace[pos])
      if replace[pos].op == "vstore": continue
    out.append(ins)
  return out, (width,)
