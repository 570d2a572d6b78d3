"""Model benchmark (issue 18): alloy beside PyTorch in the same run, on the device DEV selects (PyTorch on the same
device: CPU here, CUDA on the GPU machine).

- Training step (zero_grad, forward, backward, AdamW) of examples/train_digits.py's CNN (batch 64 of 8x8 digits) and
  of an MLP 784-1024-1024-10 (batch 256, cross-entropy): alloy eager and under @jit; torch eager (AdamW
  foreach, its default) and torch.compile of the loss (its optimizer stays eager: compiling step() is not its
  documented best form). ms per step.
- GPT-2 (examples/gpt2_model.py, random weights, the same in both): prefill of L tokens at batch B (ms), and greedy
  decode tokens/s at each batch of --decode-batches, fp32 and fp16; alloy eager and under @jit (replayed as device
  graphs) beside torch eager with a static KV cache written in place and scaled_dot_product_attention.

python bench/models.py                                       (the issue's sizes: 124M, prefill 1024 x 8, decode 1 and 32)
python bench/models.py --layers 2 --prefill 128 --prefill-batch 2 --decode-batches 1 4 --dtypes float32 --no-compile   (a quick CPU run)
"""
from __future__ import annotations
import argparse, os, sys, time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
import numpy as np
import alloy
from alloy import Tensor, nn, optim
import alloy.nn.functional as F
from alloy.realize_tensors import realize
from common import median_time, print_table

try: import torch
except ImportError: torch = None

# ---- training steps

def _mlp_alloy():
  return nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))

def _train_rows(device: str, compile_too: bool, notes: list) -> list:
  from train_digits import DigitsCNN
  rows = []
  rng = np.random.default_rng(0)
  cases = [("digits CNN step, batch 64", DigitsCNN, (64, 1, 8, 8)), ("MLP 784-1024-1024-10 step, batch 256", _mlp_alloy, (256, 784))]
  for name, make, shape in cases:
    x, y = rng.standard_normal(shape).astype(np.float32), rng.integers(0, 10, shape[0])
    row = {"workload": name, "unit": "ms"}
    for jitted in (False, True):
      alloy.manual_seed(0)
      model = make().to(device)
      opt = optim.AdamW(model.parameters(), lr=1e-3)
      xa, ya = Tensor(x, device=device), Tensor(y, device=device)
      def step():
        opt.zero_grad()
        loss = F.cross_entropy(model(xa), ya)
        loss.backward()
        # the loss with the gradients, as PyTorch computes it (not recomputed from the updated parameters afterwards)
        realize([loss] + [p.grad for p in model.parameters()])
        opt.step()
        return loss.detach()
      fn = alloy.jit(step) if jitted else step
      dev = alloy.get_device(device)
      def run():
        fn().realize(); dev.synchronize()
      run()
      row["alloy @jit" if jitted else "alloy"] = median_time(run) * 1e3
    if torch is not None: notes += _torch_train(row, name, x, y, device, compile_too)
    rows.append(_shown(row))
  return rows

