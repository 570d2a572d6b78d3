"""The C-family core shared by the C, CUDA and Metal renderers: linear program -> source text, by two tables.

`CStyleRenderer.kinds` says what each instruction kind prints, `ops` what each elementwise op's expression is; a
language subclass adds its own kinds to the table (the tensor-core tile) and names its types, kernel signature,
thread indices and math functions through the methods the table's entries call. Nothing here computes an index:
codegen/passes.py lowered them to the IALU and PTR instructions printed here.
"""
from __future__ import annotations
import math
from alloy import dtype as dt
from alloy.dtype import DType
from alloy.ir import symbolic as sym
from alloy.ir.ops import Op, SELECTS
from alloy.codegen.program import Kind, LinearProgram, stepped_pointers, word_count, word_offsets

def integer_helpers(qualifier: str) -> str:
  """Short integer type names and an exact integer power per type (C has no integer pow)."""
  return ("typedef int8_t int8; typedef uint8_t uint8; typedef int16_t int16; typedef uint16_t uint16; typedef int32_t int32;\n"
          "typedef uint32_t uint32; typedef int64_t int64; typedef uint64_t uint64;\n"
          f"#define ALLOY_IPOW(T) {qualifier} T alloy_ipow_##T(T a, T b) {{ T r = 1; "
          "if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0); \\\n"
          "  while (b) { if (b & 1) r *= a; a *= a; b >>= 1; } return r; }\n"
          "ALLOY_IPOW(int8) ALLOY_IPOW(uint8) ALLOY_IPOW(int16) ALLOY_IPOW(uint16) ALLOY_IPOW(int32) ALLOY_IPOW(uint32) "
          "ALLOY_IPOW(int64) ALLOY_IPOW(uint64)\n")

def floor_division_helpers(qualifier: str, types: list[str], float_suffix: str = "f") -> str:
  """Floor division and remainder of floats as Python, NumPy and PyTorch define them: through fmod, which is exact
  (a - floor(a/b)*b overflows once the quotient passes the largest float, and makes inf // b inf instead of nan).
  float_suffix: what ends the float versions of fmod, floor and copysign (C's "f"; Metal overloads them: "")."""
  out = []
  for t in types:
    f, half = (float_suffix, "0.5f") if t == "float" else ("", "0.5")
    out.append(f"{qualifier} {t} alloy_floormod_{t}({t} a, {t} b) {{ {t} m = fmod{f}(a, b); "
               f"return (m != 0 && ((b < 0) != (m < 0))) ? m + b : m; }}\n"
               f"{qualifier} {t} alloy_floordiv_{t}({t} a, {t} b) {{\n"
               f"  if (b == 0) return a / b;\n"
               f"  {t} m = fmod{f}(a, b), d = (a - m) / b;\n"
               f"  if (m != 0 && ((b < 0) != (m < 0))) d -= 1;\n"
               f"  if (d == 0) return copysign{f}(({t})0, a / b);\n"
               f"  {t} r = floor{f}(d);\n"
               f"  return d - r > {half} ? r + 1 : r;\n}}\n")
  return "".join(out)

def scalar_word_count(prog: LinearProgram) -> int: return sum(map(word_count, prog.meta.scalar_dtypes))

class Text:
  """One kernel's text as it is printed: each value's name (an expression or a variable), the lines, the depth of the
  open blocks. One per render, so a renderer serves kernels compiling side by side."""
  def __init__(self, prog: LinearProgram):
    self.prog, self.names, self.lines, self.params, self.depth, self.count = prog, {}, [], [], 1, 0
    self.stepped = stepped_pointers(prog.instrs)
  def __getitem__(self, ins) -> str: return self.names[id(ins)]
  def __setitem__(self, ins, name: str): self.names[id(ins)] = name
  def args(self, ins) -> list[str]: return [self.names[id(s)] for s in ins.src]
  def new(self, prefix: str = "v") -> str:
    self.count += 1
    return f"{prefix}{self.count - 1}"
  def emit(self, *lines: str) -> None: self.lines += ["  " * self.depth + line for line in lines]
  def declare(self, ins, type_name: str, value: str, prefix: str = "v") -> None:
    """A variable for ins's value."""
    self[ins] = name = self.new(prefix)
    self.emit(f"{type_name} {name} = {value};")
  def named(self, ins, name: str, *lines: str) -> None:
    self[ins] = name
    self.emit(*lines)
  def open(self, *lines: str) -> None:
    self.emit(*lines)
    self.depth += 1
  def close(self) -> None:
    self.depth -= 1
    self.emit("}")

