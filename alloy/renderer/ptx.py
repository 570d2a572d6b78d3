"""PTX for the CUDA device: the linear program straight to NVIDIA's virtual ISA, with no C++ compiler in the way.

Longer than the house's 400 lines: besides printing, it hoists loop invariants, steps pointers and unrolls loops
itself, which the C renderers leave to their compilers. Those transforms move into codegen passes shared by every
renderer in the codegen issue, and this file shrinks to a printer.

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
import math
from alloy.dtype import DType
from alloy.ir import symbolic as sym
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

class _Loop:
  """An open loop: the lines hoisted out of it (emitted before its first iteration) and what they computed, and the
  pointers it steps: an address base + size*(invariant + c*var) becomes a register stepped by size*c*unroll per
  iteration, each unrolled copy k reading it at offset size*c*k (NVVM's strength reduction, done here)."""
  def __init__(self, var: str):
    self.var, self.copy = var, 0   # copy: which unrolled copy of the body is being emitted
    self.preheader: list = []
    self.cache: dict = {}
    self.pointers: dict = {}   # (buffer, invariant part, c) -> (register, bytes per step of var)

def _flat(lines: list):
  for line in lines:
    if isinstance(line, list): yield from _flat(line)
    else: yield line

class _Kernel:
  """One kernel's PTX, emitted instruction by instruction."""
  def __init__(self, prog: LinearProgram, arch: str):
    self.prog, self.arch = prog, arch
    self.counts = {c: 0 for c in _REG_PREFIX}
    self.head: list[str] = []   # parameter loads and constants: before any branch, so every use sees them
    self.body: list = []        # lines, and each loop's preheader: a list of the lines hoisted out of that loop
    self.out = self.body        # where emit() writes
    self.loops: list[_Loop] = []
    self.levels: dict = {}      # loop variable name or id(instr) -> how many loops were open where it was defined
    self.shared: list[str] = []
    self.names: dict[int, object] = {}   # id(instr) -> register (a list of registers for a vector load)
    self.dtypes: dict[int, DType] = {}
    self.vars: dict[str, str] = {}       # loop and thread index variables -> their register
    self.labels = 0
    self.written = {ins.src[0].arg for ins in prog.instrs if ins.op in (Kind.STORE, Kind.VSTORE)}
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

  # ---- integer index arithmetic: int32 as the C renderers' `int`, or 64-bit where sym.fits_int32 says a value on
  # the way may pass 2^31, or a variable it uses is held in 64 bits
  def level(self, e: sym.Expr) -> int:
    """The number of open loops whose variables (or values defined inside them) e depends on, innermost counted."""
    if isinstance(e, sym.Const): return 0
    if isinstance(e, sym.Var): return self.levels.get(e.name, 0)
    if isinstance(e, sym.Opaque): return self.levels.get(id(e.ref), len(self.loops))
    if isinstance(e, sym.Sum): return max((self.level(t) for t, _ in e.terms), default=0)
    return self.level(e.a)

  def hoisted(self, key, level: int, compute):
    """compute() emitted before the outermost open loop it does not depend on (once per loop), else here. NVVM does
    this for the CUDA C renderer; ptxas alone left index arithmetic in the loop (matmul ran at 0.27x)."""
    if level >= len(self.loops): return compute()
    loop = self.loops[level]
    if key not in loop.cache:
      saved, self.out = self.out, loop.preheader
      try: loop.cache[key] = compute()
      finally: self.out = saved
    return loop.cache[key]

  def is_wide(self, e: sym.Expr) -> bool:
    return not sym.fits_int32(e) or any(_is64(self.vars[v.name]) for v in e.vars())

  def expr(self, e: sym.Expr, wide: bool | None = None) -> str | int:
    """A register holding e (64-bit where wide, by default where is_wide says so), or e itself where it is a constant."""
    if wide is None: wide = self.is_wide(e)
    if isinstance(e, (sym.Sum, sym.Div, sym.Mod)): return self.hoisted((e, wide), self.level(e), lambda: self.compute(e, wide))
    return self.compute(e, wide)

  def compute(self, e: sym.Expr, wide: bool) -> str | int:
    t = "s64" if wide else "s32"
    if isinstance(e, sym.Const): return e.v
    if isinstance(e, sym.Var): return self.resized(self.vars[e.name], wide)
    if isinstance(e, sym.Opaque): return self.to_index(self.names[id(e.ref)], self.dtypes[id(e.ref)], wide)
    if isinstance(e, sym.Sum):
      total: str | None = None
      terms = e.terms
      invariant = [(t, c) for t, c in terms if self.level(t) < len(self.loops)]
      if invariant and len(invariant) < len(terms):   # the part that does not change in the innermost loop, once
        part = self.expr(sym.Sum(tuple(invariant), e.const), wide)
        if isinstance(part, int): return self.compute(sym.Sum(tuple(t for t in terms if t not in invariant), part), wide)
        total, e = part, sym.Sum(tuple(t for t in terms if t not in invariant), 0)
      for term, coef in e.terms:
        r = self.in_reg(self.expr(term, wide), wide)
        if total is None and coef == 1:
          total = r
          continue
        out = self.index_reg(wide)
        if total is None: self.emit(f"mul.lo.{t} {out}, {r}, {coef};")
        elif coef == 1: self.emit(f"add.{t} {out}, {total}, {r};")
        else: self.emit(f"mad.lo.{t} {out}, {r}, {coef}, {total};")
        total = out
      if total is None: return e.const
      if e.const:
        out = self.index_reg(wide)
        self.emit(f"add.{t} {out}, {total}, {e.const};")
        total = out
      return total
    if isinstance(e, (sym.Div, sym.Mod)):
      a = self.expr(e.a, wide)
      if isinstance(a, int): return int(a / e.d) if isinstance(e, sym.Div) else int(math.fmod(a, e.d))   # C truncates
      out = self.index_reg(wide)
      self.emit(f"{'div' if isinstance(e, sym.Div) else 'rem'}.{t} {out}, {a}, {e.d};")
      return out
    raise TypeError(e)
  def index_reg(self, wide: bool) -> str: return self.reg("b64" if wide else "b32")
  def in_reg(self, v: str | int, wide: bool = False) -> str:
    if isinstance(v, str): return v
    out = self.index_reg(wide)
    self.emit(f"mov.b{64 if wide else 32} {out}, {v};")
    return out
  def resized(self, r: str, wide: bool) -> str:
    """An index register as 64 or 32 bits (indices are non-negative: widening zero-extends)."""
    if _is64(r) == wide: return r
    out = self.index_reg(wide)
    self.emit(f"cvt.u64.u32 {out}, {r};" if wide else f"cvt.u32.u64 {out}, {r};")
    return out
  def to_index(self, r: str, d: DType, wide: bool) -> str:
    """C's (int) or (int64_t) of a value used as an index."""
    if not wide: return self.to_int32(r, d)
    cls = reg_class(d)
    if cls == "b64": return r
    out = self.reg("b64")
    if cls == "pred": self.emit(f"selp.b64 {out}, 1, 0, {r};")
    elif cls in ("b16", "b32"): self.emit(f"cvt.{'u64.u' if d.is_unsigned else 's64.s'}{cls[1:]} {out}, {r};")
    else: raise Unsupported(f"a {d.name} value as an index")
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

  def cond(self, c: sym.Cond) -> str | bool:
    """A predicate register for c, or True/False where it is known."""
    if c.is_false: return False
    out: str | None = None
    for kind, e, bound in c.clauses:
      v = self.expr(e)
      if isinstance(v, int):
        if (v >= bound) if kind == "ge" else (v < bound): continue
        return False
      if abs(bound) > sym.INT32_MAX: v = self.resized(v, True)
      p = self.reg("pred")
      self.emit(f"setp.{kind}.s{64 if _is64(v) else 32} {p}, {v}, {bound};")
      if out is not None: self.emit(f"and.pred {p}, {p}, {out};")
      out = p
    return True if out is None else out
  def pred_of(self, c) -> str:
    if isinstance(c, str): return c
    p = self.reg("pred")
    self.emit(f"setp.ne.s32 {p}, {1 if c else 0}, 0;")
    return p

  def address(self, buf, flat: sym.Expr) -> str:
    """The address operand of element `flat` of buf (a register, or register+offset)."""
    if self.loops and (stepped := self.stepped_pointer(buf, flat)) is not None: return stepped
    return self.hoisted((id(buf), flat), self.level(flat), lambda: self.compute_address(buf, flat))

  def stepped_pointer(self, buf, flat: sym.Expr) -> str | None:
    loop, depth = self.loops[-1], len(self.loops)
    if not isinstance(flat, sym.Sum): return None
    steps = [k for k, (t, _) in enumerate(flat.terms) if self.level(t) >= depth]
    if len(steps) != 1: return None
    var, coef = flat.terms[steps[0]]
    if not isinstance(var, sym.Var) or var.name != loop.var: return None
    size = max(1, buf.dtype.itemsize)
    invariant = sym.Sum(flat.terms[:steps[0]] + flat.terms[steps[0] + 1:], flat.const)
    key = (id(buf), invariant, coef)
    if key not in loop.pointers:
      saved, self.out = self.out, loop.preheader
      try:
        pointer = self.reg("b64")
        self.emit(f"mov.b64 {pointer}, {self.compute_address(buf, invariant)};")
      finally: self.out = saved
      loop.pointers[key] = (pointer, size * coef)
    pointer, step = loop.pointers[key]
    return f"{pointer}+{step * loop.copy}" if loop.copy else pointer

  def compute_address(self, buf, flat: sym.Expr) -> str:
    return self.element(self.names[id(buf)], self.expr(flat), max(1, buf.dtype.itemsize))

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

  def space(self, buf) -> str:
    """Where loads of buf go: through the read-only cache unless the kernel writes buf."""
    return "global" if buf.arg in self.written else "global.nc"

  def load(self, buf, flat: sym.Expr, valid, d: DType) -> str:
    cls, out = reg_class(d), self.reg(reg_class(d))
    mem, space = _mem_type(d), self.space(buf)
    guard = "" if valid is True else f"@{valid} "
    addr = self.address(buf, flat)
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
    self.block(prog.instrs)
    # the scalar arguments' int32 words after the pointers, every one declared whether used or not (the launch passes all)
    self.params += [f"\t.param .u32 {prog.meta.name}_s{w}" for w in range(sum(map(word_count, prog.meta.scalar_dtypes)))]
    threads = prog.meta.local_size[0]
    regs = [f"\t.reg .{cls} %{_REG_PREFIX[cls]}<{n}>;" for cls, n in self.counts.items() if n]
    return "\n".join([f".version {ptx_version(self.arch)}", f".target {self.arch}", ".address_size 64", "",
                      f".visible .entry {prog.meta.name}(", ",\n".join(self.params), ")",
                      # as the CUDA C renderer's __launch_bounds__: room for the registers the kernel needs
                      f".maxntid {threads}, 1, 1", f".minnctapersm {min(32, max(1, 512 // threads))}", "{",
                      *regs, *self.shared, *self.head, *_flat(self.body), "\tret;", "}", ""])

  def block(self, instrs: list) -> None:
    i = 0
    while i < len(instrs):
      ins = instrs[i]
      if ins.op is not Kind.RANGE:
        self.instr(ins)
        i += 1
        continue
      depth, j = 1, i + 1
      while depth:   # the matching endrange
        depth += {Kind.RANGE: 1, Kind.ENDRANGE: -1}.get(instrs[j].op, 0)
        j += 1
      self.loop(ins.arg[0], instrs[i + 1:j - 1], ins.dtype.itemsize == 8)
      i = j

  def loop(self, var: sym.Var, body: list, wide: bool = False) -> None:
    """for var in [0, var.max]: body, as a do-while (the count is at least 1). An innermost loop of a short body is
    unrolled by 4 (or 2) where that divides the count, so several iterations' loads are in flight at once. wide: the
    counter is 64-bit (a count past 2^31)."""
    count = var.max + 1
    if count < 1: raise Unsupported("an empty loop")
    simple = len(body) <= 64 and not any(ins.op in (Kind.RANGE, Kind.GROUP_REDUCE, Kind.LOCAL, Kind.SPECIAL) for ins in body)
    unroll = next((u for u in (4, 2) if simple and count % u == 0 and count >= 2 * u), 1)
    bits = 64 if wide else 32
    counter, top, again = self.index_reg(wide), self.label(), self.reg("pred")
    self.emit(f"mov.b{bits} {counter}, 0;")
    loop = _Loop(var.name)
    self.out.append(loop.preheader)
    self.out.append(f"{top}:")
    self.loops.append(loop)
    self.levels[var.name] = len(self.loops)
    for k in range(unroll):
      loop.copy = k
      if k == 0: self.vars[var.name] = counter
      else:
        self.vars[var.name] = self.index_reg(wide)
        self.emit(f"add.s{bits} {self.vars[var.name]}, {counter}, {k};")
      self.block(body)
    self.loops.pop()
    for pointer, step in loop.pointers.values(): self.emit(f"add.s64 {pointer}, {pointer}, {step * unroll};")
    self.emit(f"add.s{bits} {counter}, {counter}, {unroll};")
    self.emit(f"setp.lt.s{bits} {again}, {counter}, {count};")
    self.emit(f"@{again} bra {top};")

  def instr(self, ins) -> None:
    prog, op = self.prog, ins.op
    # values defined here depend on the loops open here; accumulators change inside them: never hoisted
    self.levels[id(ins)] = 1 << 30 if op in (Kind.ACC, Kind.GROUP_REDUCE) else len(self.loops)
    if op is Kind.PARAM:
      raw, ptr = self.reg("b64"), self.reg("b64")
      self.params.append(f"\t.param .u64 {prog.meta.name}_p{ins.arg}")
      self.head += [f"\tld.param.u64 {raw}, [{prog.meta.name}_p{ins.arg}];", f"\tcvta.to.global.u64 {ptr}, {raw};"]
      self.names[id(ins)] = ptr
    elif op is Kind.CONST: self.names[id(ins)], self.dtypes[id(ins)] = self.const(ins.arg, ins.dtype), ins.dtype
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
      self.levels[var.name] = len(self.loops)
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
      c, end = self.cond(ins.arg), self.label()
      if c is False: self.emit(f"bra {end};")
      elif c is not True: self.emit(f"@!{c} bra {end};")
      self.ifs.append(end)
    elif op is Kind.ENDIF: self.out.append(f"{self.ifs.pop()}:")
    elif op is Kind.STORE:
      flat, _ = ins.arg
      buf, val = ins.src
      v = self.stored(self.names[id(val)], buf.dtype)
      self.emit(f"st.global.{_mem_type(buf.dtype)} [{self.address(buf, flat)}], {v};")
    elif op is Kind.VSTORE:
      flat, width = ins.arg
      buf = ins.src[0]
      vals = [self.stored(self.names[id(v)], buf.dtype) for v in ins.src[1:]]
      vec = f".v{width}" if len(vals) > 1 else ""
      value = "{" + ", ".join(vals) + "}" if len(vals) > 1 else vals[0]
      self.emit(f"st.global{vec}.{_mem_type(buf.dtype)} [{self.address(buf, flat)}], {value};")
    elif op is Kind.VLOAD:
      flat, width = ins.arg
      buf = ins.src[0]
      if reg_class(ins.dtype) not in ("b32", "f32") or ins.dtype.name in _HALVES: raise Unsupported("vector load of 16-bit values")
      lanes = [self.reg(reg_class(ins.dtype)) for _ in range(width)]
      self.emit(f"ld.{self.space(buf)}.v{width}.{_mem_type(ins.dtype)} {{{', '.join(lanes)}}}, [{self.address(buf, flat)}];")
      self.names[id(ins)], self.dtypes[id(ins)] = lanes, ins.dtype
    elif op is Kind.GEP: self.names[id(ins)], self.dtypes[id(ins)] = self.names[id(ins.src[0])][ins.arg], ins.dtype
    elif op is Kind.UPDATE:
      acc, val = ins.src
      a = self.names[id(acc)]
      self.alu(ins.arg, ins.dtype, [a, self.names[id(val)]], ins.dtype, out=a)
      if ins.dtype.is_float: self.rounded(a, ins.dtype)
    elif op is Kind.LOAD:
      flat, valid = ins.arg
      v = self.load(ins.src[0], flat, True if valid.is_true else self.cond(valid), ins.dtype)
      self.names[id(ins)], self.dtypes[id(ins)] = v, ins.dtype
    elif op is Kind.INDEX:   # in a register of the dtype's size, whichever width the arithmetic took
      wide = ins.dtype.itemsize == 8
      self.names[id(ins)], self.dtypes[id(ins)] = self.resized(self.in_reg(self.expr(ins.arg), wide), wide), ins.dtype
    elif op is Kind.COND: self.names[id(ins)], self.dtypes[id(ins)] = self.pred_of(self.cond(ins.arg)), ins.dtype
    elif op is Kind.ACC:
      cls = reg_class(ins.dtype)
      out, init = self.reg(cls), self.const(ins.arg, ins.dtype)
      self.emit(f"mov.{cls} {out}, {init};")
      self.names[id(ins)], self.dtypes[id(ins)] = out, ins.dtype
    elif op in (Kind.CAST, Kind.BITCAST):
      src = ins.src[0]
      fn = self.cast if op is Kind.CAST else self.bitcast
      self.names[id(ins)], self.dtypes[id(ins)] = fn(self.names[id(src)], self.dtypes[id(src)], ins.dtype), ins.dtype
    elif op is Kind.ALU:
      srcs = [self.names[id(s)] for s in ins.src]
      sd = ins.dtype if ins.arg is Op.WHERE else self.dtypes[id(ins.src[0])]
      out = self.alu(ins.arg, ins.dtype, srcs, sd)
      if ins.arg not in SELECTS and ins.dtype.is_float: self.rounded(out, ins.dtype)
      self.names[id(ins)], self.dtypes[id(ins)] = out, ins.dtype
    else: raise Unsupported(f"the {op.name.lower()} instruction")
