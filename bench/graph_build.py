"""Front-end cost: host time per Tensor op to build alloy's lazy graph (nothing realized), beside PyTorch eager's
per-op cost on the CPU for the same code (tiny tensors, so its figure is its dispatch, not its arithmetic).

Each workload is one function written once over the names alloy and torch share (methods, F.layer_norm, F.gelu), run
on each library's tensors. Ops per call: the graph nodes alloy's run makes (Tensor._new calls; a view or a cast
that is a no-op makes none), and torch's figure is divided by the same count. Then the GPT-2 model's eager prefill
forward (examples/gpt2_model.py, the graph bench/host_profile.py times) built without realizing, and cProfile's top
functions of the builds.

  DEV=CPU python bench/graph_build.py [--batch 8] [--length 1024] [--layers 2] [--profile 18]
"""
from __future__ import annotations
import argparse, cProfile, math, os, pstats, sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import numpy as np
import alloy
from alloy import Tensor
from common import median_time, print_table

try: import torch
except ImportError: torch = None

def elementwise(x, w):
  for _ in range(8): x = (x * 1.0001 + 1).exp() - w
  return x

def views(x, w):
  for _ in range(8): x = x.reshape(4, 8, 16).permute(2, 0, 1).reshape(16, 32)[:, :16].expand(2, 16, 16).reshape(32, 16)
  return x

def block(x, w, F):
  """A GPT-2 block's forward (x (B, L, C)): layer norm, attention with a causal mask, residual, MLP."""
  B, L, C = x.shape
  H, D = 4, C // 4
  h = F.layer_norm(x, (C,)) @ w["attn"] + w["attn_b"]
  q, k, v = [t.reshape(B, L, H, D).permute(0, 2, 1, 3) for t in h.split(C, dim=-1)]
  scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(D)) + w["mask"]
  y = (scores.softmax(-1) @ v).permute(0, 2, 1, 3).reshape(B, L, C)
  x = x + y @ w["proj"]
  return x + F.gelu(F.layer_norm(x, (C,)) @ w["fc"], approximate="tanh") @ w["fc2"]

def block_weights(C: int, L: int, make) -> dict:
  rng = np.random.default_rng(0)
  shapes = {"attn": (C, 3 * C), "attn_b": (3 * C,), "proj": (C, C), "fc": (C, 4 * C), "fc2": (4 * C, C)}
  w = {k: make(rng.standard_normal(s).astype(np.float32) * 0.02) for k, s in shapes.items()}
  w["mask"] = make(np.triu(np.full((L, L), -1e9, np.float32), 1))
  return w

class _Count:
  """Counts the nodes alloy's front end makes (Tensor._new calls) while entered."""
  def __enter__(self):
    self.n, self.orig = 0, Tensor._new
    def counted(t, node):
      self.n += 1
      return self.orig(t, node)
    Tensor._new = counted
    return self
  def __exit__(self, *exc): Tensor._new = self.orig

def ops_of(fn) -> int:
  with _Count() as c: fn()
  return c.n

def gpt2_build(batch: int, length: int, layers: int, dtype=None):
  """A thunk building the graph of GPT-2's eager prefill (examples/gpt2_model.py, a KV cache, the last position's
  logits) on the default device, nothing realized; bench/host_profile.py times it too."""
  from gpt2_model import GPT2Config, GPT2LMHeadModel, KVCache
  alloy.manual_seed(0)
  config = GPT2Config(n_layer=layers)
  device = alloy.default_device()
  model = GPT2LMHeadModel(config).to(device)
  if dtype is not None: model = model.to(dtype=dtype)
  cache = KVCache(config, batch, length, dtype=dtype, device=device)
  ids = Tensor(np.random.default_rng(0).integers(0, config.vocab_size, (batch, length)).astype(np.int32), device=device).realize()
  def build():
    with alloy.no_grad(): return model(ids, 0, cache, logits_to_keep=1)
  return build

def run():
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--batch", type=int, default=8)
  ap.add_argument("--length", type=int, default=1024)
  ap.add_argument("--layers", type=int, default=2)
  ap.add_argument("--profile", type=int, default=18, help="how many of cProfile's top functions to print (0: no profile)")
  a = ap.parse_args()
  import alloy.nn.functional as AF
  device = alloy.default_device()
  rng = np.random.default_rng(0)
  host = rng.standard_normal((16, 32)).astype(np.float32)
  C, L = 64, 16
  xb = rng.standard_normal((2, L, C)).astype(np.float32)
  ours_w = block_weights(C, L, lambda h: Tensor(h, device=device).realize())
  workloads = [("elementwise chain, 16x32 f32", elementwise, (host, host)),
               ("reshape/permute/shrink/expand, 16x32", views, (host, host)),
               (f"GPT-2 block forward, 2x{L}x{C}", lambda x, w, F=AF: block(x, w, F), (xb, ours_w))]
  if torch is not None:
    torch.set_num_threads(1)
    import torch.nn.functional as TF
    torch_w = block_weights(C, L, torch.from_numpy)
    torch_fns = [elementwise, views, lambda x, w: block(x, w, TF)]
  rows, builds = [], []
  for (name, fn, (x, w)), k in zip(workloads, range(len(workloads))):
    xo = Tensor(x, device=device).realize()
    wo = w if isinstance(w, dict) else Tensor(w, device=device).realize()
    def build(fn=fn, xo=xo, wo=wo):
      with alloy.no_grad(): return fn(xo, wo)
    n = ops_of(build)
    row = {"workload": f"{name} ({n} ops)", "unit": "us/op", "alloy": median_time(build) / n * 1e6}
    if torch is not None:
      xt, wt = torch.from_numpy(x), torch_w if isinstance(w, dict) else torch.from_numpy(w)
      def torch_run(f=torch_fns[k], xt=xt, wt=wt):
        with torch.no_grad(): return f(xt, wt)
      row["torch"] = median_time(torch_run) / n * 1e6
    rows.append(row); builds.append(build)
  gpt2 = gpt2_build(a.batch, a.length, a.layers)
  n = ops_of(gpt2)
  t = median_time(gpt2, rounds=5)
  rows.append({"workload": f"GPT-2 prefill {a.batch}x{a.length}, {a.layers} layers ({n} ops)", "unit": "us/op", "alloy": t / n * 1e6})
  print(f"graph building on {device}: host µs per op, nothing realized (torch: eager, CPU, one thread, tiny tensors)")
  print_table(rows, ["alloy"] + (["torch"] if torch is not None else []), {})
  print(f"GPT-2 prefill graph: {t * 1e3:.2f} ms for {a.layers} layers, {t * 1e3 * 12 / a.layers:.1f} ms scaled to 12")
  if torch is None: print("torch: not installed, no column")
  if a.profile:
    pr = cProfile.Profile()
    pr.runcall(lambda: [[b() for b in builds + [gpt2]] for _ in range(20)])
    pstats.Stats(pr).sort_stats("tottime").print_stats(a.profile)

if __name__ == "__main__":
  run()
