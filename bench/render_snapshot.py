"""Every renderer's text for a fixed set of kernels, one file per kernel and renderer, so a renderer refactor can be
checked by diffing two snapshots (renderers are pure: no GPU needed). Kernels are compiled by realizing on CPU, then
lowered again with each GPU device's caps.

python bench/render_snapshot.py OUTDIR   # then: diff -r BEFORE AFTER
"""
from __future__ import annotations
import os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
from alloy import Tensor
from alloy.caps import DeviceCaps
from alloy.codegen.lower import lower
from alloy.engine import compiled
from alloy.renderer.c import CRenderer
from alloy.renderer.cuda import CUDARenderer
from alloy.renderer.metal import MetalRenderer
from alloy.renderer.ptx import PTXRenderer, Unsupported

CAPS = {"cuda": DeviceCaps(threads=True, codegen_loops=True), "cpu": DeviceCaps(threads=False),
        "metal": DeviceCaps(threads=True, registers=128, shared_bytes=32 << 10, shuffle_bytes=4)}
RENDERERS = {"c": ("cpu", CRenderer), "cuda": ("cuda", CUDARenderer), "ptx": ("cuda", PTXRenderer), "metal": ("metal", MetalRenderer)}

def workloads():
  rng = np.random.default_rng(0)
  f = lambda *s: Tensor(rng.uniform(-2, 2, s).astype(np.float32), device="CPU")
  x, y, i = f(300, 70), f(70, 33), Tensor(rng.integers(0, 300, 50).astype(np.int32), device="CPU")
  return [lambda: (x * 1.25 + 0.5).exp().softmax(1).log2().sum(0), lambda: x @ y, lambda: x.max(1).values, lambda: x.argmax(0),
          lambda: x[i].tanh(), lambda: (x.half() * 2).float().sqrt().sum(), lambda: x.reshape(70, 300).permute(1, 0) + 1]

def main(outdir: str):
  os.makedirs(outdir, exist_ok=True)
  asts = []
  for build in workloads():
    before = set(compiled._compiled)
    build().realize()
    asts += [ck.ast for key, ck in compiled._compiled.items() if key not in before]
  for k, ast in enumerate(asts):
    for rname, (caps, renderer) in RENDERERS.items():
      prog = lower(ast, CAPS[caps])
      try: text = renderer().render(prog)
      except Unsupported as e: text = f"unsupported: {e}\n"
      with open(os.path.join(outdir, f"{k:03d}_{prog.meta.name}.{rname}"), "w") as fh: fh.write(text)
  print(f"{len(asts)} kernels x {len(RENDERERS)} renderers -> {outdir}")

if __name__ == "__main__":
  if len(sys.argv) != 2: sys.exit(__doc__)
  main(sys.argv[1])
