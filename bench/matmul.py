"""Matmul on the GPU: alloy's tensor-core tiles (codegen/tensor_core.py) beside cuBLAS (and a convolution beside cuDNN,
GPT-2's causal attention beside PyTorch's scaled_dot_product_attention in fp16 and fp32) through PyTorch, one process.

Floors (H200): dense fp16/bf16 tensor cores ~989 TFLOP/s (cuBLAS reaches 750-800 with wgmma); mma.sync, the
sm_80 instruction, issues at about half of wgmma's rate on sm_90, so ~0.5x cuBLAS is its ceiling in practice.
fp32 without TF32: ~67 TFLOP/s of FMA.

Each figure is the median of ROUNDS turns, the columns of a row timed in turn; each turn times 10 calls back to back
behind a spacer on both sides (common.back_to_back_seconds), so the figures are the kernels' device time.

python bench/matmul.py [--quick] [--fp32 (the float32 rows only)]
"""
from __future__ import annotations
import os, statistics, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import alloy
from alloy import Tensor
import alloy.nn.functional as F
from common import back_to_back_seconds, print_table, torch_back_to_back_seconds, torch_compiled
import torch

ROUNDS = 5   # alternated turns of each row's columns (see run's row)

def attention_rows(row, rng, dtype) -> None:
  """GPT-2's prefill attention (8 x 12 heads x 1024 x 64, causal): alloy's fused kernel beside PyTorch's
  scaled_dot_product_attention (its flash or memory-efficient kernel), FLOPs counted for the causal half."""
  qkv = [rng.uniform(-1, 1, (8, 12, 1024, 64)).astype(dtype) for _ in range(3)]
  row(f"{np.dtype(dtype).name} causal attention 8x12x1024x64", 2 * 8 * 12 * 1024 * 1024 * 64, qkv,
      lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
      torch_fn=lambda q, k, v: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True))

def run(quick: bool = False, fp32_only: bool = False):
  dev = alloy.get_device("CUDA")
  rng = np.random.default_rng(0)
  rows, notes = [], set()
  def row(workload: str, flops: float, hosts: list, fn, torch_fn=None, dtype=None, compile_too=False, torch_setup=None):
    ours_in = [Tensor(h, device="CUDA").realize() for h in hosts]
    torch_in = [torch.from_numpy(h).cuda() for h in hosts]
    if dtype is not None:
      ours_in = [t.cast(dtype).realize() for t in ours_in]
      torch_in = [t.to(getattr(torch, dtype.name)) for t in torch_in]
    timed = {"alloy": lambda: back_to_back_seconds(lambda: fn(*ours_in), dev),
             "torch": lambda: torch_back_to_back_seconds(lambda: (torch_fn or fn)(*torch_in))}
    if compile_too:
      compiled, why_not = torch_compiled(torch_fn or fn, *torch_in)
      if compiled is not None: timed["compile"] = lambda: torch_back_to_back_seconds(lambda: compiled(*torch_in))
      else: notes.add(why_not)
    # the columns in turns, ROUNDS times, each the median of its turns: the clocks and the host's other tenants drift
    # over a run, and a figure taken minutes apart from its peer's can be off by 5%
    seconds = {k: [] for k in timed}
    for _ in range(ROUNDS):
      for k, f in timed.items(): seconds[k].append(f())
    r = {"workload": workload, "unit": "TFLOP/s", **{k: flops / statistics.median(v) / 1e12 for k, v in seconds.items()}}
    rows.append(r)
  mm = lambda a, b: a @ b
  sizes = (4096,) if quick else (4096, 8192)
  for dtype in () if fp32_only else (alloy.float16, alloy.bfloat16):
    for n in sizes:
      h = [rng.uniform(-1, 1, (n, n)).astype(np.float32) for _ in range(2)]
      row(f"{dtype.name} matmul {n}^3", 2 * n ** 3, h, mm, dtype=dtype)
  if not fp32_only:   # matmuls of a few waves of Hopper blocks or fewer: the block narrows to fill the SMs (tc.wgmma_tile)
    for m, k, n in ((1000, 1000, 1000), (512, 4096, 4096), (64, 4096, 4096)):
      h = [rng.uniform(-1, 1, (m, k)).astype(np.float16), rng.uniform(-1, 1, (k, n)).astype(np.float16)]
      row(f"float16 matmul {m}x{k}x{n}", 2 * m * k * n, h, mm)
    q = rng.uniform(-1, 1, (512, 1024, 64)).astype(np.float16)
    k = rng.uniform(-1, 1, (512, 64, 1024)).astype(np.float16)
    row("fp16 attention 512x(1024x64 @ 64x1024)", 2 * 512 * 1024 * 1024 * 64, [q, k], mm)
    attention_rows(row, rng, np.float16)
    n = 4096
    h = [rng.uniform(-1, 1, (n, n)).astype(np.float16), rng.uniform(-1, 1, (n, n)).astype(np.float16), rng.uniform(-1, 1, n).astype(np.float16)]
    row("fp16 gelu(a@b + bias) 4096^3", 2 * n ** 3, h, lambda a, b, c: (a @ b + c).gelu(),
        torch_fn=lambda a, b, c: torch.nn.functional.gelu(torch.addmm(c, a, b)), compile_too=True)
    torch.backends.cudnn.benchmark = True   # cuDNN's fastest algorithm for the shape, its best form
    h = [rng.uniform(-1, 1, (64, 64, 56, 56)).astype(np.float16), rng.uniform(-0.1, 0.1, (64, 64, 3, 3)).astype(np.float16)]
    row("fp16 conv2d b64 64->64 56x56 3x3", 2 * 64 * 64 * 64 * 56 * 56 * 9, h, lambda x, w: F.conv2d(x, w, padding=1),
        torch_fn=lambda x, w: torch.nn.functional.conv2d(x, w, padding=1))
  torch.backends.cuda.matmul.allow_tf32 = False
  for n in (1000, 4096) + (() if quick else (8192,)):   # exact float32: the CUDA cores' tile (tensor_core.SIMT_F32)
    h = [rng.uniform(-1, 1, (n, n)).astype(np.float32) for _ in range(2)]
    row(f"fp32 matmul {n}^3 (exact)", 2 * n ** 3, h, mm)
  h = [rng.uniform(-1, 1, s).astype(np.float32) for s in ((8192, 768), (768, 3072), (3072,))]
  row("fp32 gelu(x@W + b) 8192x768x3072", 2 * 8192 * 768 * 3072, h, lambda a, b, c: (a @ b + c).gelu(),
      torch_fn=lambda a, b, c: torch.nn.functional.gelu(torch.addmm(c, a, b)), compile_too=True)
  attention_rows(row, rng, np.float32)
  print(f"matmul benchmark on {dev.device_name} ({dev.target}); device time of 10 calls back to back behind a spacer (CUDA events), each side")
  print_table(rows, ["alloy", "torch"] + (["compile"] if any("compile" in r for r in rows) else []), {})
  print("torch: cuBLAS (eager; gelu row: addmm then gelu, two kernels; compile: torch.compile of the same function); "
        "conv2d: cuDNN with benchmark=True; attention: scaled_dot_product_attention; fp32: allow_tf32=False")
  for note in sorted(notes): print(note)

if __name__ == "__main__":
  run("--quick" in sys.argv, "--fp32" in sys.argv)
