"""Where the host time of one eager realize of a cached tiny kernel goes: cProfile of many such realizes.

python bench/realize_profile.py [DEVICE]      (default: the default device)

Prints the time per realize (without the profiler), then the functions that take the most of it. The same workload as
bench/gpu.py's "one realize, cached tiny kernel" row.
"""
from __future__ import annotations
import cProfile, os, pstats, sys, time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import alloy
from alloy import Tensor

def main(device: str) -> None:
  dev = alloy.get_device(device)
  small = Tensor(np.random.default_rng(0).uniform(1, 2, 1024).astype(np.float32), device=device).realize()
  def realize_small():
    (small * 1.0001 + 1).realize(); dev.synchronize()
  for _ in range(2000): realize_small()
  rounds = []
  for _ in range(5):
    start = time.perf_counter()
    for _ in range(2000): realize_small()
    rounds.append((time.perf_counter() - start) / 2000)
  print(f"one realize on {dev.name}: {sorted(rounds)[2] * 1e6:.1f} us (median of 5 rounds of 2000)")
  profile = cProfile.Profile()
  profile.runcall(lambda: [realize_small() for _ in range(20000)])
  pstats.Stats(profile).sort_stats("tottime").print_stats(15)

if __name__ == "__main__": main(sys.argv[1] if len(sys.argv) > 1 else alloy.default_device())
