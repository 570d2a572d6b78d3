"""What crosses from schedule to codegen: one kernel's AST (an IR type, so codegen needs only the IR)."""
from __future__ import annotations
from dataclasses import dataclass
from alloy.ir.node import Node
from alloy.ir.ops import Op

@dataclass(frozen=True)
class KernelAST:
  """Computes `root` (leaves are INPUT(k) views, CONST, VAR, ARANGE) into buffer 0, contiguous.
  Buffer k >= 1 is read through INPUT(k), scalar argument k through VAR(k) (numbered from 0 without gaps).
  Structural: the same AST is the same kernel, whatever values its scalar arguments get."""
  root: Node
  n_buffers: int

  @property
  def shape(self): return self.root.shape
  @property
  def dtype(self): return self.root.dtype
  @property
  def scalar_dtypes(self) -> tuple:
    """The dtype of each scalar argument, by number."""
    found = {n.arg: n.dtype for n in self.root.toposort() if n.op is Op.VAR}
    assert sorted(found) == list(range(len(found))), f"scalar arguments {sorted(found)} are not numbered 0..n-1"
    return tuple(found[k] for k in range(len(found)))

  def describe(self) -> str:
    lines, names = [], {}
    for n in self.root.toposort():
      names[id(n)] = f"%{len(names)}"
      args = ", ".join(names[id(s)] for s in n.src)
      extra = "" if n.arg is None else f" {n.arg}"
      lines.append(f"  {names[id(n)]} = {n.op.name}({args}){extra} : {n.dtype.name}{list(n.shape)}")
    return "\n".join(lines)
