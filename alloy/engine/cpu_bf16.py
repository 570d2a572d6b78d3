"""Which kernels go to the CPU's bfloat16 matmul on AVX512-BF16 (renderer/c_bf16_gemm.py) instead of the Lowerer,
and their CompiledKernel.

A kernel goes there on a CPU whose flags list avx512_bf16, with kernels built for AVX-512 (ALLOY_CPU_ISA not
narrowing them) and `ALLOY_CPU_BF16` not 0 (runtime/cpu: the device's caps then list bfloat16 in `whole_matmuls`,
and the schedule stores such a matmul as its cast, its epilogue a kernel of its own: the values are the same, since
the graph rounds the matmul to bf16 first), where codegen/matmul.py recognises a matmul of two bfloat16 operands,
accumulated in float32, with no epilogue but the cast to bfloat16, stored as (batch..., m, n) in order; A (the left
operand) must run along K in memory, and each operand's batch axes must be one run of memory. An operand B shared by
the batch, with A's batches one run of rows (x @ W), folds the batch into M. Anything else (float16, another
layout) goes through the Lowerer, whose float32 register tile converts bf16 as it loads.

Measured on this project's 2-core AVX-512 VM (2026-12-04), against the Lowerer's tile, ms: a @ b 1024^3 11.7 -> 5.6
(bench/cpu.py: 183 -> 382 GFLOP/s, PyTorch's oneDNN 374); x @ W.T (nn.Linear's layout) 8x4096x4096 28.0 -> 1.9,
64x4096x4096 26.2 -> 6.7 (both the dot kernel), 256x768x3072 10.1 -> 3.5, 1024^3 14.9 -> 6.0 (PyTorch 2.3, 6.1, 3.4,
5.5).
"""
from __future__ import annotations
import dataclasses, time
from alloy import dtype as dt
from alloy.helpers import prod
from alloy.codegen.matmul import MatmulSpec, flat_batch_stride, folds_batch_into_rows, match_matmul
from alloy.codegen.program import KernelMeta
from alloy.engine.whole_kernel import WholeKernel
from alloy.ir.kernel import KernelAST
from alloy.renderer.c_bf16_gemm import BF16Gemm, kernel_name, render_bf16_gemm

def bf16_gemm(spec: MatmulSpec) -> BF16Gemm | None:
  """spec as the kernel's BF16Gemm, or None where the kernel does not take it (module docstring)."""
  if spec.a.dtype is not dt.bfloat16 or spec.b.dtype is not dt.bfloat16 or spec.acc_dtype is not dt.float32: return None
  if spec.out_dtype is not dt.bfloat16 or not spec.plain or spec.a.k_stride != 1: return None
  a_batch, b_batch = (flat_batch_stride(op, spec.batch) for op in (spec.a, spec.b))
  if a_batch is None or b_batch is None: return None
  g = BF16Gemm(prod(spec.batch), spec.M, spec.N, spec.K, spec.a.stride, a_batch, spec.a.offset, spec.b.k_stride, spec.b.stride,
               b_batch, spec.b.offset, spec.a.slot, spec.b.slot)
  if folds_batch_into_rows(spec):   # x @ W: one matmul of batch * M rows
    g = dataclasses.replace(g, batch=1, M=g.batch * g.M, a_batch=0)
  return g

def takes_bf16(device) -> bool:
  """Whether device is a CPU whose kernels may use AVX512-BF16 (its caps list bfloat16's whole matmuls: cpu_caps)."""
  return "bfloat16" in device.caps.whole_matmuls

def whole_kernel(ast: KernelAST, device) -> WholeKernel | None:
  """The kernel for ast on device, or None where it does not apply (module docstring)."""
  if ast.scalar_dtypes or not takes_bf16(device): return None
  t0 = time.perf_counter()
  if (spec := match_matmul(ast)) is None or (g := bf16_gemm(spec)) is None: return None
  name = kernel_name(g)
  source = render_bf16_gemm(g, name)
  nbytes = 2 * (g.batch * g.M * g.N + prod(spec.batch) * spec.K * (spec.M + spec.N))
  meta = KernelMeta(name, (g.items, 1, 1), (1, 1, 1), g.flops, nbytes, opts=(), target=device.target)
  return WholeKernel(source, meta, device.compiler.compile_cached, lambda binary: device.load(name, binary), time.perf_counter() - t0)
