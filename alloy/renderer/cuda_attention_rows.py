"""The fused attention kernel for a few query rows (a decode step's one) or a boolean attn_mask, in CUDA C, rendered
from an AttentionSpec (codegen/attention.py): float16, bfloat16 and float32, accumulated in float32.

A threadgroup owns one query row of one (*lead) index. Its threads form groups of LANES; a group holds one key's row
across its lanes, 16 bytes a lane (D / LANES elements), and takes KEYS keys a step, the keys of neighbouring groups
side by side (a warp reads consecutive rows of k and v). Per step a lane loads its slices of the KEYS rows of k and
v at once, the dot products with q are summed across the group's lanes by shuffles, and the group keeps its own
running max, sum and slice of the output (online softmax). At the end the groups' partial results are combined
through shared memory, each rescaled by exp2(its max - the row's max). Keys past S, past the row under is_causal
(key j <= row i), or False in the mask are skipped; a row that sees no key is NaN, as PyTorch's softmax of nothing.
Every thread of a threadgroup runs the same number of steps, so the shuffles see full warps.
"""
from __future__ import annotations
from alloy.helpers import prod
from alloy.codegen.attention import AttentionSpec
from alloy.renderer.cuda_attention import AttentionKernel, kernel_name, offsets

KEYS = 4                   # keys a group takes a step: their loads are in flight together
MIN_THREADS, MAX_THREADS = 128, 1024
STEPS_PER_GROUP = 2        # threadgroups grow until each group has about this many steps to walk (long caches, few rows)

TYPES = {"float32": ("float", "", ""), "float16": ("__half", "__half2float", "__float2half_rn"),
         "bfloat16": ("__nv_bfloat16", "__bfloat162float", "__float2bfloat16_rn")}