def _torch_train(row: dict, name: str, x, y, device: str, compile_too: bool) -> list:
  tdev = "cuda" if device.startswith("CUDA") else "cpu"
  sync = torch.cuda.synchronize if tdev == "cuda" else (lambda: None)
  torch.manual_seed(0)
  if name.startswith("digits"):
    tn = torch.nn
    model = tn.Sequential(tn.Conv2d(1, 16, 3, padding=1), tn.BatchNorm2d(16), tn.ReLU(), tn.MaxPool2d(2),
                          tn.Conv2d(16, 32, 3, padding=1), tn.BatchNorm2d(32), tn.ReLU(), tn.MaxPool2d(2), tn.Flatten(), tn.Linear(128, 10))
  else:
    model = torch.nn.Sequential(torch.nn.Linear(784, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
  model = model.to(tdev)
  opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
  xt, yt = torch.tensor(x, device=tdev), torch.tensor(y, device=tdev)
  def loss_fn(): return torch.nn.functional.cross_entropy(model(xt), yt)
  def stepper(f):
    def step():
      opt.zero_grad(); f().backward(); opt.step(); sync()
    return step
  row["torch"] = median_time(stepper(loss_fn)) * 1e3
  if not compile_too: return []
  try:
    row["torch.compile"] = median_time(stepper(torch.compile(loss_fn))) * 1e3
    return []
  except Exception as e:   # no working C++ toolchain or Triton for inductor here
    return [f"torch.compile ({name}): did not run ({type(e).__name__}: {str(e).splitlines()[0][:100] if str(e) else ''})"]

# ---- GPT-2

class TorchGPT2:
  """The same GPT-2 in PyTorch, eager: weights from alloy's state dict, a static KV cache written in place
  (cache[:, :, pos] = k) and scaled_dot_product_attention over the filled part."""
  def __init__(self, state: dict, config, dtype, device: str):
    self.c, self.w = config, {k: torch.tensor(v.numpy()).to(device=device, dtype=dtype) for k, v in state.items()}
    self.dtype, self.device = dtype, device

  def cache(self, batch: int, max_len: int):
    shape = (batch, self.c.n_head, max_len, self.c.n_embd // self.c.n_head)
    return [(torch.zeros(shape, dtype=self.dtype, device=self.device), torch.zeros(shape, dtype=self.dtype, device=self.device))
            for _ in range(self.c.n_layer)]

  @torch.no_grad()
  def __call__(self, ids, start: int, cache) -> "torch.Tensor":
    w, c = self.w, self.c
    B, L = ids.shape
    H, D = c.n_head, c.n_embd // c.n_head
    ln = torch.nn.functional.layer_norm
    x = w["transformer.wte.weight"][ids] + w["transformer.wpe.weight"][start:start + L]
    for i in range(c.n_layer):
      p = f"transformer.h.{i}."
      h = ln(x, (c.n_embd,), w[p + "ln_1.weight"], w[p + "ln_1.bias"], c.layer_norm_epsilon)
      qkv = torch.addmm(w[p + "attn.c_attn.bias"], h.view(B * L, -1), w[p + "attn.c_attn.weight"]).view(B, L, -1)
      q, k, v = [t.view(B, L, H, D).transpose(1, 2) for t in qkv.split(c.n_embd, -1)]
      kc, vc = cache[i]
      kc[:, :, start:start + L] = k
      vc[:, :, start:start + L] = v
      y = torch.nn.functional.scaled_dot_product_attention(q, kc[:, :, :start + L], vc[:, :, :start + L], is_causal=L > 1)
      x = x + torch.addmm(w[p + "attn.c_proj.bias"], y.transpose(1, 2).reshape(B * L, -1), w[p + "attn.c_proj.weight"]).view(B, L, -1)
      h = ln(x, (c.n_embd,), w[p + "ln_2.weight"], w[p + "ln_2.bias"], c.layer_norm_epsilon)
      h = torch.nn.functional.gelu(torch.addmm(w[p + "mlp.c_fc.bias"], h.view(B * L, -1), w[p + "mlp.c_fc.weight"]), approximate="tanh")
      x = x + torch.addmm(w[p + "mlp.c_proj.bias"], h, w[p + "mlp.c_proj.weight"]).view(B, L, -1)
    x = ln(x[:, -1], (c.n_embd,), w["transformer.ln_f.weight"], w["transformer.ln_f.bias"], c.layer_norm_epsilon)
    return (x @ w["transformer.wte.weight"].T).argmax(-1, keepdim=True)

def _gpt2_rows(device: str, a, notes: list) -> list:
  from gpt2_model import GPT2Config, GPT2LMHeadModel
  from gpt2 import Generator
  rows = []
  config = GPT2Config(n_layer=a.layers)
  alloy.manual_seed(0)
  base = GPT2LMHeadModel(config).to(device)
  state = base.state_dict()
  dev = alloy.get_device(device)
  tdev = "cuda" if device.startswith("CUDA") else "cpu"
  sync = torch.cuda.synchronize if (torch is not None and tdev == "cuda") else (lambda: None)
  rng = np.random.default_rng(0)
  for dtype in a.dtypes:
    model = base if dtype == "float32" else GPT2LMHeadModel(config).to(device).to(dtype=getattr(alloy, dtype))
    if model is not base: model.load_state_dict({k: v.cast(getattr(alloy, dtype)) for k, v in state.items()})
    ref = TorchGPT2(state, config, getattr(torch, dtype), tdev) if torch is not None else None
    # prefill
    prompt = rng.integers(0, config.vocab_size, (a.prefill_batch, a.prefill))
    gen = Generator(model)
    row = {"workload": f"GPT-2 {a.layers}L prefill {a.prefill_batch}x{a.prefill} {dtype}", "unit": "ms"}
    for jitted in (False, True):
      def alloy_prefill():
        gen.prefill(prompt, a.prefill, jit=jitted).realize(); dev.synchronize()
      row["alloy @jit" if jitted else "alloy"] = median_time(alloy_prefill, rounds=3, min_seconds=0.1) * 1e3
    if ref is not None:
      ids, cache = torch.tensor(prompt, device=tdev), ref.cache(a.prefill_batch, a.prefill)
      def torch_prefill():
        ref(ids, 0, cache); sync()
      row["torch"] = median_time(torch_prefill, rounds=3, min_seconds=0.1) * 1e3
    rows.append(_shown(row))
    # decode
    for batch in a.decode_batches:
      row = {"workload": f"GPT-2 {a.layers}L decode batch {batch} {dtype}", "unit": "tok/s"}
      start = 8
      steps = a.decode_steps
      prompt = rng.integers(0, config.vocab_size, (batch, start))
      for jitted in (False, True):
        gen = Generator(model)
        def decode_run():
          tok = gen.prefill(prompt, start + steps + 1)
          dev.synchronize()
          t0 = time.perf_counter()
          for pos in range(start, start + steps):
            tok = gen.decode(tok, pos) if jitted else gen._decode(tok, pos)
          tok.realize(); dev.synchronize()
          return time.perf_counter() - t0
        decode_run()   # compiles; under @jit also captures
        row["alloy @jit" if jitted else "alloy"] = batch * steps / min(decode_run() for _ in range(2))
      if ref is not None:
        ids = torch.tensor(prompt, device=tdev)
        def torch_run():
          cache = ref.cache(batch, start + steps + 1)
          tok = ref(ids, 0, cache); sync()
          t0 = time.perf_counter()
          for pos in range(start, start + steps): tok = ref(tok, pos, cache)
          sync()
          return time.perf_counter() - t0
        torch_run()
        row["torch"] = batch * steps / min(torch_run() for _ in range(2))
      rows.append(_shown(row))
  return rows

def _shown(row: dict) -> dict:
  """row, printed at once as well (a run cut short by a time limit keeps what it measured)."""
  print("  " + ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)
  return row

def main():
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--layers", type=int, default=12)
  ap.add_argument("--prefill", type=int, default=1024)
  ap.add_argument("--prefill-batch", type=int, default=8)
  ap.add_argument("--decode-batches", type=int, nargs="+", default=[1, 32])
  ap.add_argument("--decode-steps", type=int, default=32)
  ap.add_argument("--dtypes", nargs="+", default=["float32", "float16"])
  ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out (its first compile takes minutes on 2 cores)")
  ap.add_argument("--no-train", action="store_true")
  ap.add_argument("--no-gpt2", action="store_true")
  a = ap.parse_args()
  device = alloy.default_device()
  print(f"device {device}; torch {torch.__version__ if torch is not None else 'not installed'}")
  notes: list = []
  rows = ([] if a.no_train else _train_rows(device, not a.no_compile, notes)) + ([] if a.no_gpt2 else _gpt2_rows(device, a, notes))
  print_table(rows, ["alloy @jit", "alloy", "torch", "torch.compile"], {}, ours="alloy @jit")
  for n in notes: print(n)

if __name__ == "__main__":
  main()
