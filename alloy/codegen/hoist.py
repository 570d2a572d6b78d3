"""Hoisting: a pure instruction moves out of every loop and guard it does not depend on.

Each PURE instruction (program.py) goes to the block of its innermost operand, just before the loop or guard that
held it, and is merged with an equal instruction already visible there. Index arithmetic lowered in place by
index.py thus runs once per iteration of the loops it depends on, for every renderer: NVVM and C compilers do this
themselves, but ptxas does not (PTX matmul ran at 0.27x of its speed with the index math left in the loop).
A PTR that a STEP moves stays where strength.py put it: it changes in its loop; so does what reads an accumulator
(its value is final only after the loop that updates it).
"""
from __future__ import annotations
from alloy.codegen.blocks import Block, flat, homes, nest
from alloy.codegen.program import Kind, PURE

_CHANGING = (Kind.ACC, Kind.VACC)

def hoist(instrs: list) -> list:
  top = nest(instrs)
  home = homes(top)
  stepped = {id(ins.src[0]) for ins in instrs if ins.op is Kind.STEP}
  seen: dict = {}        # id(block) -> {key: instr} of the pure instructions placed in it
  replaced: dict = {}    # id(instr) -> the equal instruction it merged into
  path: list = []        # the blocks open at the instruction being visited, outermost first

  def visible(block: Block, key):
    b = block
    while b is not None:
      if (hit := seen.get(id(b), {}).get(key)) is not None: return hit
      b = b.parent
    return None

  def place(ins, block: Block) -> bool:
    """Move ins out to its operands' innermost block; False where it merged into an instruction there."""
    target = top
    for s in ins.src:
      b = home.get(id(s), top)
      if b.depth() > target.depth(): target = b
    key = (ins.op, ins.dtype, tuple(id(s) for s in ins.src), (type(ins.arg), ins.arg))
    if (hit := visible(target, key)) is not None:
      replaced[id(ins)] = hit
      return False
    seen.setdefault(id(target), {})[key] = ins
    home[id(ins)] = target
    if target is not block:   # before the child of target that holds the instruction's old place
      child = path[target.depth() + 1]
      target.items.insert(target.items.index(child), ins)
      return False
    return True

  def walk(block: Block):
    path.append(block)
    if block.head is not None: block.head.src = tuple(replaced.get(id(s), s) for s in block.head.src)
    i = 0
    while i < len(block.items):
      item = block.items[i]
      if isinstance(item, Block):
        walk(item)
        i = block.items.index(item) + 1   # hoisted instructions went in before it
        continue
      item.src = tuple(replaced.get(id(s), s) for s in item.src)
      if item.op in PURE and id(item) not in stepped and not any(x.op in _CHANGING for x in item.src) and not place(item, block):
        del block.items[i]
        continue
      i += 1
    path.pop()

  walk(top)
  return flat(top)
