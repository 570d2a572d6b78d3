"""Every tensor-core tile and pipeline depth (codegen/tensor_core.py) on a few matmuls, forced, beside the heuristics'
choice: what the tile table and TENSOR_CORE_BIG_TILES are tuned from. TFLOP/s from CUDA events (best of 5).

python bench/matmul_tiles.py [--quick] [--fp32] [--mid]
"""
from __future__ import annotations
import math, os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import alloy
from alloy import Tensor
from alloy.schedule.fusion import schedule
from alloy.codegen.opts import choose_opts
from alloy.codegen.candidates import neighbours
from alloy.codegen.transforms import describe
from alloy.codegen.tensor_core import tile_for
from common import forced_seconds

def run():
  dev = alloy.get_device("CUDA")
  rng = np.random.default_rng(0)
  h = lambda *s: Tensor(rng.uniform(-1, 1, s).astype(np.float16), device="CUDA").realize()
  work = {"fp16 4096^3": (h(4096, 4096), h(4096, 4096)), "fp16 8192^3": (h(8192, 8192), h(8192, 8192)),
          "attention 512x1024x64x1024": (h(512, 1024, 64), h(512, 64, 1024))}
  if "--quick" in sys.argv: work = {"fp16 4096^3": work["fp16 4096^3"]}
  if "--mid" in sys.argv:   # fp16 matmuls of a few waves of Hopper tiles or fewer: where the tile's width decides the grid
    shapes = ((1000, 1000, 1000), (2048, 2048, 2048), (8192, 768, 3072), (8192, 3072, 768), (512, 4096, 4096), (1024, 1024, 4096),
              (128, 4096, 4096), (256, 4096, 4096), (4096, 1024, 1024), (512, 256, 1024), (8192, 1024, 128))
    work = {f"fp16 {m}x{k}x{n}": (h(m, k), h(k, n)) for m, k, n in shapes}
  if "--fp32" in sys.argv:   # the CUDA cores' float32 tiles
    f = lambda *s: Tensor(rng.uniform(-1, 1, s).astype(np.float32), device="CUDA").realize()
    work = {"fp32 4096^3": (f(4096, 4096), f(4096, 4096)), "fp32 1000^3": (f(1000, 1000), f(1000, 1000)),
            "fp32 8192x768x3072": (f(8192, 768), f(768, 3072)), "fp32 8192x3072x768": (f(8192, 3072), f(3072, 768))}
  for name, (a, b) in work.items():
    ((_, ast, inputs, _),) = schedule([(a @ b).node])
    flops = 2 * math.prod(ast.shape) * a.shape[-1]
    base = choose_opts(ast, dev.caps)
    lists = [tuple(base)] + [o for o in neighbours(ast, dev.caps, base) if len(o) == 1 or o[-1].arg == tile_for(o[0].arg).stages + 1]
    results = [(flops / t / 1e12, describe(opts)) for opts, t in zip(lists, forced_seconds(ast, inputs[1:], lists, "CUDA", 4))]
    print(f"{name}: heuristics {describe(base)} {results[0][0]:.0f} TFLOP/s; best: " +
          ", ".join(f"{describe_} {tf:.0f}" for tf, describe_ in sorted(results, reverse=True)[:5]))

if __name__ == "__main__":
  run()
