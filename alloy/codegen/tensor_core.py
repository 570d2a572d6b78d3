"""Tensor-core tiles: the table TENSOR_CORE(axis, arg) indexes, what the validator checks of one, and where each
thread's accumulators lie (the lowering evaluates the epilogue there).

A kernel under TENSOR_CORE(axis, arg) is one threadgroup per BM x BN tile of the output (per batch element), its warps
each owning a WM x WN part of it as m16n8k16 `mma.sync` tiles (accumulating in float32 registers). The K loop
copies BK-wide slices of both operands into shared memory with `cp.async` (16 bytes per copy, zero-filled past the
edges; element by element where an operand's rows are not 16-byte aligned), `stages` slices in flight
(STAGE(axis, depth) sets another depth), and reads them with `ldmatrix` (`.trans` for an operand whose contiguous axis
is not the reduction). Each operand's slice is stored in rows along its contiguous axis with an XOR swizzle of its
16-byte chunks, so neither the copies nor the ldmatrix reads conflict on banks. Shapes the tile does not divide are
masked: the copies read zeros past the edges and each accumulator's epilogue and store are guarded.

Metal's tiles (instruction SIMDGROUP_8X8: `simdgroup_matrix<T, 8, 8>`, Apple7 and newer) take the same plan: one
threadgroup per BM x BN tile, each SIMD group of 32 threads owning WM x WN of it as (WM/8) x (WN/8) float32
simdgroup_matrix accumulators. Each BK-wide slice of both operands is copied by all threads into threadgroup memory
(row-major, zeros past the edges, any strides: transposed and batched operands alike), then read with
`simdgroup_load` and multiplied with `simdgroup_multiply_accumulate` (fp16 or fp32 operands, fp32 accumulators);
one slice at a time (stages 1: Metal has no cp.async). At the end the accumulators are stored to threadgroup memory
and each thread takes BM*BN/threads of them, pairs of row neighbours (accumulator_index), where the epilogue runs
(renderer/metal_simdgroup.py prints the loop).

CUDA's float32 tiles (instruction SIMT_F32: the CUDA cores' fused multiply-adds, exact float32, no tensor core) take
the same plan without matrix instructions: one threadgroup per BM x BN tile, each thread owning a WM x WN register tile
of it (WM and WN count rows and columns of one thread, not of a warp), as 4 x 4 blocks spread BM / (WM/4) rows and
BN / (WN/4) columns apart, so the threads of a warp read neighbouring 16-byte words of shared memory. BK-wide slices
of both operands go through registers into two shared-memory buffers (one filled while the other is read), each
stored K-major (rows of BM and BN values: an operand whose contiguous axis is K is transposed on the way), so every
step of the reduction reads WM/4 + WN/4 aligned 16-byte words and does WM x WN multiply-adds
(renderer/cuda_mma.py's `simt_tile`).

Hopper's tiles (instruction WGMMA: `wgmma.mma_async` m64nNk16, sm_90a) take the plain Hopper matmul's main loop
(codegen/wgmma.py's rules, renderer/cuda_wgmma.py's `mainloop`): a BM x BN tile per threadgroup of 128 * (BM/64 + 1)
threads, warpgroup 0 the producer (one thread streams 64-wide K slices of both operands into a ring of `stages`
shared-memory stages with the bulk tensor copy engine, through tensor maps the runtime encodes per launch), each
other warpgroup multiplying 64 rows by all BN columns into BN/2 float32 registers a thread. The producer's threads
leave after the loop, so the epilogue runs on the consumers (lanes 128 and up) and its barriers count those alone.

A persistent WGMMA tile (`persistent`) takes a matmul the graph rounds to 16 bits before its epilogue reads it
(`MatmulSpec.rounded`): one threadgroup an SM (`launch_groups`) walks the tiles `tile_origin` orders, the producer
thread streaming every tile's slices into the ring, the consumers multiplying one tile after another. After each they
store the rounded tile in shared memory behind the ring (BM rows of BN + STAGE_PAD values) and go on to the next, while
warps 1-3 of the producer warpgroup (lanes 32-127, `EPILOGUE_LANES`) evaluate the epilogue from it and store the
output: the epilogue costs the main loop nothing but the last tile's (gelu(a @ b + bias) fp16 4096^3 on an H200,
probe: 199.5 us against 215 for the consumers' own epilogue; torch's addmm + gelu 218).

`axis` is the output axis holding N (the tile's columns). `arg` indexes TILES:
"""
from __future__ import annotations
import dataclasses
from dataclasses import dataclass
from alloy.helpers import float32_matmul_precision, prod
from alloy.ir import symbolic as sym
from alloy.caps import DeviceCaps
from alloy.codegen.matmul import MatmulSpec
from alloy.codegen.wgmma import gemm_of

