"""The fused attention kernel in CUDA C with inline PTX, rendered from an AttentionSpec (codegen/attention.py):
FlashAttention-2's forward pass on mma.sync.m16n8k16.

A threadgroup of 4 warps owns 64 or 128 query rows (one or two 16-row tiles a warp: `m_tiles`) of one (*lead) index.
Its q rows go to registers once; then it walks the keys 64 at a time, the next block's k and v rows copied into shared
memory (cp.async, two buffers) while it works on this one:
- S = q k^T on the tensor cores (k's rows are mma's column-major B as they lie: plain ldmatrix);
- per row, the running max m and sum l (online softmax): P = exp2(S * scale * log2 e - m), the accumulators and l
  rescaled by exp2(m_old - m) when the max grows;
- O += P v (P's accumulator fragments are mma's A fragments once packed to 16 bits; v's rows need ldmatrix.trans).
At the end O / l is stored. Under a causal mask a threadgroup stops at its last row's key and masks only the diagonal
block; the threadgroups with the most keys start first. Shared-memory rows are padded by 16 bytes, so ldmatrix's 8
rows fall on distinct banks. Rows past L or S are zero-filled by the copy and masked, so any L and S work.
"""
from __future__ import annotations
import math
from dataclasses import dataclass
from alloy.helpers import prod
from alloy.codegen.attention import AttentionSpec

BLOCK_N, THREADS = 64, 128

def m_tiles(s: AttentionSpec) -> int:
  """The 16-row mma tiles of queries a warp owns: two where D's registers allow (D <= 64) and there are 1024 query rows
  or more, so that each k and v fragment read from shared memory serves both; else one (fewer rows would leave the
  larger threadgroups too few). H200, fp16, D 64, one tile -> two, alternated in one process (probe, 2026-12-04): 8 x 12
  x 1024 1.14x (142.4 -> 125.3 us), causal 1.05x (104.7 -> 99.8), 2 x 12 x 2048 1.10x, causal 4 x 12 x 2048 1.04x,
  causal 2 x 12 x 4096 1.05x; causal 8 x 12 x 333 0.90x (26.5 -> 29.2)."""
  return 2 if s.D <= 64 and s.L >= 1024 else 1

def block_m(s: AttentionSpec) -> int: return THREADS // 32 * 16 * m_tiles(s)   # query rows a threadgroup owns

@dataclass(frozen=True)
class AttentionKernel:
  name: str
  source: str
  grid: tuple
  block: tuple
  shared_bytes: int

def shared_bytes(s: AttentionSpec) -> int:
  """q's tile and two buffers of k's and v's, rows padded by 8 elements (16 bytes)."""
  return (block_m(s) + 4 * BLOCK_N) * (s.D + 8) * 2

def kernel_name(s: AttentionSpec) -> str:
  lead = "x".join(map(str, s.lead)) or "1"
  inside = s.out.row_stride != s.D   # heads_inside: rows of L x heads x D
  return f"attention_{s.dtype.name}_{lead}_{s.L}x{s.S}x{s.D}{'_causal' if s.causal else ''}{'_lhd' if inside else ''}"

def offsets(s: AttentionSpec) -> str:
  """C statements placing q, k and v's rows, the output's and the attn_mask's for lead index blockIdx.x."""
  names, layouts = ("q_at", "k_at", "v_at", "o_at", "m_at"), (*s.layouts, s.out) + ((s.attn_mask,) if s.attn_mask is not None else ())
  lines = ["long long " + ", ".join(f"{n} = {lay.offset}LL" for n, lay in zip(names, layouts)) + ", rest = blockIdx.x;"]
  for axis in reversed(range(len(s.lead))):
    strides = [lay.lead_strides[axis] for lay in layouts]
    if not any(strides): continue
    lines.append(f"{{ long long i = rest % {s.lead[axis]}; rest /= {s.lead[axis]}; "
                 + " ".join(f"{n} += i * {st}LL;" for n, st in zip(names, strides) if st) + " }")
  return "\n  ".join(lines)

def placement(s: AttentionSpec, T: str, block_m: int, block_n: int) -> str:
  """C statements placing a threadgroup's work: its first query row q0 (the blocks with the most keys first), the
  operands' and the output's rows for its lead index (qg, kg, vg, og, of element type T), and the key blocks of
  block_n it walks (`blocks`: under a causal mask up to its last row's key)."""
  qb, kb, vb = (f"buf{slot}" for slot in s.slots[:3])
  keys = f"min({s.S}, q0 + {block_m})" if s.causal else str(s.S)
  return f"""const int q0 = (gridDim.y - 1 - blockIdx.y) * {block_m};   // the blocks with the most keys first
  {offsets(s)}
  const {T}* qg = {qb} + q_at;
  const {T}* kg = {kb} + k_at;
  const {T}* vg = {vb} + v_at;
  {T}* og = out + o_at;
  const int blocks = ({keys} + {block_n - 1}) / {block_n};"""

