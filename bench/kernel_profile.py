"""Where a GPT-2 prefill or decode step spends device time: each kernel's device-measured time, summed by name, with
its opts, beside torch's wall time for the same step in the same run.

  DEV=CUDA python3 bench/kernel_profile.py prefill --batch 8 --length 1024 --dtype float16
  DEV=CUDA python3 bench/kernel_profile.py decode --batch 32 --dtype float32

Every launch waits for its kernel (a watcher asks for device time), so the total is the kernels' time with no overlap
or launch gaps: compare it with the step's wall time (printed too) to see what the host adds.
"""
from __future__ import annotations
import argparse, collections, os, sys, time
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
sys.path.insert(0, os.path.dirname(__file__))
import alloy
from alloy.engine.watch import OnLaunch, watchers

def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("step", choices=["prefill", "decode"])
  ap.add_argument("--batch", type=int, default=8)
  ap.add_argument("--length", type=int, default=1024, help="prefill: prompt length; decode: the cache's")
  ap.add_argument("--layers", type=int, default=12)
  ap.add_argument("--dtype", default="float32")
  ap.add_argument("--top", type=int, default=25)
  a = ap.parse_args()
  from gpt2_model import GPT2Config, GPT2LMHeadModel
  from gpt2 import Generator
  alloy.manual_seed(0)
  dtype = getattr(alloy, a.dtype)
  device = alloy.default_device()
  model = GPT2LMHeadModel(GPT2Config(n_layer=a.layers)).to(device).to(dtype=dtype)
  dev = alloy.get_device(device)
  gen = Generator(model)
  rng = np.random.default_rng(0)
  if a.step == "prefill":
    prompt = rng.integers(0, 50257, (a.batch, a.length))
    def step(): gen.prefill(prompt, a.length)
  else:
    tok = gen.prefill(rng.integers(0, 50257, (a.batch, 8)), a.length)
    def step(): gen._decode(tok, 8).realize()
  step(); dev.synchronize()   # compiles
  t0 = time.perf_counter()
  for _ in range(3): step()
  dev.synchronize()
  wall = (time.perf_counter() - t0) / 3
  per = collections.defaultdict(lambda: [0.0, 0, ""])
  def heard(ck, buffers, elapsed, t_submit, consts):
    row = per[ck.meta.name]
    row[0] += elapsed or 0.0; row[1] += 1; row[2] = " ".join(map(str, ck.meta.opts))
  with watchers.watching(OnLaunch(heard, device_time=True)): step()
  total = sum(r[0] for r in per.values())
  print(f"{a.step} batch {a.batch} length {a.length} {a.dtype} on {device}: wall {wall * 1e3:.2f} ms, kernels {total * 1e3:.2f} ms "
        f"({sum(r[1] for r in per.values())} launches)")
  for name, (sec, n, opts) in sorted(per.items(), key=lambda kv: -kv[1][0])[:a.top]:
    print(f"  {sec * 1e3:9.3f} ms  {100 * sec / total:5.1f}%  x{n:<4d} {name}  {opts}")

if __name__ == "__main__":
  main()