def scalar(value, prefix: str = "v"):
  """The table entry of a kind that is one scalar value: a variable of its register type set to value(r, t, ins)."""
  return lambda r, t, ins: t.declare(ins, r.vtype(ins.dtype), value(r, t, ins), prefix)

def binary(sign: str):
  """The ops table's entry of C's infix operator `sign`: bool's + and * as | and &; the results of shifts and of
  narrow integers' arithmetic cast back to their type (C computes them in int)."""
  def text(r, s: list[str], d: DType) -> str:
    if sign in ("<<", ">>"): return f"(({r.vtype(d)})({s[0]}{sign}{s[1]}))"
    if d.is_bool and sign in ("+", "|", "*"): return f"({s[0]}{'&' if sign == '*' else '|'}{s[1]})"
    if d.itemsize < 4 and d.is_int and sign not in ("<", "<=", "==", "!="): return f"(({r.vtype(d)})({s[0]}{sign}{s[1]}))"
    return f"({s[0]}{sign}{s[1]})"
  return text

def extreme(sign: str):
  """max (sign ">") or min ("<"): a float NaN on either side comes through (a when a is NaN, else b), as PyTorch's."""
  def text(r, s: list[str], d: DType) -> str:
    a, b = s
    if d.is_float: return f"((({a}){sign}({b})||({a})!=({a}))?({a}):({b}))"
    return f"(({a}){sign}({b})?({a}):({b}))"
  return text

def call(name: str): return lambda r, s, d: r.func(name, d, s)

FLOAT_FUNCS = {Op.EXP: "exp", Op.EXP2: "exp2", Op.LOG: "log", Op.LOG2: "log2", Op.SIN: "sin", Op.COS: "cos", Op.TAN: "tan",
               Op.TANH: "tanh", Op.SQRT: "sqrt", Op.ERF: "erf", Op.FLOOR: "floor", Op.CEIL: "ceil", Op.ROUND: "rint",
               Op.TRUNC: "trunc", Op.POW: "pow"}

def _pointer(r, t, ins):   # an address is an expression where it is used, unless a STEP moves it
  base, index = ins.src
  address = t[base] if index.op is Kind.CONST and index.arg == 0 else f"({t[base]}+{t[index]})"
  if id(ins) not in t.stepped: t[ins] = address
  else:
    name = t.new("p")
    t.named(ins, name, r.pointer_decl(name, address))

def _vstore(r, t, ins):
  (offset, width), ptr = ins.arg, ins.src[0]
  vals = [r.to_storage(t[v], ptr.dtype) for v in ins.src[1:]]
  value = t[ins.src[1]] if len(vals) == 1 else r.vec_make(vals, ptr.dtype, width)
  t.emit(f"*{r.vec_pointer(t[ptr], str(offset), ptr.dtype, width, True)} = {value};")

def _gep(r, t, ins):   # a lane is read where it is used: an accumulator's lanes are final only after its loop
  vec = ins.src[0]   # a tensor-core tile's accumulators are a float array in every C language
  if vec.op is Kind.MMA: t[ins] = f"{t[vec]}[{ins.arg}]"
  else: t[ins] = r.from_storage(r.vec_lane(t[vec], ins.arg, vec.dtype, vec.arg[1]), ins.dtype)   # VLOAD, VALU, VACC: (_, width)

def _vupdate(r, t, ins):   # acc op= val, or with two values acc += a*b fused
  acc, *vals = ins.src
  a, v, width = t[acc], [t[x] for x in vals], acc.arg[1]
  t.emit(f"{a} = {r.vec_fma(v[0], v[1], a, ins.dtype, width) if len(v) == 2 else r.vec_alu(ins.arg, [a, v[0]], ins.dtype, width)};")

def _range(r, t, ins):
  t[ins] = ins.arg[0].name
  t.open(*r.range_open(*ins.arg, r.index_type(ins.dtype)))