def render_attention(s: AttentionSpec) -> AttentionKernel:
  name, D = kernel_name(s), s.D
  BM, MT = block_m(s), m_tiles(s)
  T = "__half" if s.dtype.name == "float16" else "__nv_bfloat16"
  ab = "f16" if s.dtype.name == "float16" else "bf16"
  pack = "__floats2half2_rn" if s.dtype.name == "float16" else "__floats2bfloat162_rn"
  params = ", ".join([f"{T}* __restrict__ out"] + [f"const {T}* __restrict__ buf{k}" for k in range(1, s.n_buffers)])
  q_rows, k_rows, v_rows = (lay.row_stride for lay in s.layouts)
  source = f"""#include <cuda_fp16.h>
#include <cuda_bf16.h>
#define INFINITY __int_as_float(0x7f800000)
extern "C" __device__ int alloy_dynamic_shared_bytes = {shared_bytes(s)};
#define D {D}
#define LDS {D + 8}
#define MT {MT}
typedef {T} T;
__device__ __forceinline__ unsigned smem_at(const void* p) {{ return (unsigned)__cvta_generic_to_shared(p); }}
__device__ __forceinline__ void copy16(T* dst, const T* src, bool inside) {{   // zero-fills where !inside
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n" :: "r"(smem_at(dst)), "l"(src), "r"(inside ? 16 : 0));
}}
#define LDSM(r, p, how) asm volatile("ldmatrix.sync.aligned.m8n8.x4" how ".shared.b16 {{%0,%1,%2,%3}}, [%4];\\n" \\
  : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_at(p)))
__device__ __forceinline__ void ldsm(unsigned* r, const T* p) {{ LDSM(r, p, ""); }}
__device__ __forceinline__ void ldsm_trans(unsigned* r, const T* p) {{ LDSM(r, p, ".trans"); }}
__device__ __forceinline__ void mma(float* c, const unsigned* a, unsigned b0, unsigned b1) {{
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.{ab}.{ab}.f32 {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, {{%0,%1,%2,%3}};\\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3]) : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}}
__device__ __forceinline__ float exp2_fast(float x) {{ float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }}
__device__ __forceinline__ unsigned pack(float lo, float hi) {{ auto h = {pack}(lo, hi); return *(unsigned*)&h; }}
// rows [r0, r0 + ROWS) of one operand (row stride rs) into a tile of shared memory; rows past `limit` read as zeros
template <int ROWS> __device__ __forceinline__ void load_rows(T* tile, const T* g, int r0, long long rs, int limit) {{
  #pragma unroll
  for (int c = threadIdx.x; c < ROWS * (D / 8); c += {THREADS}) {{
    int r = c / (D / 8), col = c % (D / 8) * 8;
    bool inside = r0 + r < limit;
    copy16(tile + r * LDS + col, inside ? g + (r0 + r) * rs + col : g, inside);
  }}
}}

extern "C" __global__ void __launch_bounds__({THREADS}) {name}({params}) {{
  extern __shared__ __align__(16) unsigned char shared[];
  T* sq = (T*)shared;
  T* sk = sq + {BM} * LDS;
  T* sv = sk + 2 * {BLOCK_N} * LDS;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  {placement(s, "T", BM, BLOCK_N)}
  load_rows<{BM}>(sq, qg, q0, {q_rows}, {s.L});
  load_rows<{BLOCK_N}>(sk, kg, 0, {k_rows}, {s.S});
  load_rows<{BLOCK_N}>(sv, vg, 0, {v_rows}, {s.S});
  asm volatile("cp.async.commit_group;\\n");
  unsigned qa[MT][D / 16][4];
  float o[MT][D / 8][4];
  float m[MT][2], l[MT][2];
  #pragma unroll
  for (int i = 0; i < MT; i++) {{
    m[i][0] = m[i][1] = -INFINITY; l[i][0] = l[i][1] = 0.0f;
    #pragma unroll
    for (int d = 0; d < D / 8; d++) o[i][d][0] = o[i][d][1] = o[i][d][2] = o[i][d][3] = 0.0f;
  }}
  const int row = q0 + warp * 16 * MT + g;   // this thread's rows: row + 16i and row + 16i + 8 for each m tile i
  for (int nb = 0; nb < blocks; nb++) {{
    const int buf = nb & 1, n0 = nb * {BLOCK_N};
    if (nb + 1 < blocks) {{
      load_rows<{BLOCK_N}>(sk + (buf ^ 1) * {BLOCK_N} * LDS, kg, n0 + {BLOCK_N}, {k_rows}, {s.S});
      load_rows<{BLOCK_N}>(sv + (buf ^ 1) * {BLOCK_N} * LDS, vg, n0 + {BLOCK_N}, {v_rows}, {s.S});
    }}
    asm volatile("cp.async.commit_group;\\n");
    asm volatile("cp.async.wait_group 1;\\n" ::: "memory");
    __syncthreads();
    if (nb == 0) {{
      #pragma unroll
      for (int i = 0; i < MT; i++)
        #pragma unroll
        for (int kk = 0; kk < D / 16; kk++) ldsm(qa[i][kk], sq + ((warp * MT + i) * 16 + (lane & 15)) * LDS + kk * 16 + (lane >> 4) * 8);
    }}
    const T* ks = sk + buf * {BLOCK_N} * LDS;
    const T* vs = sv + buf * {BLOCK_N} * LDS;
    float s[MT][8][4];
    #pragma unroll
    for (int i = 0; i < MT; i++)
      #pragma unroll
      for (int j = 0; j < 8; j++) s[i][j][0] = s[i][j][1] = s[i][j][2] = s[i][j][3] = 0.0f;
    #pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {{
      #pragma unroll
      for (int j = 0; j < 8; j += 2) {{
        unsigned b[4];
        ldsm(b, ks + (j * 8 + (lane & 7) + ((lane >> 4) << 3)) * LDS + kk * 16 + ((lane >> 3) & 1) * 8);
        #pragma unroll
        for (int i = 0; i < MT; i++) {{ mma(s[i][j], qa[i][kk], b[0], b[1]); mma(s[i][j + 1], qa[i][kk], b[2], b[3]); }}
      }}
    }}
    const bool edge = n0 + {BLOCK_N} > {s.S}{f" || n0 + {BLOCK_N - 1} > q0" if s.causal else ""};
    unsigned pa[MT][{BLOCK_N // 16}][4];
    #pragma unroll
    for (int i = 0; i < MT; i++) {{
      float top[2] = {{m[i][0], m[i][1]}};
      #pragma unroll
      for (int j = 0; j < 8; j++) {{
        #pragma unroll
        for (int e = 0; e < 4; e++) {{
          float x = s[i][j][e] * {s.scale * math.log2(math.e)!r}f;
          const int key = n0 + j * 8 + 2 * t + (e & 1);
          if (edge && (key >= {s.S}{" || key > row + 16 * i + (e >> 1) * 8" if s.causal else ""})) x = -INFINITY;
          s[i][j][e] = x;
          top[e >> 1] = fmaxf(top[e >> 1], x);
        }}
      }}
      float base[2], sum[2] = {{0.0f, 0.0f}};
      #pragma unroll
      for (int r = 0; r < 2; r++) {{
        top[r] = fmaxf(top[r], __shfl_xor_sync(0xffffffff, top[r], 1));
        top[r] = fmaxf(top[r], __shfl_xor_sync(0xffffffff, top[r], 2));
        base[r] = top[r] == -INFINITY ? 0.0f : top[r];   // a row that has seen no key yet: exp2(-inf) is 0, not NaN
        const float rescale = exp2_fast(m[i][r] - base[r]);
        m[i][r] = top[r];
        l[i][r] *= rescale;
        #pragma unroll
        for (int d = 0; d < D / 8; d++) {{ o[i][d][2 * r] *= rescale; o[i][d][2 * r + 1] *= rescale; }}
      }}
      #pragma unroll
      for (int j = 0; j < 8; j++) {{
        #pragma unroll
        for (int e = 0; e < 4; e++) {{ s[i][j][e] = exp2_fast(s[i][j][e] - base[e >> 1]); sum[e >> 1] += s[i][j][e]; }}
      }}
      l[i][0] += sum[0]; l[i][1] += sum[1];
      #pragma unroll
      for (int kk = 0; kk < {BLOCK_N // 16}; kk++) {{
        pa[i][kk][0] = pack(s[i][2 * kk][0], s[i][2 * kk][1]); pa[i][kk][1] = pack(s[i][2 * kk][2], s[i][2 * kk][3]);
        pa[i][kk][2] = pack(s[i][2 * kk + 1][0], s[i][2 * kk + 1][1]); pa[i][kk][3] = pack(s[i][2 * kk + 1][2], s[i][2 * kk + 1][3]);
      }}
    }}
    #pragma unroll
    for (int kk = 0; kk < {BLOCK_N // 16}; kk++) {{
      #pragma unroll
      for (int d = 0; d < D / 8; d += 2) {{
        unsigned b[4];
        ldsm_trans(b, vs + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * LDS + d * 8 + (lane >> 4) * 8);
        #pragma unroll
        for (int i = 0; i < MT; i++) {{ mma(o[i][d], pa[i][kk], b[0], b[1]); mma(o[i][d + 1], pa[i][kk], b[2], b[3]); }}
      }}
    }}
    __syncthreads();   // every warp is done with this buffer before the next block's copy refills it
  }}
  #pragma unroll
  for (int i = 0; i < MT; i++)
    #pragma unroll
    for (int r = 0; r < 2; r++) {{
      float li = l[i][r];
      li += __shfl_xor_sync(0xffffffff, li, 1);
      li += __shfl_xor_sync(0xffffffff, li, 2);
      const float inv = 1.0f / li;
      const int at_row = row + 16 * i + r * 8;
      if (at_row < {s.L}) {{
        T* at = og + (long long)at_row * {s.out.row_stride} + 2 * t;
        #pragma unroll
        for (int d = 0; d < D / 8; d++) *(unsigned*)(at + d * 8) = pack(o[i][d][2 * r] * inv, o[i][d][2 * r + 1] * inv);
      }}
    }}
}}
"""
  return AttentionKernel(name, source, (prod(s.lead), -(-s.L // BM), 1), (THREADS, 1, 1), shared_bytes(s))
