"""PTX for the CUDA device: the linear program straight to NVIDIA's virtual ISA, with no C++ compiler in the way.

Longer than the house's 400 lines: it only prints (index arithmetic, hoisting, pointer stepping and unrolling are
codegen passes: codegen/passes.py), but PTX has no expressions and no types beyond register widths, so most kinds
print as several instructions per value class (the casts, floor division, 8-bit wrapping, 16-bit float rounding and
the group reduction's shuffles below), and a split would separate each kind's text from the register classes it needs.

A new CUDA C kernel costs NVRTC's front end, NVVM (with libdevice linked in) and ptxas: 27-47 ms on an H200 host.
PTX skips all but ptxas (nvJitLink, 8-9 ms): a first realize of a new kernel took 14.1 ms against 45.2 ms through
NVRTC in one run of bench/gpu.py. Where PTX has no instruction for an op (float64 transcendentals,
sin, cos, tan, pow, float floor division), render() raises Unsupported and the kernel is rendered as CUDA C
instead, so libdevice's versions serve those. The float32 math PTX lacks (exp, log, tanh, erf) is in ptx_math.py.

Registers by value class: bool lives in predicates; 8- and 16-bit integers in 16-bit registers (8-bit values kept
sign- or zero-extended, wrapped after each op as C's conversion back to int8 would); float16 and bfloat16 in float
registers, rounded to their precision after each op as the CUDA C renderer does; the rest in registers of their size.
Arithmetic follows the CUDA C renderer's semantics op for op, so both renderers give the same values.
"""
from __future__ import annotations
from alloy.dtype import DType
from alloy.ir.ops import Op, COMPARE, SELECTS
from alloy.codegen.program import Kind, LinearProgram, word_count, word_offsets
from alloy.renderer.cuda import CUDARenderer
from alloy.renderer import ptx_math
from alloy.renderer.ptx_math import float_literal

class Unsupported(NotImplementedError):
  """The program uses something this renderer does not emit; render it as CUDA C."""

_HALVES = ("float16", "bfloat16")   # held in f32 registers, rounded to their precision after each op
_REG_PREFIX = {"pred": "p", "b16": "h", "b32": "r", "b64": "rd", "f32": "f", "f64": "fd"}
# how a register class's values sit in shared memory: (bytes, ld/st type); bool as a byte
_SHARED = {"pred": (1, "u8"), "b16": (2, "b16"), "b32": (4, "b32"), "f32": (4, "f32"), "b64": (8, "b64"), "f64": (8, "f64")}

def reg_class(d: DType) -> str:
  if d.is_bool: return "pred"
  if d.is_float: return "f64" if d.itemsize == 8 else "f32"
  return {1: "b16", 2: "b16", 4: "b32", 8: "b64"}[d.itemsize]

def arith_type(d: DType) -> str:
  """The type suffix of arithmetic on d's registers."""
  if d.is_float: return "f64" if d.itemsize == 8 else "f32"
  return f"{'u' if d.is_unsigned else 's'}{max(16, d.itemsize * 8)}"

def _mem_type(d: DType) -> str:
  if d.is_bool: return "u8"
  if d.name in _HALVES: return "b16"
  if d.is_float: return arith_type(d)
  return f"{'u' if d.is_unsigned else 's'}{d.itemsize * 8}"

def sm_number(arch: str) -> int:
  """90 for sm_90 (and sm_90a)."""
  return int(arch[3:].rstrip("af"))

