"""float32 matmuls of the shapes GPT-2 runs without tensor cores (a decode step at batch 32, attention's scores
against a transposed key), their heuristic kernel beside BEAM=2's and torch's (TF32 off), with each kernel's
transforms: what the heuristics miss.

  DEV=CUDA BEAM_BUDGET_S=20 python3 bench/small_m.py [--beam]
"""
from __future__ import annotations
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import alloy
from alloy import Tensor
from alloy.engine.watch import OnLaunch, watchers
from common import device_seconds
from beam import torch_seconds

SHAPES = [   # (name, A's shape, B's shape, B transposed (its last two axes swapped, as k.transpose(-1, -2)))
  ("decode c_fc 32x768 @ 768x3072", (32, 768), (768, 3072), False),
  ("decode c_proj 32x3072 @ 3072x768", (32, 3072), (3072, 768), False),
  ("decode lm_head 32x768 @ 768x50257^T", (32, 768), (50257, 768), True),
  ("scores 96x(1024x64 @ 64x1024^T)", (96, 1024, 64), (96, 1024, 64), True),
  ("prefill c_fc 8192x768 @ 768x3072", (8192, 768), (768, 3072), False),
]

def main():
  device = alloy.default_device()
  dev = alloy.get_device(device)
  rng = np.random.default_rng(0)
  print(f"{'workload':38s} {'heur GF/s':>10s} {'BEAM GF/s':>10s} {'torch GF/s':>10s}  heuristic opts | BEAM opts")
  for name, sa, sb, bt in SHAPES:
    ha, hb = rng.standard_normal(sa).astype(np.float32), rng.standard_normal(sb).astype(np.float32)
    a, b = Tensor(ha, device=device).realize(), Tensor(hb, device=device).realize()
    fn = (lambda: a @ b.transpose(-1, -2)) if bt else (lambda: a @ b)
    flops = 2 * np.prod(sa) * (sb[-2] if bt else sb[-1])
    seen = []
    def note(ck, buffers, elapsed, t_submit, consts): seen.append(" ".join(map(str, ck.meta.opts)))
    with watchers.watching(OnLaunch(note)): fn().realize()
    heur, heur_opts = device_seconds(fn, dev), seen[-1]
    beam, beam_opts = heur, "(not searched: --beam)"
    if "--beam" in sys.argv:
      with alloy.beam(2):
        with watchers.watching(OnLaunch(note)): fn().realize()
        beam, beam_opts = device_seconds(fn, dev), seen[-1]
    theirs = torch_seconds((lambda x, y: x @ y.transpose(-1, -2)) if bt else (lambda x, y: x @ y), [ha, hb], device)
    print(f"{name:38s} {flops / heur / 1e9:10.0f} {flops / beam / 1e9:10.0f} {flops / theirs / 1e9 if theirs else 0:10.0f}  "
          f"{heur_opts} | {beam_opts}", flush=True)

def sweep():
  """--sweep: forced transform lists on each decode shape (the register tile's shapes), timed by the device."""
  import math
  from alloy.schedule.fusion import schedule
  from alloy.codegen.opts import choose_opts
  from alloy.codegen.plan import check
  from alloy.codegen.transforms import describe, local, upcast, unroll
  from common import forced_seconds
  device = alloy.default_device()
  dev = alloy.get_device(device)
  rng = np.random.default_rng(0)
  for name, sa, sb, bt in SHAPES[:3] + [("decode attn c_proj 32x768 @ 768x768", (32, 768), (768, 768), False)]:
    a = Tensor(rng.standard_normal(sa).astype(np.float32), device=device).realize()
    b = Tensor(rng.standard_normal(sb).astype(np.float32), device=device).realize()
    out = a @ b.transpose(-1, -2) if bt else a @ b
    ((_, ast, inputs, _),) = schedule([out.node])
    flops = 2 * math.prod(ast.shape) * sa[-1]
    lists = [choose_opts(ast, dev.caps)]
    for rows in (1, 2, 4, 8, 16, 32):
      for cols in (1, 2, 4):
        for threads in (32, 64, 128, 256):
          for k in (None, 4):
            lists.append([local(threads)] + ([upcast(0, rows)] if rows > 1 else []) + ([upcast(1, cols)] if cols > 1 else []) +
                         ([unroll(k)] if k else []))
    lists = [opts for opts in lists if check(ast, dev.caps, opts) is None]
    results = [(flops / t / 1e9, describe(opts)) for opts, t in zip(lists, forced_seconds(ast, inputs[1:], lists, device))]
    print(f"{name}: heuristics {results[0][1]} {results[0][0]:.0f} GFLOP/s; best: " +
          ", ".join(f"{d} {g:.0f}" for g, d in sorted(results, reverse=True)[:6]), flush=True)

if __name__ == "__main__":
  sweep() if "--sweep" in sys.argv else main()
