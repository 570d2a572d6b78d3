"""The linear program: what crosses from codegen to the renderers.

A flat list of instructions; loops are RANGE ... ENDRANGE pairs, guards IF ... ENDIF.
Indices stay symbolic (ir.symbolic expressions) so each renderer prints them in its own syntax.
"""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Any
from alloy.dtype import DType

@dataclass(eq=False)
class Instr:
  op: str                    # param, const, range, endrange, special, if, endif, load, store, alu, cast,
                             # bitcast, acc, update, index, cond
  dtype: DType | None
  src: tuple = ()
  arg: Any = None
  def __repr__(self):
    arg = ', ' + str(self.arg) if self.arg is not None else ''
    return f"{self.op}({self.dtype.name if self.dtype else ''}{arg}) <- {[id(s) % 1000 for s in self.src]}"

@dataclass
class KernelMeta:
  """Everything known about one kernel besides its source: recorded with each launch."""
  name: str
  global_size: tuple = (1, 1, 1)
  local_size: tuple = (1, 1, 1)
  flops: int = 0
  bytes: int = 0
  vector_widths: tuple = ()
  opts: tuple = ()
  target: str = ""
  outs: int = 1

@dataclass
class LinearProgram:
  instrs: list[Instr]
  meta: KernelMeta
  buffer_dtypes: list = field(default_factory=list)   # per buffer slot
  def describe(self) -> str:
    names = {id(ins): f"%{i}" for i, ins in enumerate(self.instrs)}
    lines = []
    for i, ins in enumerate(self.instrs):
      srcs = ", ".join(names.get(id(s), "?") for s in ins.src)
      lines.append(f"%{i:<4d} {ins.op:9s} {ins.dtype.name if ins.dtype else '':8s} [{srcs}] {'' if ins.arg is None else ins.arg}")
    return "\n".join(lines)
