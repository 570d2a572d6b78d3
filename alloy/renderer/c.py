"""C for the CPU device: scalar loops; the outer loop of a large kernel runs over a slice the caller passes.

A kernel is its body, `<name>_body(buffers..., int32 words...)` with restrict pointers, and an exported entry point of
one type for every kernel, `void <name>(void *const *a, const int32_t *c)`, which passes the body its pointers from a
and its words from c: the CPU device's queue calls any kernel through that one type (runtime/cpu/queue.h).
A parallel kernel takes two int32 arguments after its own, alloy_start and alloy_end, and runs its outer loop over
[alloy_start, alloy_end) only; it exports `<name>_parallel_range`, the loop's full length, so the CPU device's thread
team (runtime/cpu/team.c) can split the loop into slices and call the kernel once per slice."""
from __future__ import annotations
from alloy.dtype import DType
from alloy.ir import symbolic as sym
from alloy.codegen.program import Kind, LinearProgram
from alloy.renderer.cstyle import CStyleRenderer, floor_division_helpers, integer_helpers

# bfloat16 <-> float (to nearest even, NaN kept NaN): every CPU kernel's, and renderer/c_bf16_gemm.py's
BFLOAT16_HELPERS = r"""static inline float alloy_bfloat16_to_float(uint16_t b) {
  uint32_t u = (uint32_t)b << 16; float f; memcpy(&f, &u, 4); return f;
}
static inline uint16_t alloy_float_to_bfloat16(float f) {
  uint32_t u; memcpy(&u, &f, 4);
  if (f != f) return 0x7FC0;
  return (uint16_t)((u + 0x7FFF + ((u >> 16) & 1)) >> 16);
}
"""

C_PRELUDE = r"""#include <math.h>
#include <stdint.h>
#include <string.h>
static inline int64_t alloy_f2i(double x) {
  return x != x ? 0 : x <= -9223372036854775808.0 ? INT64_MIN : x >= 9223372036854775807.0 ? INT64_MAX : (int64_t)x;
}
""" + BFLOAT16_HELPERS + r"""/* vector types of element alignment: a vector access may start at any element */
typedef float alloy_float32x4 __attribute__((vector_size(16), aligned(4)));
typedef int32_t alloy_int32x4 __attribute__((vector_size(16), aligned(4)));
typedef uint32_t alloy_uint32x4 __attribute__((vector_size(16), aligned(4)));
typedef float alloy_float32x8 __attribute__((vector_size(32), aligned(4)));
typedef int32_t alloy_int32x8 __attribute__((vector_size(32), aligned(4)));
typedef uint32_t alloy_uint32x8 __attribute__((vector_size(32), aligned(4)));
typedef float alloy_float32x16 __attribute__((vector_size(64), aligned(4)));
typedef int32_t alloy_int32x16 __attribute__((vector_size(64), aligned(4)));
typedef uint32_t alloy_uint32x16 __attribute__((vector_size(64), aligned(4)));
/* a*b+c with one rounding, lane by lane: the FMA instruction where there is one (16 lanes: AVX-512's, which the
   CPU device only asks for where the target has it; elsewhere lane by lane) */
#define ALLOY_FMA(N) static inline alloy_float32x##N alloy_fma_float32x##N(alloy_float32x##N a, alloy_float32x##N b, \
  alloy_float32x##N c) { for (int k = 0; k < N; k++) c[k] = fmaf(a[k], b[k], c[k]); return c; }
#if defined(__FMA__) && (defined(__x86_64__) || defined(__i386__))
#define alloy_fma_float32x8(a, b, c) ((alloy_float32x8)__builtin_ia32_vfmaddps256((a), (b), (c)))
#define alloy_fma_float32x4(a, b, c) ((alloy_float32x4)__builtin_ia32_vfmaddps((a), (b), (c)))
#else
ALLOY_FMA(8) ALLOY_FMA(4)
#endif
#if defined(__AVX512F__)
#define alloy_fma_float32x16(a, b, c) ((alloy_float32x16)__builtin_ia32_vfmaddps512_mask((a), (b), (c), (unsigned short)-1, 4))
#else
ALLOY_FMA(16)
#endif
#define ALLOY_VEC_SELECT(N) \
static inline alloy_float32x##N alloy_select_float32x##N(alloy_int32x##N m, alloy_float32x##N a, alloy_float32x##N b) { \
  return (alloy_float32x##N)(((alloy_int32x##N)a & m) | ((alloy_int32x##N)b & ~m)); }
ALLOY_VEC_SELECT(16) ALLOY_VEC_SELECT(8) ALLOY_VEC_SELECT(4)
/* x clamped to [lo, hi], NaN to lo: on x86 one max and one min (they return their second operand for NaN), where
   compares and selects took six instructions (softmax 2048^2: ~10% faster) */
#define ALLOY_VEC_CLAMP(N) \
static inline alloy_float32x##N alloy_clamp_float32x##N(alloy_float32x##N x, alloy_float32x##N lo, alloy_float32x##N hi) { \
  x = alloy_select_float32x##N((x < lo) | (x != x), lo, x); return alloy_select_float32x##N(x > hi, hi, x); }
#if defined(__AVX__)
#define alloy_clamp_float32x8(x, lo, hi) ((alloy_float32x8)__builtin_ia32_minps256(__builtin_ia32_maxps256((x), (lo)), (hi)))
#define alloy_clamp_float32x4(x, lo, hi) ((alloy_float32x4)__builtin_ia32_minps(__builtin_ia32_maxps((x), (lo)), (hi)))
#else
ALLOY_VEC_CLAMP(8) ALLOY_VEC_CLAMP(4)
#endif
ALLOY_VEC_CLAMP(16)
/* NaN-propagating max and exp on float vectors, so rows of softmax and max-reductions stay vector code.
   exp: 2^k * e^r with k = round(x*log2(e)), r = x - k*ln2 in two parts, e^r by Cephes' degree-6 polynomial
   (within 2 ulp of the correctly rounded value); 2^k applied as two factors so results near overflow and
   the subnormal range come out right; x clamped to [-150, 128] first, where e^x is already 0 or inf. */
#define ALLOY_VEC_MATH(N) \
static inline alloy_float32x##N alloy_max_float32x##N(alloy_float32x##N a, alloy_float32x##N b) { \
  return alloy_select_float32x##N((a > b) | (a != a), a, b); } \
static inline alloy_float32x##N alloy_exp_float32x##N(alloy_float32x##N x) { \
  alloy_float32x##N zero = {0}, c = alloy_clamp_float32x##N(x, zero - 150.0f, zero + 128.0f); \
  alloy_float32x##N k = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f; \
  alloy_float32x##N r = (c - k * 0.693359375f) - k * -2.12194440e-4f; \
  alloy_float32x##N p = zero + 1.9875691500e-4f; \
  p = alloy_fma_float32x##N(p, r, zero + 1.3981999507e-3f); p = alloy_fma_float32x##N(p, r, zero + 8.3334519073e-3f); \
  p = alloy_fma_float32x##N(p, r, zero + 4.1665795894e-2f); p = alloy_fma_float32x##N(p, r, zero + 1.6666665459e-1f); \
  p = alloy_fma_float32x##N(p, r, zero + 5.0000001201e-1f); \
  alloy_float32x##N y = alloy_fma_float32x##N(p, r * r, r) + 1.0f; \
  alloy_int32x##N ki = __builtin_convertvector(k, alloy_int32x##N), k1 = ki >> 1, k2 = ki - k1; \
  y = y * (alloy_float32x##N)((k1 + 127) << 23) * (alloy_float32x##N)((k2 + 127) << 23); \
  return alloy_select_float32x##N(x != x, x, y); }
ALLOY_VEC_MATH(16) ALLOY_VEC_MATH(8) ALLOY_VEC_MATH(4)
"""+ integer_helpers("static inline") + floor_division_helpers("static inline", ["float", "double"])

