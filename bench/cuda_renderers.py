"""The CUDA device's two renderers on the same work: kernels rendered as PTX (assembled by nvJitLink, the default)
against the same kernels as CUDA C (NVRTC, what ALLOY_PTX=0 gives), device time from CUDA events, PyTorch beside
them, in one process; and what a never-seen kernel costs to compile through each.

python bench/cuda_renderers.py
"""
from __future__ import annotations
import os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import alloy
from alloy import Tensor
from alloy.engine import compiled
from alloy.renderer.cuda import CUDARenderer
from alloy.renderer.ptx import PTXFirstRenderer
from common import device_seconds, new_kernel_seconds, print_table
from gpu import torch_time
import torch

def workloads(rng) -> list:
  """(name, unit, amount of work: bytes or FLOPs, host arrays, function applied alike to alloy and torch tensors)"""
  n, m = 1 << 26, 8192
  f32 = lambda *shape: rng.uniform(-2, 2, shape).astype(np.float32)
  a, b, c = f32(n), f32(n), f32(n)
  h = [x.astype(np.float16) for x in (a, b, c)]
  idx = rng.integers(0, n, n // 4).astype(np.int64)
  return [
    ("d = a*b + c, 2^26 f32", "GB/s", 16 * n, [a, b, c], lambda a, b, c: a * b + c),
    ("d = a*b + c, 2^26 f16", "GB/s", 8 * n, h, lambda a, b, c: a * b + c),
    ("tanh, 2^26 f32", "GB/s", 8 * n, [a], lambda a: a.tanh()),
    ("gelu (erf), 2^26 f32", "GB/s", 8 * n, [a], lambda a: 0.5 * a * (1 + (a * 0.7071067811865476).erf())),
    ("softmax rows 8192x8192 f32", "GB/s", 8 * m * m, [f32(m, m)], lambda s: s.softmax(1)),
    ("argmax rows 8192x8192 f32", "GB/s", 4 * m * m, [f32(m, m)], lambda s: s.argmax(1)),
    ("gather 2^24 of 2^26 f32", "GB/s", 16 * (n // 4), [a, idx], lambda a, i: a[i]),
    ("matmul 1024^3 f32", "GFLOP/s", 2 * 1024 ** 3, [f32(1024, 1024), f32(1024, 1024)], lambda x, y: x @ y),
    ("matmul 2048^3 f32", "GFLOP/s", 2 * 2048 ** 3, [f32(2048, 2048), f32(2048, 2048)], lambda x, y: x @ y),
  ]

def run():
  dev = alloy.get_device("CUDA")
  if not isinstance(dev.renderer, PTXFirstRenderer): sys.exit("the CUDA device renders CUDA C only here (ALLOY_PTX=0 or no nvJitLink)")
  renderers = {"alloy": dev.renderer, "CUDA C": CUDARenderer()}
  rng = np.random.default_rng(0)
  torch.backends.cuda.matmul.allow_tf32 = False   # the same float32 arithmetic as ours
  rows = []
  for name, unit, work, hosts, fn in workloads(rng):
    row = {"workload": name, "unit": unit}
    ours_in = [Tensor(x, device="CUDA").realize() for x in hosts]
    for label, renderer in renderers.items():
      dev.renderer = renderer
      compiled._compiled.clear()   # render and compile again with this renderer
      row[label] = work / device_seconds(lambda: fn(*ours_in), dev) / 1e9
    torch_in = [torch.from_numpy(x).cuda() for x in hosts]
    row["torch"] = work / torch_time(lambda: fn(*torch_in)) / 1e9
    rows.append(row)
  small = Tensor(rng.uniform(1, 2, 1024).astype(np.float32), device="CUDA").realize()
  row = {"workload": "first realize, new kernel + compile", "unit": "ms"}
  for label, renderer in renderers.items():
    dev.renderer = renderer
    row[label] = new_kernel_seconds(small, dev) * 1e3
  rows.append(row)
  dev.renderer = renderers["alloy"]
  print(f"CUDA renderers on {dev.device_name} ({dev.target}): alloy = PTX where it covers the kernel (nvJitLink), "
        "CUDA C = the same kernels through NVRTC; device time from CUDA events")
  print_table(rows, ["alloy", "CUDA C", "torch"], {})

if __name__ == "__main__":
  run()
