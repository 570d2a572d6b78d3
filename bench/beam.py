"""BEAM search against the heuristics, beside PyTorch (cuBLAS on CUDA, TF32 off), in one run.

python bench/beam.py [--device CUDA] [--small]

For each workload: the heuristics' kernel time, the BEAM=2 kernel time (found now, within BEAM_BUDGET_S per kernel),
PyTorch's, and the search's wall time in this process and in a second process that finds the winners in the disk
cache (it should spend no time searching). --small shrinks the sizes (a check on a CPU).
"""
from __future__ import annotations
import json, os, subprocess, sys, time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import alloy
from alloy import Tensor
from alloy.engine import search
from common import device_seconds, median_time

def workloads(small: bool) -> list:
  """(name, input shapes, function of the inputs, FLOPs or bytes, unit)."""
  s = 8 if small else 1
  m1, m2, m3 = 4096 // s, 8192 // s, 1000 // (2 if small else 1)
  sm, rs = (8192 // s, 1000), (1000, 16384 // s)
  return [
    (f"matmul {m1}^3 f32", [(m1, m1), (m1, m1)], lambda a, b: a @ b, 2 * m1 ** 3, "GFLOP/s"),
    (f"matmul {m2}^3 f32", [(m2, m2), (m2, m2)], lambda a, b: a @ b, 2 * m2 ** 3, "GFLOP/s"),
    (f"matmul {m3}^3 f32", [(m3, m3), (m3, m3)], lambda a, b: a @ b, 2 * m3 ** 3, "GFLOP/s"),
    (f"softmax {sm[0]}x{sm[1]} f32", [sm], lambda a: a.softmax(-1), 8 * sm[0] * sm[1], "GB/s"),
    (f"row sums {rs[0]}x{rs[1]} f32", [rs], lambda a: a.sum(1), 4 * rs[0] * rs[1], "GB/s"),
  ]

def torch_seconds(fn, args, device: str):
  try: import torch
  except ImportError: return None
  torch.backends.cuda.matmul.allow_tf32 = False
  torch.backends.cudnn.allow_tf32 = False
  targs = [torch.from_numpy(a).to("cuda" if device.startswith("CUDA") else "cpu") for a in args]
  if device.startswith("CUDA"):
    fn(*targs); torch.cuda.synchronize()
    start, end, ts = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True), []
    for _ in range(3):
      start.record()
      for _ in range(5): fn(*targs)
      end.record(); end.synchronize()
      ts.append(start.elapsed_time(end) / 5 / 1e3)
    return sorted(ts)[1]
  return median_time(lambda: fn(*targs))

def first_realize(fn, args, device: str) -> tuple:
  """(wall seconds of the first BEAM=2 realize: the search, or the cache lookup, and one compile; searches run)."""
  before = search.searches
  t0 = time.perf_counter()
  with alloy.beam(2): fn(*args).realize()
  alloy.get_device(device).synchronize()
  return time.perf_counter() - t0, search.searches - before

def cached_run(device: str, small: bool) -> None:
  """The second process: each workload's first BEAM=2 realize, which should find its winner on disk."""
  rng = np.random.default_rng(0)
  out = {}
  for name, shapes, fn, _, _ in workloads(small):
    args = [Tensor(rng.uniform(-1, 1, s).astype(np.float32), device=device).realize() for s in shapes]
    out[name] = first_realize(fn, args, device)
  print("CACHED " + json.dumps(out))

def run(device: str, small: bool) -> None:
  dev = alloy.get_device(device)
  rng = np.random.default_rng(0)
  rows = []
  for name, shapes, fn, work, unit in workloads(small):
    hosts = [rng.uniform(-1, 1, s).astype(np.float32) for s in shapes]
    args = [Tensor(h, device=device).realize() for h in hosts]
    heuristic = device_seconds(lambda: fn(*args), dev)
    searched, n = first_realize(fn, args, device)
    with alloy.beam(2): beam = device_seconds(lambda: fn(*args), dev)
    theirs = torch_seconds(fn, hosts, device)
    rows.append((name, unit, work, heuristic, beam, theirs, searched, n))
    print(f"  {name}: done (search {searched:.1f} s)", flush=True)
  env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(os.path.dirname(os.path.abspath(__file__))), os.environ.get("PYTHONPATH", "")]))
  second = subprocess.run([sys.executable, os.path.abspath(__file__), "--cached", "--device", device] + (["--small"] if small else []),
                          env=env, capture_output=True, text=True)
  cached = next((json.loads(l[7:]) for l in second.stdout.splitlines() if l.startswith("CACHED ")), {})
  if not cached: print(f"second process failed: {second.stderr[-2000:]}")
  rate = {"GFLOP/s": 1e9, "GB/s": 1e9}
  print(f"\n{'workload':28s} {'unit':8s} {'heuristic':>10s} {'BEAM=2':>10s} {'torch':>10s} {'BEAM/heur':>10s} {'BEAM/torch':>10s} "
        f"{'search 1st':>11s} {'search 2nd':>11s}")
  for name, unit, work, h, b, t, searched, n in rows:
    fig = lambda s: work / s / rate[unit] if s else None
    ratio_t = f"{t / b:.2f}x" if t else "-"
    second_s = cached.get(name, (None, None))
    second_txt = f"{second_s[0]:.2f} s" + (" (searched!)" if second_s[1] else "") if second_s[0] is not None else "-"
    print(f"{name:28s} {unit:8s} {fig(h):10.0f} {fig(b):10.0f} {(fig(t) if t else 0):10.0f} {h / b:9.2f}x {ratio_t:>10s} "
          f"{searched:9.1f} s {second_txt:>11s}  ({n} kernel{'s' if n != 1 else ''} searched)")
  print("ratios: above 1 means BEAM's kernel is faster; search 2nd: the first BEAM realize in a new process (disk cache)")

if __name__ == "__main__":
  device = sys.argv[sys.argv.index("--device") + 1] if "--device" in sys.argv else "CUDA"
  small = "--small" in sys.argv
  if "--cached" in sys.argv: cached_run(device, small)
  else: run(device, small)
