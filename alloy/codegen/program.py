"""The linear program: what crosses from codegen to the renderers.

A flat list of instructions; loops are RANGE ... ENDRANGE pairs, guards IF ... ENDIF.
Indices stay symbolic (ir.symbolic expressions) so each renderer prints them in its own syntax.
"""
from __future__ import annotations
import functools, math, struct
from dataclasses import dataclass, field
from typing import Any
from alloy.dtype import DType

@dataclass(eq=False)
class Instr:
  op: str                    # param, const, var, range, endrange, special, if, endif, load, store, alu, cast,
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
  scalar_dtypes: tuple = ()  # the dtype of each scalar argument (VAR), passed as int32 words (see scalar_words)

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

# ---- scalar arguments: every device passes a kernel's scalars as int32 words after its buffers (the native CPU queue,
# CUDA's parameter block and Metal's bindings already carry int32s): one word per value, two (low, high) for 64-bit
# values; a float32 word holds the value's bits, 16-bit floats travel as float32 (as their literals are float32)
_WORD_FORMAT = {"float64": "d", "float32": "f", "float16": "f", "bfloat16": "f", "int64": "q", "uint64": "Q",
                "uint32": "I", "uint16": "I", "uint8": "I"}

def word_count(d: DType) -> int: return 2 if d.itemsize == 8 else 1

def word_offsets(dtypes) -> list[int]:
  """Where each scalar's first word is among the kernel's scalar words."""
  out, at = [], 0
  for d in dtypes:
    out.append(at)
    at += word_count(d)
  return out

@functools.lru_cache(maxsize=1024)
def _packers(dtypes: tuple) -> tuple:
  values = struct.Struct("<" + "".join(_WORD_FORMAT.get(d.name, "i") for d in dtypes))
  return values, struct.Struct(f"<{values.size // 4}i")

def scalar_words(dtypes: tuple, values) -> tuple:
  """The int32 words that pass `values` (Python numbers already in their dtypes' ranges) as scalars of `dtypes`."""
  values_packer, words = _packers(dtypes)
  try: return words.unpack(values_packer.pack(*values))
  except (OverflowError, struct.error):   # a float beyond float32's range: inf, as its literal would be
    return words.unpack(values_packer.pack(*[_to_float32(v) if _WORD_FORMAT.get(d.name) == "f" else int(v) if not d.is_float else v
                                             for d, v in zip(dtypes, values)]))

def _to_float32(v: float) -> float:
  if math.isnan(v) or math.isinf(v) or abs(v) <= 3.4028234663852886e38: return v
  return math.copysign(math.inf, v)