def geometry(s: AttentionSpec) -> tuple[int, int, int]:
  """(elements a lane loads, lanes a key, threads a threadgroup): lanes a power of two covering D; threads enough
  for about STEPS_PER_GROUP steps a group, within [MIN_THREADS, MAX_THREADS]."""
  vec = 16 // s.dtype.itemsize
  lanes = 1
  while lanes * vec < s.D: lanes *= 2
  threads = MIN_THREADS
  while threads < MAX_THREADS and (threads // lanes) * KEYS * STEPS_PER_GROUP < s.S: threads *= 2
  return vec, lanes, threads

def render_attention_rows(s: AttentionSpec) -> AttentionKernel:
  vec, lanes, threads = geometry(s)
  groups = threads // lanes
  T, to_float, from_float = TYPES[s.dtype.name]
  name = kernel_name(s) + "_rows" + ("_mask" if s.attn_mask is not None else "")
  mask_slot = s.slots[3] if s.attn_mask is not None else None
  params = ", ".join([f"{T}* __restrict__ out"] + [f"const {'unsigned char' if k == mask_slot else T}* __restrict__ buf{k}"
                                                    for k in range(1, s.n_buffers)])
  qb, kb, vb = (f"buf{slot}" for slot in s.slots[:3])
  q_rows, k_rows, v_rows = (lay.row_stride for lay in s.layouts)
  limit = f"min({s.S}, row + 1)" if s.causal else str(s.S)
  seen = "j < limit"
  if s.attn_mask is not None:
    seen += f" && mask_row[(long long)j * {s.attn_mask.key_stride}]"
  source = f"""#include <cuda_fp16.h>
#include <cuda_bf16.h>
#define INFINITY __int_as_float(0x7f800000)
#define D {s.D}
#define VEC {vec}
#define LANES {lanes}
#define GROUPS {groups}
#define KEYS {KEYS}
typedef {T} T;
// VEC elements of a row (one 16-byte load) as floats
__device__ __forceinline__ void load(float* f, const T* p) {{
  uint4 raw = *(const uint4*)p;
  const T* e = (const T*)&raw;
  #pragma unroll
  for (int i = 0; i < VEC; i++) f[i] = {to_float}(e[i]);
}}

extern "C" __global__ void __launch_bounds__({threads}) {name}({params}) {{
  __shared__ float sm_m[GROUPS], sm_l[GROUPS];
  __shared__ float sm_o[GROUPS][LANES * VEC];
  const int g = threadIdx.x / LANES, lane = threadIdx.x % LANES, row = blockIdx.y;
  const bool active = lane * VEC < D;   // lanes past D (D / VEC not a power of two) hold zeros
  {offsets(s)}
  const T* kg = {kb} + k_at + lane * VEC;
  const T* vg = {vb} + v_at + lane * VEC;
  {f"const unsigned char* mask_row = buf{mask_slot} + m_at + (long long)row * {s.attn_mask.row_stride};" if mask_slot else ""}
  float q[VEC], o[VEC], m = -INFINITY, l = 0.0f;
  if (active) load(q, {qb} + q_at + (long long)row * {q_rows} + lane * VEC);
  #pragma unroll
  for (int i = 0; i < VEC; i++) {{ q[i] = active ? q[i] * {s.scale * 1.4426950408889634!r}f : 0.0f; o[i] = 0.0f; }}   // scale * log2(e): exp2 below
  const int limit = {limit};
  const int steps = (limit + GROUPS * KEYS - 1) / (GROUPS * KEYS);
  for (int step = 0; step < steps; step++) {{
    const int j0 = (step * GROUPS + g) * KEYS;
    float kf[KEYS][VEC], vf[KEYS][VEC], sc[KEYS];
    bool ok[KEYS];
    #pragma unroll
    for (int u = 0; u < KEYS; u++) {{
      const int j = j0 + u;
      ok[u] = {seen};
      if (ok[u] && active) {{ load(kf[u], kg + (long long)j * {k_rows}); load(vf[u], vg + (long long)j * {v_rows}); }}
      else {{
        #pragma unroll
        for (int i = 0; i < VEC; i++) kf[u][i] = vf[u][i] = 0.0f;
      }}
    }}
    #pragma unroll
    for (int u = 0; u < KEYS; u++) {{
      sc[u] = 0.0f;
      #pragma unroll
      for (int i = 0; i < VEC; i++) sc[u] = fmaf(q[i], kf[u][i], sc[u]);
    }}
    #pragma unroll
    for (int off = LANES / 2; off > 0; off >>= 1) {{
      #pragma unroll
      for (int u = 0; u < KEYS; u++) sc[u] += __shfl_xor_sync(0xffffffff, sc[u], off);
    }}
    float top = m;
    #pragma unroll
    for (int u = 0; u < KEYS; u++) {{ if (!ok[u]) sc[u] = -INFINITY; top = fmaxf(top, sc[u]); }}
    if (top == -INFINITY) continue;   // the group has seen no key yet (the same for all its lanes)
    const float rescale = exp2f(m - top);
    m = top;
    l *= rescale;
    #pragma unroll
    for (int i = 0; i < VEC; i++) o[i] *= rescale;
    #pragma unroll
    for (int u = 0; u < KEYS; u++) {{
      const float p = exp2f(sc[u] - top);
      l += p;
      #pragma unroll
      for (int i = 0; i < VEC; i++) o[i] = fmaf(p, vf[u][i], o[i]);
    }}
  }}
  if (lane == 0) {{ sm_m[g] = m; sm_l[g] = l; }}
  #pragma unroll
  for (int i = 0; i < VEC; i++) sm_o[g][lane * VEC + i] = o[i];
  __syncthreads();
  float top = -INFINITY;
  for (int k = 0; k < GROUPS; k++) top = fmaxf(top, sm_m[k]);
  for (int d = threadIdx.x; d < D; d += {threads}) {{
    float sum = 0.0f, acc = 0.0f;
    for (int k = 0; k < GROUPS; k++) {{
      const float w = exp2f(sm_m[k] - top);   // a group that saw nothing: 0; a row that saw nothing: NaN
      sum = fmaf(sm_l[k], w, sum);
      acc = fmaf(sm_o[k][d], w, acc);
    }}
    out[o_at + (long long)row * {s.out.row_stride} + d] = {from_float}(acc / sum);
  }}
}}
"""
  return AttentionKernel(name, source, (prod(s.lead), s.L, 1), (threads, 1, 1), 0)
