"""Gradients of reads at indices (alloy/scatter_sum.py): an embedding's and a gather's backward, alloy's sorted
scatter-add beside its dense compare (what every size took before) and PyTorch's index_add/scatter_add kernels.

python bench/scatter_grads.py [--device CPU]

The floor is the bytes: the output gradient read once and the weight gradient written once.
"""
from __future__ import annotations
import argparse, os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import alloy
from alloy import Tensor, scatter_sum
from alloy.gathering import embedding
from common import median_time

def _alloy_seconds(fn, device: str, dense: bool) -> float:
  saved = scatter_sum.DENSE_MAX_SIDE, scatter_sum.DENSE_MAX_WORK
  if dense: scatter_sum.DENSE_MAX_SIDE = scatter_sum.DENSE_MAX_WORK = 1 << 62
  try:
    fn().realize()   # compiles
    dev = alloy.get_device(device)
    def run():
      fn().realize()
      dev.synchronize()
    return median_time(run)
  finally: scatter_sum.DENSE_MAX_SIDE, scatter_sum.DENSE_MAX_WORK = saved

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--device", default="CPU")
  args = ap.parse_args()
  rng = np.random.default_rng(0)
  try: import torch
  except ImportError: torch = None
  cases = []
  for vocab, width, tokens in ((8192, 256, 2048), (50257, 64, 1024)):
    ids = rng.integers(0, vocab, tokens)
    w = rng.standard_normal((vocab, width)).astype(np.float32)
    g = rng.standard_normal((tokens, width)).astype(np.float32)
    wt, it, gt = Tensor(w, device=args.device), Tensor(ids, device=args.device), Tensor(g, device=args.device)
    def grad(wt=wt, it=it, gt=gt):
      p = wt.detach().requires_grad_()
      (embedding(it, p) * gt).sum().backward()
      return p.grad
    tfn = None
    if torch is not None:
      tw, ti, tg = torch.tensor(w, requires_grad=True), torch.tensor(ids), torch.tensor(g)
      def tfn(tw=tw, ti=ti, tg=tg):
        tw.grad = None
        (torch.nn.functional.embedding(ti, tw) * tg).sum().backward()
    cases.append((f"embedding grad {vocab}x{width}, {tokens} tokens", grad, tfn, 4 * (tokens + 2 * vocab) * width))
  n = size = 1 << 16
  x, idx, gg = rng.standard_normal(size).astype(np.float32), rng.integers(0, size, n), rng.standard_normal(n).astype(np.float32)
  xt, it, gt = Tensor(x, device=args.device), Tensor(idx, device=args.device), Tensor(gg, device=args.device)
  def ggrad():
    p = xt.detach().requires_grad_()
    (p.gather(0, it) * gt).sum().backward()
    return p.grad
  tfn = None
  if torch is not None:
    tx, ti, tgg = torch.tensor(x, requires_grad=True), torch.tensor(idx), torch.tensor(gg)
    def tfn():
      tx.grad = None
      (tx.gather(0, ti) * tgg).sum().backward()
  cases.append((f"gather grad {n} into {size}", ggrad, tfn, 4 * (2 * n + size)))
  print(f"{'case':<44} {'sorted ms':>10} {'dense ms':>10} {'torch ms':>10} {'torch/sorted':>13} {'sorted GB/s':>12}")
  for name, fn, tfn, nbytes in cases:
    s = _alloy_seconds(fn, args.device, dense=False)
    d = _alloy_seconds(fn, args.device, dense=True) if "50257" not in name and "gather" not in name else float("nan")   # dense: minutes
    t = median_time(tfn) if tfn is not None else float("nan")
    print(f"{name:<44} {s * 1e3:10.2f} {d * 1e3:10.2f} {t * 1e3:10.2f} {t / s:13.2f} {nbytes / s / 1e9:12.2f}")

if __name__ == "__main__": main()
