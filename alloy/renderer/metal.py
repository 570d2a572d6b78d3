"""Metal Shading Language: one thread per output element, like CUDA.

half is native; bfloat16 is kept as ushort bits and computed in float (so it needs neither MSL 3.1 nor
native bfloat, and runs on the software device); int64 is `long`. Metal has no double: float64 is
rejected before codegen (see runtime/registry.py's unsupported_dtype), and here as a last guard.
Grouped reductions combine through SIMD-group shuffles and threadgroup memory. A TENSOR_CORE matmul's main loop
runs on simdgroup matrices (renderer/metal_simdgroup.py), its epilogue per accumulator as any other code.
"""
from __future__ import annotations
from alloy.dtype import DType
from alloy.codegen.program import Kind, LinearProgram
from alloy.codegen.tensor_core import SIMDGROUP_8X8
from alloy.renderer.cstyle import CStyleRenderer, floor_division_helpers, integer_helpers, scalar_word_count
from alloy.renderer.metal_simdgroup import simdgroup_lines

# Metal has no erf: below 0.84375 fdlibm's rational fit, above it the Chebyshev fit of erfc from Numerical
# Recipes (relative error < 1.2e-7); both in float, which is all Metal has.
METAL_PRELUDE = r"""#include <metal_stdlib>
using namespace metal;
inline long alloy_f2i(float x) {
  return x != x ? 0 : x <= -9223372036854775808.0f ? (-9223372036854775807l - 1) : x >= 9223372036854775807.0f ? 9223372036854775807l : (long)x;
}
inline float alloy_bfloat16_to_float(ushort b) { return as_type<float>((uint)b << 16); }
inline ushort alloy_float_to_bfloat16(float f) {
  uint u = as_type<uint>(f);
  return f != f ? (ushort)0x7FC0 : (ushort)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
inline float alloy_erf(float x) {
  float a = fabs(x);
  if (a < 0.84375f) {
    float z = x * x;
    float p = 1.28379166e-01f + z * (-3.25042108e-01f + z * (-2.84817495e-02f + z * (-5.77027029e-03f + z * -2.37630166e-05f)));
    float q = 1.0f + z * (3.97917223e-01f + z * (6.50222499e-02f + z * (5.08130628e-03f + z * (1.32494738e-04f + z * -3.96022827e-06f))));
    return x + x * (p / q);
  }
  if (a >= 6.0f) return x < 0.0f ? -1.0f : 1.0f;
  float t = 1.0f / (1.0f + 0.5f * a);
  float y = t * exp(-a * a - 1.26551223f + t * (1.00002368f + t * (0.37409196f + t * (0.09678418f + t * (-0.18628806f +
            t * (0.27886807f + t * (-1.13520398f + t * (1.48851587f + t * (-0.82215223f + t * 0.17087277f)))))))));
  return x < 0.0f ? y - 1.0f : 1.0f - y;
}
""" + integer_helpers("inline") + floor_division_helpers("inline", ["float"], float_suffix="")

MAX_BINDINGS = 31   # buffer bindings of a Metal kernel

def mma(r, t, ins):
  """The simdgroup-matrix tile (renderer/metal_simdgroup.py) into an array of accumulators."""
  spec, tile = ins.arg
  if tile.instruction != SIMDGROUP_8X8: raise ValueError(f"Metal has no {tile.instruction} tiles (its own: {SIMDGROUP_8X8})")
  acc = t.new("acc")
  t.named(ins, acc, *simdgroup_lines(spec, tile, r.tname(spec.operand_dtype), *t.args(ins), acc))

