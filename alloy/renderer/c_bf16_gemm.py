"""C for the CPU's bfloat16 matmul on AVX512-BF16's pair dot products (`vdpbf16ps`: 32 bf16 products a vector
instruction, summed in pairs into 16 float32 accumulators, twice the float32 FMA's rate), rendered whole from a
`BF16Gemm`: C[b] = A[b] @ B[b], bf16 operands, float32 accumulation, bf16 output stored contiguous.

Work is split into items of (batch element, 32-column panel of B, block of MC rows), a contiguous range of them per
thread (the CPU queue's parallel range). An item packs its panel of B (unless the item before it on that thread had
the same one) as K/2 rows of 32 bf16 pairs, (k, k + 1) of a column in one 32-bit word, zero past N and past an odd K,
so a k-pair step is two 64-byte loads; A's rows are read in place, a k-pair of a row one 32-bit word broadcast to
every lane (A must be contiguous along K). The register tile is MR rows by the panel's 32 columns: 2 MR
accumulators. Rows past M in the last tile read the last row and are not stored.

Where B lies along K (nn.Linear's weight) and A has at most DOT_ROWS rows (a decode step's), the dot kernel runs
instead: no packing, an item per DN rows of B, tiles of DM rows of A by them, each output a vector of pair dot products
along K summed across its lanes at the end (the panels' packing was most of the work there: 8x4096x4096 5.7 -> 1.9
ms on the 2-core VM, 64 rows 10.1 -> 6.7; at 128 rows and more the panels win).

The instruction treats denormal inputs as zero and flushes denormal sums (bf16 denormals lie below 1.2e-38); outputs
are rounded to bf16 as the other CPU kernels round (to nearest even, NaN kept NaN).
"""
from __future__ import annotations
from dataclasses import dataclass
from alloy.renderer.c import BFLOAT16_HELPERS

NR, MR, MC = 32, 8, 256   # a panel's columns (two vectors of 16), the register tile's rows, an item's rows
DOT_ROWS = 64             # at most this many rows of A, where B lies along K: the dot kernel (no packing)
DM, DN = 4, 4             # the dot kernel's tile: rows of A by rows of B (B's columns when stored K-major)

