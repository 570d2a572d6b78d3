"""Which kernels go to the Hopper matmul (renderer/cuda_wgmma.py) instead of the Lowerer, and their CompiledKernel.

A kernel goes there when the device lists "wgmma.m64nNk16" in `caps.tensor_cores` (the CUDA device on an sm_90
GPU), `ALLOY_WGMMA` is not 0, and codegen/matmul.py recognises it as a matmul whose operands are both float16 or
both bfloat16, accumulated in float32, with no epilogue but the cast to the output (the operands' dtype), stored as
(batch..., m, n) in order; the operands' strides must suit the copy engine (each operand contiguous along K or along
its own M/N axis, the other strides multiples of 16 bytes, offsets 16-byte aligned). Batch axes that are one run of
memory in both operands become one; an operand B shared by every batch (x @ W) folds the batch into M, an operand
shared otherwise is read at batch 0; K must pass 64 (below, mma.sync's one-slice tile measured faster). `gemm_fit` says
whether and how the kernel can compute a spec.

It takes only matmuls of at most SHORT_M rows (after the batch folds into them: a decode step's x @ W, a
convolution's 64 output channels), in 64-row blocks. Taller ones go to the Lowerer's WGMMA tile, the same main loop
with the Lowerer's epilogue, which stages the outputs through shared memory into 16-byte stores where this kernel
stores 4 bytes a thread from registers: measured on the H200 (2026-12-04, device time, median of 3 alternated), the
tile was 1.03-1.06x this kernel at 4096^3 (fp16, bf16, a @ b.T), 1.05x at 4104^3, 1.12x at 1000^3, 1.05-1.24x on
GPT-2's x @ W of 8192 rows, equal at 8192^3, 1.03x at 96 x 4096 x 4096 and 0.95x at 128 x 4096 x 4096 (the one
shape measured where it lost); this kernel was 1.02-1.55x the Lowerer's choice at 32 and 64 rows. So
anything else (an epilogue: bias, activation, residual, a float32 output; more rows; a spec the kernel cannot take,
codegen/wgmma.py's `gemm_of`) goes through the Lowerer, whose TENSOR_CORE takes the WGMMA tile where it applies (else
mma.sync's): `wgmma_gemm` returns None.
"""
from __future__ import annotations
import dataclasses, time
from alloy.helpers import getenv, prod
from alloy.codegen.matmul import MatmulSpec, folds_batch_into_rows, match_matmul
from alloy.codegen.opts import TENSOR_CORE_SHORT_K
from alloy.codegen.program import KernelMeta
from alloy.engine.whole_kernel import WholeKernel
from alloy.codegen.tensor_core import TILES, wgmma_tile
from alloy.codegen.wgmma import WGMMAGemm, gemm_of
from alloy.ir.kernel import KernelAST
from alloy.renderer.cuda_wgmma import render_wgmma

INSTRUCTION = "wgmma.m64nNk16"

SHORT_M = 64   # rows that one consumer warpgroup covers: a taller block would compute as many rows past M

def _tile(M: int, N: int, batch: int) -> dict:
  """The block tile and stages of codegen's WGMMA tile for the matmul; 64 rows where M fits in them (a convolution's
  weight of 64 output channels times each image's window matrix: half of a 128-row block would multiply zeros)."""
  block_m = SHORT_M if M <= SHORT_M else None
  t = TILES[wgmma_tile(M, N, batch, block_m)]
  return {"block_m": block_m or t.bm, "block_n": t.bn, "stages": t.stages}

def wgmma_gemm(spec: MatmulSpec) -> tuple[WGMMAGemm, tuple] | None:
  """The kernel's gemm for spec and the (slot, byte offset) of A and B where this kernel takes spec (at most SHORT_M
  rows: module docstring), else None."""
  fit = gemm_fit(spec)
  return fit if fit is not None and fit[0].M <= SHORT_M else None

def gemm_fit(spec: MatmulSpec) -> tuple[WGMMAGemm, tuple] | None:
  """The kernel's gemm for spec and the (slot, byte offset) of A and B, or None where the kernel cannot compute it."""
  # K <= 64 (attention's q @ k^T) is store-bound: there mma.sync's one-slice tile, as the heuristics choose it
  # (opts.TENSOR_CORE_SHORT_K), measured faster on the H200 than this kernel's 128 x 256 blocks (64 x 64 then: 85
  # TFLOP/s against 73.5)
  if spec.K <= TENSOR_CORE_SHORT_K or spec.operand_dtype is None: return None
  # a float32 output (no cast) the renderer can store, but that path has not run on a GPU yet: the Lowerer keeps it
  if spec.out_dtype != spec.operand_dtype: return None
  if not spec.plain: return None
  if isinstance(fit := gemm_of(spec, **_tile(spec.M, spec.N, prod(spec.batch))), str): return None
  g, operands = fit
  if folds_batch_into_rows(spec):
    # x @ W: B is shared, A's batches are one run of rows: one matmul of batch * M rows
    g = dataclasses.replace(g, batch=1, M=g.batch * g.M, a=dataclasses.replace(g.a, batch_stride=0), **_tile(g.batch * g.M, g.N, 1))
  return g, operands

def whole_kernel(ast: KernelAST, device) -> WholeKernel | None:
  """The wgmma kernel for ast on device, or None where the kernel does not apply (module docstring)."""
  if INSTRUCTION not in getattr(device.caps, "tensor_cores", ()) or not getenv("ALLOY_WGMMA", 1): return None
  if ast.n_buffers != 3 or ast.scalar_dtypes: return None   # the kernel takes C, A, B (two buffers: x @ x.T) and no scalars
  t0 = time.perf_counter()
  if (spec := match_matmul(ast)) is None or (fit := wgmma_gemm(spec)) is None: return None
  from alloy.runtime.cuda.tensor_map import TensorMapProgram, arch_compiler   # only a CUDA device gets here
  gemm, operands = fit
  kernel = render_wgmma(gemm)
  out_bytes = gemm.batch * gemm.M * gemm.N * 2
  meta = KernelMeta(kernel.name, kernel.grid, kernel.block, kernel.flops, out_bytes + 2 * prod(spec.batch) * spec.K * (spec.M + spec.N),
                    opts=(), target=device.target)
  return WholeKernel(kernel.source, meta, arch_compiler(device.target).compile_cached,
                     lambda binary: TensorMapProgram(device, kernel, binary, operands), time.perf_counter() - t0)
