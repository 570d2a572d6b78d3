"""The fused attention kernel for float32 in CUDA C, rendered from an AttentionSpec (codegen/attention.py): the same
online softmax as renderer/cuda_attention.py (FlashAttention-2's forward pass), but on the CUDA cores in exact float32,
as PyTorch computes float32 attention by default (no TF32).

A threadgroup of 128 threads owns BM query rows of one (*lead) index and walks the keys 64 at a time. Thread (ty, tx),
ty = tid / 8 and tx = tid % 8, holds rows ty + 16 i (i < R) and, of each key block, the scores of keys tx + 8 j (j < 8):
an R x 8 register tile of S = q k^T, read from shared memory as float4 runs along D. The 8 threads of a row sit in
one warp, so its max and sum are 3 shuffles. P goes through shared memory, and the same thread then accumulates its
rows of O += P v for columns 4 tx + 32 c (float4 runs of v's rows), so the per-row rescale never leaves the thread.
Shared-memory rows are padded (q and k by 4 floats, P by 8) so that the float4 reads of a warp fall on distinct banks.
One buffer each of k and v: the next block's k is copied (cp.async) while this block's softmax and P v run, its v
while the next scores run. Under a causal mask a threadgroup stops at its last row's key; the threadgroups with the
most keys start first. Rows past L or S are zero-filled by the copy and masked.
"""
from __future__ import annotations
from alloy.helpers import prod
from alloy.codegen.attention import F32_BLOCK_N as BLOCK_N, F32_THREADS as THREADS, AttentionSpec, f32_rows_per_thread, f32_shared_bytes
from alloy.renderer.cuda_attention import AttentionKernel, kernel_name, placement

