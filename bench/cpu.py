"""CPU benchmark: the same work through alloy, NumPy, and PyTorch/tinygrad when installed, in one process.

python bench/cpu.py            (add --big for matmul 2048^3)

NumPy and PyTorch in their best forms of the same work: NumPy writing into a preallocated output where that saves
an allocation, torch eager as one kernel where it has one (torch.addcmul), and torch.compile where it runs here.
"""
from __future__ import annotations
import os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import alloy
from alloy import Tensor
from common import median_time, new_kernel_seconds, print_table, tinygrad_for, torch_compiled

try:
  import torch
  torch.set_num_threads(os.cpu_count() or 1)
except ImportError: torch = None

def run(big: bool = False):
  rng = np.random.default_rng(0)
  dev = alloy.get_device("CPU")
  rows, notes = [], set()
  def torch_figures(row: dict, work: float, fn, args: list, eager=None) -> None:
    """torch's figures for fn over args (NumPy arrays): eager (its one-kernel form `eager` where given) and compiled."""
    if torch is None: return
    targs = [torch.from_numpy(x) for x in args]
    figure = (lambda t: work / t / 1e9) if row["unit"] in ("GB/s", "GFLOP/s") else (lambda t: t * 1e6)
    row["torch"] = figure(median_time(lambda: (eager or fn)(*targs)))
    compiled, why_not = torch_compiled(fn, *targs)
    if compiled is not None: row["compile"] = figure(median_time(lambda: compiled(*targs)))
    else: notes.add(why_not)
  tinygrad, tinygrad_note = tinygrad_for("CPU")
  if tinygrad:
    TG, tg_realized = tinygrad
    def tg_time(thunk): return median_time(lambda: tg_realized(thunk))
    def tg(x): return TG(x, device="CPU").realize()
  def ours(fn):
    def go():
      fn().realize(); dev.synchronize()
    return median_time(go)
  N = 1 << 24
  a, b, c = (rng.uniform(0.5, 1.5, N).astype(np.float32) for _ in range(3))
  ta, tb, tc = (Tensor(x, device="CPU").realize() for x in (a, b, c))
  row = {"workload": "d = a*b + c, 2^24 f32", "unit": "GB/s"}
  nbytes = 16 * N
  row["alloy"] = nbytes / ours(lambda: ta * tb + tc) / 1e9
  out = np.empty_like(a)
  def numpy_fma():   # into a preallocated output: no page faults of a fresh 64 MB result per call
    np.multiply(a, b, out=out); np.add(out, c, out=out)
  row["numpy"] = nbytes / median_time(numpy_fma) / 1e9
  torch_figures(row, nbytes, lambda a, b, c: a * b + c, [a, b, c], lambda a, b, c: torch.addcmul(c, a, b))
  if tinygrad:
    ga, gb, gc = tg(a), tg(b), tg(c)
    row["tinygrad"] = nbytes / tg_time(lambda: ga * gb + gc) / 1e9
  rows.append(row)
  row = {"workload": "sum, 2^24 f32", "unit": "GB/s"}
  row["alloy"] = 4 * N / ours(lambda: ta.sum()) / 1e9
  row["numpy"] = 4 * N / median_time(lambda: a.sum()) / 1e9
  torch_figures(row, 4 * N, lambda a: a.sum(), [a])
  if tinygrad: row["tinygrad"] = 4 * N / tg_time(lambda: ga.sum()) / 1e9
  rows.append(row)
  m = rng.uniform(0.5, 1.5, (4096, 4096)).astype(np.float32)
  tm = Tensor(m, device="CPU").realize()
  row = {"workload": "row sums 4096x4096 f32", "unit": "GB/s"}
  row["alloy"] = m.nbytes / ours(lambda: tm.sum(1)) / 1e9
  row["numpy"] = m.nbytes / median_time(lambda: m.sum(1)) / 1e9
  torch_figures(row, m.nbytes, lambda m: m.sum(1), [m])
  if tinygrad:
    gm = tg(m); row["tinygrad"] = m.nbytes / tg_time(lambda: gm.sum(1)) / 1e9
  rows.append(row)
  s = rng.uniform(-2, 2, (2048, 2048)).astype(np.float32)
  ts = Tensor(s, device="CPU").realize()
  def np_softmax():
    e = np.exp(s - s.max(1, keepdims=True)); return e / e.sum(1, keepdims=True)
  row = {"workload": "softmax rows 2048x2048 f32", "unit": "GB/s"}
  row["alloy"] = 2 * s.nbytes / ours(lambda: ts.softmax(1)) / 1e9
  row["numpy"] = 2 * s.nbytes / median_time(np_softmax) / 1e9
  torch_figures(row, 2 * s.nbytes, lambda s: s.softmax(1), [s])
  if tinygrad:
    gs = tg(s); row["tinygrad"] = 2 * s.nbytes / tg_time(lambda: gs.softmax(1)) / 1e9
  rows.append(row)
  for n in ([1024, 2048] if big else [1024]):
    x, y = rng.uniform(-1, 1, (n, n)).astype(np.float32), rng.uniform(-1, 1, (n, n)).astype(np.float32)
    tx, ty = Tensor(x, device="CPU").realize(), Tensor(y, device="CPU").realize()
    row = {"workload": f"matmul {n}^3 f32", "unit": "GFLOP/s"}
    flops = 2 * n ** 3
    row["alloy"] = flops / ours(lambda: tx @ ty) / 1e9
    row["numpy"] = flops / median_time(lambda: x @ y) / 1e9
    torch_figures(row, flops, lambda x, y: x @ y, [x, y])
    if tinygrad:
      gx, gy = tg(x), tg(y); row["tinygrad"] = flops / tg_time(lambda: gx @ gy) / 1e9
    rows.append(row)
  # bfloat16 (NumPy has none): AVX512-BF16's pair dot products where the CPU has them (engine/cpu_bf16.py), else the
  # float32 tile converting as it loads; PyTorch's bf16 matmul (oneDNN) beside it
  n = 1024
  xb, yb = (Tensor(rng.uniform(-1, 1, (n, n)).astype(np.float32), device="CPU").cast(alloy.bfloat16).realize() for _ in range(2))
  row = {"workload": f"matmul {n}^3 bf16", "unit": "GFLOP/s", "alloy": 2 * n ** 3 / ours(lambda: xb @ yb) / 1e9}
  if torch is not None:
    txb, tyb = (torch.from_numpy(t.float().numpy()).bfloat16() for t in (xb, yb))
    row["torch"] = 2 * n ** 3 / median_time(lambda: txb @ tyb) / 1e9
  rows.append(row)
  # nn.Linear's layout at a decode step's 8 rows: x @ W.T, W stored (out, in)
  xd, wd = (Tensor(rng.uniform(-1, 1, s).astype(np.float32), device="CPU").cast(alloy.bfloat16).realize() for s in ((8, 4096), (4096, 4096)))
  flops = 2 * 8 * 4096 * 4096
  row = {"workload": "x @ W.T 8x4096x4096 bf16", "unit": "GFLOP/s", "alloy": flops / ours(lambda: xd @ wd.T) / 1e9}
  if torch is not None:
    txd, twd = (torch.from_numpy(t.float().numpy()).bfloat16() for t in (xd, wd))
    row["torch"] = flops / median_time(lambda: txd @ twd.T) / 1e9
  rows.append(row)
  small = Tensor(rng.uniform(1, 2, 1024).astype(np.float32), device="CPU").realize()
  row = {"workload": "one realize, cached tiny kernel", "unit": "us"}
  row["alloy"] = ours(lambda: small * 1.0001 + 1) * 1e6
  sn = small.numpy()
  row["numpy"] = median_time(lambda: sn * 1.0001 + 1) * 1e6
  if torch is not None:
    xsn, one = torch.from_numpy(sn), torch.ones(1024)
    row["torch"] = median_time(lambda: torch.add(one, xsn, alpha=1.0001)) * 1e6   # its one-kernel form
  if tinygrad:
    gsn = tg(sn); row["tinygrad"] = tg_time(lambda: gsn * 1.0001 + 1) * 1e6
  rows.append(row)
  rows.append({"workload": "first realize, new kernel + compile", "unit": "ms", "alloy": new_kernel_seconds(small, dev) * 1e3})
  e = rng.uniform(0.5, 2, (4, 3)).astype(np.float32)
  te = Tensor(e, device="CPU").realize()
  row = {"workload": "seed example, warm", "unit": "us"}
  row["alloy"] = ours(lambda: te.T.pad(((1, 1), (1, 1))).sum(1)) * 1e6
  row["numpy"] = median_time(lambda: np.pad(e.T, ((1, 1), (1, 1))).sum(1)) * 1e6
  torch_figures(row, 0, lambda e: torch.nn.functional.pad(e.T, (1, 1, 1, 1)).sum(1), [e])
  if tinygrad:
    ge = tg(e); row["tinygrad"] = tg_time(lambda: ge.T.pad(((1, 1), (1, 1))).sum(1)) * 1e6
  rows.append(row)
  cols = ["alloy", "numpy"] + (["torch"] if torch is not None else []) + (["compile"] if any("compile" in r for r in rows) else [])
  cols += ["tinygrad"] if tinygrad else []
  print(f"CPU benchmark on {dev.target}, {os.cpu_count()} cores; medians of 3 rounds")
  print_table(rows, cols, {})
  if torch is not None: print("torch: eager, one kernel per row where it has one (torch.addcmul); compile: torch.compile of the same function")
  for note in sorted(notes): print(note)
  if tinygrad_note: print(tinygrad_note)

if __name__ == "__main__":
  run(big="--big" in sys.argv)