def ptx_version(arch: str) -> str:
  """The lowest PTX ISA version that knows the architecture (sm_90: 7.8), so older drivers still take it."""
  return {10: "8.6", 12: "8.7"}.get(sm_number(arch) // 10, "7.8")

def _literal(v, cls: str) -> str:
  """v as an immediate operand for registers of class cls (not pred)."""
  if cls[0] == "f": return float_literal(float(v), int(cls[1:]))
  return str(int(v) & ((1 << int(cls[1:])) - 1))

# codegen/index.py's integer index arithmetic, on s32 or s64 operands
_INDEX_OPS = {"add": "add.{t}", "mul": "mul.lo.{t}", "mad": "mad.lo.{t}", "div": "div.{t}", "mod": "rem.{t}",
              "lt": "setp.lt.{t}", "ge": "setp.ge.{t}", "and": "and.pred"}

def is_ptx(source: str) -> bool: return source.startswith(".version")

def _is64(r: str) -> bool: return r.startswith("%rd")   # a 64-bit integer register (see _REG_PREFIX)

class PTXRenderer:
  language = "ptx"
  def __init__(self, arch: str = "sm_90"): self.arch = arch
  def render(self, prog: LinearProgram) -> str: return _Kernel(prog, self.arch).text()

class PTXFirstRenderer:
  """The CUDA device's renderer: PTX where PTXRenderer covers the kernel, else CUDA C for NVRTC."""
  language = "ptx"
  def __init__(self, arch: str):
    self.ptx, self.cuda = PTXRenderer(arch), CUDARenderer()
  def render(self, prog: LinearProgram) -> str:
    try: return self.ptx.render(prog)
    except Unsupported: return self.cuda.render(prog)

class _Kernel:
  """One kernel's PTX, emitted instruction by instruction."""
  def __init__(self, prog: LinearProgram, arch: str):
    self.prog, self.arch = prog, arch
    self.counts = {c: 0 for c in _REG_PREFIX}
    self.head: list[str] = []   # parameter loads and constants: before any branch, so every use sees them
    self.out: list[str] = []    # the body's lines
    self.loops: list = []       # each open loop: (counter register, first label, count, bits)
    self.shared: list[str] = []
    self.names: dict[int, object] = {}   # id(instr) -> register (a list of registers for a vector load)
    self.dtypes: dict[int, DType] = {}
    self.vars: dict[str, str] = {}       # thread index variables -> their register (a group reduction names its lane)
    self.labels = 0
    self.written = {ins.src[0].src[0].arg for ins in prog.instrs if ins.op in (Kind.STORE, Kind.VSTORE)}
    self.stepped = {id(ins.src[0]) for ins in prog.instrs if ins.op is Kind.STEP}
    self.params: list[str] = []
    self.ifs: list[str] = []   # the end label of each open if

  # ---- registers and lines
  def reg(self, cls: str) -> str:
    self.counts[cls] += 1
    return f"%{_REG_PREFIX[cls]}{self.counts[cls] - 1}"
  def emit(self, line: str) -> None: self.out.append("\t" + line)
  def label(self) -> str:
    self.labels += 1
    return f"$L{self.labels - 1}"

  # ---- values: constants wanted as registers are set in the head; as an IALU's last operand they are immediates
  def value(self, ins) -> str:
    if ins.op is Kind.CONST and id(ins) not in self.names: self.names[id(ins)], self.dtypes[id(ins)] = self.const(ins.arg, ins.dtype), ins.dtype
    return self.names[id(ins)]
  def operand(self, ins) -> str:
    if ins.op is Kind.CONST and not ins.dtype.is_bool: return str(int(ins.arg)) if ins.dtype.is_int else _literal(ins.arg, reg_class(ins.dtype))
    return self.value(ins)

  def index_reg(self, wide: bool) -> str: return self.reg("b64" if wide else "b32")
  def resized(self, r: str, wide: bool) -> str:
    """An index register as 64 or 32 bits (indices are non-negative: widening zero-extends)."""
    if _is64(r) == wide: return r
    out = self.index_reg(wide)
    self.emit(f"cvt.u64.u32 {out}, {r};" if wide else f"cvt.u32.u64 {out}, {r};")
    return out
  def to_int32(self, r: str, d: DType) -> str:
    """C's (int) of a value used as an index."""
    cls = reg_class(d)
    if cls == "b32": return r
    out = self.reg("b32")
    if cls == "pred": self.emit(f"selp.b32 {out}, 1, 0, {r};")
    elif cls == "b16": self.emit(f"cvt.{'u32.u16' if d.is_unsigned else 's32.s16'} {out}, {r};")
    elif cls == "b64": self.emit(f"cvt.u32.u64 {out}, {r};")
    else: raise Unsupported(f"a {d.name} value as an index")
    return out

  def address(self, ptr, offset: int) -> str:
    """The address operand of the element `offset` past a PTR."""
    return f"{self.names[id(ptr)]}+{offset * max(1, ptr.dtype.itemsize)}" if offset else self.names[id(ptr)]

  def element(self, base: str, index: str | int, size: int) -> str:
    """A register holding base + index*size: the address of an array element."""
    out = self.reg("b64")
    if isinstance(index, int): self.emit(f"add.s64 {out}, {base}, {index * size};")
    elif _is64(index): self.emit(f"add.s64 {out}, {base}, {index};" if size == 1 else f"mad.lo.s64 {out}, {index}, {size}, {base};")
    else:
      off = self.reg("b64")
      self.emit(f"mul.wide.s32 {off}, {index}, {size};")
      self.emit(f"add.s64 {out}, {base}, {off};")
    return out

  # ---- constants and conversions between storage and registers
  def const(self, v, d: DType) -> str:
    cls = reg_class(d)
    out = self.reg(cls)
    if cls == "pred": self.head.append(f"\tsetp.ne.s32 {out}, {1 if v else 0}, 0;")
    else: self.head.append(f"\tmov.{cls} {out}, {_literal(v, cls)};")
    return out

  def scalar(self, index: int, d: DType) -> str:
    """A register holding scalar argument `index` (its words loaded in the head, as constants are)."""
    first, name = word_offsets(self.prog.meta.scalar_dtypes)[index], self.prog.meta.name
    words = [self.reg("b32") for _ in range(word_count(d))]
    for k, w in enumerate(words): self.head.append(f"\tld.param.u32 {w}, [{name}_s{first + k}];")
    cls = reg_class(d)
    if cls == "b32": return words[0]
    out = self.reg(cls)
    if cls == "pred": self.head.append(f"\tsetp.ne.s32 {out}, {words[0]}, 0;")
    elif cls == "b16": self.head.append(f"\tcvt.u16.u32 {out}, {words[0]};")   # an 8-bit value's low bits, extended as stored
    elif len(words) == 2: self.head.append(f"\tmov.b64 {out}, {{{words[0]}, {words[1]}}};")
    else: self.head.append(f"\tmov.b32 {out}, {words[0]};")   # float32 bits (16-bit floats come as float32)
    return out

  def half_to_float(self, h: str, d: DType, out: str) -> None:
    if d.name == "float16": self.emit(f"cvt.f32.f16 {out}, {h};")
    else:   # bfloat16 is the top half of a float32
      wide = self.reg("b32")
      self.emit(f"cvt.u32.u16 {wide}, {h};"); self.emit(f"shl.b32 {wide}, {wide}, 16;"); self.emit(f"mov.b32 {out}, {wide};")
  def float_to_half(self, f: str, d: DType) -> str:
    if d.name == "bfloat16" and sm_number(self.arch) < 80: raise Unsupported("bfloat16 rounding before sm_80")
    h = self.reg("b16")
    self.emit(f"cvt.rn.{'f16' if d.name == 'float16' else 'bf16'}.f32 {h}, {f};")
    return h
  def rounded(self, r: str, d: DType) -> None:
    """Round a float-held 16-bit float to its precision, in place."""
    if d.name in _HALVES: self.half_to_float(self.float_to_half(r, d), d, r)
  def wrap(self, r: str, d: DType) -> None:
    """Bring a 16-bit register holding an 8-bit integer back to its range, in place (C's conversion to int8)."""
    if d.is_int and d.itemsize == 1:
      if d.is_unsigned: self.emit(f"and.b16 {r}, {r}, 255;")
      else: self.emit(f"shl.b16 {r}, {r}, 8;"); self.emit(f"shr.s16 {r}, {r}, 8;")

  def space(self, ptr) -> str:
    """Where loads through ptr go: through the read-only cache unless the kernel writes its buffer."""
    buf = ptr.src[0]
    if buf.op is Kind.LOCAL: return "shared"
    return "global" if buf.arg in self.written else "global.nc"

  def load(self, ptr, offset: int, valid, d: DType) -> str:
    cls, out = reg_class(d), self.reg(reg_class(d))
    mem, space = _mem_type(d), self.space(ptr)
    guard = "" if valid is True else f"@{valid} "
    addr = self.address(ptr, offset)
    if cls in ("pred", "f32") and mem in ("u8", "b16"):   # through a 16-bit register
      raw = self.reg("b16")
      if guard: self.emit(f"mov.b16 {raw}, 0;")
      self.emit(f"{guard}ld.{space}.{mem} {raw}, [{addr}];")
      if cls == "pred": self.emit(f"setp.ne.s16 {out}, {raw}, 0;")
      else: self.half_to_float(raw, d, out)
      return out
    if guard: self.emit(f"mov.{cls} {out}, {_literal(0, cls)};")
    self.emit(f"{guard}ld.{space}.{mem} {out}, [{addr}];")
    return out

  def stored(self, v: str, d: DType) -> str:
    """The register to store for value v of dtype d."""
    if d.is_bool:
      raw = self.reg("b16")
      self.emit(f"selp.u16 {raw}, 1, 0, {v};")
      return raw
    if d.name in _HALVES: return self.float_to_half(v, d)
    return v

  # ---- arithmetic
  def alu(self, op: Op, d: DType, srcs: list[str], sd: DType, out: str | None = None) -> str:
    """d = op(srcs) where the sources have dtype sd; into `out` when given (an accumulator)."""
    cls = "pred" if op in COMPARE else reg_class(d)
    out = out or self.reg(cls)
    a, b = srcs[0], srcs[1] if len(srcs) > 1 else None
    t, bits = arith_type(sd), reg_class(sd)[1:]
    if sd.is_bool and op is not Op.WHERE:
      self.bool_alu(op, out, a, b)
      return out
    if op in (Op.ADD, Op.SUB, Op.MUL):
      name = {Op.ADD: "add", Op.SUB: "sub", Op.MUL: "mul"}[op]
      self.emit(f"{name}{'' if sd.is_float else '.lo' if op is Op.MUL else ''}.{t} {out}, {a}, {b};")
    elif op in (Op.AND, Op.OR, Op.XOR): self.emit(f"{op.name.lower()}.b{bits} {out}, {a}, {b};")
    elif op in (Op.SHL, Op.SHR):
      shift = b   # the shift amount is a u32 operand whatever the width
      if bits != "32": shift = self.reg("b32"); self.emit(f"cvt.u32.u{bits} {shift}, {b};")
      self.emit(f"{'shl.b' + bits if op is Op.SHL else 'shr.' + t} {out}, {a}, {shift};")
    elif op in COMPARE:
      cmp = {Op.CMPLT: "lt", Op.CMPLE: "le", Op.CMPEQ: "eq", Op.CMPNE: "neu" if sd.is_float else "ne"}[op]
      self.emit(f"setp.{cmp}.{t} {out}, {a}, {b};")
    elif op is Op.WHERE:
      if d.is_bool:
        other = self.reg("pred")
        self.emit(f"and.pred {out}, {a}, {b};"); self.emit(f"not.pred {other}, {a};")
        self.emit(f"and.pred {other}, {other}, {srcs[2]};"); self.emit(f"or.pred {out}, {out}, {other};")
      else: self.emit(f"selp.{cls if cls[0] == 'f' else 'b' + cls[1:]} {out}, {b}, {srcs[2]}, {a};")
    elif op is Op.NEG: self.emit(f"neg.{t if sd.is_float else 's' + bits} {out}, {a};")
    elif op is Op.NOT: self.emit(f"not.b{bits} {out}, {a};")
    elif op in (Op.MAX, Op.MIN):
      if sd.is_float:   # a where a beats b or a is NaN, else b: NaN from either side comes through, as in C
        p, q = self.reg("pred"), self.reg("pred")
        self.emit(f"setp.{'gt' if op is Op.MAX else 'lt'}.{t} {p}, {a}, {b};")
        self.emit(f"setp.nan.{t} {q}, {a}, {a};")
        self.emit(f"or.pred {p}, {p}, {q};")
        self.emit(f"selp.{t} {out}, {a}, {b}, {p};")
      else: self.emit(f"{op.name.lower()}.{t} {out}, {a}, {b};")
    elif op is Op.DIV: self.emit(f"div{'.rn' if sd.is_float else ''}.{t} {out}, {a}, {b};")
    elif op in (Op.IDIV, Op.MOD):
      if sd.is_float: raise Unsupported("float floor division")
      self.floor_div_mod(op, t, out, a, b, sd)
    elif op is Op.ABS:
      if sd.is_unsigned: self.emit(f"mov.b{bits} {out}, {a};")
      else: self.emit(f"abs.{t if sd.is_float else 's' + bits} {out}, {a};")
    elif op in (Op.RECIP, Op.SQRT, Op.RSQRT) and sd.is_float:
      if op is Op.RECIP: self.emit(f"rcp.rn.{t} {out}, {a};")
      elif op is Op.SQRT: self.emit(f"sqrt.rn.{t} {out}, {a};")
      else: self.emit(f"sqrt.rn.{t} {out}, {a};"); self.emit(f"rcp.rn.{t} {out}, {out};")
    elif op in (Op.FLOOR, Op.CEIL, Op.TRUNC, Op.ROUND) and sd.is_float:
      mode = {Op.FLOOR: "rmi", Op.CEIL: "rpi", Op.TRUNC: "rzi", Op.ROUND: "rni"}[op]
      self.emit(f"cvt.{mode}.{t}.{t} {out}, {a};")
    elif op in ptx_math.FLOAT32 and t == "f32": ptx_math.FLOAT32[op](self, out, a)
    else: raise Unsupported(f"{op} on {sd.name}")
    if cls != "pred" and op is not Op.WHERE: self.wrap(out, d)
    return out

  def bool_alu(self, op: Op, out: str, a: str, b: str | None) -> None:
    if op in (Op.ADD, Op.OR, Op.MAX): self.emit(f"or.pred {out}, {a}, {b};")
    elif op in (Op.MUL, Op.AND, Op.MIN): self.emit(f"and.pred {out}, {a}, {b};")
    elif op in (Op.XOR, Op.CMPNE): self.emit(f"xor.pred {out}, {a}, {b};")
    elif op is Op.CMPEQ: self.emit(f"xor.pred {out}, {a}, {b};"); self.emit(f"not.pred {out}, {out};")
    elif op is Op.NOT: self.emit(f"not.pred {out}, {a};")
    elif op in (Op.CMPLT, Op.CMPLE):   # false < true: a < b is !a & b, a <= b is !a | b
      self.emit(f"not.pred {out}, {a};")
      self.emit(f"{'and' if op is Op.CMPLT else 'or'}.pred {out}, {out}, {b};")
    else: raise Unsupported(f"{op} on bool")

  def floor_div_mod(self, op: Op, t: str, out: str, a: str, b: str, sd: DType) -> None:
    """Python's floor division and modulo of integers, with x // 0 and x % 0 giving 0 (as the C renderers do)."""
    bits = t[1:]
    if sd.is_unsigned:
      if op is Op.IDIV: self.emit(f"div.{t} {out}, {a}, {b};"); return
      zero = self.reg("pred")
      self.emit(f"rem.{t} {out}, {a}, {b};")
      self.emit(f"setp.eq.{t} {zero}, {b}, 0;"); self.emit(f"@{zero} mov.b{bits} {out}, 0;")
      return
    r, off, sign, zero = self.reg(f"b{bits}"), self.reg("pred"), self.reg("pred"), self.reg("pred")
    self.emit(f"rem.{t} {r}, {a}, {b};")
    self.emit(f"setp.ne.{t} {off}, {r}, 0;")          # a remainder whose sign differs from b's: truncation
    self.emit(f"setp.lt.{t} {sign}, {r}, 0;")         # rounded toward zero, one step away from floor
    self.emit(f"setp.lt.xor.{t} {sign}, {b}, 0, {sign};")
    self.emit(f"and.pred {off}, {off}, {sign};")
    if op is Op.IDIV: self.emit(f"div.{t} {out}, {a}, {b};"); self.emit(f"@{off} sub.{t} {out}, {out}, 1;")
    else: self.emit(f"mov.b{bits} {out}, {r};"); self.emit(f"@{off} add.{t} {out}, {out}, {b};")
    self.emit(f"setp.eq.{t} {zero}, {b}, 0;")
    self.emit(f"@{zero} mov.b{bits} {out}, 0;")

  def cast(self, v: str, src: DType, dst: DType) -> str:
    scls, dcls = reg_class(src), reg_class(dst)
    out = self.reg(dcls)
    if dst.is_bool:
      if src.is_bool: return v
      self.emit(f"setp.{'neu' if src.is_float else 'ne'}.{arith_type(src)} {out}, {v}, {_literal(0, scls)};")
      return out
    if src.is_bool:
      self.emit(f"selp.{dcls if dst.is_float else 'b' + dcls[1:]} {out}, {_literal(1, dcls)}, {_literal(0, dcls)}, {v};")
      return out
    st, dt = arith_type(src), arith_type(dst)
    if src.is_float and dst.is_float:
      if st == dt: self.emit(f"mov.{dt} {out}, {v};")
      else: self.emit(f"cvt{'.rn' if dt == 'f32' else ''}.{dt}.{st} {out}, {v};")
      self.rounded(out, dst)
    elif src.is_float:   # saturating to int64 (PTX's conversion saturates) with NaN to 0, then wrapped, as C's alloy_f2i
      wide, nan = self.reg("b64"), self.reg("pred")
      self.emit(f"cvt.rzi.s64.{st} {wide}, {v};")
      self.emit(f"setp.nan.{st} {nan}, {v}, {v};")
      self.emit(f"@{nan} mov.b64 {wide}, 0;")
      if dcls == "b64": self.emit(f"mov.b64 {out}, {wide};")
      else: self.emit(f"cvt.{dt}.s64 {out}, {wide};")
    elif dst.is_float: self.emit(f"cvt.rn.{dt}.{st} {out}, {v};"); self.rounded(out, dst)
    elif st == dt: self.emit(f"mov.b{dcls[1:]} {out}, {v};")
    else: self.emit(f"cvt.{dt}.{st} {out}, {v};")
    self.wrap(out, dst)
    return out

  def bitcast(self, v: str, src: DType, dst: DType) -> str:
    if src.itemsize != dst.itemsize or src.is_bool or dst.is_bool: raise Unsupported(f"bitcast {src.name} -> {dst.name}")
    raw = self.float_to_half(v, src) if src.name in _HALVES else v
    out = self.reg(reg_class(dst))
    if dst.name in _HALVES: self.half_to_float(raw, dst, out)
    else: self.emit(f"mov.b{reg_class(dst)[1:]} {out}, {raw};"); self.wrap(out, dst)
    return out

  def shuffle_xor(self, v: str, d: DType, offset: int) -> str:
    """The value of v in lane (lane ^ offset) of the warp."""
    cls, out = reg_class(d), self.reg(reg_class(d))
    if cls in ("b32", "f32"): self.emit(f"shfl.sync.bfly.b32 {out}, {v}, {offset}, 31, -1;"); return out
    if cls in ("b64", "f64"):
      lo, hi = self.reg("b32"), self.reg("b32")
      self.emit(f"mov.b64 {{{lo}, {hi}}}, {v};")
      self.emit(f"shfl.sync.bfly.b32 {lo}, {lo}, {offset}, 31, -1;")
      self.emit(f"shfl.sync.bfly.b32 {hi}, {hi}, {offset}, 31, -1;")
      self.emit(f"mov.b64 {out}, {{{lo}, {hi}}};")
      return out
    wide = self.to_int32(v, d)   # a fresh 32-bit register: shuffled in place
    self.emit(f"shfl.sync.bfly.b32 {wide}, {wide}, {offset}, 31, -1;")
    if cls == "pred": self.emit(f"setp.ne.s32 {out}, {wide}, 0;")
    else: self.emit(f"cvt.u16.u32 {out}, {wide};")
    return out

  def shared_access(self, kind: str, base: str, index: str | int, v: str, d: DType) -> None:
    """ld or st of element `index` of a shared array of d's register values (bool as a byte)."""
    cls = reg_class(d)
    size, t = _SHARED[cls]
    start = self.reg("b64")
    self.emit(f"mov.u64 {start}, {base};")
    addr = self.element(start, index, size)
    if kind == "st": self.emit(f"st.shared.{t} [{addr}], {self.stored(v, d) if cls == 'pred' else v};")
    elif cls != "pred": self.emit(f"ld.shared.{t} {v}, [{addr}];")
    else:
      raw = self.reg("b16")
      self.emit(f"ld.shared.u8 {raw}, [{addr}];"); self.emit(f"setp.ne.s16 {v}, {raw}, 0;")

  def group_reduce(self, acc: str, op: Op, d: DType, lane: str, width: int, scratch: str) -> None:
    """Combine acc over the `width` threads of the block, the result in every thread's acc: butterfly shuffles
    within each warp, then one value per warp through shared memory."""
    def combine(other: str) -> None:
      self.alu(op, d, [acc, other], d, out=acc)
      if d.is_float and op not in (Op.MAX, Op.MIN): self.rounded(acc, d)
    for offset in (16, 8, 4, 2, 1): combine(self.shuffle_xor(acc, d, offset))
    if width <= 32: return
    first, warp, lanes = self.reg("pred"), self.reg("b32"), self.reg("b32")
    skip = self.label()
    self.emit(f"and.b32 {lanes}, {lane}, 31;")
    self.emit(f"setp.ne.s32 {first}, {lanes}, 0;")
    self.emit(f"@{first} bra {skip};")
    self.emit(f"shr.s32 {warp}, {lane}, 5;")
    self.shared_access("st", scratch, warp, acc, d)
    self.out.append(f"{skip}:")
    self.emit("bar.sync 0;")
    self.shared_access("ld", scratch, 0, acc, d)
    for w in range(1, width // 32):
      other = self.reg(reg_class(d))
      self.shared_access("ld", scratch, w, other, d)
      combine(other)

  # ---- the program
  def text(self) -> str:
    prog = self.prog
    for ins in prog.instrs: self.instr(ins)
    # the scalar arguments' int32 words after the pointers, every one declared whether used or not (the launch passes all)
    self.params += [f"\t.param .u32 {prog.meta.name}_s{w}" for w in range(sum(map(word_count, prog.meta.scalar_dtypes)))]
    threads = prog.meta.local_size[0]
    regs = [f"\t.reg .{cls} %{_REG_PREFIX[cls]}<{n}>;" for cls, n in self.counts.items() if n]
    return "\n".join([f".version {ptx_version(self.arch)}", f".target {self.arch}", ".address_size 64", "",
                      f".visible .entry {prog.meta.name}(", ",\n".join(self.params), ")",
                      # as the CUDA C renderer's __launch_bounds__: room for the registers the kernel needs
                      f".maxntid {threads}, 1, 1", f".minnctapersm {min(32, max(1, 512 // threads))}", "{",
                      *regs, *self.shared, *self.head, *self.out, "\tret;", "}", ""])

  def range_open(self, ins) -> None:
    """for var in [0, var.max]: ..., as a do-while (the count is at least 1); what hoist.py moved out of the loop
    was printed before it. wide: the counter is 64-bit (a count past 2^31)."""
    count, bits = ins.arg[0].max + 1, ins.dtype.itemsize * 8
    if count < 1: raise Unsupported("an empty loop")
    counter, top = self.index_reg(bits == 64), self.label()
    self.emit(f"mov.b{bits} {counter}, 0;")
    self.out.append(f"{top}:")
    self.names[id(ins)], self.dtypes[id(ins)] = counter, ins.dtype
    self.loops.append((counter, top, count, bits))
  def range_close(self) -> None:
    counter, top, count, bits = self.loops.pop()
    again = self.reg("pred")
    self.emit(f"add.s{bits} {counter}, {counter}, 1;")
    self.emit(f"setp.lt.s{bits} {again}, {counter}, {count};")
    self.emit(f"@{again} bra {top};")

  def index_alu(self, ins) -> str:
    """An IALU: the operand types are its sources' (s32 or s64); a constant first operand goes through a register."""
    a, *rest = ins.src
    t = "s64" if a.dtype.itemsize == 8 else "s32"
    out = self.reg("pred" if ins.dtype.is_bool else reg_class(ins.dtype))
    first = self.value(a) if a.op is Kind.CONST else self.operand(a)
    self.emit(f"{_INDEX_OPS[ins.arg].format(t=t)} {out}, {', '.join([first] + [self.operand(r) for r in rest])};")
    return out

  def pointer(self, ins) -> str:
    """A PTR: base + index * element size (a fresh register where a STEP moves it)."""
    buf, index = ins.src
    size = max(1, ins.dtype.itemsize) if buf.op is Kind.PARAM else _SHARED[reg_class(ins.dtype)][0]
    base = self.value(buf)
    if buf.op is Kind.LOCAL:
      start = self.reg("b64")
      self.emit(f"mov.u64 {start}, {base};")
      base = start
    if index.op is Kind.CONST:
      if index.arg == 0 and id(ins) not in self.stepped: return base
      out = self.reg("b64")
      self.emit(f"add.s64 {out}, {base}, {int(index.arg) * size};")
      return out
    return self.element(base, self.value(index), size)

  def instr(self, ins) -> None:
    prog, op = self.prog, ins.op
    if op is Kind.PARAM:
      raw, ptr = self.reg("b64"), self.reg("b64")
      self.params.append(f"\t.param .u64 {prog.meta.name}_p{ins.arg}")
      self.head += [f"\tld.param.u64 {raw}, [{prog.meta.name}_p{ins.arg}];", f"\tcvta.to.global.u64 {ptr}, {raw};"]
      self.names[id(ins)] = ptr
    elif op is Kind.CONST: pass   # a register in the head where one is wanted (value), else an immediate
    elif op is Kind.VAR: self.names[id(ins)], self.dtypes[id(ins)] = self.scalar(ins.arg, ins.dtype), ins.dtype
    elif op is Kind.SPECIAL:
      var, kind = ins.arg
      wide = ins.dtype.itemsize == 8   # a grid of more than 2^31 threads
      out = self.index_reg(wide)
      if kind == "global":
        block, size, thread = self.reg("b32"), self.reg("b32"), self.reg("b32")
        self.emit(f"mov.u32 {block}, %ctaid.x;"); self.emit(f"mov.u32 {size}, %ntid.x;"); self.emit(f"mov.u32 {thread}, %tid.x;")
        if wide: self.emit(f"mad.wide.u32 {out}, {block}, {size}, {self.resized(thread, True)};")
        else: self.emit(f"mad.lo.s32 {out}, {block}, {size}, {thread};")
      else: self.emit(f"mov.u32 {out}, {'%ctaid.x' if kind == 'group' else '%tid.x'};")
      self.vars[var.name] = out
      self.names[id(ins)], self.dtypes[id(ins)] = out, ins.dtype
    elif op is Kind.RANGE: self.range_open(ins)
    elif op is Kind.ENDRANGE: self.range_close()
    elif op is Kind.IALU: self.names[id(ins)], self.dtypes[id(ins)] = self.index_alu(ins), ins.dtype
    elif op is Kind.PTR: self.names[id(ins)] = self.pointer(ins)
    elif op is Kind.STEP:
      ptr = self.names[id(ins.src[0])]
      self.emit(f"add.s64 {ptr}, {ptr}, {ins.arg * max(1, ins.src[0].dtype.itemsize)};")
    elif op is Kind.LOCAL:
      name, size = ins.arg
      nbytes = size * _SHARED[reg_class(ins.dtype)][0]
      self.shared.append(f"\t.shared .align 16 .b8 {name}[{nbytes}];")
      self.names[id(ins)] = name
    elif op is Kind.GROUP_REDUCE:
      reduce_op, width, lane = ins.arg
      acc = self.names[id(ins.src[0])]
      self.group_reduce(acc, reduce_op, ins.dtype, self.vars[lane], width, self.names[id(ins.src[1])])
      self.names[id(ins)], self.dtypes[id(ins)] = acc, ins.dtype
    elif op is Kind.IF:
      c, end = ins.src[0], self.label()
      if c.op is Kind.CONST:
        if not c.arg: self.emit(f"bra {end};")
      else: self.emit(f"@!{self.value(c)} bra {end};")
      self.ifs.append(end)
    elif op is Kind.ENDIF: self.out.append(f"{self.ifs.pop()}:")
    elif op is Kind.STORE:
      ptr, val = ins.src
      v = self.stored(self.value(val), ptr.dtype)
      self.emit(f"st.{'shared' if ptr.src[0].op is Kind.LOCAL else 'global'}.{_mem_type(ptr.dtype)} [{self.address(ptr, ins.arg)}], {v};")
    elif op is Kind.VSTORE:
      offset, width = ins.arg
      ptr = ins.src[0]
      vals = [self.stored(self.value(v), ptr.dtype) for v in ins.src[1:]]
      vec = f".v{width}" if len(vals) > 1 else ""
      value = "{" + ", ".join(vals) + "}" if len(vals) > 1 else vals[0]
      self.emit(f"st.global{vec}.{_mem_type(ptr.dtype)} [{self.address(ptr, offset)}], {value};")
    elif op is Kind.VLOAD:
      offset, width = ins.arg
      ptr = ins.src[0]
      if reg_class(ins.dtype) not in ("b32", "f32") or ins.dtype.name in _HALVES: raise Unsupported("vector load of 16-bit values")
      lanes = [self.reg(reg_class(ins.dtype)) for _ in range(width)]
      self.emit(f"ld.{self.space(ptr)}.v{width}.{_mem_type(ins.dtype)} {{{', '.join(lanes)}}}, [{self.address(ptr, offset)}];")
      self.names[id(ins)], self.dtypes[id(ins)] = lanes, ins.dtype
    elif op is Kind.GEP: self.names[id(ins)], self.dtypes[id(ins)] = self.names[id(ins.src[0])][ins.arg], ins.dtype
    elif op is Kind.UPDATE:
      acc, val = ins.src
      a = self.names[id(acc)]
      self.alu(ins.arg, ins.dtype, [a, self.value(val)], ins.dtype, out=a)
      if ins.dtype.is_float: self.rounded(a, ins.dtype)
    elif op is Kind.LOAD:
      valid = True if len(ins.src) == 1 else ins.src[1]
      if valid is not True and valid.op is Kind.CONST: valid = True if valid.arg else self.value(valid)
      elif valid is not True: valid = self.value(valid)
      self.names[id(ins)], self.dtypes[id(ins)] = self.load(ins.src[0], ins.arg, valid, ins.dtype), ins.dtype
    elif op is Kind.ACC:
      cls = reg_class(ins.dtype)
      out, init = self.reg(cls), self.const(ins.arg, ins.dtype)
      self.emit(f"mov.{cls} {out}, {init};")
      self.names[id(ins)], self.dtypes[id(ins)] = out, ins.dtype
    elif op in (Kind.CAST, Kind.BITCAST):
      src = ins.src[0]
      fn = self.cast if op is Kind.CAST else self.bitcast
      self.names[id(ins)], self.dtypes[id(ins)] = fn(self.value(src), self.dtypes[id(src)], ins.dtype), ins.dtype
    elif op is Kind.ALU:
      srcs = [self.value(s) for s in ins.src]
      sd = ins.dtype if ins.arg is Op.WHERE else self.dtypes[id(ins.src[0])]
      out = self.alu(ins.arg, ins.dtype, srcs, sd)
      if ins.arg not in SELECTS and ins.dtype.is_float: self.rounded(out, ins.dtype)
      self.names[id(ins)], self.dtypes[id(ins)] = out, ins.dtype
    else: raise Unsupported(f"the {op.name.lower()} instruction")