class MetalRenderer(CStyleRenderer):
  language = "metal"
  type_names = {"bool": "bool", "int8": "char", "uint8": "uchar", "int16": "short", "uint16": "ushort",
                "int32": "int", "uint32": "uint", "int64": "long", "uint64": "ulong",
                "float16": "half", "bfloat16": "ushort", "float32": "float"}
  compute_in_float = {"bfloat16"}
  # half2 and ushort2 (bfloat16's bits): a TENSOR_CORE epilogue's 2-wide stores
  vector_names = {"float32": "float", "int32": "int", "uint32": "uint", "float16": "half", "bfloat16": "ushort"}

  def tname(self, d: DType) -> str:
    if d.name not in self.type_names: raise TypeError(f"Metal has no {d.name}: the METAL device cannot compute in {d.name}")
    return self.type_names[d.name]
  def preamble(self, prog: LinearProgram) -> list[str]: return [METAL_PRELUDE]
  kinds = {**CStyleRenderer.kinds, Kind.MMA: mma}
  def signature(self, name: str, params: list[str], prog: LinearProgram) -> str:
    specials = ["uint3 gid [[threadgroup_position_in_grid]]", "uint3 lid [[thread_position_in_threadgroup]]",
                "uint3 lsize [[threads_per_threadgroup]]"]
    return f"kernel void {name}({', '.join(params + specials)})"
  def param_decl(self, slot: int, d: DType, written: bool) -> str:
    return f"device {'' if written else 'const '}{self.tname(d)}* data{slot} [[buffer({slot})]]"
  # a binding per scalar word after the buffers, or all words in one where there are too few bindings for that: what
  # MetalProgram's setBytes and MetalGraph's argument slots fill (runtime/metal/program.py's scalars_packed)
  def scalar_params(self, prog: LinearProgram) -> list[str]:
    n_buffers, n_words = len(prog.buffer_dtypes), scalar_word_count(prog)
    if n_buffers + n_words > MAX_BINDINGS: return [f"constant int* alloy_s [[buffer({n_buffers})]]"]
    return [f"constant int& alloy_s{w} [[buffer({n_buffers + w})]]" for w in range(n_words)]
  def scalar_word(self, w: int, prog: LinearProgram) -> str:
    return f"alloy_s[{w}]" if len(prog.buffer_dtypes) + scalar_word_count(prog) > MAX_BINDINGS else f"alloy_s{w}"
  def special(self, kind: str, wide: bool = False) -> str:
    if wide and kind == "global": return "((long)gid.x*lsize.x+lid.x)"   # the product passes 2^32
    return {"global": "(int)(gid.x*lsize.x+lid.x)", "group": "(int)gid.x", "lane": "(int)lid.x"}[kind]
  def local_decl(self, name: str, d: DType, size: int) -> str: return f"threadgroup {self.tname(d)} {name}[{size}];"
  barrier = "threadgroup_barrier(mem_flags::mem_threadgroup);"
  def shuffle_xor(self, value: str, offset: str, d: DType) -> str:
    if d.itemsize == 8: raise ValueError("Metal has no 64-bit SIMD shuffles (its caps say shuffle_bytes=4)")
    return f"simd_shuffle_xor({self.shuffle_operand(value, d)}, (ushort){offset})"
  def vec_type(self, d: DType, width: int) -> str: return f"{self.vector_names[d.name]}{width}"
  def vec_pointer(self, buf: str, idx: str, d: DType, width: int, writable: bool) -> str:
    return f"((device {'' if writable else 'const '}{self.vec_type(d, width)}*)({buf}+{idx}))"
  def vec_make(self, vals: list[str], d: DType, width: int) -> str: return f"{self.vec_type(d, width)}({', '.join(vals)})"
  def func(self, name: str, d: DType, args: list[str]) -> str:
    if name == "erf": return f"(({self.vtype(d)})alloy_erf((float)({args[0]})))"
    return f"{name}({', '.join(args)})"
  def const(self, v, d: DType) -> str:
    if d.name == "int64": return f"{int(v)}l" if int(v) != -(1 << 63) else "(-9223372036854775807l-1)"
    if d.name == "uint64": return f"{int(v)}ul"
    return super().const(v, d)
  def cast(self, v: str, src: DType, dst: DType) -> str:
    if src.is_float and dst.is_int and not dst.is_bool: return f"(({self.vtype(dst)})alloy_f2i((float)({v})))"
    return super().cast(v, src, dst)
  def bitcast(self, v: str, src: DType, dst: DType) -> str:
    return self.from_storage(f"as_type<{self.tname(dst)}>({self.to_storage(v, src)})", dst)
