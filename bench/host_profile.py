"""Where the host's time goes in one eager GPT-2 prefill: building the lazy graph (the model's Python), scheduling
it, and launching its kernels, each timed apart, then cProfile's top functions of the whole step.

  DEV=CUDA python3 bench/host_profile.py [--batch 8] [--length 1024] [--dtype float16]
"""
from __future__ import annotations
import argparse, cProfile, pstats, time
import alloy
from alloy.schedule import fusion

def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--batch", type=int, default=8)
  ap.add_argument("--length", type=int, default=1024)
  ap.add_argument("--layers", type=int, default=12)
  ap.add_argument("--dtype", default="float16")
  a = ap.parse_args()
  from graph_build import gpt2_build
  build = gpt2_build(a.batch, a.length, a.layers, getattr(alloy, a.dtype))
  device = alloy.default_device()
  dev = alloy.get_device(device)
  for _ in range(2): build().realize()   # compiles
  dev.synchronize()
  times = {"build": [], "schedule": [], "realize": [], "device wait": []}
  for _ in range(5):
    t0 = time.perf_counter(); y = build(); t1 = time.perf_counter()
    fusion.schedule([y.node]); t2 = time.perf_counter()   # (cached: the realize below finds it again)
    y.realize(); t3 = time.perf_counter()
    dev.synchronize(); t4 = time.perf_counter()
    for k, v in zip(times, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)): times[k].append(v)
  print(f"eager prefill {a.batch}x{a.length} {a.dtype} on {device}, {a.layers} layers, median ms: " +
        ", ".join(f"{k} {sorted(v)[2] * 1e3:.2f}" for k, v in times.items()))
  pr = cProfile.Profile()
  pr.enable()
  for _ in range(3): build().realize()
  dev.synchronize()
  pr.disable()
  pstats.Stats(pr).sort_stats("tottime").print_stats(18)

if __name__ == "__main__":
  main()
