"""CUDA C (inline PTX) for Hopper's (sm_90a) matmul main loop, and the plain kernel built on it: C[b] = A[b] @ B[b] in
fp16 or bf16 with fp32 accumulators.

The main loop (`mainloop`, a device routine) is warp-specialised: warpgroup 0 is the producer, one thread of which
streams 64-wide K slices of A and B into a ring of shared-memory stages with the bulk tensor copy engine (TMA,
`cp.async.bulk.tensor`, 128-byte swizzle), each stage guarded by a pair of mbarriers (full: the copy engine's bytes
have landed; empty: the consumers are done reading); warpgroups 1.. are consumers, each multiplying 64 rows of the
block tile by the whole block width with `wgmma.mma_async` straight from shared memory (both operands through matrix
descriptors), keeping one wgmma group in flight while it releases the stage before. The copy engine zero-fills loads
past M, N and K, so partial tiles need no other care. Two kernels call it: `render_wgmma`'s plain matmul, whose
epilogue converts the accumulators and stores them straight from registers (masked at the edges), and the
Lowerer's WGMMA tile (codegen/tensor_core.py; renderer/cuda.py prints the call), whose epilogue is the kernel's own.

codegen/wgmma.py's `WGMMAGemm` says what is multiplied (sizes, dtype, each operand's major dimension and strides);
`render_wgmma` returns a `WGMMAKernel`: the source, the launch shape, the dynamic shared memory, and the two tensor
maps as plain data (`TensorMapSpec`), which the runtime encodes with the operands' addresses
(runtime/cuda/tensor_map.py). A Lowerer tile's module describes its maps itself (TENSOR_MAPS_SYMBOL).
"""
from __future__ import annotations
import functools, pathlib
from dataclasses import dataclass
from alloy.codegen.wgmma import BLOCK_K, Operand, WGMMAGemm, wgmma_unfit

WGMMA_K = 16            # K of one wgmma.m64nNk16
DTYPES = {"float16": ("__half", "f16"), "bfloat16": ("__nv_bfloat16", "bf16")}
# the first line of a source that needs the architecture-specific target (sm_90a: wgmma, setmaxnreg); the CUDA
# compiler reads it
ARCH_SPECIFIC = "// alloy: architecture-specific target"
TENSOR_MAPS_SYMBOL = "alloy_tensor_maps"   # a Lowerer WGMMA tile's module describes its tensor maps in this array

@dataclass(frozen=True)
class TensorMapSpec:
  """A 3-d tensor map as the copy engine sees it: dims and box inner dimension first, strides in bytes of dims 1, 2."""
  dtype: str
  dims: tuple[int, int, int]
  strides: tuple[int, int]
  box: tuple[int, int, int]

@dataclass(frozen=True)
class WGMMAKernel:
  name: str
  source: str
  grid: tuple[int, int, int]
  block: tuple[int, int, int]
  shared: int
  maps: tuple[TensorMapSpec, TensorMapSpec]   # A's, then B's
  flops: int

def tensor_maps(g: WGMMAGemm) -> tuple[TensorMapSpec, TensorMapSpec]:
  def spec(op: Operand, rows: int, block_rows: int) -> TensorMapSpec:
    # dims inner first: (K, rows, batch) when K is contiguous, else (rows, K, batch); an operand shared by the batch
    # elements (or a batch of one) has a batch of one, whose stride is only a valid placeholder
    inner, outer = (g.K, rows) if op.k_major else (rows, g.K)
    batched = g.batch > 1 and op.batch_stride != 0
    batch_stride = op.batch_stride if batched else op.row_stride * outer
    box = (BLOCK_K, block_rows, 1) if op.k_major else (64, BLOCK_K, 1)
    return TensorMapSpec(g.dtype, (inner, outer, g.batch if batched else 1), (op.row_stride * 2, batch_stride * 2), box)
  return spec(g.a, g.M, g.block_m), spec(g.b, g.N, g.block_n)

@functools.lru_cache(None)
def device_helpers() -> str: return (pathlib.Path(__file__).parent / "wgmma.h").read_text()

def kernel_name(g: WGMMAGemm) -> str:
  major = lambda op: "k" if op.k_major else "mn"
  out = "_f32out" if g.out != g.dtype else ""
  return f"wgmma_{g.dtype}{out}_{g.batch}x{g.M}x{g.N}x{g.K}_{major(g.a)}{major(g.b)}_{g.block_m}x{g.block_n}s{g.stages}"

