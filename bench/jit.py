"""Launch overhead: a chain of 1000 dependent tiny kernels (x = x*1.0001 + 1 on 1024 float32), in µs per kernel.

alloy eager (schedule + cached compile per kernel), @jit replay launch by launch, @jit replay in graphs, beside
NumPy on the CPU and PyTorch when installed: eager (on the CPU too) in its one-kernel form of the step
(torch.add(1, x, alpha=1.0001); `x*1.0001 + 1` is two kernels in eager torch and would flatter alloy 2x), and on
CUDA the same step through torch.compile, and torch.cuda.CUDAGraph.
Also: the fixed cost of one replay (a one-kernel function), with its result dropped and with results held.

python bench/jit.py            (DEV=CUDA or DEV=CPU picks the device; default: the best present)
"""
from __future__ import annotations
import collections, os, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import alloy
from alloy import Tensor
from common import median_time, print_table, torch_compiled

try: import torch
except ImportError: torch = None

N_KERNELS, N_ELEMS = 1000, 1024

def chain(x: Tensor) -> Tensor:
  for _ in range(N_KERNELS): x = (x * 1.0001 + 1).realize()
  return x

def per_kernel_us(fn, sync, rounds: int = 3) -> float:
  def go():
    fn(); sync()
  return median_time(go, rounds=rounds, min_seconds=0.3) / N_KERNELS * 1e6

def run():
  device = alloy.default_device()
  dev = alloy.get_device(device)
  x = Tensor(np.ones(N_ELEMS, np.float32), device=device).realize()
  want = np.ones(N_ELEMS, np.float32)
  for _ in range(N_KERNELS): want = want * np.float32(1.0001) + np.float32(1)
  row = {"workload": f"{N_KERNELS} dependent kernels, {N_ELEMS} f32", "unit": "us"}
  row["eager"] = per_kernel_us(lambda: chain(x), dev.synchronize, rounds=1)
  for name, graph in (("jit", False), ("jit+graph", True)):
    f = alloy.jit(chain, graph=graph)
    f(x); f(x)
    np.testing.assert_allclose(f(x).numpy(), want, rtol=1e-4)
    row[name] = per_kernel_us(lambda: f(x), dev.synchronize)
    if not graph:
      runner = f.replay.batches[0][0]
      how = type(runner).__name__
      if hasattr(runner, "loop"): how += " and its C launch loop" if runner.loop is not None else f", launching from Python ({runner.launch})"
      print(f"{device}: launch by launch through {how}")
    graphs = [j - i for g, i, j, _ in f.replay.graphs if g is not None]
    if graph and not graphs: print(f"{device}: no graphs ({f.replay.graph_off})")
    elif graph: print(f"{device}: {len(graphs)} graphs of {graphs} kernels")
  columns = ["jit+graph", "jit", "eager"]
  if device == "CPU":
    a = np.ones(N_ELEMS, np.float32)
    def numpy_chain():
      y = a
      for _ in range(N_KERNELS): y = y * np.float32(1.0001) + np.float32(1)
    row["numpy"] = per_kernel_us(numpy_chain, lambda: None)
    columns.append("numpy")
  on_cuda = device.startswith("CUDA") and torch is not None and torch.cuda.is_available()
  if torch is not None and (on_cuda or device == "CPU"):   # eager torch on the same device: its per-kernel cost
    t = torch.ones(N_ELEMS, device="cuda" if on_cuda else "cpu")
    ones_t = torch.ones_like(t)
    def torch_step(y): return torch.add(ones_t, y, alpha=1.0001)
    def torch_chain(step=torch_step):
      y = t
      for _ in range(N_KERNELS): y = step(y)
      return y
    row["torch"] = per_kernel_us(torch_chain, torch.cuda.synchronize if on_cuda else lambda: None)
    columns.append("torch")
  if on_cuda:
    compiled, why_not = torch_compiled(lambda y: y * 1.0001 + 1, t)
    if compiled is not None:
      row["compile"] = per_kernel_us(lambda: torch_chain(compiled), torch.cuda.synchronize)
      columns.append("compile")
    else: print(why_not)
    static_in = t.clone()
    torch_chain_graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s): torch_chain()
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(torch_chain_graph):
      y = static_in
      for _ in range(N_KERNELS): y = torch_step(y)
    row["torch+graph"] = per_kernel_us(torch_chain_graph.replay, torch.cuda.synchronize)
    columns.append("torch+graph")
  print(f"launch overhead on {device} ({dev.target}): µs per kernel, lower is better")
  print_table([row], columns, {}, ours="jit+graph")
  # the fixed cost of one replay: with the result dropped at once (its buffer is written again by the next call),
  # and with the last few results held (every call makes a fresh output buffer, its nodes and Tensor)
  one = alloy.jit(lambda a: a * 2, graph=True)
  one(x); one(x)
  replay_us = median_time(lambda: one(x)) * 1e6
  held = collections.deque(maxlen=4)
  held_us = median_time(lambda: held.append(one(x))) * 1e6
  dev.synchronize()
  print(f"one replay of a one-kernel function: {replay_us:.2f} µs host time with its result dropped, "
        f"{held_us:.2f} µs with results held (a fresh output buffer per call)")

if __name__ == "__main__":
  run()