def _param(r, t, ins):
  t[ins] = f"data{ins.arg}"
  t.params.append(r.param_decl(ins.arg, ins.dtype, ins.arg == 0))   # slot 0, the output, is the one written

def _alu(r, t, ins) -> str:
  text = r.alu(ins.arg, t.args(ins), ins.dtype if ins.arg is Op.WHERE else ins.src[0].dtype)
  return r.rounded(text, ins.dtype) if ins.arg not in SELECTS and ins.dtype.is_float else text

class CStyleRenderer:
  language = "c"
  type_names: dict = {}
  kernel_prefix = ""
  buffer_prefix = ""
  const_buffer_prefix = "const "
  infix = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.AND: "&", Op.OR: "|", Op.XOR: "^",
           Op.SHL: "<<", Op.SHR: ">>", Op.CMPLT: "<", Op.CMPLE: "<=", Op.CMPEQ: "==", Op.CMPNE: "!="}
  # types whose arithmetic happens in float (no native ALU in this language)
  compute_in_float: set = set()

  # ---- the tables: an instruction kind -> what prints it, f(renderer, Text, instr); an elementwise op -> its
  # expression, f(renderer, operands, the operands' dtype (WHERE: the result's)). A language adds to `kinds` (the MMA).
  kinds = {
    Kind.PARAM: _param,
    Kind.VAR: scalar(lambda r, t, ins: r.scalar_value(ins.arg, ins.dtype, t.prog)),
    Kind.SPECIAL: lambda r, t, ins: t.named(ins, ins.arg[0].name,
                                            f"{r.index_type(ins.dtype)} {ins.arg[0].name} = {r.special(ins.arg[1], ins.dtype.itemsize == 8)};"),
    Kind.LOCAL: lambda r, t, ins: t.named(ins, ins.arg[0], r.local_decl(ins.arg[0], ins.dtype, ins.arg[1]) if len(ins.arg) == 2 else
                                          r.tile_memory_decl(ins.arg[0], ins.dtype)),
    Kind.RANGE: _range,
    Kind.ENDRANGE: lambda r, t, ins: t.close(),
    Kind.IF: lambda r, t, ins: t.open(f"if ({t[ins.src[0]]}) {{"),
    Kind.ENDIF: lambda r, t, ins: t.close(),
    Kind.CONST: lambda r, t, ins: t.named(ins, r.const(ins.arg, ins.dtype)),
    Kind.LOAD: scalar(lambda r, t, ins: r.load(t[ins.src[0]], str(ins.arg), t[ins.src[1]] if len(ins.src) > 1 else None, ins.dtype)),
    Kind.ALU: scalar(_alu),
    Kind.CAST: scalar(lambda r, t, ins: r.rounded(r.cast(t[ins.src[0]], ins.src[0].dtype, ins.dtype), ins.dtype)),
    Kind.BITCAST: scalar(lambda r, t, ins: r.bitcast(t[ins.src[0]], ins.src[0].dtype, ins.dtype)),
    Kind.ACC: scalar(lambda r, t, ins: r.const(ins.arg, ins.dtype), "acc"),
    Kind.UPDATE: lambda r, t, ins: t.emit(f"{t[ins.src[0]]} = {r.rounded(r.alu(ins.arg, t.args(ins), ins.dtype), ins.dtype)};"),
    Kind.SHUFFLE: scalar(lambda r, t, ins: f"({r.vtype(ins.dtype)}){r.shuffle_xor(t[ins.src[0]], str(ins.arg), ins.dtype)}"),
    Kind.BARRIER: lambda r, t, ins: t.emit(r.barrier),
    Kind.STORE: lambda r, t, ins: t.emit(r.store(t[ins.src[0]], str(ins.arg), t[ins.src[1]], ins.src[0].dtype)),
    Kind.IALU: scalar(lambda r, t, ins: r.index_ops[ins.arg].format(*t.args(ins))),
    Kind.PTR: _pointer,
    Kind.STEP: lambda r, t, ins: t.emit(f"{t[ins.src[0]]} += {ins.arg};"),
    Kind.VLOAD: lambda r, t, ins: t.declare(ins, r.vec_type(ins.dtype, ins.arg[1]),
                                            "*" + r.vec_pointer(t[ins.src[0]], str(ins.arg[0]), ins.dtype, ins.arg[1], False), "vec"),
    Kind.VSTORE: _vstore,
    Kind.GEP: _gep,
    Kind.VBROADCAST: lambda r, t, ins: t.declare(ins, r.vec_type(ins.dtype, ins.arg), r.vec_make([t[ins.src[0]]] * ins.arg, ins.dtype, ins.arg)),
    Kind.VALU: lambda r, t, ins: t.declare(ins, r.vec_type(ins.dtype, ins.arg[1]), r.vec_alu(ins.arg[0], t.args(ins), ins.dtype, ins.arg[1])),
    Kind.VACC: lambda r, t, ins: t.declare(ins, r.vec_type(ins.dtype, ins.arg[1]),
                                           r.vec_make([r.const(ins.arg[0], ins.dtype)] * ins.arg[1], ins.dtype, ins.arg[1]), "acc"),
    Kind.VUPDATE: _vupdate,
  }
  ops = {**{op: binary(sign) for op, sign in infix.items()}, **{op: call(name) for op, name in FLOAT_FUNCS.items()},
         Op.WHERE: lambda r, s, d: f"({s[0]}?{s[1]}:{s[2]})",
         Op.NEG: lambda r, s, d: f"(-{s[0]})" if d.itemsize >= 4 or d.is_float else f"(({r.vtype(d)})(-{s[0]}))",
         Op.NOT: lambda r, s, d: f"(!{s[0]})" if d.is_bool else f"(({r.vtype(d)})(~{s[0]}))",
         Op.MAX: extreme(">"), Op.MIN: extreme("<"), Op.DIV: lambda r, s, d: f"({s[0]}/{s[1]})",
         Op.IDIV: lambda r, s, d: r.floor_div(s[0], s[1], d), Op.MOD: lambda r, s, d: r.floor_mod(s[0], s[1], d),
         Op.ABS: lambda r, s, d: r.func("fabs", d, s) if d.is_float else f"(({s[0]})<0?(-({s[0]})):({s[0]}))",
         Op.RECIP: lambda r, s, d: f"({r.const(1, d)}/{s[0]})", Op.RSQRT: lambda r, s, d: f"({r.const(1, d)}/{r.func('sqrt', d, s)})",
         Op.POW: lambda r, s, d: r.func("pow", d, s) if d.is_float else f"{r.int_pow_name(d)}({s[0]}, {s[1]})"}
  # integer index arithmetic (codegen/index.py's IALU): C's own operators, on int and int64
  index_ops = {"add": "({0}+{1})", "mul": "({0}*{1})", "mad": "({0}*{1}+{2})", "div": "({0}/{1})", "mod": "({0}%{1})",
               "lt": "({0}<{1})", "ge": "({0}>={1})", "and": "({0}&&{1})"}

  def render(self, prog: LinearProgram) -> str:
    t = Text(prog)
    for ins in prog.instrs:
      if (printer := self.kinds.get(ins.op)) is None: raise NotImplementedError(ins.op.name.lower())
      printer(self, t, ins)
    pointers, words = t.params + self.extra_params(prog), self.scalar_params(prog)
    name = prog.meta.name
    return "\n".join(self.preamble(prog) + [self.signature(name, pointers + words, prog) + " {", "\n".join(t.lines), "}"]
                     + self.entry(name, len(pointers), len(words), prog) + [""])
  def alu(self, op: Op, srcs: list[str], d: DType) -> str:
    """op's expression on srcs, operands of dtype d (WHERE: d is the result's)."""
    if (text := self.ops.get(op)) is None: raise NotImplementedError(f"{self.language} renderer has no {op}")
    return text(self, srcs, d)

  def tname(self, d: DType) -> str: return self.type_names[d.name]
  def vtype(self, d: DType) -> str:
    """Type of a value in registers: float for the 16-bit floats this language can't compute in."""
    return "float" if d.name in self.compute_in_float else self.tname(d)
  def from_storage(self, v: str, d: DType) -> str:
    return f"alloy_{d.name}_to_float({v})" if d.name in self.compute_in_float else v
  def to_storage(self, v: str, d: DType) -> str:
    return f"alloy_float_to_{d.name}({v})" if d.name in self.compute_in_float else v
  def rounded(self, v: str, d: DType) -> str:
    """Round a float-held value to d's precision after each op, as a native d would."""
    return f"alloy_{d.name}_to_float(alloy_float_to_{d.name}({v}))" if d.name in self.compute_in_float else v

  # ---- pieces each language overrides
  def preamble(self, prog: LinearProgram) -> list[str]: return []
  def extra_params(self, prog: LinearProgram) -> list[str]:
    """Parameters between the buffers and the scalars (CUDA: a WGMMA tile's tensor maps)."""
    return []
  def signature(self, name: str, params: list[str], prog: LinearProgram) -> str: raise NotImplementedError
  def entry(self, name: str, pointers: int, words: int, prog: LinearProgram) -> list[str]:
    """What follows the kernel (C: the entry point the CPU device's queue calls): lines, none by default."""
    return []
  def special(self, kind: str, wide: bool = False) -> str:
    """The thread index of a GPU launch: "global" (flat over the grid), "group" (threadgroup) or "lane" (in it);
    wide: computed in 64 bits (a grid of more than 2^31 threads)."""
    raise NotImplementedError
  def local_decl(self, name: str, d: DType, size: int) -> str:
    """An array in fast memory of the kernel's own: shared by a threadgroup on GPUs, the thread's on the CPU."""
    raise NotImplementedError
  def tile_memory_decl(self, name: str, d: DType) -> str:
    """A pointer to the tensor-core tile's pipeline memory as an array of d (an epilogue's staging; see Kind.LOCAL)."""
    raise NotImplementedError(f"{type(self).__name__} stages no tensor-core epilogue")
  barrier = ""   # a statement all threads of a group wait at, their shared-memory writes visible after it
  def shuffle_xor(self, value: str, offset: str, d: DType) -> str:
    """The value of `value` in the SIMD lane `offset` away (lane ^ offset)."""
    raise NotImplementedError
  def shuffle_operand(self, value: str, d: DType) -> str:
    """Bool and 8/16-bit integers travel through a shuffle as int."""
    return f"(int){value}" if d.is_bool or (d.is_int and d.itemsize < 4) else value
  def func(self, name: str, d: DType, args: list[str]) -> str:
    suffix = "f" if d.name == "float32" and self.language == "c" else ""
    return f"{name}{suffix}({', '.join(args)})"
  def range_open(self, var: sym.Var, parallel: bool, itype: str = "int") -> list[str]:
    return [f"for ({itype} {var.name} = 0; {var.name} < {self.index_literal(var.max + 1)}; {var.name}++) {{"]
  def index_type(self, d: DType) -> str:
    """The type of an index variable of dtype d (lowering picks int64 only past 2^31)."""
    return "int" if d.itemsize <= 4 else self.tname(dt.int64)
  def index_literal(self, v: int) -> str: return str(v) if abs(v) <= sym.INT32_MAX else self.const(v, dt.int64)

  # ---- literals and expressions
  def const(self, v, d: DType) -> str:
    if d.is_bool: return "1" if v else "0"
    if d.is_float:
      v = float(v)
      if math.isnan(v): s = "NAN"
      elif math.isinf(v): s = "INFINITY" if v > 0 else "(-INFINITY)"
      else: s = repr(v) if "e" in repr(v) or "." in repr(v) else repr(v) + ".0"
      if d.name == "float64": return s if s[0].isalpha() or s.startswith("(") else s
      lit = s if s[0].isalpha() or s.startswith("(") else s + "f"
      return lit if d.name == "float32" else f"(({self.vtype(d)}){lit})"
    v = int(v)
    if d.name in ("int64",): return f"{v}ll" if v != -(1 << 63) else "(-9223372036854775807ll-1)"
    if d.name in ("uint64",): return f"{v}ull"
    if d.name in ("uint32",): return f"{v}u"
    if d.name == "int32" and v == -(1 << 31): return "(-2147483647-1)"
    return str(v) if d.name == "int32" else f"(({self.tname(d)}){v})"

  def pointer_decl(self, name: str, address: str) -> str:
    """A pointer variable set to `address` (one that a STEP moves): C++ deduces its type, qualifiers and address space."""
    return f"auto {name} = {address};"

  def floor_div(self, a, b, d: DType) -> str:
    if d.is_float: return f"alloy_floordiv_{'double' if d.itemsize == 8 else 'float'}({a}, {b})"
    if d.is_unsigned or d.is_bool: return f"({a}/{b})"
    # Python/PyTorch floor division: round toward -inf; x/0 gives 0 here, never a trap
    return f"(({b})==0?0:(({a})/({b})-((({a})%({b})!=0)&&((({a})<0)!=(({b})<0)))))"
  def floor_mod(self, a, b, d: DType) -> str:
    if d.is_float: return f"alloy_floormod_{'double' if d.itemsize == 8 else 'float'}({a}, {b})"
    if d.is_unsigned or d.is_bool: return f"(({b})==0?0:({a})%({b}))"
    return f"(({b})==0?0:((({a})%({b})+({b}))%({b})))"
  def int_pow_name(self, d: DType) -> str: return f"alloy_ipow_{d.name}"

  def cast(self, v: str, src: DType, dst: DType) -> str:
    if dst.is_bool: return f"(({v})!=0)"
    if src.is_float and dst.is_int:
      # out-of-range float -> int is undefined in C: go through a saturating int64 conversion, then wrap
      return f"(({self.vtype(dst)})alloy_f2i((double)({v})))"
    return f"(({self.vtype(dst)})({v}))"
  def bitcast(self, v: str, src: DType, dst: DType) -> str: raise NotImplementedError

  # vector accesses: a language names its vector types and how a lane is read and a vector built
  def vec_type(self, d: DType, width: int) -> str: raise NotImplementedError
  def vec_pointer(self, buf: str, idx: str, d: DType, width: int, writable: bool) -> str:
    return f"(({'' if writable else 'const '}{self.vec_type(d, width)}*)({buf}+{idx}))"
  def vec_lane(self, v: str, k: int, d: DType, width: int) -> str: return f"{v}[{k}]"
  def vec_make(self, vals: list[str], d: DType, width: int) -> str: raise NotImplementedError
  def vec_alu(self, op: Op, args: list[str], d: DType, width: int) -> str:
    """One vector op: infix where the language has it lane by lane, else a helper of the prelude."""
    if op in self.infix: return f"({f' {self.infix[op]} '.join(args)})"
    if op is Op.DIV: return f"({args[0]} / {args[1]})"
    return f"alloy_{op.name.lower()}_{d.name}x{width}({', '.join(args)})"
  def vec_fma(self, a: str, b: str, c: str, d: DType, width: int) -> str:
    """a*b+c lane by lane with one rounding."""
    raise NotImplementedError

  def load(self, buf: str, idx: str, valid: str | None, d: DType) -> str:
    v = self.from_storage(f"{buf}[{idx}]", d)
    return f"({valid}?{v}:{self.const(0, d)})" if valid else v
  def store(self, buf: str, idx: str, v: str, d: DType) -> str: return f"{buf}[{idx}] = {self.to_storage(v, d)};"

  # ---- scalar arguments: int32 words after the buffers (codegen/program.py's scalar_words packs them)
  def scalar_params(self, prog: LinearProgram) -> list[str]: return [f"int32_t alloy_s{w}" for w in range(scalar_word_count(prog))]
  def scalar_word(self, w: int, prog: LinearProgram) -> str: return f"alloy_s{w}"
  def scalar_value(self, index: int, d: DType, prog: LinearProgram) -> str:
    """Scalar argument `index` as a value of d, from its words."""
    w = word_offsets(prog.meta.scalar_dtypes)[index]
    lo = self.scalar_word(w, prog)
    if d.itemsize == 8:
      bits = f"((((uint64)(uint32){self.scalar_word(w + 1, prog)}) << 32) | (uint64)(uint32){lo})"
      return self.bitcast(bits, dt.uint64, d) if d.is_float else f"(({self.tname(d)}){bits})"
    if d.is_bool: return f"({lo}!=0)"
    if not d.is_float: return f"(({self.tname(d)}){lo})"
    f = self.bitcast(lo, dt.int32, dt.float32)   # 16-bit floats come as float32, converted as their literals are
    return f if d.name == "float32" else f"(({self.vtype(d)}){f})"

  def param_decl(self, slot: int, d: DType, written: bool) -> str:
    prefix = self.buffer_prefix if written else self.buffer_prefix + self.const_buffer_prefix
    return f"{prefix}{self.tname(d)}* restrict data{slot}"