MMA_SYNC = "mma.sync.m16n8k16"   # DeviceCaps.tensor_cores names it where the device has it (sm_80 and newer)
SIMDGROUP_8X8 = "simdgroup_matrix.8x8"   # Metal's simdgroup matrices (Apple7 and newer)
SIMT_F32 = "simt.f32"   # CUDA's float32 tiles on the CUDA cores (every CUDA device)
WGMMA = "wgmma.m64nNk16"   # Hopper's warpgroup matrix instructions (sm_90a), fed by the copy engine
PRODUCER_THREADS = 128     # a WGMMA tile's first warpgroup: it feeds the stages and leaves before the epilogue
EPILOGUE_LANES = range(32, PRODUCER_THREADS)   # a persistent WGMMA tile's epilogue threads: the producer warpgroup's warps 1-3
STAGE_PAD = 8   # 16-bit elements past each row of a staged tile, so the 8 rows a warp's pair stores hit fall in different banks

@dataclass(frozen=True)
class TensorCoreTile:
  """One threadgroup's tile: BM x BN outputs, BK of the reduction per pipeline stage, warps of WM x WN."""
  bm: int
  bn: int
  bk: int
  wm: int
  wn: int
  stages: int
  instruction: str = MMA_SYNC
  persistent: bool = False   # WGMMA: one threadgroup an SM over all the tiles, the epilogue overlapped (module docstring)
  @property
  def warps(self) -> int:
    if self.instruction == SIMT_F32: return -(-self.threads // 32)
    if self.instruction == WGMMA: return 4 * (self.bm // self.wm) * (self.bn // self.wn) + PRODUCER_THREADS // 32   # warpgroups of 4
    return (self.bm // self.wm) * (self.bn // self.wn)
  @property
  def threads(self) -> int:
    return (self.bm // self.wm) * (self.bn // self.wn) if self.instruction == SIMT_F32 else 32 * self.warps
  @property
  def epilogue_threads(self) -> int:
    """The threads that hold accumulators and run the epilogue (a WGMMA tile's consumers: lanes PRODUCER_THREADS on; a
    persistent one's epilogue runs on EPILOGUE_LANES instead)."""
    return self.threads - PRODUCER_THREADS if self.instruction == WGMMA else self.threads
  @property
  def accumulators(self) -> int:
    """Per thread: (WM/16) x (WN/8) mma tiles of 4 float32 values each; on Metal its share of the tile's elements; a
    SIMT_F32 tile's WM x WN."""
    if self.instruction == SIMDGROUP_8X8: return self.bm * self.bn // self.threads
    if self.instruction == SIMT_F32: return self.wm * self.wn
    if self.instruction == WGMMA: return self.bn // 2   # a consumer warpgroup's 64 x BN over its 128 threads
    return (self.wm // 16) * (self.wn // 8) * 4
  def shared_bytes(self, itemsize: int = 2) -> int:
    """Both operands' slices; on Metal also the float32 tile the accumulators are stored through; a persistent tile's
    staged 16-bit tile."""
    out = self.bm * self.bn * 4 if self.instruction == SIMDGROUP_8X8 else 1024 if self.instruction == WGMMA else 0   # WGMMA: + swizzle alignment
    return out + self.stages * (self.bm + self.bn) * self.bk * itemsize + self.staged_bytes
  @property
  def staged_bytes(self) -> int: return self.bm * (self.bn + STAGE_PAD) * 2 if self.persistent else 0
  def __str__(self):
    units = f"{self.threads} threads" if self.instruction == SIMT_F32 else f"{self.warps} warps"   # a SIMT_F32 tile's WM x WN is a thread's
    return f"{self.bm}x{self.bn}x{self.bk} {units} of {self.wm}x{self.wn}, {self.stages} stages{', persistent' if self.persistent else ''}"

TILES = (   # shared memory: stages x (BM + BN) x BK x 2 bytes
  TensorCoreTile(128, 128, 32, 64, 32, 4),   # 0: large matmuls: 64 KiB, 64 accumulators a thread, 2 threadgroups an SM
  TensorCoreTile(128, 64, 32, 64, 32, 4),    # 1: fewer columns (48 KiB)
  TensorCoreTile(64, 64, 32, 32, 32, 4),     # 2: small matmuls: more threadgroups to fill the GPU (32 KiB)
  TensorCoreTile(128, 256, 32, 64, 64, 3),   # 3: wide: 128 accumulators a thread (72 KiB)
  TensorCoreTile(128, 128, 64, 64, 32, 3),   # 4: half the barriers per K (96 KiB)
  TensorCoreTile(256, 128, 32, 64, 64, 3),   # 5: tall: 128 accumulators a thread (72 KiB)
  TensorCoreTile(128, 128, 32, 64, 64, 4),   # 6: 4 warps of 64x64: fewer ldmatrix per mma (64 KiB)
  # Metal: 4 SIMD groups of 2 x 2 simdgroup matrices (8 accumulators a thread; 8 KiB of threadgroup memory in fp32)
  TensorCoreTile(32, 32, 16, 16, 16, 1, SIMDGROUP_8X8),   # 7
  # Metal, large matmuls: 4 SIMD groups of 4 x 4 (32 accumulators a thread; 24 KiB in fp32)
  TensorCoreTile(64, 64, 16, 32, 32, 1, SIMDGROUP_8X8),   # 8
  # CUDA float32 on the CUDA cores, 256 threads (H200, TFLOP/s, bench/matmul_tiles.py --fp32; cuBLAS 51): 16 x 8 a
  # thread where enough threadgroups fill several waves (4096^3: 43, against 39 for 8 x 8; with 1.5 waves, 8192 x
  # 768 x 3072: 31 against 40); 8 x 8, 16 deep (32 KiB: 4096^3 39, against 35 for 8 deep); 8 x 4 for fewer
  # threadgroups' worth (1000^3: 26, against 21 for 64 x 64 and 17 for 128 x 128); 4 x 4 for small matmuls
  TensorCoreTile(256, 128, 8, 16, 8, 2, SIMT_F32),  # 9
  TensorCoreTile(128, 128, 16, 8, 8, 2, SIMT_F32),  # 10
  TensorCoreTile(128, 64, 16, 8, 4, 2, SIMT_F32),   # 11
  TensorCoreTile(64, 64, 8, 4, 4, 2, SIMT_F32),     # 12
  TensorCoreTile(128, 128, 8, 8, 8, 2, SIMT_F32),   # 13: half the shared memory of 10
  TensorCoreTile(64, 128, 8, 4, 8, 2, SIMT_F32),    # 14: 4 x 8 a thread
  TensorCoreTile(128, 256, 8, 8, 16, 2, SIMT_F32),  # 15: 8 x 16 a thread (4096^3: 40)
  # Hopper: two consumer warpgroups of 64 x BN (the plain Hopper matmul's tiles: 128 x 256 measured fastest at 4096^3)
  TensorCoreTile(128, 256, 64, 64, 256, 4, WGMMA),  # 16
  TensorCoreTile(128, 128, 64, 64, 128, 6, WGMMA),  # 17
  TensorCoreTile(128, 64, 64, 64, 64, 8, WGMMA),    # 18
  # mma.sync for a K of at most 64: all of K in one slice, so a threadgroup waits for one round trip of loads, not two
  # (H200, fp16, device time against tile 2 with 4 stages: 512 x 1024x64 @ 64x1024 506.6 -> 480.6 us, 96 x ... 105.7
  # -> 95.6, 16 x 256x64 @ 64x256 19.6 -> 14.8, 8 x 1024x64 @ 64x128 21.2 -> 15.4, 4096x64 @ 64x4096 23.6 -> 23.1;
  # on the first: tile 2 in 64-deep slices 515 us, 3 stages of it 618, 128x128 in one slice 491-498 with 8 warps, 530 with 4)
  TensorCoreTile(128, 64, 64, 64, 32, 2),           # 19
  # Hopper, persistent (the epilogue overlapped): tiles 16-18 with as many stages as fit beside the staged tile
  TensorCoreTile(128, 256, 64, 64, 256, 3, WGMMA, persistent=True),  # 20
  TensorCoreTile(128, 128, 64, 64, 128, 5, WGMMA, persistent=True),  # 21
  TensorCoreTile(128, 64, 64, 64, 64, 8, WGMMA, persistent=True),    # 22
)

__doc__ += "\n".join(f"- {k}: {t}" for k, t in enumerate(TILES)) + "\n"
SIMDGROUP_TILES = tuple(k for k, t in enumerate(TILES) if t.instruction == SIMDGROUP_8X8)   # Metal's: (small, large)
SIMT_TILES = tuple(k for k, t in enumerate(TILES) if t.instruction == SIMT_F32)   # CUDA float32: huge, large, medium, small, ...
WGMMA_TILES = tuple(k for k, t in enumerate(TILES) if t.instruction == WGMMA and not t.persistent)   # Hopper: N 256, 128, 64
# each WGMMA tile's persistent form: the same block tile
PERSISTENT = {k: next(j for j, u in enumerate(TILES) if u.persistent and (u.bm, u.bn) == (TILES[k].bm, TILES[k].bn)) for k in WGMMA_TILES}

MMA_DTYPES = ("float16", "bfloat16")   # and float32 as tf32 (m16n8k8), where float32_matmul_precision allows
# The tf32 tile's results were once wrong on the H200: its cvt.rna.tf32.f32 read the float32 through an integer ("r")
# register. With an "f" one, test_tensor_core's test_gpu_tf32 passes on the H200 (9 of 9). check() refuses the tile
# where this is False (a switch to take it out again should a GPU check fail).
TF32_VERIFIED = True
SIMDGROUP_DTYPES = ("float16", "float32")   # bfloat16 is ushort bits on alloy's Metal (renderer/metal.py)
FRAGMENT_REGISTERS = 64   # registers a thread needs beside its accumulators: operand fragments, addresses, loop state

def tile_for(arg: int, depth: int | None = None) -> TensorCoreTile:
  """TILES[arg], with `depth` stages where STAGE gives one."""
  t = TILES[arg]
  return t if depth is None else dataclasses.replace(t, stages=depth)

def unit_axes(spec: MatmulSpec) -> tuple[bool, bool]:
  """(A's contiguous axis is K, B's contiguous axis is N): how each operand's slice lies in shared memory. An axis of
  length 1 counts as contiguous whatever its stride."""
  a_k = spec.a.k_stride == 1 or spec.K == 1
  b_n = spec.b.stride == 1 or spec.N == 1
  return a_k, b_n

def check(spec: MatmulSpec | None, tile: TensorCoreTile, caps: DeviceCaps) -> str | None:
  """Why this tile cannot run this kernel on this device, or None where it can."""
  if spec is None: return "the kernel is not a matmul with an elementwise epilogue (codegen/matmul.py)"
  if tile.instruction not in caps.tensor_cores: return f"the device has no {tile.instruction} tensor cores"
  if tile.instruction == SIMDGROUP_8X8: return _check_simdgroup(spec, tile, caps)
  if tile.instruction == WGMMA: return _check_wgmma(spec, tile, caps)
  # CUDA's tiles: what each instruction takes, then the resources and layouts both need
  if (why := (_check_simt if tile.instruction == SIMT_F32 else _check_mma)(spec, tile)) is not None: return why
  if spec.acc_dtype.name != "float32":
    return f"{spec.acc_dtype.name} accumulation: the tiles accumulate in float32 only"
  limit = max(caps.shared_bytes, caps.dynamic_shared_bytes)   # the pipeline is in dynamic shared memory
  if (nb := tile.shared_bytes(spec.operand_dtype.itemsize)) > limit:
    return f"{tile}: {nb} bytes of shared memory, over the device's {limit}"
  if tile.threads > caps.max_local: return f"{tile}: {tile.threads} threads, over the device's {caps.max_local}"
  if tile.accumulators + FRAGMENT_REGISTERS > caps.registers:
    return (f"{tile}: {tile.accumulators} accumulators per thread and {FRAGMENT_REGISTERS} for fragments and addresses, "
            f"over the device's {caps.registers} registers")
  a_k, b_n = unit_axes(spec)
  if not a_k and spec.a.stride != 1 and spec.M > 1: return "A has no contiguous axis (neither M nor K has stride 1)"
  if not b_n and spec.b.k_stride != 1 and spec.K > 1: return "B has no contiguous axis (neither K nor N has stride 1)"
  return None

def _check_mma(spec: MatmulSpec, tile: TensorCoreTile) -> str | None:
  if spec.operand_dtype is not None and spec.operand_dtype.name == "float32":
    if float32_matmul_precision() == "highest":
      return ("float32 operands: tensor cores round them to tf32, which alloy.set_float32_matmul_precision('high') "
              "allows (the default, 'highest', keeps float32 matmuls exact)")
    if not TF32_VERIFIED:
      return ("float32 operands as tf32: the m16n8k8 tile compiles but gave wrong results on an H200 (6 of 6 GPU checks), "
              "so it is refused until that is fixed; float32 matmuls stay exact")
  elif spec.operand_dtype is None or spec.operand_dtype.name not in MMA_DTYPES:
    return (f"operands {spec.a.dtype.name} and {spec.b.dtype.name}: {tile.instruction} takes two float16 or two bfloat16 "
            f"operands (two float32 as tf32)")
  if tile.stages < 2: return f"{tile.stages} stages: the pipeline needs at least 2"
  return None

def _check_simt(spec: MatmulSpec, tile: TensorCoreTile) -> str | None:
  if spec.operand_dtype is None or spec.operand_dtype.name != "float32":
    return f"operands {spec.a.dtype.name} and {spec.b.dtype.name}: {tile.instruction} takes two float32 operands"
  if tile.stages != 2: return f"{tile.stages} stages: the float32 tile double-buffers its slices (2)"
  if tile.wm % 4 or tile.wn % 4 or tile.bk % 4: return f"{tile}: a thread's rows, columns and the slice's depth go in 16-byte words (multiples of 4)"
  return None

def _check_simdgroup(spec: MatmulSpec, tile: TensorCoreTile, caps: DeviceCaps) -> str | None:
  if spec.operand_dtype is None or spec.operand_dtype.name not in SIMDGROUP_DTYPES:
    return f"operands {spec.a.dtype.name} and {spec.b.dtype.name}: {tile.instruction} takes two float16 or two float32 operands"
  if spec.acc_dtype.name != "float32": return f"{spec.acc_dtype.name} accumulation: the tiles accumulate in float32 only"
  if tile.stages != 1: return f"{tile.stages} stages: Metal's tiles copy one slice at a time (no asynchronous copies)"
  if (nb := tile.shared_bytes(spec.operand_dtype.itemsize)) > caps.shared_bytes:
    return f"{tile}: {nb} bytes of threadgroup memory, over the device's {caps.shared_bytes}"
  if tile.threads > caps.max_local: return f"{tile}: {tile.threads} threads, over the device's {caps.max_local}"
  if tile.accumulators + FRAGMENT_REGISTERS > caps.registers:
    return f"{tile}: {tile.accumulators} accumulators per thread, over the device's {caps.registers} registers"
  return None

WGMMA_STATIC_SHARED = 256   # a WGMMA tile's barriers (static shared memory), which the device's limit also counts
WGMMA_WAVE = 132   # WGMMA threadgroups that run at once: one an SM (each takes most of its shared memory), an H200's 132
# each WGMMA tile's throughput beside the widest's where both fill whole waves (H200, fp16, bench/matmul_tiles.py --mid,
# 2026-12-04: 128 x 128 0.85-0.86x of 128 x 256 at 2048^3 and 8192x768x3072, 128 x 64 0.65x)
WGMMA_TILE_SPEED = dict(zip(WGMMA_TILES, (1.0, 0.86, 0.65)))

def wgmma_tile(M: int, N: int, batch: int = 1, block_m: int | None = None) -> int:
  """The WGMMA tile for a matmul (batch x M x N, in blocks of block_m rows where not the tile's own; both the Lowerer's
  heuristics and the plain Hopper kernel, engine/wgmma.py, take it): of the tiles no wider than N asks (the widest N,
  at most 256, that does not mostly hang past N), the one whose speed times the share of its waves that its
  threadgroups fill is highest. A matmul of few tiles idles SMs in the widest tile where a narrower one fills them:
  H200, fp16, 128 x 256 -> the choice, TFLOP/s (bench/matmul_tiles.py --mid, 2026-12-04): 128x4096x4096 < 102 -> 169
  (128 x 64), 512x4096x4096 338 -> 453 (128 x 128), 8192x3072x768 473 -> 506 (128 x 128), 1000^3 99 -> 128 (128 x
  64); 2048^3, 1024x1024x4096 and 8192x768x3072 keep 128 x 256. The plain kernel's 64-row blocks, us (probe, same
  day): 64x4096x4096 28.1 -> 17.2 (64 x 64; cuBLAS 21.8), 64x768x3072 12.7 -> 8.4, 16x768x2304 12.6 -> 8.9."""
  wide, mid, narrow = WGMMA_TILES
  widest = TILES[wide if N > 128 else mid if N > 64 else narrow].bn
  def score(t: int) -> float:
    tiles = -(-M // (block_m or TILES[t].bm)) * -(-N // TILES[t].bn) * batch
    return WGMMA_TILE_SPEED[t] * tiles / (-(-tiles // WGMMA_WAVE) * WGMMA_WAVE)
  return max((t for t in WGMMA_TILES if TILES[t].bn <= widest), key=score)

def wgmma_gemm(spec: MatmulSpec, tile: TensorCoreTile):
  """The WGMMA tile's matmul as codegen/wgmma.py's WGMMAGemm and its operands' (slot, byte offset), or why not."""
  return gemm_of(spec, tile.bm, tile.bn, tile.stages)

def launch_groups(spec: MatmulSpec, tile: TensorCoreTile, caps: DeviceCaps) -> int:
  """The threadgroups a tile's kernel launches: one a tile; a persistent tile's one an SM (caps.multiprocessors, else
  WGMMA_WAVE), at most one a tile."""
  tiles = prod(grid(spec, tile))
  return min(tiles, caps.multiprocessors or WGMMA_WAVE) if tile.persistent else tiles

def _check_wgmma(spec: MatmulSpec, tile: TensorCoreTile, caps: DeviceCaps) -> str | None:
  if isinstance(why := wgmma_gemm(spec, tile), str): return why
  if tile.persistent and spec.rounded is None:
    return ("the epilogue reads the float32 accumulator (the graph does not round the matmul to 16 bits first), "
            "which a persistent tile's staged 16-bit tile cannot hold")
  # one stage: the producer would wait for the consumers to release the stage they wait on it to fill
  if tile.stages < 2: return f"{tile.stages} stages: the producer's ring needs at least 2"
  if tile.shared_bytes() + WGMMA_STATIC_SHARED > caps.dynamic_shared_bytes:
    return (f"{tile}: {tile.shared_bytes()} bytes of shared memory and {WGMMA_STATIC_SHARED} for its barriers, over the device's "
            f"{caps.dynamic_shared_bytes}")
  if tile.threads > caps.max_local: return f"{tile}: {tile.threads} threads, over the device's {caps.max_local}"
  return None

def aligned(spec: MatmulSpec) -> tuple[bool, bool]:
  """Whether each operand's rows start on 16 bytes and its contiguous length is whole 16-byte chunks: then its
  slices are copied with 16-byte cp.async, else element by element."""
  a_k, b_n = unit_axes(spec)
  def ok(op, inner: int, ld: int, rows: int) -> bool:
    epc = 16 // op.dtype.itemsize   # elements of a chunk
    starts = [op.offset, *op.batch_strides] + ([ld] if rows > 1 else [])
    return inner % epc == 0 and all(s % epc == 0 for s in starts)
  a = ok(spec.a, spec.K if a_k else spec.M, spec.a.stride if a_k else spec.a.k_stride, spec.M if a_k else spec.K)
  b = ok(spec.b, spec.N if b_n else spec.K, spec.b.k_stride if b_n else spec.b.stride, spec.K if b_n else spec.N)
  return a, b

def grid(spec: MatmulSpec, tile: TensorCoreTile) -> tuple[int, int, int]:
  """(threadgroups along M, along N, batch elements): the launch is their product, N fastest."""
  return -(-spec.M // tile.bm), -(-spec.N // tile.bn), prod(spec.batch)

RASTER = 8   # threadgroups run down this many tile rows before moving one column on: neighbours share operand panels in L2

def tile_origin(spec: MatmulSpec, tile: TensorCoreTile, group: sym.Expr) -> tuple:
  """(first row, first column, flat batch element) of threadgroup `group`'s tile. Within a batch element the tiles go
  in column-major strips RASTER tile rows tall (where RASTER divides the tile rows), so the threadgroups running at
  once read a few row panels of A and column panels of B, which stay in L2, instead of every panel of B."""
  tiles_m, tiles_n, _ = grid(spec, tile)
  flat = sym.mod(group, tiles_m * tiles_n)
  if tiles_m % RASTER == 0 and tiles_m > RASTER and tiles_n > 1:
    strip = sym.mod(flat, RASTER * tiles_n)
    tm, tn = sym.div(flat, RASTER * tiles_n) * RASTER + sym.mod(strip, RASTER), sym.div(strip, RASTER)
  else: tm, tn = sym.div(flat, tiles_n), sym.mod(flat, tiles_n)
  return tm * tile.bm, tn * tile.bn, sym.div(group, tiles_m * tiles_n)

def accumulator_index(tile: TensorCoreTile, lane: sym.Expr) -> list[tuple]:
  """(row, column) in the threadgroup's tile of each of a thread's accumulators, in the order the main loop keeps
  them: for each of the warp's (WM/16) x (WN/8) mma tiles, m16n8k16's four: rows g and g+8, columns 2t and 2t+1,
  with g = lane / 4 and t = lane % 4 within the warp. Metal's: pairs of row neighbours, accumulators 2j and 2j+1
  elements 2*(lane + j*threads) and the one after it of the tile in row-major order (as CUDA's, so the lowering's
  2-wide stores serve both)."""
  if tile.instruction == SIMDGROUP_8X8:
    at = [2 * (lane + (k // 2) * tile.threads) + k % 2 for k in range(tile.accumulators)]
    return [(sym.div(e, tile.bn), sym.mod(e, tile.bn)) for e in at]
  if tile.instruction == WGMMA:   # m64nNk16's: d[4j + 2h + e] at row 16w + lane/4 + 8h, column 8j + 2(lane%4) + e
    c, tid = sym.div(lane, 128) - 1, sym.mod(lane, 128)
    row = c * 64 + sym.div(tid, 32) * 16 + sym.div(sym.mod(tid, 32), 4)
    col = sym.mod(tid, 4) * 2
    return [(row + 8 * ((k % 4) // 2), col + (8 * (k // 4) + k % 2)) for k in range(tile.accumulators)]
  if tile.instruction == SIMT_F32:   # accumulator i * WN + j: the thread's row i, column j, in 4 x 4 blocks
    tx = tile.bn // tile.wn
    ty, tx = sym.div(lane, tx), sym.mod(lane, tx)
    row = lambda i: ty * 4 + ((i // 4) * (tile.bm * 4 // tile.wm) + i % 4)
    col = lambda j: tx * 4 + ((j // 4) * (tile.bn * 4 // tile.wn) + j % 4)
    return [(row(i), col(j)) for i in range(tile.wm) for j in range(tile.wn)]
  warps_n = tile.bn // tile.wn
  warp, within = sym.div(lane, 32), sym.mod(lane, 32)
  wm, wn = sym.div(warp, warps_n), sym.mod(warp, warps_n)
  g, t = sym.div(within, 4), sym.mod(within, 4)
  out = []
  for mi in range(tile.wm // 16):
    for ni in range(tile.wn // 8):
      for c in range(4):
        out.append((wm * tile.wm + g + (mi * 16 + 8 * (c // 2)), wn * tile.wn + t * 2 + (ni * 8 + c % 2)))
  return out
