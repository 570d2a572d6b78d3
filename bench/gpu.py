"""GPU benchmark: alloy on CUDA beside PyTorch on the same GPU, in one process.

python bench/gpu.py
"""
from __future__ import annotations
import os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import alloy
from alloy import Tensor
from common import median_time, new_kernel_seconds, print_table
import torch

def torch_time(fn) -> float:
  fn(); torch.cuda.synchronize()
  s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
  ts = []
  for _ in range(3):
    s.record()
    for _ in range(10): fn()
    e.record(); e.synchronize()
    ts.append(s.elapsed_time(e) / 10 / 1e3)
  return sorted(ts)[1]

def run():
  dev = alloy.get_device("CUDA")
  rng = np.random.default_rng(0)
  def ours(fn) -> float:
    """Device time of the kernels fn launches (CUDA events through wait=True), median of 3."""
    from alloy.engine import realize as eng
    times = []
    def listener(ck, bufs, elapsed, t_submit): times.append(elapsed)
    fn().realize(); dev.synchronize()
    best = []
    os.environ["DEBUG"] = "0"
    for _ in range(3):
      times.clear()
      eng.launch_listeners.append(listener)
      import alloy.engine.realize as r
      old = r.DEBUG
      r.DEBUG = 2
      try:
        import io, contextlib
        with contextlib.redirect_stdout(io.StringIO()): fn().realize()
      finally:
        r.DEBUG = old
        eng.launch_listeners.remove(listener)
      best.append(sum(times))
    return sorted(best)[1]
  rows = []
  N = 1 << 28
  x = torch.empty(N, device="cuda").uniform_(0.5, 1.5)
  y = torch.empty_like(x)
  copy_t = torch_time(lambda: y.copy_(x))
  rows.append({"workload": "device copy 2^28 f32 (ceiling)", "unit": "GB/s", "torch": 8 * N / copy_t / 1e9})
  a, b, c = (Tensor(rng.uniform(0.5, 1.5, N).astype(np.float32), device="CUDA").realize() for _ in range(3))
  xa, xb, xc = (torch.rand(N, device="cuda") + 0.5 for _ in range(3))
  rows.append({"workload": "d = a*b + c, 2^28 f32", "unit": "GB/s", "alloy": 16 * N / ours(lambda: a * b + c) / 1e9,
               "torch": 16 * N / torch_time(lambda: xa * xb + xc) / 1e9})
  rows.append({"workload": "sum, 2^28 f32", "unit": "GB/s", "alloy": 4 * N / ours(lambda: a.sum()) / 1e9,
               "torch": 4 * N / torch_time(lambda: xa.sum()) / 1e9})
  m = Tensor(rng.uniform(0.5, 1.5, (16384, 16384)).astype(np.float32), device="CUDA").realize()
  xm = torch.rand(16384, 16384, device="cuda")
  rows.append({"workload": "row sums 16384x16384 f32", "unit": "GB/s", "alloy": 4 * 16384 ** 2 / ours(lambda: m.sum(1)) / 1e9,
               "torch": 4 * 16384 ** 2 / torch_time(lambda: xm.sum(1)) / 1e9})
  s = Tensor(rng.uniform(-2, 2, (8192, 8192)).astype(np.float32), device="CUDA").realize()
  xs = torch.rand(8192, 8192, device="cuda")
  rows.append({"workload": "softmax rows 8192x8192 f32", "unit": "GB/s", "alloy": 8 * 8192 ** 2 / ours(lambda: s.softmax(1)) / 1e9,
               "torch": 8 * 8192 ** 2 / torch_time(lambda: xs.softmax(1)) / 1e9})
  small = Tensor(rng.uniform(1, 2, 1024).astype(np.float32), device="CUDA").realize()
  xsm = torch.rand(1024, device="cuda")
  def realize_small():
    (small * 1.0001 + 1).realize(); dev.synchronize()
  def torch_small():
    xsm * 1.0001 + 1; torch.cuda.synchronize()
  rows.append({"workload": "one realize, cached tiny kernel", "unit": "us", "alloy": median_time(realize_small) * 1e6,
               "torch": median_time(torch_small) * 1e6})
  rows.append({"workload": "first realize, new kernel + compile", "unit": "ms", "alloy": new_kernel_seconds(small, dev) * 1e3})
  print(f"GPU benchmark on {dev.device_name} ({dev.target}); alloy device time from CUDA events")
  print_table(rows, ["alloy", "torch"], {})

if __name__ == "__main__":
  run()
