"""The fused attention kernel for an ATTENTION kernel (renderer/cuda_attention.py; for float32
renderer/cuda_attention_f32.py; for a few query rows or a mask renderer/cuda_attention_rows.py), rendered whole
(engine/whole_kernel.py): no Lowerer, no search. The front end makes ATTENTION only for a device and operands a kernel serves
(codegen/attention.py's `fits`); anything else reaching here is an error that says why."""
from __future__ import annotations
import time
from alloy import dtype as dt
from alloy.codegen.attention import AttentionSpec, attention_spec, fits
from alloy.codegen.program import KernelMeta
from alloy.engine.whole_kernel import WholeKernel
from alloy.ir.kernel import KernelAST
from alloy.ir.ops import Op
from alloy.renderer.cuda_attention import AttentionKernel, render_attention
from alloy.renderer.cuda_attention_f32 import render_attention_f32
from alloy.renderer.cuda_attention_rows import render_attention_rows

def whole_kernel(ast: KernelAST, device) -> WholeKernel | None:
  """The fused kernel for an ATTENTION kernel; None for any other."""
  if ast.root.op is not Op.ATTENTION: return None
  t0 = time.perf_counter()
  spec = attention_spec(ast)
  if isinstance(spec, str): raise ValueError(f"ATTENTION on {device.name}: {spec}")
  if not fits(device.caps, spec.dtype, spec.D, spec.L, spec.attn_mask is not None):
    raise ValueError(f"ATTENTION on {device.name}: the device has no fused attention kernel for {spec.dtype.name} with head size {spec.D}")
  kernel = render(spec)
  meta = KernelMeta(kernel.name, kernel.grid, kernel.block, spec.flops, spec.bytes, target=device.target)
  return WholeKernel(kernel.source, meta, device.compiler.compile_cached, lambda binary: device.load(kernel.name, binary),
                     time.perf_counter() - t0)

def render(spec: AttentionSpec) -> AttentionKernel:
  """The fused kernel's source for spec: a threadgroup per query row for a few rows or a mask; else tiles on the CUDA
  cores for float32, on the tensor cores for 16-bit floats."""
  if spec.rows: return render_attention_rows(spec)
  return (render_attention_f32 if spec.dtype is dt.float32 else render_attention)(spec)