def parallel_chunk(length: int) -> int:
  """Iterations of a parallel loop of `length` per unit of the range the thread team splits: 1, or where the length
  passes the team's int32 range (and alloy_start, alloy_end are int32), the least power of two that brings it within;
  the kernel then runs [alloy_start * chunk, min(alloy_end * chunk, length))."""
  chunk = 1
  while -(-length // chunk) > sym.INT32_MAX: chunk *= 2
  return chunk

def parallel_range(prog: LinearProgram) -> int | None:
  """The length of the kernel's parallel outer loop (there is at most one) in chunks, or None for a serial kernel."""
  n = next((var.max + 1 for ins in prog.instrs if ins.op is Kind.RANGE for var, parallel in [ins.arg] if parallel), None)
  return None if n is None else -(-n // parallel_chunk(n))

SHORT_LOOP = 4   # iterations: a loop of at most this many is unrolled whole (_range), where every loop inside it is too

def short_nests(prog: LinearProgram) -> set:
  """id() of each serial loop of at most SHORT_LOOP iterations none of whose inner loops has more: a nest that unrolls
  into straight-line code (a pooling window's 2x2), which -O2 leaves rolled for code size (the digits CNN's pool
  backward 195 -> 67 us unrolled). A short loop around a longer one stays rolled: GCC 12 (-O2 -ftree-vectorize with
  AVX2 or AVX-512) miscompiled such a nest, a 2-iteration loop unrolled around the vectorized loops of a padded copy
  (2x2x2 padded by 2 on both sides of its middle axis: the copied values came out 0)."""
  short, open_loops = set(), []
  for ins in prog.instrs:
    if ins.op is Kind.RANGE:
      var, parallel = ins.arg
      if var.max + 1 > SHORT_LOOP or parallel: short.difference_update(id(o) for o in open_loops)
      else: short.add(id(ins))
      open_loops.append(ins)
    elif ins.op is Kind.ENDRANGE: open_loops.pop()
  return short

def _range(r, t, ins):
  var, parallel = ins.arg
  t[ins] = var.name
  if (short := getattr(t, "short_nests", None)) is None: short = t.short_nests = short_nests(t.prog)
  unroll = [f"#pragma GCC unroll {var.max + 1}"] if id(ins) in short else []
  t.open(*unroll, *r.range_open(var, parallel, r.index_type(ins.dtype)))

class CRenderer(CStyleRenderer):
  language = "c"
  type_names = {"bool": "_Bool", "int8": "int8_t", "uint8": "uint8_t", "int16": "int16_t", "uint16": "uint16_t",
                "int32": "int32_t", "uint32": "uint32_t", "int64": "int64_t", "uint64": "uint64_t",
                "float16": "_Float16", "bfloat16": "uint16_t", "float32": "float", "float64": "double"}
  compute_in_float = {"bfloat16"}
  kinds = {**CStyleRenderer.kinds, Kind.RANGE: _range}

  def preamble(self, prog: LinearProgram) -> list[str]: return [C_PRELUDE]
  def signature(self, name: str, params: list[str], prog: LinearProgram) -> str:
    # not inlined into the entry point: restrict holds for a function's parameters, whatever gcc's inliner keeps of it
    body = f"static __attribute__((noinline)) void {name}_body"
    if (n := parallel_range(prog)) is None: return f"{body}({', '.join(params)})"
    return f"const int32_t {name}_parallel_range = {n};\n{body}({', '.join(params + ['int32_t alloy_start', 'int32_t alloy_end'])})"
  def entry(self, name: str, pointers: int, words: int, prog: LinearProgram) -> list[str]:
    words += 2 if parallel_range(prog) is not None else 0   # the slice's start and end
    args = [f"a[{i}]" for i in range(pointers)] + [f"c[{j}]" for j in range(words)]
    return [f"void {name}(void *const *a, const int32_t *c) {{ (void)a; (void)c; {name}_body({', '.join(args)}); }}"]
  def range_open(self, var: sym.Var, parallel: bool, itype: str = "int") -> list[str]:
    if not parallel: return super().range_open(var, parallel, itype)
    v, n = var.name, var.max + 1
    if (chunk := parallel_chunk(n)) == 1: return [f"for (int {v} = alloy_start; {v} < alloy_end; {v}++) {{"]
    # the slice counts chunks of iterations; the last chunk stops at the loop's end
    start, end = f"(int64_t)alloy_start*{chunk}", f"(int64_t)alloy_end*{chunk}"
    return [f"for (int64_t {v} = {start}, {v}_end = {end} < {n}ll ? {end} : {n}ll; {v} < {v}_end; {v}++) {{"]
  def load(self, buf: str, idx: str, valid: str | None, d: DType) -> str:
    """A masked element is read from element 0 and replaced by 0: the load itself is unconditional. GCC 12 (-O2
    -ftree-vectorize with AVX2 or AVX-512) miscompiled conditional loads it vectorized as masked loads: a (7, 2) tensor
    padded by 2 rows before and after came out 0 in rows 2 and 3 (as a C file on its own, with any unroll pragma or
    none; -fno-tree-loop-if-convert hides it but un-vectorizes every select, where() 7x slower)."""
    if not valid: return super().load(buf, idx, None, d)
    return f"({{ __typeof__({buf}[0]) _m = {buf}[({valid})?({idx}):0]; ({valid})?{self.from_storage('_m', d)}:{self.const(0, d)}; }})"
  def func(self, name: str, d: DType, args: list[str]) -> str:
    if d.name == "float32": return f"{name}f({', '.join(args)})"
    if d.name == "float16": return f"(_Float16){name}f({', '.join(f'(float){a}' for a in args)})"
    return f"{name}({', '.join(args)})"
  def int_pow_name(self, d: DType) -> str: return f"alloy_ipow_{d.name}"
  def pointer_decl(self, name: str, address: str) -> str: return f"__typeof__({address}) {name} = {address};"
  def vec_type(self, d: DType, width: int) -> str: return f"alloy_{d.name}x{width}"
  # the kernel thread's own array (a packed matmul panel): on its stack, which the queue's threads make 16 MB
  def local_decl(self, name: str, d: DType, size: int) -> str: return f"{self.tname(d)} {name}[{size}] __attribute__((aligned(64)));"
  def vec_make(self, vals: list[str], d: DType, width: int) -> str: return f"({self.vec_type(d, width)}){{{', '.join(vals)}}}"
  def vec_fma(self, a: str, b: str, c: str, d: DType, width: int) -> str: return f"alloy_fma_{d.name}x{width}({a}, {b}, {c})"
  def bitcast(self, v: str, src: DType, dst: DType) -> str:
    copy = f"{self.tname(dst)} _d; memcpy(&_d, &_s, sizeof(_d));"
    return f"({{ {self.tname(src)} _s = {self.to_storage(v, src)}; {copy} {self.from_storage('_d', dst)}; }})"