def render_attention_f32(s: AttentionSpec) -> AttentionKernel:
  name, D, R = kernel_name(s), s.D, f32_rows_per_thread(s.D)
  BM = 16 * R
  params = ", ".join(["float* __restrict__ out"] + [f"const float* __restrict__ buf{k}" for k in range(1, s.n_buffers)])
  q_rows, k_rows, v_rows = (lay.row_stride for lay in s.layouts)
  mask = f"key >= {s.S}" + (" || key > q0 + ty + 16 * i" if s.causal else "")
  source = f"""#define INFINITY __int_as_float(0x7f800000)
extern "C" __device__ int alloy_dynamic_shared_bytes = {f32_shared_bytes(D)};
#define D {D}
#define QLD {D + 4}
#define PLD {BLOCK_N + 8}
__device__ __forceinline__ unsigned smem_at(const void* p) {{ return (unsigned)__cvta_generic_to_shared(p); }}
// rows [r0, r0 + n) of one operand (row stride rs) into a tile of shared memory (row stride ld); rows past `limit`
// read as zeros
__device__ __forceinline__ void load_rows(float* tile, int ld, int n, const float* g, int r0, long long rs, int limit) {{
  #pragma unroll
  for (int c = threadIdx.x; c < n * (D / 4); c += {THREADS}) {{
    int r = c / (D / 4), col = c % (D / 4) * 4;
    bool inside = r0 + r < limit;
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n" :: "r"(smem_at(tile + r * ld + col)),
                 "l"(inside ? g + (r0 + r) * rs + col : g), "r"(inside ? 16 : 0));
  }}
  asm volatile("cp.async.commit_group;\\n");
}}
#define WAIT_ALL_BUT_LATEST() asm volatile("cp.async.wait_group 1;\\n" ::: "memory")

extern "C" __global__ void __launch_bounds__({THREADS}) {name}({params}) {{
  extern __shared__ __align__(16) float shared[];
  float* sq = shared;
  float* sk = sq + {BM} * QLD;
  float* sv = sk + {BLOCK_N} * QLD;
  float* sp = sv + {BLOCK_N} * D;
  const int ty = threadIdx.x >> 3, tx = threadIdx.x & 7;
  {placement(s, "float", BM, BLOCK_N)}
  // copy groups stay in the order k, v, k, v, ... (empty past the last block), so "all but the latest" is always
  // the one needed next
  load_rows(sq, QLD, {BM}, qg, q0, {q_rows}, {s.L});
  load_rows(sk, QLD, {BLOCK_N}, kg, 0, {k_rows}, {s.S});
  load_rows(sv, D, {BLOCK_N}, vg, 0, {v_rows}, {s.S});
  float o[{R}][D / 8], m[{R}], l[{R}];
  #pragma unroll
  for (int i = 0; i < {R}; i++) {{
    m[i] = -INFINITY; l[i] = 0.0f;
    #pragma unroll
    for (int c = 0; c < D / 8; c++) o[i][c] = 0.0f;
  }}
  for (int nb = 0; nb < blocks; nb++) {{
    const int n0 = nb * {BLOCK_N};
    WAIT_ALL_BUT_LATEST();   // q and this block's k
    __syncthreads();
    float s[{R}][8];
    #pragma unroll
    for (int i = 0; i < {R}; i++) {{
      #pragma unroll
      for (int j = 0; j < 8; j++) s[i][j] = 0.0f;
    }}
    #pragma unroll
    for (int d = 0; d < D; d += 4) {{
      float4 qv[{R}], kv[8];
      #pragma unroll
      for (int i = 0; i < {R}; i++) qv[i] = *(const float4*)(sq + (ty + 16 * i) * QLD + d);
      #pragma unroll
      for (int j = 0; j < 8; j++) kv[j] = *(const float4*)(sk + (tx + 8 * j) * QLD + d);
      #pragma unroll
      for (int i = 0; i < {R}; i++) {{
        #pragma unroll
        for (int j = 0; j < 8; j++)
          s[i][j] = fmaf(qv[i].w, kv[j].w, fmaf(qv[i].z, kv[j].z, fmaf(qv[i].y, kv[j].y, fmaf(qv[i].x, kv[j].x, s[i][j]))));
      }}
    }}
    __syncthreads();   // every warp has read k: the next block's may land
    if (nb + 1 < blocks) load_rows(sk, QLD, {BLOCK_N}, kg, n0 + {BLOCK_N}, {k_rows}, {s.S});
    else asm volatile("cp.async.commit_group;\\n");
    const bool edge = n0 + {BLOCK_N} > {s.S}{f" || n0 + {BLOCK_N - 1} > q0" if s.causal else ""};
    #pragma unroll
    for (int i = 0; i < {R}; i++) {{
      float top = m[i];
      #pragma unroll
      for (int j = 0; j < 8; j++) {{
        float x = s[i][j] * {s.scale * 1.4426950408889634!r}f;   // scale * log2(e): exp2 below
        const int key = n0 + tx + 8 * j;
        if (edge && ({mask})) x = -INFINITY;
        s[i][j] = x;
        top = fmaxf(top, x);
      }}
      top = fmaxf(top, __shfl_xor_sync(0xffffffff, top, 1));
      top = fmaxf(top, __shfl_xor_sync(0xffffffff, top, 2));
      top = fmaxf(top, __shfl_xor_sync(0xffffffff, top, 4));
      const float base = top == -INFINITY ? 0.0f : top;   // a row that has seen no key yet: exp2(-inf) is 0, not NaN
      const float rescale = exp2f(m[i] - base);
      m[i] = top;
      l[i] *= rescale;
      #pragma unroll
      for (int c = 0; c < D / 8; c++) o[i][c] *= rescale;
      #pragma unroll
      for (int j = 0; j < 8; j++) {{
        const float p = exp2f(s[i][j] - base);
        l[i] += p;
        sp[(ty + 16 * i) * PLD + tx + 8 * j] = p;
      }}
    }}
    WAIT_ALL_BUT_LATEST();   // this block's v
    __syncthreads();         // and every row's P
    #pragma unroll 4
    for (int k = 0; k < {BLOCK_N}; k += 4) {{
      float4 pv[{R}];
      #pragma unroll
      for (int i = 0; i < {R}; i++) pv[i] = *(const float4*)(sp + (ty + 16 * i) * PLD + k);
      #pragma unroll
      for (int kk = 0; kk < 4; kk++) {{
        float4 vv[D / 32];
        #pragma unroll
        for (int c = 0; c < D / 32; c++) vv[c] = *(const float4*)(sv + (k + kk) * D + 4 * tx + 32 * c);
        #pragma unroll
        for (int i = 0; i < {R}; i++) {{
          const float p = kk == 0 ? pv[i].x : kk == 1 ? pv[i].y : kk == 2 ? pv[i].z : pv[i].w;
          #pragma unroll
          for (int c = 0; c < D / 32; c++) {{
            o[i][4 * c] = fmaf(p, vv[c].x, o[i][4 * c]);
            o[i][4 * c + 1] = fmaf(p, vv[c].y, o[i][4 * c + 1]);
            o[i][4 * c + 2] = fmaf(p, vv[c].z, o[i][4 * c + 2]);
            o[i][4 * c + 3] = fmaf(p, vv[c].w, o[i][4 * c + 3]);
          }}
        }}
      }}
    }}
    __syncthreads();   // every warp is done with v and P
    if (nb + 1 < blocks) load_rows(sv, D, {BLOCK_N}, vg, n0 + {BLOCK_N}, {v_rows}, {s.S});
    else asm volatile("cp.async.commit_group;\\n");
  }}
  #pragma unroll
  for (int i = 0; i < {R}; i++) {{
    l[i] += __shfl_xor_sync(0xffffffff, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffff, l[i], 2);
    l[i] += __shfl_xor_sync(0xffffffff, l[i], 4);
    const float inv = 1.0f / l[i];
    const int row = q0 + ty + 16 * i;
    if (row < {s.L}) {{
      float* at = og + (long long)row * {s.out.row_stride} + 4 * tx;
      #pragma unroll
      for (int c = 0; c < D / 32; c++)
        *(float4*)(at + 32 * c) = make_float4(o[i][4 * c] * inv, o[i][4 * c + 1] * inv, o[i][4 * c + 2] * inv, o[i][4 * c + 3] * inv);
    }}
  }}
}}
"""
  return AttentionKernel(name, source, (prod(s.lead), -(-s.L // BM), 1), (THREADS, 1, 1), f32_shared_bytes(D))
