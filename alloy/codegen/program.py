"""The linear program: what crosses from codegen to the renderers.

A flat list of instructions; loops are RANGE ... ENDRANGE pairs, guards IF ... ENDIF.
`Kind` names what an instruction does; the table after it says, for each kind, what its `dtype`, `src` and `arg` hold.

Two forms, one before and one after codegen/index.py. Lowering and vectorize.py write indices and guards as
ir.symbolic expressions in the instructions' args (flat, valid); index.py then lowers every one of them to IALU
instructions, and every memory access to a PTR (the element's address) plus a constant element offset. The passes
after it (hoist.py, strength.py) and every renderer see only that second form: a renderer prints, it computes no index.
"""
from __future__ import annotations
import functools, math, struct
from dataclasses import dataclass, field
from typing import Any
from alloy.dtype import DType

class Kind:
  """An instruction kind: a named singleton, compared and hashed by identity, a plain class rather than an Enum for
  the reason ir.ops.Op gives (lowering and the renderers look kinds up constantly). `dtype`, `src` and `arg` say what
  an Instr of this kind holds in those fields."""
  __slots__ = ("name", "dtype", "src", "arg")
  def __init__(self, name: str, dtype: str, src: str, arg: str): self.name, self.dtype, self.src, self.arg = name, dtype, src, arg
  def __repr__(self): return f"Kind.{self.name}"
  def __reduce__(self): return (getattr, (Kind, self.name))   # copies and pickles resolve to the one instance

# the one table of what each kind's fields hold; flat: a sym.Expr element index into the buffer; valid: a sym.Cond;
# "lowered:" says what a kind holds after codegen/index.py (an access: its PTR, and `offset`, an int element offset)
# ---- kernel arguments and thread indices
Kind.PARAM = Kind("PARAM", dtype="slot 0 (the output): its element dtype; an input: None (LinearProgram.buffer_dtypes has it)",
                  src="()", arg="the buffer slot (int)")
Kind.VAR = Kind("VAR", dtype="the scalar's dtype", src="()", arg="the scalar argument's number (int; see KernelMeta.scalar_dtypes)")
Kind.SPECIAL = Kind("SPECIAL", dtype="the index dtype (int64 for a grid past 2^31 threads)", src="()",
                    arg='(sym.Var it defines, "global" (flat over the grid) | "group" (the threadgroup) | "lane" (in it))')
Kind.LOCAL = Kind("LOCAL", dtype="the element dtype", src="()",
                  arg="(name, size in elements[, True: in the tensor-core tile's pipeline memory, free once its MMA is done]): an array in "
                      "fast memory (a threadgroup's shared memory; the thread's own on the CPU)")
# ---- blocks
Kind.RANGE = Kind("RANGE", dtype="the counter's index dtype", src="()",
                  arg="(sym.Var counter over 0..var.max, parallel: the CPU's outer loop that the thread team splits); ENDRANGE "
                      "closes it. Lowered: the instruction is also the counter's value, an operand of IALUs")
Kind.ENDRANGE = Kind("ENDRANGE", dtype="None", src="()", arg="None")
Kind.IF = Kind("IF", dtype="None", src="() (lowered: (bool value,))", arg="sym.Cond: the block runs where it holds; ENDIF closes it "
              "(lowered: None, the block runs where src[0] is true)")
Kind.ENDIF = Kind("ENDIF", dtype="None", src="()", arg="None")
# ---- scalar values
Kind.CONST = Kind("CONST", dtype="the value's dtype", src="()", arg="the value (Python scalar)")
Kind.INDEX = Kind("INDEX", dtype="the index dtype", src="()",
                  arg="sym.Expr: an index expression as a value (an arange element, a named index); index.py replaces it by IALUs")
Kind.COND = Kind("COND", dtype="bool", src="()", arg="sym.Cond as a value; index.py replaces it by IALUs")
Kind.LOAD = Kind("LOAD", dtype="the element dtype", src="(PARAM or LOCAL,) (lowered: (PTR,) or (PTR, bool valid value))",
                 arg="(flat, valid): the element, 0 where valid is false (lowered: offset)")
Kind.ALU = Kind("ALU", dtype="the result's dtype", src="the operands (1 to 3 values)", arg="the elementwise ir.ops.Op")
Kind.CAST = Kind("CAST", dtype="the target dtype", src="(value,)", arg="None")
Kind.BITCAST = Kind("BITCAST", dtype="the target dtype (same size)", src="(value,)", arg="None")
Kind.ACC = Kind("ACC", dtype="the accumulator's dtype", src="()", arg="its initial value (the reduction's identity)")
Kind.UPDATE = Kind("UPDATE", dtype="the accumulator's dtype", src="(ACC, value)", arg="ir.ops.Op: acc = op(acc, value)")
# ---- a threadgroup's threads together (lower.py's grouped reduction)
Kind.SHUFFLE = Kind("SHUFFLE", dtype="the value's dtype (at most DeviceCaps.shuffle_bytes wide)", src="(value,)",
                    arg="offset (int): the value in SIMD lane lane^offset of this thread's SIMD group, all of whose lanes run it")
Kind.BARRIER = Kind("BARRIER", dtype="None", src="()",
                    arg="None: every thread of the threadgroup waits here; their LOCAL writes before it are seen after it. "
                        "n: the same for the threadgroup's last n threads alone (a WGMMA tile's consumers: its producer has left)")
