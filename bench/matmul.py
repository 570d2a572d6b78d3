"""Half-precision matmul on the GPU: alloy's `a @ b` (on an H200 the Hopper kernel, engine/wgmma.py) beside
torch.matmul (cuBLAS) on the same values, in one run, in TFLOP/s with the ratio. alloy's figure is the device time
of the kernels its realize launches (CUDA events, median of 3 after a warm-up; bench/common.py), torch's the median
of 3 timings of 10 back-to-back calls; each result is compared with torch's.

python bench/matmul.py [--quick]
"""
from __future__ import annotations
import os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import torch
import alloy
from alloy import Tensor
from common import device_seconds, torch_time

CASES = [("fp16 4096^3", "float16", (4096, 4096), (4096, 4096), False), ("bf16 4096^3", "bfloat16", (4096, 4096), (4096, 4096), False),
         ("fp16 8192^3", "float16", (8192, 8192), (8192, 8192), False), ("bf16 8192^3", "bfloat16", (8192, 8192), (8192, 8192), False),
         ("fp16 512x1024x64 @ 64x1024 (q @ k^T)", "float16", (512, 1024, 64), (512, 1024, 64), True)]

def run(quick: bool = False) -> None:
  dev = alloy.get_device("CUDA")
  rng = np.random.default_rng(0)
  print(f"device {dev.device_name} ({dev.target}); alloy's kernel and torch's on the same values")
  print(f"{'workload':38s} {'alloy TFLOP/s':>14s} {'cuBLAS TFLOP/s':>15s} {'ratio':>7s} {'max|diff|/max|C|':>17s}  kernel")
  for label, dtype, a_shape, b_shape, transpose_b in CASES[:1] if quick else CASES:
    a_np, b_np = (rng.uniform(-1, 1, s).astype(np.float32) for s in (a_shape, b_shape))
    adt, tdt = getattr(alloy, dtype), getattr(torch, dtype)
    a, b = (Tensor(x, device="CUDA").cast(adt).realize() for x in (a_np, b_np))
    ta, tb = (torch.from_numpy(x).cuda().to(tdt) for x in (a_np, b_np))
    ours = (lambda: a @ b.transpose(1, 2)) if transpose_b else (lambda: a @ b)
    theirs = (lambda: torch.matmul(ta, tb.transpose(1, 2))) if transpose_b else (lambda: torch.matmul(ta, tb))
    from alloy.engine import realize as engine
    names = []
    listener = lambda ck, bufs, elapsed, t_submit, consts: names.append(ck.meta.name)
    engine.launch_listeners.append(listener)
    try: t_ours = device_seconds(ours, dev)
    finally: engine.launch_listeners.remove(listener)
    t_torch = torch_time(theirs)
    ref = theirs().float()
    got = torch.from_numpy(ours().float().numpy()).cuda().reshape(ref.shape)
    diff = ((got - ref).abs().max() / ref.abs().max()).item()
    flops = 2 * np.prod(a_shape[:-1]) * a_shape[-1] * (b_shape[-2] if transpose_b else b_shape[-1])
    print(f"{label:38s} {flops / t_ours / 1e12:14.1f} {flops / t_torch / 1e12:15.1f} {t_torch / t_ours:7.2f} {diff:17.2e}  "
          f"{sorted(set(names))[0] if names else '?'}", flush=True)

if __name__ == "__main__": run("--quick" in sys.argv)