@dataclass(frozen=True)
class BF16Gemm:
  """C[batch, M, N] = A[batch, M, K] @ B[batch, K, N]. Strides and offsets in elements: A's rows `a_row` apart (K
  contiguous), B's `b_k` along K and `b_n` along N; a batch stride of 0 shares the operand across the batch. A and B
  are the kernel's buffers `a_slot` and `b_slot` (C is buffer 0; one buffer may be both operands)."""
  batch: int
  M: int
  N: int
  K: int
  a_row: int
  a_batch: int
  a_offset: int
  b_k: int
  b_n: int
  b_batch: int
  b_offset: int
  a_slot: int = 1
  b_slot: int = 2

  @property
  def dot(self) -> bool:
    """Whether the dot kernel computes it: B stored along K (nn.Linear's weight) and few rows of A, where packing B's
    panels would be most of the work."""
    return self.b_k == 1 and self.M <= DOT_ROWS
  @property
  def items(self) -> int:
    if self.dot: return self.batch * -(-self.N // DN)
    return self.batch * -(-self.N // NR) * -(-self.M // MC)
  @property
  def flops(self) -> int: return 2 * self.batch * self.M * self.N * self.K

def kernel_name(g: BF16Gemm) -> str:
  return f"bf16_gemm_{g.batch}x{g.M}x{g.N}x{g.K}_a{g.a_row}_b{g.b_k}x{g.b_n}"

def _tile(a_row: int) -> str:
  """The register tile's k-pair loop over the `rows` (at most MR) rows of A at `arow`, `a_row` elements apart."""
  lines = [f"const uint16_t* a{r} = arow + (long long)({r} < rows ? {r} : rows - 1) * {a_row};" for r in range(MR)]
  acc = [f"__m512 c{r}0 = _mm512_setzero_ps(), c{r}1 = _mm512_setzero_ps();" for r in range(MR)]
  step = "\n".join(f"        {{ __m512i x = _mm512_set1_epi32((int)pair(a{r}, kp)); c{r}0 = _mm512_dpbf16_ps(c{r}0, (__m512bh)x, (__m512bh)b0);"
                   f" c{r}1 = _mm512_dpbf16_ps(c{r}1, (__m512bh)x, (__m512bh)b1); }}" for r in range(MR))
  odd = "\n".join(f"        {{ __m512i x = _mm512_set1_epi32((int)a{r}[K - 1]); c{r}0 = _mm512_dpbf16_ps(c{r}0, (__m512bh)x, (__m512bh)b0);"
                  f" c{r}1 = _mm512_dpbf16_ps(c{r}1, (__m512bh)x, (__m512bh)b1); }}" for r in range(MR))
  store = "\n".join(f"      if ({r} < rows) store_row(crow + (long long){r} * N, c{r}0, c{r}1, cols);" for r in range(MR))
  return ("      " + "\n      ".join(lines + acc) + "\n"
          "      for (int kp = 0; kp < K / 2; kp++) {\n"
          "        const __m512i b0 = _mm512_load_si512(panel + kp * 32), b1 = _mm512_load_si512(panel + kp * 32 + 16);\n"
          f"{step}\n      }}\n"
          "      if (K & 1) {\n"
          "        const __m512i b0 = _mm512_load_si512(panel + (K / 2) * 32), b1 = _mm512_load_si512(panel + (K / 2) * 32 + 16);\n"
          f"{odd}\n      }}\n{store}")

def _pack(g: BF16Gemm) -> str:
  """`pack(panel, b, cols)`: the panel of `cols` (at most 32) columns starting at b as K/2 (+1) rows of 32 words, (B[k][n],
  B[k + 1][n]) per column, zero past the columns and past K. Where B lies along K (nn.Linear's weight) each column's
  pair is one 32-bit word, copied 16 pairs (a cache line) of a column at a time into 16 rows of the panel; where it
  lies along N, two rows' 16 columns are widened to 32 bits and merged a vector at a time; a word at a time elsewhere,
  and for an odd K's last pair or a partial panel along N."""
  scalar = f"""for (int j = 0; j < 32; j++) {{
      const long long at = (long long)(2 * kp) * {g.b_k} + (long long)j * {g.b_n};
      const uint32_t lo = j < cols ? b[at] : 0, hi = j < cols && 2 * kp + 1 < K ? b[at + {g.b_k}] : 0;
      panel[kp * 32 + j] = lo | hi << 16;
    }}"""
  if g.b_k == 1:   # K-major: 16 pairs of each column at a time (one 64-byte line), stored into 16 rows of the panel
    return f"""static void pack(uint32_t* panel, const uint16_t* b, int cols) {{
  for (int kp0 = 0; kp0 < K / 2; kp0 += 16) {{
    const int kn = K / 2 - kp0 < 16 ? K / 2 - kp0 : 16;
    for (int j = 0; j < 32; j++) {{
      const uint16_t* src = b + (long long)j * {g.b_n} + 2 * kp0;
      for (int q = 0; q < kn; q++) {{ uint32_t w = 0; if (j < cols) memcpy(&w, src + 2 * q, 4); panel[(kp0 + q) * 32 + j] = w; }}
    }}
  }}
  if (K & 1) for (int j = 0; j < 32; j++) panel[(K / 2) * 32 + j] = j < cols ? b[(long long)j * {g.b_n} + K - 1] : 0;
}}"""
  if g.b_n == 1:   # rows 2kp and 2kp + 1, 16 columns at a time, widened to 32 bits and merged
    fast = f"""for (int h = 0; h < 2; h++) {{
        const __m512i lo = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(b + (long long)(2 * kp) * {g.b_k} + 16 * h)));
        const __m512i hi = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)(b + (long long)(2 * kp + 1) * {g.b_k} + 16 * h)));
        _mm512_store_si512(panel + kp * 32 + 16 * h, _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16)));
      }}"""
    cond = "cols == 32 && 2 * kp + 1 < K"
  else: fast, cond = "", "0"
  return f"""static void pack(uint32_t* panel, const uint16_t* b, int cols) {{
  for (int kp = 0; kp < (K + 1) / 2; kp++) {{
    if ({cond}) {{ {fast} }}
    else {scalar}
  }}
}}"""

def render_bf16_gemm(g: BF16Gemm, name: str | None = None) -> str:
  """The kernel's C source: the CPU ABI of renderer/c.py (an entry point taking the buffers' addresses and the item
  range, and the length of its parallel range)."""
  name = name or kernel_name(g)
  return f"""#include <immintrin.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#define M {g.M}
#define N {g.N}
#define K {g.K}
const int32_t {name}_parallel_range = {g.items};
{BFLOAT16_HELPERS}{_dot_body(g, name) if g.dot else _panel_body(g, name)}"""

def _panel_body(g: BF16Gemm, name: str) -> str:
  """The packed-panel kernel: per item a panel of B (packed unless the item before had it) and a block of MC rows of
  A, in register tiles of MR rows by the panel's 32 columns."""
  np_, mb = -(-g.N // NR), -(-g.M // MC)
  return f"""static inline uint32_t pair(const uint16_t* row, int kp) {{ uint32_t w; memcpy(&w, row + 2 * kp, 4); return w; }}
// alloy_float_to_bfloat16, 16 lanes at once
static inline __m256i to_bf16(__m512 v) {{
  const __m512i u = _mm512_castps_si512(v);
  const __m512i r = _mm512_srli_epi32(_mm512_add_epi32(_mm512_add_epi32(u, _mm512_set1_epi32(0x7FFF)),
                                                         _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1))), 16);
  const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
  return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(r, nan, _mm512_set1_epi32(0x7FC0)));
}}
static inline void store_row(uint16_t* c, __m512 v0, __m512 v1, int cols) {{
  __m256i h0 = to_bf16(v0), h1 = to_bf16(v1);
  if (cols >= 32) {{ _mm256_storeu_si256((__m256i*)c, h0); _mm256_storeu_si256((__m256i*)(c + 16), h1); return; }}
  uint16_t tmp[32];
  _mm256_storeu_si256((__m256i*)tmp, h0); _mm256_storeu_si256((__m256i*)(tmp + 16), h1);
  memcpy(c, tmp, cols * 2);
}}
{_pack(g)}
void {name}(void *const *args, const int32_t *range) {{
  uint16_t* C = (uint16_t*)args[0];
  const uint16_t* A = (const uint16_t*)args[{g.a_slot}] + {g.a_offset};
  const uint16_t* B = (const uint16_t*)args[{g.b_slot}] + {g.b_offset};
  uint32_t* panel = (uint32_t*)aligned_alloc(64, (size_t)(K / 2 + 1) * 32 * 4);
  if (!panel) return;
  int packed = -1;   // the (batch element, panel) in `panel`
  for (int item = range[0]; item < range[1]; item++) {{
    const int p = item / {mb}, m_block = item % {mb}, bz = p / {np_}, n0 = p % {np_} * 32;
    const int cols = N - n0 < 32 ? N - n0 : 32;
    if (p != packed) {{ pack(panel, B + (long long)bz * {g.b_batch} + (long long)n0 * {g.b_n}, cols); packed = p; }}
    const int m_end = (m_block + 1) * {MC} < M ? (m_block + 1) * {MC} : M;
    for (int m0 = m_block * {MC}; m0 < m_end; m0 += {MR}) {{
      const int rows = m_end - m0 < {MR} ? m_end - m0 : {MR};
      const uint16_t* arow = A + (long long)bz * {g.a_batch} + (long long)m0 * {g.a_row};
      uint16_t* crow = C + (long long)bz * M * N + (long long)m0 * N + n0;
{_tile(g.a_row)}
    }}
  }}
  free(panel);
}}
"""

def _dot_body(g: BF16Gemm, name: str) -> str:
  """The dot kernel: per item DN rows of B (columns of C), per tile DM rows of A by them, each output one vector of
  pair dot products along K (the last partial 32 masked) summed across its lanes at the end."""
  pointers = (" ".join(f"const uint16_t* w{j} = w + (long long)(n0 + {j} < N ? n0 + {j} : N - 1) * {g.b_n};" for j in range(DN)),
              " ".join(f"const uint16_t* x{i} = x + (long long)(m0 + {i} < M ? m0 + {i} : M - 1) * {g.a_row};" for i in range(DM)))
  acc = " ".join(f"__m512 c{i}{j} = _mm512_setzero_ps();" for i in range(DM) for j in range(DN))
  def step(load: str) -> str:
    loads = " ".join(f"const __m512i a{i} = {load.format(p=f'x{i}')};" for i in range(DM)) + "\n        " + \
            " ".join(f"const __m512i b{j} = {load.format(p=f'w{j}')};" for j in range(DN))
    return loads + "\n        " + "\n        ".join(" ".join(f"c{i}{j} = _mm512_dpbf16_ps(c{i}{j}, (__m512bh)a{i}, (__m512bh)b{j});"
                                                             for j in range(DN)) for i in range(DM))
  store = "\n      ".join(f"if (m0 + {i} < M && n0 + {j} < N)\n        c[(long long)(m0 + {i}) * N + n0 + {j}] = "
                          f"alloy_float_to_bfloat16(_mm512_reduce_add_ps(c{i}{j}));" for i in range(DM) for j in range(DN))
  return f"""void {name}(void *const *args, const int32_t *range) {{
  uint16_t* C = (uint16_t*)args[0];
  const uint16_t* A = (const uint16_t*)args[{g.a_slot}] + {g.a_offset};
  const uint16_t* B = (const uint16_t*)args[{g.b_slot}] + {g.b_offset};
  for (int item = range[0]; item < range[1]; item++) {{
    const int bz = item / {-(-g.N // DN)}, n0 = item % {-(-g.N // DN)} * {DN};
    const uint16_t* w = B + (long long)bz * {g.b_batch};
    const uint16_t* x = A + (long long)bz * {g.a_batch};
    uint16_t* c = C + (long long)bz * M * N;
    {pointers[0]}
    for (int m0 = 0; m0 < M; m0 += {DM}) {{
      {pointers[1]}
      {acc}
      int k = 0;
      for (; k + 32 <= K; k += 32) {{
        {step("_mm512_loadu_si512({p} + k)")}
      }}
      if (k < K) {{
        const __mmask32 live = (__mmask32)((1u << (K - k)) - 1);
        {step("_mm512_maskz_loadu_epi16(live, {p} + k)")}
      }}
      {store}
    }}
  }}
}}
"""
