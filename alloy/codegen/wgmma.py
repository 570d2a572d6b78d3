"""What Hopper's wgmma matmul (sm_90a) is given and what it takes: `WGMMAGemm` (sizes, dtype, each operand's layout,
the block tile), `wgmma_unfit` (why the copy engine or wgmma cannot take one), and `gemm_of` (a recognised matmul as a
WGMMAGemm and the buffer slots and byte offsets its tensor maps start at). Two kernels read these rules: the plain
Hopper matmul (renderer/cuda_wgmma.py's whole kernel, engine/wgmma.py) and the Lowerer's WGMMA tile (tensor_core.py),
whose epilogue is any elementwise function of the accumulators.

The operands are read by the bulk tensor copy engine (TMA) through 3-d tensor maps: (K, rows, batch) where K is the
operand's contiguous dimension ("K-major": A stored M x K, B stored N x K), else (rows, K, batch). The copy engine wants
the strides between rows and batches in positive multiples of 16 bytes and the first element 16-byte aligned; it
zero-fills what lies past M, N and K, so partial tiles need no other care. An operand shared by every batch element
(x @ W's W) has a batch of one, read at batch coordinate 0.
"""
from __future__ import annotations
from dataclasses import dataclass
from alloy.helpers import prod
from alloy.codegen.matmul import MatmulOperand, MatmulSpec, flat_batch_stride

BLOCK_K = 64            # elements of K per stage: one 128-byte swizzle row of 16-bit values
SMEM_LIMIT = 227 << 10  # bytes of shared memory one block may opt into on sm_90
WGMMA_DTYPES = ("float16", "bfloat16")

@dataclass(frozen=True)
class Operand:
  """One input's storage: k_major when K is its contiguous dimension (A stored M x K, B stored N x K), else M (or
  N) is; `row_stride` is the element distance between the storage's rows, `batch_stride` between batches (0: the
  operand is shared by every batch element)."""
  k_major: bool
  row_stride: int
  batch_stride: int

@dataclass(frozen=True)
class WGMMAGemm:
  """C[batch, M, N] = A[batch, M, K] @ B[batch, K, N], both `dtype`, fp32 accumulation; the plain kernel stores C
  contiguous in `out_dtype` (`dtype` where not given, or float32)."""
  batch: int
  M: int
  N: int
  K: int
  dtype: str
  a: Operand
  b: Operand
  block_m: int = 128    # 64 rows per consumer warpgroup
  block_n: int = 256    # the N of each wgmma (a multiple of 64 up to 256)
  stages: int = 4
  out_dtype: str = ""

  @property
  def out(self) -> str: return self.out_dtype or self.dtype
  @property
  def consumers(self) -> int: return self.block_m // 64
  @property
  def threads(self) -> int: return 128 * (self.consumers + 1)
  @property
  def stage_bytes(self) -> int: return (self.block_m + self.block_n) * BLOCK_K * 2
  @property
  def shared_bytes(self) -> int: return self.stages * self.stage_bytes + 1024   # + alignment slack for the swizzle
  @property
  def tiles(self) -> tuple[int, int]: return (-(-self.M // self.block_m), -(-self.N // self.block_n))
  @property
  def flops(self) -> int: return 2 * self.batch * self.M * self.N * self.K

def wgmma_unfit(g: WGMMAGemm) -> str | None:
  """Why the wgmma kernels cannot compute g (None when they can): what the copy engine and wgmma require."""
  if g.dtype not in WGMMA_DTYPES: return f"dtype {g.dtype} (wgmma: float16, bfloat16)"
  if g.out not in (g.dtype, "float32"): return f"output dtype {g.out} from {g.dtype} operands"
  if min(g.batch, g.M, g.N, g.K) < 1: return "an empty dimension"
  if g.block_m not in (64, 128, 192, 256) or g.block_n % 64 or not 64 <= g.block_n <= 256: return f"block {g.block_m}x{g.block_n}"
  if g.shared_bytes > SMEM_LIMIT: return f"{g.shared_bytes} bytes of shared memory"
  if g.batch > 65535: return f"batch {g.batch} past the grid's y limit"
  for name, op in (("A", g.a), ("B", g.b)):
    strides = (op.row_stride, op.batch_stride) if g.batch > 1 and op.batch_stride else (op.row_stride,)
    if any(s <= 0 or s * 2 % 16 for s in strides):
      return f"{name}'s strides {strides} (elements): the copy engine needs positive multiples of 16 bytes"
  return None

def _operand(op: MatmulOperand, batch_stride: int) -> Operand | None:
  if op.k_stride == 1: return Operand(True, op.stride, batch_stride)
  if op.stride == 1: return Operand(False, op.k_stride, batch_stride)
  return None

def gemm_of(spec: MatmulSpec, block_m: int = 128, block_n: int = 256, stages: int = 4) -> tuple[WGMMAGemm, tuple] | str:
  """spec as a WGMMAGemm with this block tile, and the (buffer slot, byte offset) of A's and B's first element; or why
  the copy engine and wgmma cannot read its operands."""
  dtype = spec.operand_dtype
  if dtype is None or dtype.name not in WGMMA_DTYPES:
    return f"operands {spec.a.dtype.name} and {spec.b.dtype.name}: wgmma takes two float16 or two bfloat16 operands"
  if spec.acc_dtype.name != "float32": return f"{spec.acc_dtype.name} accumulation: wgmma accumulates in float32 here"
  strides = [flat_batch_stride(op, spec.batch) for op in (spec.a, spec.b)]
  if None in strides: return "an operand's batch axes are not one run of memory (the tensor maps have one batch axis)"
  a, b = _operand(spec.a, strides[0]), _operand(spec.b, strides[1])
  if a is None or b is None: return "an operand has no contiguous axis (neither its rows nor K have stride 1)"
  offsets = (spec.a.offset * 2, spec.b.offset * 2)
  if any(o % 16 for o in offsets): return f"operand offsets {offsets} bytes: the copy engine needs 16-byte alignment"
  g = WGMMAGemm(prod(spec.batch), spec.M, spec.N, spec.K, dtype.name, a, b, block_m, block_n, stages)
  if (why := wgmma_unfit(g)): return why
  return g, ((spec.a.slot, offsets[0]), (spec.b.slot, offsets[1]))
