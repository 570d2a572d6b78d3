"""Half-precision matmul on an H200: alloy's Hopper kernel (wgmma + TMA, renderer/cuda_wgmma.py) beside torch.matmul
(cuBLAS) on the same tensors, in one run, as TFLOP/s and the ratio. Each figure is the median of 3 timings of 10
back-to-back launches (CUDA events), after a warm-up; alloy's output is compared with torch's.

python bench/matmul.py [--quick]
"""
from __future__ import annotations
import os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch
import alloy
from alloy.renderer.cuda_wgmma import Operand, WGMMAGemm
from alloy.runtime.cuda.tensor_map import build_wgmma

def events_time(launch, record) -> float:
  times = []
  for _ in range(3):
    start, end = record()
    for _ in range(10): launch()
    times.append(end() / 10)
  return sorted(times)[1]

def run(quick: bool = False) -> None:
  dev = alloy.get_device("CUDA")
  cases = [("fp16 4096^3", torch.float16, 1, 4096, 4096, 4096, False), ("bf16 4096^3", torch.bfloat16, 1, 4096, 4096, 4096, False),
           ("fp16 8192^3", torch.float16, 1, 8192, 8192, 8192, False), ("bf16 8192^3", torch.bfloat16, 1, 8192, 8192, 8192, False),
           ("fp16 512 x 1024x64 @ 64x1024 (Q @ K^T)", torch.float16, 512, 1024, 1024, 64, True)]
  if quick: cases = cases[:1]
  print(f"{'workload':42s} {'alloy TFLOP/s':>14s} {'cuBLAS TFLOP/s':>15s} {'ratio':>7s} {'max |diff| / max |C|':>22s}")
  for label, dt, batch, M, N, K, b_kmajor in cases:
    a = torch.empty(batch, M, K, device="cuda", dtype=dt).uniform_(-1, 1)
    b_store = torch.empty(batch, N, K, device="cuda", dtype=dt).uniform_(-1, 1) if b_kmajor else \
              torch.empty(batch, K, N, device="cuda", dtype=dt).uniform_(-1, 1)
    b = b_store.transpose(1, 2) if b_kmajor else b_store
    c = torch.empty(batch, M, N, device="cuda", dtype=dt)
    name = "float16" if dt is torch.float16 else "bfloat16"
    g = WGMMAGemm(batch, M, N, K, name, Operand(True, K, M * K), Operand(b_kmajor, K if b_kmajor else N, N * K))
    kern = build_wgmma(dev, g)
    launch = lambda: kern.launch([c.data_ptr(), a.data_ptr(), b_store.data_ptr()])
    torch.cuda.synchronize()
    launch(); dev.synchronize()
    def ours_events():
      dev.synchronize()
      from cuda.bindings import driver
      driver.cuEventRecord(dev.t0, dev.stream)
      return None, dev.elapsed_since_t0
    t_ours = events_time(launch, ours_events)
    ref = torch.matmul(a, b)
    def torch_events():
      s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
      s.record()
      def end():
        e.record(); e.synchronize()
        return s.elapsed_time(e) / 1e3
      return None, end
    t_torch = events_time(lambda: torch.matmul(a, b, out=ref) if batch == 1 else torch.bmm(a, b, out=ref), torch_events)
    dev.synchronize(); torch.cuda.synchronize()
    diff = ((c.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
    flops = 2 * batch * M * N * K
    print(f"{label:42s} {flops / t_ours / 1e12:14.1f} {flops / t_torch / 1e12:15.1f} {t_torch / t_ours:7.2f} {diff:22.2e}", flush=True)

if __name__ == "__main__": run("--quick" in sys.argv)