def _loads(op: Operand, which: int, tile: str, rows: int, row0: str, batched: bool) -> list[str]:
  """The producer's TMA copies of one operand's stage: one box when K is contiguous, else one per 64 rows."""
  bz = "bz" if batched and op.batch_stride else "0"
  if op.k_major: return [f"alloy_tma_load_3d({tile}, &maps[{which}], kb * {BLOCK_K}, {row0}, {bz}, full);"]
  return [f"alloy_tma_load_3d({tile} + {i * 64 * BLOCK_K * 2}, &maps[{which}], {row0} + {i * 64}, kb * {BLOCK_K}, {bz}, full);"
          for i in range(rows // 64)]

def _desc(op: Operand, start: str) -> str:
  """The wgmma descriptor of k-step kk of one operand's stage. K-major rows are 128 bytes (a swizzle row), so a
  k-step moves 32 bytes along the row and 8-row groups are 1024 bytes apart; MN-major stages are 64-row chunks of
  64 K-rows (8192 bytes apart: the leading offset), a k-step moves 16 K-rows, and 8 K-rows are 1024 bytes. Either
  way 64 rows of M (a consumer's share of A) take 8192 bytes."""
  if op.k_major: return f"alloy_wgmma_desc({start} + kk * 32, 16, 1024)"
  return f"alloy_wgmma_desc({start} + kk * 2048, 8192, 1024)"

def _mma(g: WGMMAGemm) -> str:
  n, ptx = g.block_n, DTYPES[g.dtype][1]
  regs = n // 2
  outs = ", ".join(f"%{i}" for i in range(regs))
  binds = ", ".join(f'"+f"(d[{i}])' for i in range(regs))
  ta, tb = int(not g.a.k_major), int(not g.b.k_major)
  return (f'asm volatile("{{\\n wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx}.{ptx} {{{outs}}}, %{regs}, %{regs + 1}, '
          f'1, 1, 1, {ta}, {tb};\\n}}" : {binds} : "l"(da), "l"(db));')

MAINLOOP = "alloy_wgmma_mainloop"

def _k_slice(g: WGMMAGemm, count: str, leader: str) -> str:
  """One K slice of a consumer warpgroup's main loop, the `count`th through the ring (kb counts this tile's slices):
  wait for its stage to fill, issue its wgmmas, and once the group before is done, its stage goes back to the
  producer (one arrival a warp, by the lane where `leader` holds)."""
  S = g.stages
  return f"""const auto s = {count} % {S};
    alloy_mbar_wait(alloy_smem_addr(&bars[s]), ({count} / {S}) & 1);
    const u32 sA = smem + s * {g.stage_bytes}, sB = sA + {g.block_m * BLOCK_K * 2};
    alloy_wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < {BLOCK_K // WGMMA_K}; kk++) {{
      const u64 da = {_desc(g.a, "sA + c * 8192")}, db = {_desc(g.b, "sB")};
      {_mma(g)}
    }}
    alloy_wgmma_commit();
    alloy_wgmma_wait<1>();   // the group before this one is done: its stage goes back to the producer
    if (kb > 0 && {leader}) alloy_mbar_arrive(alloy_smem_addr(&bars[{S} + ({count} - 1) % {S}]));"""

def mainloop(g: WGMMAGemm) -> str:
  """The device routine `MAINLOOP(maps, m0, n0, bz, d)`: the block tile at (m0, n0) of batch element bz into each
  consumer thread's block_n / 2 float32 accumulators `d` (m64nNk16's layout: warp w of consumer warpgroup c holds
  rows 64c + 16w + lane/4 (+8), lane%4 picks a column pair of each 8). Warpgroup 0 is the producer: one thread
  streams the K slices into the ring of stages; its threads then exit, so the code after the call (the epilogue)
  runs on the consumers only, and a barrier there counts the consumers' threads alone (bar.sync 1, not
  __syncthreads)."""
  loads = _loads(g.a, 0, "sA", g.block_m, "m0", g.batch > 1) + _loads(g.b, 1, "sB", g.block_n, "n0", g.batch > 1)
  return f"""static __device__ __forceinline__ void {MAINLOOP}(const alloy_tensor_map* __restrict__ maps, int m0, int n0, int bz, float* d) {{
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) u64 bars[{2 * g.stages}];   // full[s], then empty[s]
  const u32 smem = (alloy_smem_addr(smem_raw) + 1023) & ~1023u;   // 128-byte swizzled tiles want 1024-byte alignment
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  const int KB = {-(-g.K // BLOCK_K)};
  if (threadIdx.x == 0) {{
    for (int s = 0; s < {g.stages}; s++) {{   // full: the producer's one arrival; empty: one per consumer warp
      alloy_mbar_init(alloy_smem_addr(&bars[s]), 1);
      alloy_mbar_init(alloy_smem_addr(&bars[{g.stages} + s]), {4 * g.consumers});
    }}
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }}
  __syncthreads();
  if (wg == 0) {{   // producer: one thread feeds the ring, then the warpgroup leaves
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (tid == 0) {{
      alloy_prefetch_tensor_map(&maps[0]); alloy_prefetch_tensor_map(&maps[1]);
#pragma unroll 1
      for (int kb = 0; kb < KB; kb++) {{
        const int s = kb % {g.stages};
        if (kb >= {g.stages}) alloy_mbar_wait(alloy_smem_addr(&bars[{g.stages} + s]), (kb / {g.stages} - 1) & 1);
        const u32 full = alloy_smem_addr(&bars[s]), sA = smem + s * {g.stage_bytes}, sB = sA + {g.block_m * BLOCK_K * 2};
        alloy_mbar_expect_tx(full, {g.stage_bytes});
        {chr(10).join('        ' + s for s in loads).lstrip()}
      }}
    }}
    asm volatile("exit;");
  }}
  // consumer c: rows m0 + 64c .. + 63 of the block tile
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const int c = wg - 1;
#pragma unroll
  for (int i = 0; i < {g.block_n // 2}; i++) d[i] = 0.0f;
  // never unrolled: where K fits in the stages (KB <= {g.stages}) NVRTC unrolled this loop around the asynchronous
  // wgmmas and the Lowerer's tiles summed wrong (H200: a quarter of a 128x256x256 product off, every run alike)
#pragma unroll 1
  for (int kb = 0; kb < KB; kb++) {{
    {_k_slice(g, "kb", "tid % 32 == 0")}
  }}
  alloy_wgmma_wait<0>();
  // the accumulators are read only after the wait: a plain read of d has no dependence on the wait's asm
#pragma unroll
  for (int i = 0; i < {g.block_n // 2}; i++) asm volatile("" : "+f"(d[i]) :: "memory");
}}
"""

PERSISTENT = "alloy_wgmma_persistent"
# a persistent tile's registers a thread (setmaxnreg): the producer warpgroup, which runs the epilogue, and the
# consumers; what the one gives up the other takes from the 168 a thread of 384 threads start with
PRODUCER_REGISTERS, CONSUMER_REGISTERS = 72, 216
PAIRS = {"float16": ("__half", "__half2", "__floats2half2_rn"), "bfloat16": ("__nv_bfloat16", "__nv_bfloat162", "__floats2bfloat162_rn")}

def persistent(g: WGMMAGemm, tiles: int, groups: int, origin: tuple[str, str, str], staged: str, pad: int) -> str:
  """A persistent WGMMA tile's device routine `PERSISTENT(maps)` and the epilogue's hand-off helpers. One threadgroup
  an SM (`groups` of them) takes tiles blockIdx.x, blockIdx.x + groups, ... of `tiles`; `origin` gives a tile t's first
  row, first column and flat batch element as C expressions of t (tensor_core.tile_origin). The producer thread
  streams every tile's slices into the ring; the consumers multiply tile after tile, and after each wait for the
  epilogue to be done with the staged tile before them, store their accumulators there rounded to `staged` (fp16 or
  bf16; row r of the tile at r * (block_n + pad)) and go on. Warps 1-3 of the producer warpgroup return the staged
  tile's address at once and run the kernel's epilogue (the Lowerer's), calling alloy_staged_wait(iteration) before
  each tile and alloy_staged_release() after it; the consumers return after their last tile, whose epilogue they
  share (no main loop hides it); warp 0 leaves inside."""
  S, KB, SB, BN = g.stages, -(-g.K // BLOCK_K), g.stage_bytes, g.block_n
  T, pair_t, pair = PAIRS[staged]
  loads = _loads(g.a, 0, "sA", g.block_m, "m0", g.batch > 1) + _loads(g.b, 1, "sB", g.block_n, "n0", g.batch > 1)
  return f"""__shared__ __align__(8) u64 alloy_staged_bars[2];   // full: the consumers' 256 threads arrive; empty: the epilogue's 96
static __device__ __forceinline__ void alloy_staged_wait(int it) {{ alloy_mbar_wait(alloy_smem_addr(&alloy_staged_bars[0]), it & 1); }}
static __device__ __forceinline__ void alloy_staged_release() {{ alloy_mbar_arrive(alloy_smem_addr(&alloy_staged_bars[1])); }}
static __device__ __forceinline__ void alloy_tile_origin(int t, int& m0, int& n0, int& bz) {{
  m0 = {origin[0]}; n0 = {origin[1]}; bz = {origin[2]};
}}
static __device__ __forceinline__ {T}* {PERSISTENT}(const alloy_tensor_map* __restrict__ maps) {{
  extern __shared__ unsigned char smem_raw[];
  __shared__ __align__(8) u64 bars[{2 * S}];   // full[s], then empty[s]
  const u32 base = alloy_smem_addr(smem_raw), smem = (base + 1023) & ~1023u;   // 128-byte swizzled tiles want 1024-byte alignment
  const u32 staged_at = smem + {S * SB};   // the staged tile, behind the ring
  {T}* staged = ({T}*)(smem_raw + (staged_at - base));
  const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
  if (threadIdx.x == 0) {{
    for (int s = 0; s < {S}; s++) {{ alloy_mbar_init(alloy_smem_addr(&bars[s]), 1); alloy_mbar_init(alloy_smem_addr(&bars[{S} + s]), 8); }}
    alloy_mbar_init(alloy_smem_addr(&alloy_staged_bars[0]), 256);
    alloy_mbar_init(alloy_smem_addr(&alloy_staged_bars[1]), 96);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }}
  __syncthreads();
  if (wg == 0) {{
    asm volatile("setmaxnreg.dec.sync.aligned.u32 {PRODUCER_REGISTERS};");
    if (tid == 0) {{   // the producer: every tile's slices, in the consumers' order
      alloy_prefetch_tensor_map(&maps[0]); alloy_prefetch_tensor_map(&maps[1]);
      u32 p = 0;
#pragma unroll 1
      for (int t = blockIdx.x; t < {tiles}; t += {groups}) {{
        int m0, n0, bz; alloy_tile_origin(t, m0, n0, bz);
#pragma unroll 1
        for (int kb = 0; kb < {KB}; kb++, p++) {{
          const u32 s = p % {S};
          if (p >= {S}) alloy_mbar_wait(alloy_smem_addr(&bars[{S} + s]), (p / {S} - 1) & 1);
          const u32 full = alloy_smem_addr(&bars[s]), sA = smem + s * {SB}, sB = sA + {g.block_m * BLOCK_K * 2};
          alloy_mbar_expect_tx(full, {SB});
          {chr(10).join('          ' + line for line in loads).lstrip()}
        }}
      }}
    }}
    if (tid < 32) asm volatile("exit;");
    return staged;   // warps 1-3: the epilogue
  }}
  asm volatile("setmaxnreg.inc.sync.aligned.u32 {CONSUMER_REGISTERS};");
  const int c = wg - 1, lane = tid % 32;
  float d[{BN // 2}];
  int i = 0;
#pragma unroll 1
  for (int t = blockIdx.x; t < {tiles}; t += {groups}, i++) {{
#pragma unroll
    for (int q = 0; q < {BN // 2}; q++) d[q] = 0.0f;
    u32 p = i * {KB};
    // never unrolled (see {MAINLOOP})
#pragma unroll 1
    for (int kb = 0; kb < {KB}; kb++, p++) {{
      {_k_slice(g, "p", "lane == 0")}
    }}
    alloy_wgmma_wait<0>();
    if (lane == 0) alloy_mbar_arrive(alloy_smem_addr(&bars[{S} + (p - 1) % {S}]));
#pragma unroll
    for (int q = 0; q < {BN // 2}; q++) asm volatile("" : "+f"(d[q]) :: "memory");
    if (i > 0) alloy_mbar_wait(alloy_smem_addr(&alloy_staged_bars[1]), (i - 1) & 1);   // the epilogue is done with the last tile
    // st.shared: a generic store's address space would be resolved at run time, between one main loop and the next
    const u32 row = staged_at + ((c * 64 + (tid / 32) * 16 + lane / 4) * {BN + pad} + (lane % 4) * 2) * 2;
#pragma unroll
    for (int j = 0; j < {BN // 8}; j++) {{
      const {pair_t} top = {pair}(d[4 * j], d[4 * j + 1]), bottom = {pair}(d[4 * j + 2], d[4 * j + 3]);
      asm volatile("st.shared.b32 [%0], %1;" :: "r"(row + j * 16), "r"(*(const u32*)&top) : "memory");
      asm volatile("st.shared.b32 [%0], %1;" :: "r"(row + {16 * (BN + pad)} + j * 16), "r"(*(const u32*)&bottom) : "memory");
    }}
    alloy_mbar_arrive(alloy_smem_addr(&alloy_staged_bars[0]));
  }}
  return staged;   // the consumers: to the last tile's epilogue, beside warps 1-3
}}
"""

def render_wgmma(g: WGMMAGemm, name: str | None = None) -> WGMMAKernel:
  """The plain Hopper matmul: MAINLOOP, then the accumulators converted and stored straight from registers, masked
  where the tile passes the matrix's edge."""
  if (why := wgmma_unfit(g)): raise ValueError(f"the wgmma kernel cannot compute this matmul: {why}")
  name = name or kernel_name(g)
  T, O = DTYPES[g.dtype][0], "float" if g.out == "float32" else DTYPES[g.dtype][0]
  pair, pair_t, one = {"float16": ("__floats2half2_rn", "__half2", "__float2half_rn"), "float32": ("make_float2", "float2", ""),
                       "bfloat16": ("__floats2bfloat162_rn", "__nv_bfloat162", "__float2bfloat16_rn")}[g.out]
  mt, nt = g.tiles
  group = 8   # block tiles walk M in groups of 8, so the blocks in flight share B's and A's tiles in L2
  even = g.N % 2 == 0   # a pair of outputs is aligned only when every row starts on an even column
  src = f"""{ARCH_SPECIFIC}
#include <cuda_fp16.h>
#include <cuda_bf16.h>
{device_helpers()}
{mainloop(g)}
extern "C" __global__ void __launch_bounds__({g.threads}, 1) {name}({O}* __restrict__ C, const {T}* __restrict__ A,
    const {T}* __restrict__ B, const alloy_tensor_map* __restrict__ maps) {{
  const int pid = blockIdx.x, bz = blockIdx.y;
  const int first_m = pid / ({group} * {nt}) * {group}, gsize = min({mt} - first_m, {group});
  const int m0 = (first_m + pid % ({group} * {nt}) % gsize) * {g.block_m}, n0 = pid % ({group} * {nt}) / gsize * {g.block_n};
  float d[{g.block_n // 2}];
  {MAINLOOP}(maps, m0, n0, bz, d);
  const int c = threadIdx.x / 128 - 1, tid = threadIdx.x % 128;   // consumers only: the producer has left
  const int row = m0 + c * 64 + (tid / 32) * 16 + (tid % 32) / 4, col0 = n0 + (tid % 4) * 2;
  {O}* out = C + (long long)bz * {g.M * g.N};
#pragma unroll
  for (int j = 0; j < {g.block_n // 8}; j++) {{
    const int col = col0 + j * 8;
#pragma unroll
    for (int h = 0; h < 2; h++) {{
      const int r = row + h * 8;
      if (r >= {g.M} || col >= {g.N}) continue;
      {O}* p = out + (long long)r * {g.N} + col;
      {f"if (col + 1 < {g.N}) {{ *({pair_t}*)p = {pair}(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]); continue; }}" if even else ""}
      p[0] = {one}(d[4 * j + 2 * h]);
      if (col + 1 < {g.N}) p[1] = {one}(d[4 * j + 2 * h + 1]);
    }}
  }}
}}
"""
  return WGMMAKernel(name, src, (mt * nt, g.batch, 1), (g.threads, 1, 1), g.shared_bytes, tensor_maps(g), g.flops)
