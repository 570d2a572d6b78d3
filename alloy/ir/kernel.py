"""What crosses from schedule to codegen: one kernel's AST (an IR type, so codegen needs only the IR)."""
from __future__ import annotations
from dataclasses import dataclass
from alloy.ir.node import Node

@dataclass(frozen=True)
class KernelAST:
  """Computes `root` (leaves are INPUT(k) views, CONST, ARANGE) into buffer 0, contiguous.
  Buffer k >= 1 is read through INPUT(k). Structural: the same AST is the same kernel."""
  root: Node
  n_buffers: int

  @property
  def shape(self): return self.root.shape
  @property
  def dtype(self): return self.root.dtype

  def describe(self) -> str:
    lines, names = [], {}
    for n in self.root.toposort():
      names[id(n)] = f"%{len(names)}"
      args = ", ".join(names[id(s)] for s in n.src)
      extra = "" if n.arg is None else f" {n.arg}"
      lines.append(f"  {names[id(n)]} = {n.op.name}({args}){extra} : {n.dtype.name}{list(n.shape)}")
    return "\n".join(lines)
