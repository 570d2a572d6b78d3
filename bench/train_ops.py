"""Training-op benchmark: forward + backward of a conv2d (64 -> 64 channels, 56x56, 3x3, padding 1) and of an MLP
(784-1024-1024-10, relu, cross-entropy), alloy beside PyTorch eager and torch.compile in the same run, on the device
DEV selects (CPU here; CUDA on a GPU machine, where PyTorch runs on the same GPU).

python bench/train_ops.py                     (batch 64 for the conv, 256 for the MLP, as issue 15 asks)
python bench/train_ops.py --conv-batch 8      (a smaller conv batch, for a slow machine: say so with the figures)
python bench/train_ops.py --no-compile        (leave torch.compile out: its first compile takes minutes on 2 cores)
"""
from __future__ import annotations
import argparse, os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import alloy
from alloy import Tensor
from alloy.realize_tensors import realize
import alloy.nn.functional as F
from common import median_time, print_table

try: import torch
except ImportError: torch = None

def _alloy_step(loss_fn, params: list, device):
  dev = alloy.get_device(device)
  def step():
    for p in params: p.grad = None
    loss = loss_fn()
    loss.backward()
    realize([loss] + [p.grad for p in params])
    dev.synchronize()
  return step

def _torch_step(loss_fn, params: list, sync):
  def step():
    for p in params: p.grad = None
    loss_fn().backward()
    sync()
  return step

def _torch_columns(row: dict, make_loss, params, sync, compile_too: bool) -> list[str]:
  """Fill row's torch and torch.compile figures (ms per step); returns notes for what did not run."""
  notes = []
  row["torch"] = median_time(_torch_step(make_loss, params, sync)) * 1e3
  if compile_too:
    try:
      compiled = torch.compile(make_loss)
      row["torch.compile"] = median_time(_torch_step(compiled, params, sync)) * 1e3
    except Exception as e:   # inductor needs a working C++ toolchain (CPU) or Triton (CUDA)
      notes.append(f"torch.compile: did not run here ({type(e).__name__}: {str(e).splitlines()[0][:120]})")
  return notes

def run(conv_batch: int, mlp_batch: int, compile_too: bool):
  device = alloy.default_device()
  tdev = "cuda" if device.startswith("CUDA") else "cpu"
  if torch is not None and tdev == "cpu": torch.set_num_threads(os.cpu_count() or 1)
  sync = (lambda: torch.cuda.synchronize()) if tdev == "cuda" else (lambda: None)
  rng = np.random.default_rng(0)
  rows, notes = [], []

  # conv2d forward + backward: the loss is a fixed weighting of the outputs, so every gradient is computed
  x = rng.standard_normal((conv_batch, 64, 56, 56)).astype(np.float32)
  w = (rng.standard_normal((64, 64, 3, 3)) * 0.05).astype(np.float32)
  b = rng.standard_normal(64).astype(np.float32)
  probe = rng.standard_normal((conv_batch, 64, 56, 56)).astype(np.float32)
  flops = 3 * 2 * conv_batch * 64 * 56 * 56 * 64 * 9
  row = {"workload": f"conv2d fwd+bwd b{conv_batch} 64x56x56 3x3", "unit": "ms"}
  ax, aw, ab = (Tensor(a, device=device, requires_grad=True).realize() for a in (x, w, b))
  aprobe = Tensor(probe, device=device).realize()
  conv_loss = lambda: (F.conv2d(ax, aw, ab, padding=1) * aprobe).sum()   # noqa: E731
  row["alloy"] = median_time(_alloy_step(conv_loss, [ax, aw, ab], device)) * 1e3
  if torch is not None:
    tx, tw, tb = (torch.tensor(a, device=tdev, requires_grad=True) for a in (x, w, b))
    tprobe = torch.tensor(probe, device=tdev)
    notes += _torch_columns(row, lambda: (torch.nn.functional.conv2d(tx, tw, tb, padding=1) * tprobe).sum(), [tx, tw, tb], sync, compile_too)
  rows.append(row)
  conv_gflops = {k: flops / (v / 1e3) / 1e9 for k, v in row.items() if k not in ("workload", "unit")}

  # MLP 784-1024-1024-10, relu, cross-entropy
  sizes = [784, 1024, 1024, 10]
  ws = [(rng.standard_normal((o, i)) / np.sqrt(i)).astype(np.float32) for i, o in zip(sizes, sizes[1:])]
  bs = [np.zeros(o, np.float32) for o in sizes[1:]]
  data = rng.standard_normal((mlp_batch, 784)).astype(np.float32)
  labels = rng.integers(0, 10, mlp_batch)
  row = {"workload": f"MLP fwd+bwd b{mlp_batch} 784-1024-1024-10", "unit": "ms"}
  aws = [Tensor(a, device=device, requires_grad=True).realize() for a in ws]
  abs_ = [Tensor(a, device=device, requires_grad=True).realize() for a in bs]
  adata, alabels = Tensor(data, device=device).realize(), Tensor(labels, device=device).realize()
  def alloy_mlp():
    h = adata
    for k, (wk, bk) in enumerate(zip(aws, abs_)):
      h = h @ wk.T + bk
      if k < 2: h = h.relu()
    return F.cross_entropy(h, alabels)
  row["alloy"] = median_time(_alloy_step(alloy_mlp, aws + abs_, device)) * 1e3
  if torch is not None:
    tws = [torch.tensor(a, device=tdev, requires_grad=True) for a in ws]
    tbs = [torch.tensor(a, device=tdev, requires_grad=True) for a in bs]
    tdata, tlabels = torch.tensor(data, device=tdev), torch.tensor(labels, device=tdev)
    def torch_mlp():
      h = tdata
      for k, (wk, bk) in enumerate(zip(tws, tbs)):
        h = h @ wk.T + bk
        if k < 2: h = h.relu()
      return torch.nn.functional.cross_entropy(h, tlabels)
    notes += _torch_columns(row, torch_mlp, tws + tbs, sync, compile_too)
  rows.append(row)

  print(f"device: {device} ({alloy.get_device(device).target}); ms per step (lower is better)")
  columns = ["alloy"] + (["torch"] if torch is not None else []) + (["torch.compile"] if any("torch.compile" in r for r in rows) else [])
  print_table(rows, columns, {})
  print("conv2d GFLOP/s (fwd + bwd = 3x the forward's FLOPs): " + ", ".join(f"{k} {v:.1f}" for k, v in conv_gflops.items()))
  if torch is None: print("torch: not installed, no column")
  for n in dict.fromkeys(notes): print(n)

if __name__ == "__main__":
  p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  p.add_argument("--conv-batch", type=int, default=64)
  p.add_argument("--mlp-batch", type=int, default=256)
  p.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
  a = p.parse_args()
  run(a.conv_batch, a.mlp_batch, not a.no_compile)