Kind.STORE = Kind("STORE", dtype="None", src="(PARAM or LOCAL, value) (lowered: (PTR, value))",
                  arg="(flat, valid); valid is always true (lowered: offset)")
# ---- integer index arithmetic and addresses (codegen/index.py, strength.py)
Kind.IALU = Kind("IALU", dtype="int32 or int64, the width it computes in (bool for lt, ge, and)",
                 src="the operands: IALU, CONST, RANGE, SPECIAL or CAST values of its dtype; a constant operand comes last",
                 arg="one of INDEX_OPS: add a+b, mul a*b, mad a*b+c, div a/b and mod a%b (C's truncating ones; b a positive "
                     "constant), lt a<b, ge a>=b, and a&&b; never wraps (index.py picks int64 where int32 could)")
Kind.PTR = Kind("PTR", dtype="the buffer's element dtype", src="(PARAM or LOCAL, index value)",
                arg="None: the address of element `index` of the buffer (strength.py: stepped by the STEPs that read it)")
Kind.STEP = Kind("STEP", dtype="None", src="(PTR,)",
                 arg="elements (int): the pointer moves on by that many; the last instruction of its loop's body")
# ---- tensor cores (codegen/tensor_core.py)
Kind.MMA = Kind("MMA", dtype="the accumulators' dtype (float32)",
                src="(A's PARAM, B's PARAM, A's element offset, B's element offset, the tile's first row, first column: "
                    "index values; a WGMMA tile's: then the flat batch element, which its tensor maps take as a coordinate)",
                arg="(codegen.matmul.MatmulSpec, codegen.tensor_core.TensorCoreTile): the threadgroup's tile of the matmul "
                    "into the thread's accumulators, GEPs (lane k: accumulator k, tensor_core.accumulator_index's order) "
                    "read them")
Kind.HANDOFF = Kind("HANDOFF", dtype="None", src="(a persistent WGMMA tile's MMA, the tile's iteration: an index value) or (MMA,)",
                   arg='"wait": the epilogue threads wait until the consumers have staged the iteration\'s tile; "release": '
                       "they hand its shared memory back (a persistent tile's MMA value is that memory: VLOADs read it)")
# ---- vectors (codegen/vectorize.py); width: elements per vector
Kind.VLOAD = Kind("VLOAD", dtype="the element dtype", src="(PARAM,) (lowered: (PTR,))", arg="(flat of lane 0, width) (lowered: (offset, width))")
Kind.VSTORE = Kind("VSTORE", dtype="None", src="(PARAM, one value per lane) or (PARAM, a vector) (lowered: PTR in PARAM's place)",
                   arg="(flat of lane 0, width) (lowered: (offset, width))")
Kind.GEP = Kind("GEP", dtype="the element dtype", src="(vector: VLOAD, VALU or VACC; or MMA,)", arg="the lane (int)")
Kind.VBROADCAST = Kind("VBROADCAST", dtype="the element dtype", src="(scalar value,)", arg="width: the value in every lane")
Kind.VALU = Kind("VALU", dtype="the element dtype", src="the operand vectors", arg="(ir.ops.Op, width): lane by lane")
Kind.VACC = Kind("VACC", dtype="the element dtype", src="()", arg="(initial value of every lane, width)")
Kind.VUPDATE = Kind("VUPDATE", dtype="the element dtype", src="(VACC, vector) or (VACC, a, b)",
                    arg="ir.ops.Op: acc = op(acc, vector) lane by lane; with a and b (op ADD, float32) acc += a*b with one rounding")

KINDS = tuple(k for k in vars(Kind).values() if type(k) is Kind)
INDEX_OPS = ("add", "mul", "mad", "div", "mod", "lt", "ge", "and")
# kinds whose value depends on their operands alone, computed without a trap: free to move to where the operands are
# (hoist.py) and to drop where unused; a PTR that a STEP moves is not among them (it changes in its loop)
PURE = frozenset({Kind.IALU, Kind.CONST, Kind.CAST, Kind.PTR})

def stepped_pointers(instrs) -> set:
  """id() of each PTR that a STEP moves (strength.py): a variable of its own, where another address is a value."""
  return {id(ins.src[0]) for ins in instrs if ins.op is Kind.STEP}

class Instr:
  """One instruction: what `dtype`, `src` (the instructions it reads) and `arg` hold depends on its kind, `op`
  (see Kind). Compared by identity; a plain class with slots, as lowering makes many."""
  __slots__ = ("op", "dtype", "src", "arg")
  def __init__(self, op: Kind, dtype: DType | None, src: tuple = (), arg: Any = None):
    if type(op) is not Kind: raise TypeError(f"an instruction's op is a Kind, not {op!r}")
    self.op, self.dtype, self.src, self.arg = op, dtype, src, arg
  def __repr__(self):
    arg = ', ' + str(self.arg) if self.arg is not None else ''
    return f"{self.op.name.lower()}({self.dtype.name if self.dtype else ''}{arg}) <- {[id(s) % 1000 for s in self.src]}"

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
  min_blocks: int = 1   # threadgroups a multiprocessor should have room for: bounds the registers a thread takes (plan.py)

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
      lines.append(f"%{i:<4d} {ins.op.name.lower():9s} {ins.dtype.name if ins.dtype else '':8s} [{srcs}] {'' if ins.arg is None else ins.arg}")
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
