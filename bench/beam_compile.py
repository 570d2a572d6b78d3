"""Do BEAM's CPU candidates compile in parallel? One round of candidates of a kernel, lowered and rendered (Python,
in the searching process), then compiled by the system C compiler (no disk cache): one after the other, in
engine/search.py's thread pool, and in a process pool, with the wall time of each.

python bench/beam_compile.py [--workers N] [--kernel matmul|softmax]

The compile is a `cc` subprocess per candidate: a thread waiting on it holds no GIL, so threads already run the
compilers side by side; a process pool would only add the parallel lowering and rendering, which this also times.
"""
from __future__ import annotations
import argparse, os, sys, time
from concurrent.futures import ThreadPoolExecutor, ProcessPoolExecutor
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
import alloy
from alloy import Tensor
from alloy.schedule.fusion import schedule
from alloy.codegen.opts import choose_opts
from alloy.codegen.candidates import neighbours
from alloy.codegen.lower import lower

def _compile(source: str) -> int: return len(alloy.get_device("CPU").compiler.compile(source))

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
  ap.add_argument("--kernel", default="matmul", choices=["matmul", "softmax"])
  ap.add_argument("--count", type=int, default=12)
  args = ap.parse_args()
  rng = np.random.default_rng(0)
  a, b = Tensor(rng.random((256, 256), np.float32)).realize(), Tensor(rng.random((256, 256), np.float32)).realize()
  out = a @ b if args.kernel == "matmul" else a.softmax(-1)
  *_, (_, ast, _, _) = schedule([out.node])
  device = alloy.get_device("CPU")
  base = tuple(choose_opts(ast, device.caps))
  cands = [base] + list(neighbours(ast, device.caps, base))
  t0 = time.perf_counter()
  sources = list(dict.fromkeys(device.renderer.render(lower(ast, device.caps, o)) for o in cands))[:args.count]
  build_s = time.perf_counter() - t0
  print(f"{args.kernel}: {len(cands)} candidates lowered and rendered in {build_s * 1e3:.0f} ms "
        f"({build_s / len(cands) * 1e3:.1f} ms each, in the searching process); compiling {len(sources)} distinct sources:")
  for s in sources: _compile(s)   # once untimed: the compiler's files in the page cache for every form alike
  t0 = time.perf_counter()
  for s in sources: _compile(s)
  serial = time.perf_counter() - t0
  print(f"  one after the other:        {serial:6.2f} s ({serial / len(sources) * 1e3:.0f} ms each)")
  for name, pool in (("threads", ThreadPoolExecutor), ("processes", ProcessPoolExecutor)):
    with pool(args.workers) as p:
      list(p.map(_compile, sources[:1]))   # a process pool's workers start (and import alloy) outside the timing
      t0 = time.perf_counter()
      list(p.map(_compile, sources))
      wall = time.perf_counter() - t0
    print(f"  {args.workers} {name + ':':<22}{wall:6.2f} s ({serial / wall:.2f}x one after the other)")

if __name__ == "__main__": main()
