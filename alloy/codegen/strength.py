"""Strength reduction of addresses (pointer stepping): an address affine in its loop's counter is stepped, not
recomputed.

An access whose PTR is base + (invariant + c*counter) of its innermost loop reads a pointer set to base + invariant
before the loop and moved on by c elements at the end of each iteration (a STEP). Accesses that differ only in their
constant offsets (a tile's lanes, the copies of an unrolled loop) share one pointer. Run after hoist.py, which
leaves the invariant part outside the loop. NVVM does this for CUDA C and C compilers for C; ptxas does not, so the
CUDA device's caps ask for it (DeviceCaps.codegen_loops).
"""
from __future__ import annotations
from alloy.codegen.blocks import Block, flat, homes, nest, users
from alloy.codegen.program import Instr, Kind, PURE

def _affine(idx: Instr, counter: Instr, outside) -> tuple | None:
  """(invariant part or None, coefficient) where idx = invariant + c*counter, the invariant part defined outside."""
  def is_counter(v): return v is counter or (v.op is Kind.CAST and v.src[0] is counter)
  if is_counter(idx): return None, 1
  if idx.op is not Kind.IALU: return None
  a = idx.src
  if idx.arg == "mul" and is_counter(a[0]) and a[1].op is Kind.CONST: return None, a[1].arg
  if idx.arg == "add" and is_counter(a[1]) and outside(a[0]): return a[0], 1
  if idx.arg == "add" and is_counter(a[0]) and a[1].op is Kind.CONST: return a[1], 1
  if idx.arg == "mad" and is_counter(a[0]) and a[1].op is Kind.CONST and outside(a[2]): return a[2], a[1].arg
  return None

def step_pointers(instrs: list) -> list:
  top = nest(instrs)
  home = homes(top)
  replaced: dict = {}
  loops: dict = {}   # id(loop block) -> {(buffer, invariant, coefficient): stepped PTR}

  def visit(block: Block):
    for item in list(block.items):
      if isinstance(item, Block):
        visit(item)
        continue
      if item.op is not Kind.PTR or item.src[0].op is not Kind.PARAM: continue
      loop = block.loop()
      if loop is None: continue
      def outside(v, loop=loop): return not home.get(id(v), top).within(loop)
      if (form := _affine(item.src[1], loop.head, outside)) is None: continue
      inv, coef = form
      pointers = loops.setdefault(id(loop), {})
      key = (id(item.src[0]), id(inv), coef)
      if key not in pointers:
        index = inv if inv is not None else Instr(Kind.CONST, item.src[1].dtype, (), 0)
        ptr = pointers[key] = Instr(Kind.PTR, item.dtype, (item.src[0], index))
        parent = loop.parent
        at = parent.items.index(loop)
        if inv is None: parent.items.insert(at, index); at += 1
        parent.items.insert(at, ptr)
        loop.items.append(Instr(Kind.STEP, None, (ptr,), coef))
      replaced[id(item)] = pointers[key]

  visit(top)
  if not replaced: return instrs
  out = flat(top)
  for ins in out: ins.src = tuple(replaced.get(id(s), s) for s in ins.src)
  return without_dead(out)

def without_dead(instrs: list) -> list:
  """Drop pure instructions nothing reads (the addresses a stepped pointer replaced), until none is left."""
  while True:
    used = users(instrs)
    kept = [ins for ins in instrs if ins.op not in PURE or used.get(id(ins), 0)]
    if len(kept) == len(instrs): return instrs
    instrs = kept
