"""PTX for the CUDA device: the linear program straight to NVIDIA's virtual ISA, with no C++ compiler in the way.

A printer: `_Kernel.kinds` says what each instruction kind prints and OPS, FLOAT_OPS, FLOAT32_OPS and BOOL_OPS what
each elementwise op prints for its operands' class; index arithmetic, hoisting, pointer stepping, unrolling, constant
guards, the occupancy asked for and a threadgroup's reduction are codegen's (codegen/passes.py, plan.py, lower.py).
What it does beyond a lookup is PTX's own: virtual registers by value class, and byte addresses.
Longer than the house's 400 lines: PTX has no expressions and no types beyond register widths, so most kinds print as
several instructions per value class (the casts, floor division, 8-bit wrapping, 16-bit float rounding and the
shuffles below), and a split would separate each kind's text from the register classes it needs.

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
from alloy.codegen.program import Kind, LinearProgram, stepped_pointers, word_count, word_offsets
from alloy.renderer.cuda import CUDARenderer
from alloy.renderer import ptx_math
from alloy.renderer.ptx_math import float_literal

class Unsupported(NotImplementedError):
  """The program uses something this renderer does not emit; render it as CUDA C."""

_HALVES = ("float16", "bfloat16")   # held in f32 registers, rounded to their precision after each op
_REG_PREFIX = {"pred": "p", "b16": "h", "b32": "r", "b64": "rd", "f32": "f", "f64": "fd"}

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

# ---- the elementwise ops: what each prints, f(kernel, op, out register, operand registers, the operands' dtype); `line`
# entries are text formatted with the operands and the type suffixes of `_fields`
def _fields(out: str, s: list[str], sd: DType) -> dict:
  t, bits = arith_type(sd), reg_class(sd)[1:]
  f = sd.is_float
  return dict(o=out, a=s[0], b=s[1] if len(s) > 1 else "", c=s[2] if len(s) > 2 else "", t=t, bits=bits, lo="" if f else ".lo",
              rn=".rn" if f else "", signed=t if f else f"s{bits}", ne="neu" if f else "ne", sel=t if f else f"b{bits}")

def line(*texts: str):
  return lambda k, op, out, s, sd: k.emit(*(text.format(**_fields(out, s, sd)) for text in texts))

def _shift(k, op: Op, out: str, s: list[str], sd: DType) -> None:
  bits, shift = reg_class(sd)[1:], s[1]   # the shift amount is a u32 operand whatever the width
  if bits != "32": shift = k.reg("b32"); k.emit(f"cvt.u32.u{bits} {shift}, {s[1]};")
  k.emit(f"{'shl.b' + bits if op is Op.SHL else 'shr.' + arith_type(sd)} {out}, {s[0]}, {shift};")

def _where(k, op: Op, out: str, s: list[str], sd: DType) -> None:
  if not sd.is_bool: return line("selp.{sel} {o}, {b}, {c}, {a};")(k, op, out, s, sd)
  other = k.reg("pred")
  k.emit(f"and.pred {out}, {s[0]}, {s[1]};", f"not.pred {other}, {s[0]};", f"and.pred {other}, {other}, {s[2]};", f"or.pred {out}, {out}, {other};")

def _extreme(k, op: Op, out: str, s: list[str], sd: DType) -> None:
  (a, b), t = s, arith_type(sd)
  if not sd.is_float: return k.emit(f"{op.name.lower()}.{t} {out}, {a}, {b};")
  p, q = k.reg("pred"), k.reg("pred")   # a where a beats b or a is NaN, else b: NaN from either side comes through, as in C
  k.emit(f"setp.{'gt' if op is Op.MAX else 'lt'}.{t} {p}, {a}, {b};", f"setp.nan.{t} {q}, {a}, {a};", f"or.pred {p}, {p}, {q};",
         f"selp.{t} {out}, {a}, {b}, {p};")

def _floor(k, op: Op, out: str, s: list[str], sd: DType) -> None: k.floor_div_mod(op, out, *s, sd)

# every numeric dtype's
OPS = {Op.ADD: line("add.{t} {o}, {a}, {b};"), Op.SUB: line("sub.{t} {o}, {a}, {b};"), Op.MUL: line("mul{lo}.{t} {o}, {a}, {b};"),
       Op.AND: line("and.b{bits} {o}, {a}, {b};"), Op.OR: line("or.b{bits} {o}, {a}, {b};"), Op.XOR: line("xor.b{bits} {o}, {a}, {b};"),
       Op.SHL: _shift, Op.SHR: _shift, Op.CMPLT: line("setp.lt.{t} {o}, {a}, {b};"), Op.CMPLE: line("setp.le.{t} {o}, {a}, {b};"),
       Op.CMPEQ: line("setp.eq.{t} {o}, {a}, {b};"), Op.CMPNE: line("setp.{ne}.{t} {o}, {a}, {b};"), Op.WHERE: _where,
       Op.NEG: line("neg.{signed} {o}, {a};"), Op.NOT: line("not.b{bits} {o}, {a};"), Op.MAX: _extreme, Op.MIN: _extreme,
       Op.DIV: line("div{rn}.{t} {o}, {a}, {b};"), Op.IDIV: _floor, Op.MOD: _floor,
       Op.ABS: lambda k, op, out, s, sd: line("mov.b{bits} {o}, {a};" if sd.is_unsigned else "abs.{signed} {o}, {a};")(k, op, out, s, sd)}
# float dtypes' own; float32's math that PTX has no instruction for is ptx_math.py's
FLOAT_OPS = {**OPS, Op.RECIP: line("rcp.rn.{t} {o}, {a};"), Op.SQRT: line("sqrt.rn.{t} {o}, {a};"),
             Op.RSQRT: line("sqrt.rn.{t} {o}, {a};", "rcp.rn.{t} {o}, {o};"), Op.FLOOR: line("cvt.rmi.{t}.{t} {o}, {a};"),
             Op.CEIL: line("cvt.rpi.{t}.{t} {o}, {a};"), Op.TRUNC: line("cvt.rzi.{t}.{t} {o}, {a};"), Op.ROUND: line("cvt.rni.{t}.{t} {o}, {a};")}
FLOAT32_OPS = {**FLOAT_OPS, **{op: (lambda k, op, out, s, sd, f=f: f(k, out, s[0])) for op, f in ptx_math.FLOAT32.items()}}
# bool's, in predicates: false < true, so a < b is !a & b and a <= b is !a | b
BOOL_OPS = {Op.ADD: line("or.pred {o}, {a}, {b};"), Op.OR: line("or.pred {o}, {a}, {b};"), Op.MAX: line("or.pred {o}, {a}, {b};"),
            Op.MUL: line("and.pred {o}, {a}, {b};"), Op.AND: line("and.pred {o}, {a}, {b};"), Op.MIN: line("and.pred {o}, {a}, {b};"),
            Op.XOR: line("xor.pred {o}, {a}, {b};"), Op.CMPNE: line("xor.pred {o}, {a}, {b};"),
            Op.CMPEQ: line("xor.pred {o}, {a}, {b};", "not.pred {o}, {o};"), Op.NOT: line("not.pred {o}, {a};"),
            Op.CMPLT: line("not.pred {o}, {a};", "and.pred {o}, {o}, {b};"), Op.CMPLE: line("not.pred {o}, {a};", "or.pred {o}, {o}, {b};"),
            Op.WHERE: _where}

def ops_for(d: DType) -> dict:
  """The ops table of operands of dtype d: an op it lacks is Unsupported (the kernel is rendered as CUDA C)."""
  return BOOL_OPS if d.is_bool else FLOAT32_OPS if arith_type(d) == "f32" else FLOAT_OPS if d.is_float else OPS

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
    self.labels = 0
    self.stepped = stepped_pointers(prog.instrs)
    self.params: list[str] = []
    self.ifs: list[str] = []   # the end label of each open if

  # ---- registers and lines
  def reg(self, cls: str) -> str:
    self.counts[cls] += 1
    return f"%{_REG_PREFIX[cls]}{self.counts[cls] - 1}"
  def emit(self, *lines: str) -> None: self.out += ["\t" + line for line in lines]
  def label(self) -> str:
    self.labels += 1
    return f"$L{self.labels - 1}"

  # ---- values: constants wanted as registers are set in the head; as an IALU's last operand they are immediates
  def value(self, ins) -> str:
    if ins.op is Kind.CONST and id(ins) not in self.names: self.name(ins, self.const(ins.arg, ins.dtype))
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
    """The value widened to a 32-bit register (what a shuffle moves)."""
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
    return "global" if buf.arg == 0 else "global.nc"   # slot 0, the output, is the buffer a kernel writes (Kind.PARAM)

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
    if (printer := ops_for(sd).get(op)) is None: raise Unsupported(f"{op} on {sd.name}")
    printer(self, op, out, srcs, sd)
    if cls != "pred" and op is not Op.WHERE: self.wrap(out, d)
    return out

  def floor_div_mod(self, op: Op, out: str, a: str, b: str, sd: DType) -> None:
    """Python's floor division and modulo of integers, with x // 0 and x % 0 giving 0 (as the C renderers do)."""
    if sd.is_float: raise Unsupported("float floor division")
    t = arith_type(sd)
    bits = t[1:]
    if sd.is_unsigned:
      if op is Op.IDIV: self.emit(f"div.{t} {out}, {a}, {b};"); return
      zero = self.reg("pred")
      self.emit(f"rem.{t} {out}, {a}, {b};", f"setp.eq.{t} {zero}, {b}, 0;", f"@{zero} mov.b{bits} {out}, 0;")
      return
    r, off, sign, zero = self.reg(f"b{bits}"), self.reg("pred"), self.reg("pred"), self.reg("pred")
    self.emit(f"rem.{t} {r}, {a}, {b};",
              f"setp.ne.{t} {off}, {r}, 0;",          # a remainder whose sign differs from b's: truncation
              f"setp.lt.{t} {sign}, {r}, 0;",         # rounded toward zero, one step away from floor
              f"setp.lt.xor.{t} {sign}, {b}, 0, {sign};", f"and.pred {off}, {off}, {sign};")
    if op is Op.IDIV: self.emit(f"div.{t} {out}, {a}, {b};", f"@{off} sub.{t} {out}, {out}, 1;")
    else: self.emit(f"mov.b{bits} {out}, {r};", f"@{off} add.{t} {out}, {out}, {b};")
    self.emit(f"setp.eq.{t} {zero}, {b}, 0;", f"@{zero} mov.b{bits} {out}, 0;")

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

  # ---- the program
  def text(self) -> str:
    prog = self.prog
    for ins in prog.instrs:
      if (printer := self.kinds.get(ins.op)) is None: raise Unsupported(f"the {ins.op.name.lower()} instruction")
      printer(self, ins)
    # the scalar arguments' int32 words after the pointers, every one declared whether used or not (the launch passes all)
    self.params += [f"\t.param .u32 {prog.meta.name}_s{w}" for w in range(sum(map(word_count, prog.meta.scalar_dtypes)))]
    threads = prog.meta.local_size[0]
    regs = [f"\t.reg .{cls} %{_REG_PREFIX[cls]}<{n}>;" for cls, n in self.counts.items() if n]
    return "\n".join([f".version {ptx_version(self.arch)}", f".target {self.arch}", ".address_size 64", "",
                      f".visible .entry {prog.meta.name}(", ",\n".join(self.params), ")",
                      # as the CUDA C renderer's __launch_bounds__ (plan.py's choice), at most 32 as it always was
                      f".maxntid {threads}, 1, 1", f".minnctapersm {min(32, prog.meta.min_blocks)}", "{",
                      *regs, *self.shared, *self.head, *self.out, "\tret;", "}", ""])

  def range_open(self, ins) -> None:
    """for var in [0, var.max]: ..., as a do-while (the count is at least 1); what hoist.py moved out of the loop
    was printed before it. wide: the counter is 64-bit (a count past 2^31)."""
    count, bits = ins.arg[0].max + 1, ins.dtype.itemsize * 8
    if count < 1: raise Unsupported("an empty loop")
    counter, top = self.index_reg(bits == 64), self.label()
    self.emit(f"mov.b{bits} {counter}, 0;")
    self.out.append(f"{top}:")
    self.name(ins, counter)
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
    """A PTR: base + index * element size (a fresh register where a STEP moves it); PTX addresses bytes, so the scaling
    is the printer's, as C's pointer arithmetic is the C compiler's."""
    buf, index = ins.src
    size = max(1, ins.dtype.itemsize)   # a LOCAL array holds its elements as a buffer does (bool as a byte)
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

  # ---- the instructions
  def name(self, ins, reg) -> None: self.names[id(ins)] = reg
  def param(self, ins) -> None:
    raw, ptr, name = self.reg("b64"), self.reg("b64"), f"{self.prog.meta.name}_p{ins.arg}"
    self.params.append(f"\t.param .u64 {name}")
    self.head += [f"\tld.param.u64 {raw}, [{name}];", f"\tcvta.to.global.u64 {ptr}, {raw};"]
    self.name(ins, ptr)
  def special(self, ins) -> None:
    var, kind = ins.arg
    wide = ins.dtype.itemsize == 8   # a grid of more than 2^31 threads
    out = self.index_reg(wide)
    if kind == "global":
      block, size, thread = self.reg("b32"), self.reg("b32"), self.reg("b32")
      self.emit(f"mov.u32 {block}, %ctaid.x;", f"mov.u32 {size}, %ntid.x;", f"mov.u32 {thread}, %tid.x;")
      if wide: self.emit(f"mad.wide.u32 {out}, {block}, {size}, {self.resized(thread, True)};")
      else: self.emit(f"mad.lo.s32 {out}, {block}, {size}, {thread};")
    else: self.emit(f"mov.u32 {out}, {'%ctaid.x' if kind == 'group' else '%tid.x'};")
    self.name(ins, out)
  def local(self, ins) -> None:
    name, size = ins.arg
    self.shared.append(f"\t.shared .align 16 .b8 {name}[{size * max(1, ins.dtype.itemsize)}];")
    self.name(ins, name)
  def if_open(self, ins) -> None:
    end = self.label()
    self.emit(f"@!{self.value(ins.src[0])} bra {end};")
    self.ifs.append(end)
  def store(self, ins) -> None:
    ptr, val = ins.src
    space = "shared" if ptr.src[0].op is Kind.LOCAL else "global"
    self.emit(f"st.{space}.{_mem_type(ptr.dtype)} [{self.address(ptr, ins.arg)}], {self.stored(self.value(val), ptr.dtype)};")
  def vstore(self, ins) -> None:
    (offset, width), ptr = ins.arg, ins.src[0]
    space = "shared" if ptr.src[0].op is Kind.LOCAL else "global"
    vals, mem = [self.stored(self.value(v), ptr.dtype) for v in ins.src[1:]], _mem_type(ptr.dtype)
    if mem == "b16" and width == 8:   # PTX has no 8-lane vector: the 16-bit lanes go as pairs in four 32-bit words
      vals, mem = [self.paired(vals[k], vals[k + 1]) for k in range(0, 8, 2)], "b32"
    value = "{" + ", ".join(vals) + "}" if len(vals) > 1 else vals[0]
    self.emit(f"st.{space}{f'.v{len(vals)}' if len(vals) > 1 else ''}.{mem} [{self.address(ptr, offset)}], {value};")
  def paired(self, lo: str, hi: str) -> str:
    word = self.reg("b32")
    self.emit(f"mov.b32 {word}, {{{lo}, {hi}}};")
    return word
  def vload(self, ins) -> None:
    (offset, width), ptr, d = ins.arg, ins.src[0], ins.dtype
    where = f"ld.{self.space(ptr)}"
    if d.name in _HALVES:   # 16-bit lanes into b16 registers (pairs of them in 32-bit words for 8), then widened to float
      raw = [self.reg("b16") for _ in range(width)]
      if width == 8:
        words = [self.reg("b32") for _ in range(4)]
        self.emit(f"{where}.v4.b32 {{{', '.join(words)}}}, [{self.address(ptr, offset)}];")
        for k, w in enumerate(words): self.emit(f"mov.b32 {{{raw[2 * k]}, {raw[2 * k + 1]}}}, {w};")
      else: self.emit(f"{where}.v{width}.b16 {{{', '.join(raw)}}}, [{self.address(ptr, offset)}];")
      lanes = [self.reg("f32") for _ in range(width)]
      for h, f in zip(raw, lanes): self.half_to_float(h, d, f)
      return self.name(ins, lanes)
    if reg_class(d) not in ("b32", "f32"): raise Unsupported(f"vector load of {d.name}")
    lanes = [self.reg(reg_class(d)) for _ in range(width)]
    self.emit(f"{where}.v{width}.{_mem_type(d)} {{{', '.join(lanes)}}}, [{self.address(ptr, offset)}];")
    self.name(ins, lanes)
  def update(self, ins) -> None:
    a = self.names[id(ins.src[0])]
    self.alu(ins.arg, ins.dtype, [a, self.value(ins.src[1])], ins.dtype, out=a)
    if ins.dtype.is_float: self.rounded(a, ins.dtype)
  def acc(self, ins) -> None:
    cls = reg_class(ins.dtype)
    out, init = self.reg(cls), self.const(ins.arg, ins.dtype)
    self.emit(f"mov.{cls} {out}, {init};")
    self.name(ins, out)
  def elementwise(self, ins) -> None:
    out = self.alu(ins.arg, ins.dtype, [self.value(s) for s in ins.src], ins.dtype if ins.arg is Op.WHERE else ins.src[0].dtype)
    if ins.arg not in SELECTS and ins.dtype.is_float: self.rounded(out, ins.dtype)
    self.name(ins, out)
  def step(self, ins) -> None:
    ptr = self.names[id(ins.src[0])]
    self.emit(f"add.s64 {ptr}, {ptr}, {ins.arg * max(1, ins.src[0].dtype.itemsize)};")

  # what each instruction kind prints, f(kernel, instr); a kind not here is Unsupported
  kinds = {Kind.PARAM: param, Kind.CONST: lambda k, ins: None,   # a register in the head where one is wanted (value), else an immediate
           Kind.VAR: lambda k, ins: k.name(ins, k.scalar(ins.arg, ins.dtype)), Kind.SPECIAL: special, Kind.LOCAL: local,
           Kind.RANGE: range_open, Kind.ENDRANGE: lambda k, ins: k.range_close(), Kind.IF: if_open,
           Kind.ENDIF: lambda k, ins: k.out.append(f"{k.ifs.pop()}:"),
           Kind.LOAD: lambda k, ins: k.name(ins, k.load(ins.src[0], ins.arg, len(ins.src) == 1 or k.value(ins.src[1]), ins.dtype)), Kind.STORE: store,
           Kind.ALU: elementwise, Kind.CAST: lambda k, ins: k.name(ins, k.cast(k.value(ins.src[0]), ins.src[0].dtype, ins.dtype)),
           Kind.BITCAST: lambda k, ins: k.name(ins, k.bitcast(k.value(ins.src[0]), ins.src[0].dtype, ins.dtype)),
           Kind.ACC: acc, Kind.UPDATE: update, Kind.SHUFFLE: lambda k, ins: k.name(ins, k.shuffle_xor(k.value(ins.src[0]), ins.dtype, ins.arg)),
           Kind.BARRIER: lambda k, ins: k.emit("bar.sync 0;"),
           Kind.IALU: lambda k, ins: k.name(ins, k.index_alu(ins)), Kind.PTR: lambda k, ins: k.name(ins, k.pointer(ins)), Kind.STEP: step,
           Kind.VLOAD: vload, Kind.VSTORE: vstore, Kind.GEP: lambda k, ins: k.name(ins, k.names[id(ins.src[0])][ins.arg])}
