"""The C-family core shared by the C, CUDA and Metal renderers: linear program -> source text.

A language subclass names its types, kernel signature, thread indices and math functions;
everything else (loops, loads, stores, index arithmetic, casts, reductions) is printed here.
"""
from __future__ import annotations
import math
from alloy import dtype as dt
from alloy.dtype import DType
from alloy.ir import symbolic as sym
from alloy.ir.ops import Op, SELECTS
from alloy.codegen.program import Kind, LinearProgram, word_count, word_offsets

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

class CStyleRenderer:
  language = "c"
  type_names: dict = {}
  kernel_prefix = ""
  buffer_prefix = ""
  const_buffer_prefix = "const "
  infix = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.AND: "&", Op.OR: "|", Op.XOR: "^",
           Op.SHL: "<<", Op.SHR: ">>", Op.CMPLT: "<", Op.CMPLE: "<=", Op.CMPEQ: "==", Op.CMPNE: "!="}
  float_funcs = {Op.EXP: "exp", Op.EXP2: "exp2", Op.LOG: "log", Op.LOG2: "log2", Op.SIN: "sin", Op.COS: "cos",
                 Op.TAN: "tan", Op.TANH: "tanh", Op.SQRT: "sqrt", Op.ERF: "erf", Op.FLOOR: "floor",
                 Op.CEIL: "ceil", Op.ROUND: "rint", Op.TRUNC: "trunc", Op.POW: "pow"}
  # types whose arithmetic happens in float (no native ALU in this language)
  compute_in_float: set = set()

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
  def signature(self, name: str, params: list[str], prog: LinearProgram) -> str: raise NotImplementedError
  def special(self, kind: str, wide: bool = False) -> str:
    """The thread index of a GPU launch: "global" (flat over the grid), "group" (threadgroup) or "lane" (in it);
    wide: computed in 64 bits (a grid of more than 2^31 threads)."""
    raise NotImplementedError
  def local_decl(self, name: str, d: DType, size: int) -> str:
    """An array in fast memory of the kernel's own: shared by a threadgroup on GPUs, the thread's on the CPU."""
    raise NotImplementedError
  barrier = ""   # a statement all threads of a group wait at, their shared-memory writes visible after it
  def own_instruction(self, ins, names: dict, dtypes: dict, new) -> list[str] | None:
    """The lines of an instruction only this language prints (the CUDA tensor-core tile), naming its value in names;
    None for every other (the loop of render prints them)."""
    return None
  def shuffle_xor(self, value: str, offset: str, d: DType) -> str | None:
    """The value of `value` in the SIMD lane `offset` away (lane ^ offset), or None where d has no shuffle."""
    raise NotImplementedError
  def group_reduce(self, acc: str, combine, d: DType, lane: str, width: int, scratch: str) -> list[str]:
    """Lines that leave the combination of acc over all `width` threads of the group in every thread's acc;
    combine(a, b) renders one combining step. SIMD groups are 32 lanes."""
    if (shuffled := self.shuffle_xor(acc, "o", d)) is None:   # no shuffle: every thread posts its value, reads all
      return [f"{scratch}[{lane}] = {acc};", self.barrier, f"{acc} = {scratch}[0];",
              f"for (int w = 1; w < {width}; w++) {acc} = {combine(acc, f'{scratch}[w]')};"]
    # butterfly shuffles leave each SIMD group's result in all its lanes; one lane per group posts it, all read all
    t = self.vtype(d)
    lines = [f"for (int o = 16; o > 0; o >>= 1) {{ {t} other = ({t}){shuffled}; {acc} = {combine(acc, 'other')}; }}"]
    if width <= 32: return lines
    return lines + [f"if (({lane} & 31) == 0) {scratch}[{lane} >> 5] = {acc};", self.barrier,
                    f"{acc} = {scratch}[0];", f"for (int w = 1; w < {width // 32}; w++) {acc} = {combine(acc, f'{scratch}[w]')};"]
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

  # integer index arithmetic (codegen/index.py's IALU): C's own operators, on int and int64
  index_ops = {"add": "({0}+{1})", "mul": "({0}*{1})", "mad": "({0}*{1}+{2})", "div": "({0}/{1})", "mod": "({0}%{1})",
               "lt": "({0}<{1})", "ge": "({0}>={1})", "and": "({0}&&{1})"}
  def pointer_decl(self, name: str, address: str) -> str:
    """A pointer variable set to `address` (one that a STEP moves): C++ deduces its type, qualifiers and address space."""
    return f"auto {name} = {address};"

  def alu(self, op: Op, d: DType, srcs: list[str], src_dtypes: list[DType]) -> str:
    a = srcs[0]
    sd = src_dtypes[0] if op is not Op.WHERE else d
    if op in self.infix:
      if op in (Op.SHL, Op.SHR): return f"(({self.vtype(sd)})({a}{self.infix[op]}{srcs[1]}))"
      if sd.is_bool and op in (Op.ADD, Op.OR): return f"({a}|{srcs[1]})"
      if sd.is_bool and op is Op.MUL: return f"({a}&{srcs[1]})"
      if sd.itemsize < 4 and sd.is_int and op not in (Op.CMPLT, Op.CMPLE, Op.CMPEQ, Op.CMPNE):
        return f"(({self.vtype(sd)})({a}{self.infix[op]}{srcs[1]}))"
      return f"({a}{self.infix[op]}{srcs[1]})"
    if op is Op.WHERE: return f"({a}?{srcs[1]}:{srcs[2]})"
    if op is Op.NEG: return f"(-{a})" if sd.itemsize >= 4 or sd.is_float else f"(({self.vtype(sd)})(-{a}))"
    if op is Op.NOT: return f"(!{a})" if sd.is_bool else f"(({self.vtype(sd)})(~{a}))"
    if op is Op.MAX:
      if sd.is_float: return f"((({a})>({srcs[1]})||({a})!=({a}))?({a}):({srcs[1]}))"
      return f"(({a})>({srcs[1]})?({a}):({srcs[1]}))"
    if op is Op.MIN:
      if sd.is_float: return f"((({a})<({srcs[1]})||({a})!=({a}))?({a}):({srcs[1]}))"
      return f"(({a})<({srcs[1]})?({a}):({srcs[1]}))"
    if op is Op.DIV: return f"({a}/{srcs[1]})"
    if op is Op.IDIV: return self.floor_div(a, srcs[1], sd)
    if op is Op.MOD: return self.floor_mod(a, srcs[1], sd)
    if op is Op.ABS: return f"(({a})<0?(-({a})):({a}))" if not sd.is_float else self.func("fabs", sd, [a])
    if op is Op.RECIP: return f"({self.const(1, sd)}/{a})"
    if op is Op.RSQRT: return f"({self.const(1, sd)}/{self.func('sqrt', sd, [a])})"
    if op is Op.POW and not sd.is_float: return f"{self.int_pow_name(sd)}({a}, {srcs[1]})"
    if op in self.float_funcs: return self.func(self.float_funcs[op], sd, srcs)
    raise NotImplementedError(f"{self.language} renderer has no {op}")

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
  def vec_lane(self, v: str, k: int) -> str: return f"{v}[{k}]"
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

  # ---- the program
  def render(self, prog: LinearProgram) -> str:
    names: dict[int, str] = {}
    dtypes: dict[int, DType] = {}
    lines: list[str] = []
    depth = 1
    params: list[str] = []
    counter = 0
    def new(prefix="v"):
      nonlocal counter
      counter += 1
      return f"{prefix}{counter - 1}"
    written = {0}
    stepped = {id(ins.src[0]) for ins in prog.instrs if ins.op is Kind.STEP}
    for ins in prog.instrs:
      ind = "  " * depth
      if (own := self.own_instruction(ins, names, dtypes, new)) is not None:
        lines += [ind + line for line in own]; continue
      if ins.op is Kind.PARAM:
        slot = ins.arg
        names[id(ins)] = f"data{slot}"
        params.append(self.param_decl(slot, ins.dtype, slot in written))
        continue
      if ins.op is Kind.CONST:
        names[id(ins)] = self.const(ins.arg, ins.dtype); dtypes[id(ins)] = ins.dtype; continue
      if ins.op is Kind.SPECIAL:
        var, kind = ins.arg
        wide = ins.dtype.itemsize == 8
        names[id(ins)], dtypes[id(ins)] = var.name, ins.dtype
        lines.append(f"{ind}{self.index_type(ins.dtype)} {var.name} = {self.special(kind, wide)};"); continue
      if ins.op is Kind.LOCAL:
        name, size = ins.arg
        names[id(ins)] = name
        lines.append(ind + self.local_decl(name, ins.dtype, size)); continue
      if ins.op is Kind.GROUP_REDUCE:
        op, width, lane = ins.arg
        acc = names[id(ins.src[0])]
        def combine(a, b, op=op, d=ins.dtype): return self.rounded(self.alu(op, d, [a, b], [d, d]), d)
        lines += [ind + l for l in self.group_reduce(acc, combine, ins.dtype, lane, width, names[id(ins.src[1])])]
        names[id(ins)], dtypes[id(ins)] = acc, ins.dtype
        continue
      if ins.op is Kind.RANGE:
        var, parallel = ins.arg
        names[id(ins)], dtypes[id(ins)] = var.name, ins.dtype
        lines += [ind + l for l in self.range_open(var, parallel, self.index_type(ins.dtype))]; depth += 1; continue
      if ins.op in (Kind.ENDRANGE, Kind.ENDIF):
        depth -= 1; lines.append("  " * depth + "}"); continue
      if ins.op is Kind.IF:
        lines.append(f"{ind}if ({names[id(ins.src[0])]}) {{"); depth += 1; continue
      if ins.op is Kind.PTR:
        base, index = ins.src
        address = names[id(base)] if index.op is Kind.CONST and index.arg == 0 else f"({names[id(base)]}+{names[id(index)]})"
        if id(ins) not in stepped: names[id(ins)] = address; continue
        names[id(ins)] = new("p")
        lines.append(ind + self.pointer_decl(names[id(ins)], address)); continue
      if ins.op is Kind.STEP:
        lines.append(f"{ind}{names[id(ins.src[0])]} += {ins.arg};"); continue
      if ins.op is Kind.STORE:
        ptr, val = ins.src
        lines.append(ind + self.store(names[id(ptr)], str(ins.arg), names[id(val)], ptr.dtype)); continue
      if ins.op is Kind.VSTORE:
        offset, width = ins.arg
        ptr = ins.src[0]
        vals = [self.to_storage(names[id(v)], ptr.dtype) for v in ins.src[1:]]
        value = names[id(ins.src[1])] if len(vals) == 1 else self.vec_make(vals, ptr.dtype, width)
        lines.append(f"{ind}*{self.vec_pointer(names[id(ptr)], str(offset), ptr.dtype, width, True)} = {value};")
        continue
      if ins.op is Kind.GEP:   # a lane is read where it is used: an accumulator's lanes are final only after its loop
        names[id(ins)] = self.from_storage(self.vec_lane(names[id(ins.src[0])], ins.arg), ins.dtype)
        dtypes[id(ins)] = ins.dtype
        continue
      if ins.op is Kind.VUPDATE:   # acc op= val, or with two values acc += a*b fused
        acc, *vals = ins.src
        a, v = names[id(acc)], [names[id(x)] for x in vals]
        rhs = self.vec_fma(v[0], v[1], a, ins.dtype, acc.arg[1]) if len(v) == 2 else self.vec_alu(ins.arg, [a, v[0]], ins.dtype, acc.arg[1])
        lines.append(f"{ind}{a} = {rhs};"); continue
      if ins.op in (Kind.VBROADCAST, Kind.VACC, Kind.VALU):
        width = ins.arg if ins.op is Kind.VBROADCAST else ins.arg[1]
        if ins.op is Kind.VBROADCAST: rhs = self.vec_make([names[id(ins.src[0])]] * width, ins.dtype, width)
        elif ins.op is Kind.VACC: rhs = self.vec_make([self.const(ins.arg[0], ins.dtype)] * width, ins.dtype, width)
        else: rhs = self.vec_alu(ins.arg[0], [names[id(s)] for s in ins.src], ins.dtype, width)
        name = new("acc" if ins.op is Kind.VACC else "v")
        names[id(ins)] = name
        lines.append(f"{ind}{self.vec_type(ins.dtype, width)} {name} = {rhs};")
        continue
      if ins.op is Kind.VLOAD:
        offset, width = ins.arg
        name = new("vec")
        names[id(ins)], dtypes[id(ins)] = name, ins.dtype
        pointer = self.vec_pointer(names[id(ins.src[0])], str(offset), ins.dtype, width, False)
        lines.append(f"{ind}{self.vec_type(ins.dtype, width)} {name} = *{pointer};")
        continue
      if ins.op is Kind.UPDATE:
        acc, val = ins.src
        a = names[id(acc)]
        lines.append(f"{ind}{a} = {self.rounded(self.alu(ins.arg, ins.dtype, [a, names[id(val)]], [ins.dtype, ins.dtype]), ins.dtype)};"); continue
      # value-producing instructions
      if ins.op is Kind.LOAD:
        rhs = self.load(names[id(ins.src[0])], str(ins.arg), names[id(ins.src[1])] if len(ins.src) > 1 else None, ins.dtype)
      elif ins.op is Kind.IALU: rhs = self.index_ops[ins.arg].format(*(names[id(s)] for s in ins.src))
      elif ins.op is Kind.VAR: rhs = self.scalar_value(ins.arg, ins.dtype, prog)
      elif ins.op is Kind.ACC: rhs = self.const(ins.arg, ins.dtype)
      elif ins.op is Kind.CAST: rhs = self.rounded(self.cast(names[id(ins.src[0])], dtypes[id(ins.src[0])], ins.dtype), ins.dtype)
      elif ins.op is Kind.BITCAST: rhs = self.bitcast(names[id(ins.src[0])], dtypes[id(ins.src[0])], ins.dtype)
      elif ins.op is Kind.ALU:
        rhs = self.alu(ins.arg, ins.dtype, [names[id(s)] for s in ins.src], [dtypes[id(s)] for s in ins.src])
        if ins.arg not in SELECTS and ins.dtype.is_float: rhs = self.rounded(rhs, ins.dtype)
      else: raise NotImplementedError(ins.op.name.lower())
      name = new("acc" if ins.op is Kind.ACC else "v")
      names[id(ins)], dtypes[id(ins)] = name, ins.dtype
      lines.append(f"{ind}{self.vtype(ins.dtype)} {name} = {rhs};")
    body = "\n".join(lines)
    params += self.scalar_params(prog)
    return "\n".join(self.preamble(prog) + [self.signature(prog.meta.name, params, prog) + " {", body, "}", ""])

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
