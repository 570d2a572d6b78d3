"""The linear program as nested blocks: what the passes after lowering walk.

A Block is a loop (RANGE ... ENDRANGE), a guard (IF ... ENDIF) or the kernel's top level; its items are
instructions and the blocks inside it, in program order. `nest` builds the tree from the flat list and
`flat` writes it back, so a pass moves an instruction by moving it between item lists.
"""
from __future__ import annotations
from alloy.codegen.program import Kind

class Block:
  __slots__ = ("head", "items", "tail", "parent")
  def __init__(self, head, parent):
    self.head, self.items, self.tail, self.parent = head, [], None, parent
  @property
  def is_loop(self) -> bool: return self.head is not None and self.head.op is Kind.RANGE
  def loop(self):
    """The innermost loop this block is, or sits in (None at the top level)."""
    b = self
    while b is not None and not b.is_loop: b = b.parent
    return b
  def within(self, other) -> bool:
    """Whether this block is `other` or inside it."""
    b = self
    while b is not None and b is not other: b = b.parent
    return b is other
  def depth(self) -> int: return 0 if self.parent is None else 1 + self.parent.depth()

def nest(instrs: list) -> Block:
  top = block = Block(None, None)
  for ins in instrs:
    if ins.op in (Kind.RANGE, Kind.IF):
      child = Block(ins, block)
      block.items.append(child)
      block = child
    elif ins.op in (Kind.ENDRANGE, Kind.ENDIF):
      block.tail, block = ins, block.parent
    else: block.items.append(ins)
  assert block is top, "a RANGE or IF without its end"
  return top

def flat(block: Block) -> list:
  out = [] if block.head is None else [block.head]
  for item in block.items: out.extend(flat(item) if isinstance(item, Block) else [item])
  if block.tail is not None: out.append(block.tail)
  return out

def homes(top: Block) -> dict:
  """id(instr) -> the block it sits in; a RANGE's counter sits in its loop's body."""
  out: dict = {}
  def walk(b: Block):
    if b.head is not None: out[id(b.head)] = b if b.is_loop else b.parent
    for item in b.items:
      if isinstance(item, Block): walk(item)
      else: out[id(item)] = b
  walk(top)
  return out

def users(instrs: list) -> dict:
  """id(instr) -> how many instructions read it."""
  out: dict = {}
  for ins in instrs:
    for s in ins.src: out[id(s)] = out.get(id(s), 0) + 1
  return out
