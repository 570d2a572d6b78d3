"""Which kernels go to the Hopper matmul (renderer/cuda_wgmma.py) instead of the Lowerer, and their CompiledKernel.

A kernel goes there when the device lists "wgmma.m64nNk16" in `caps.tensor_cores` (the CUDA device on an sm_90
GPU), `ALLOY_WGMMA` is not 0, and codegen/matmul.py recognises it as a matmul whose operands are both float16 or
both bfloat16, accumulated in float32, with no epilogue but the cast to the output (the operands' dtype), stored as
(batch..., m, n) in order; the operands' strides must suit the copy engine (each operand contiguous along K or along
its own M/N axis, the other strides multiples of 16 bytes, offsets 16-byte aligned). Batch axes that are one run of
memory in both operands become one; an operand B shared by every batch (x @ W) folds the batch into M; K must pass
64 (below, mma.sync's small tile measured faster). Anything
else, or a spec the kernel cannot take (`wgmma_unfit`), goes through the Lowerer (TENSOR_CORE's mma.sync tiles
where they apply): `wgmma_gemm` returns None.
"""
from __future__ import annotations
import time
from alloy.helpers import getenv, prod
from alloy.codegen.matmul import MatmulOperand, MatmulSpec, match_matmul
from alloy.codegen.program import KernelMeta, LinearProgram
from alloy.ir.kernel import KernelAST
from alloy.renderer.cuda_wgmma import Operand, WGMMAGemm, render_wgmma, wgmma_unfit

INSTRUCTION = "wgmma.m64nNk16"

def _batch(spec: MatmulSpec) -> tuple[int, tuple, tuple] | None:
  """The batch axes as one: (count, A's stride, B's stride), or None where they are not one run in both."""
  sizes, sa, sb = spec.batch, spec.a.batch_strides, spec.b.batch_strides
  for j in range(len(sizes) - 1):
    if sa[j] != sa[j + 1] * sizes[j + 1] or sb[j] != sb[j + 1] * sizes[j + 1]: return None
  return prod(sizes), (sa[-1] if sa else 0), (sb[-1] if sb else 0)

def _operand(op: MatmulOperand, batch_stride: int) -> Operand | None:
  if op.k_stride == 1: return Operand(True, op.stride, batch_stride)
  if op.stride == 1: return Operand(False, op.k_stride, batch_stride)
  return None

def _tile(M: int, N: int) -> dict:
  """A 128-row block tile; the widest N (at most 256) that does not mostly hang past N, and the stages that fit."""
  block_n = 256 if N > 128 else 128 if N > 64 else 64
  return {"block_m": 128, "block_n": block_n, "stages": {256: 4, 128: 6, 64: 8}[block_n]}

def wgmma_gemm(spec: MatmulSpec) -> tuple[WGMMAGemm, tuple] | None:
  """The kernel's gemm for spec and the (slot, byte offset) of A and B, or None where the kernel cannot take it."""
  dtype = spec.operand_dtype
  # K <= 64 (attention's q @ k^T) is store-bound: there mma.sync's 64 x 64 tile measured faster on the H200 (85
  # TFLOP/s, branch mma's heuristics) than this kernel's 128 x 256 blocks (73.5)
  if spec.K <= 64: return None
  if dtype is None or dtype.name not in ("float16", "bfloat16") or spec.acc_dtype.name != "float32": return None
  # a float32 output (no cast) the renderer can store, but that path has not run on a GPU yet: the Lowerer keeps it
  if spec.out_dtype != dtype: return None
  if tuple(op.name for op in spec.epilogue_ops) != ("CAST",) or spec.epilogue_inputs: return None
  live = [ax for ax in spec.out_axes if ax != "1"]
  if live != [f"b{j}" for j in range(len(spec.batch))] + ["m", "n"]: return None
  if (batched := _batch(spec)) is None: return None
  batch, a_stride, b_stride = batched
  M = spec.M
  if batch > 1 and b_stride == 0 and spec.a.k_stride == 1 and a_stride == M * spec.a.stride:
    batch, M, a_stride = 1, batch * M, 0    # x @ W: B is shared, A's batches are one run of rows
  if batch > 1 and (a_stride == 0 or b_stride == 0): return None
  a, b = _operand(spec.a, a_stride), _operand(spec.b, b_stride)
  if a is None or b is None: return None
  offsets = (spec.a.offset * 2, spec.b.offset * 2)
  if any(o % 16 for o in offsets): return None
  g = WGMMAGemm(batch, M, spec.N, spec.K, dtype.name, a, b, **_tile(M, spec.N))
  if wgmma_unfit(g): return None
  return g, ((spec.a.slot, offsets[0]), (spec.b.slot, offsets[1]))

def compile_wgmma(ast: KernelAST, device) -> tuple | None:
  """(program, source, binary, runner, stage seconds) of the wgmma kernel for ast on device, or None where the kernel
  does not apply (module docstring)."""
  if INSTRUCTION not in getattr(device.caps, "tensor_cores", ()) or not getenv("ALLOY_WGMMA", 1): return None
  if ast.n_buffers != 3 or ast.scalar_dtypes: return None   # the kernel takes C, A, B (two buffers: x @ x.T) and no scalars
  t0 = time.perf_counter()
  if (spec := match_matmul(ast)) is None or (fit := wgmma_gemm(spec)) is None: return None
  from alloy.runtime.cuda.tensor_map import TensorMapProgram, arch_compiler   # only a CUDA device gets here
  gemm, operands = fit
  kernel = render_wgmma(gemm)
  t1 = time.perf_counter()
  binary = arch_compiler(device.target).compile_cached(kernel.source)
  t2 = time.perf_counter()
  runner = TensorMapProgram(device, kernel, binary, operands)
  t3 = time.perf_counter()
  out_bytes = gemm.batch * gemm.M * gemm.N * 2
  meta = KernelMeta(kernel.name, kernel.grid, kernel.block, kernel.flops, out_bytes + 2 * prod(spec.batch) * spec.K * (spec.M + spec.N),
                    opts=(), target=device.target)
  times = {"lower": t1 - t0, "render": 0.0, "compile": t2 - t1, "load": t3 - t2}
  return LinearProgram([], meta), kernel.source, binary, runner, times
