"""GPU benchmark: alloy on CUDA beside PyTorch on the same GPU, in one process.

PyTorch in its best forms of the same work: eager as one kernel where it has one (torch.addcmul for a*b + c), and
torch.compile (inductor's fused kernel) where it runs here.

python bench/gpu.py
"""
from __future__ import annotations
import os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import alloy
from alloy import Tensor
from common import device_seconds, median_time, torch_time, new_kernel_seconds, print_table, tinygrad_for, torch_compiled
import torch

def run():
  dev = alloy.get_device("CUDA")
  rng = np.random.default_rng(0)
  def ours(fn) -> float: return device_seconds(fn, dev)
  tinygrad, tinygrad_note = tinygrad_for("CUDA")
  def tg(host: np.ndarray): return tinygrad[0](host, device="CUDA").realize()
  def tg_figure(row: dict, work: float, thunk) -> None:
    """tinygrad's figure for the same work: host clock around realize + synchronize (its launch cost included)."""
    t = median_time(lambda: tinygrad[1](thunk))
    row["tinygrad"] = work / t / 1e9 if row["unit"] == "GB/s" else t * 1e6
  rows, notes = [], set()
  def bandwidth_row(workload: str, nbytes: int, hosts: list, fn, torch_eager=None) -> None:
    """fn applied to the same host arrays uploaded for alloy, torch and tinygrad: the three share these method names.
    torch_eager: torch's one-kernel form of the same work where fn is several kernels in eager torch."""
    ours_in = [Tensor(h, device="CUDA").realize() for h in hosts]
    torch_in = [torch.from_numpy(h).cuda() for h in hosts]
    eager = torch_eager or fn
    row = {"workload": workload, "unit": "GB/s", "alloy": nbytes / ours(lambda: fn(*ours_in)) / 1e9,
           "torch": nbytes / torch_time(lambda: eager(*torch_in)) / 1e9}
    compiled, why_not = torch_compiled(fn, *torch_in)
    if compiled is not None: row["compile"] = nbytes / torch_time(lambda: compiled(*torch_in)) / 1e9
    else: notes.add(why_not)
    if tinygrad:
      tg_in = [tg(h) for h in hosts]
      tg_figure(row, nbytes, lambda: fn(*tg_in))
    rows.append(row)
  N = 1 << 28
  x = torch.empty(N, device="cuda").uniform_(0.5, 1.5)
  y = torch.empty_like(x)
  copy_t = torch_time(lambda: y.copy_(x))
  rows.append({"workload": "device copy 2^28 f32 (ceiling)", "unit": "GB/s", "torch": 8 * N / copy_t / 1e9})
  host = [rng.uniform(0.5, 1.5, N).astype(np.float32) for _ in range(3)]
  bandwidth_row("d = a*b + c, 2^28 f32", 16 * N, host, lambda a, b, c: a * b + c, lambda a, b, c: torch.addcmul(c, a, b))
  bandwidth_row("sum, 2^28 f32", 4 * N, host[:1], lambda a: a.sum())
  bandwidth_row("row sums 16384x16384 f32", 4 * 16384 ** 2, [rng.uniform(0.5, 1.5, (16384, 16384)).astype(np.float32)], lambda m: m.sum(1))
  bandwidth_row("softmax rows 8192x8192 f32", 8 * 8192 ** 2, [rng.uniform(-2, 2, (8192, 8192)).astype(np.float32)], lambda s: s.softmax(1))
  host = rng.uniform(1, 2, 1024).astype(np.float32)
  small, xsm = Tensor(host, device="CUDA").realize(), torch.from_numpy(host).cuda()
  def realize_small():
    (small * 1.0001 + 1).realize(); dev.synchronize()
  one = torch.ones_like(xsm)
  def torch_small():   # its one-kernel form: 1 + 1.0001 * x
    torch.add(one, xsm, alpha=1.0001); torch.cuda.synchronize()
  row = {"workload": "one realize, cached tiny kernel", "unit": "us", "alloy": median_time(realize_small) * 1e6,
         "torch": median_time(torch_small) * 1e6}
  if tinygrad:
    gsm = tg(host); tg_figure(row, 0, lambda: gsm * 1.0001 + 1)
  rows.append(row)
  rows.append({"workload": "first realize, new kernel + compile", "unit": "ms", "alloy": new_kernel_seconds(small, dev) * 1e3})
  print(f"GPU benchmark on {dev.device_name} ({dev.target}); alloy device time from CUDA events")
  print_table(rows, ["alloy", "torch"] + (["compile"] if any("compile" in r for r in rows) else []) + (["tinygrad"] if tinygrad else []), {})
  print("torch: eager, one kernel per row (torch.addcmul for a*b + c); compile: torch.compile of the same function")
  for note in sorted(notes): print(note)
  if tinygrad_note: print(tinygrad_note)
  else: print("tinygrad: host clock around realize + synchronize, so its per-realize host time is in its figures "
              "(alloy's and torch's bandwidth rows are device time)")

if __name__ == "__main__":
  run()
