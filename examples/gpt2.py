"""GPT-2 text generation with alloy: greedy or top-k sampling with a KV cache, each decode step under @alloy.jit
(captured on the second token, then replayed as device graphs with the position as a kernel argument).

  python examples/gpt2.py [--weights model.safetensors] [--tokens 464 2068 318 | --prompt "464, 2068"]
                          [--max-new-tokens N] [--top-k K] [--temperature T] [--batch B] [--seed S] [--device DEV]

--weights takes a safetensors file in Hugging Face GPT-2's layout (GPT2LMHeadModel.save_pretrained(dir,
safe_serialization=True) writes dir/model.safetensors); without it the 124M configuration runs on random weights.
Token ids only: no tokenizer here (nothing can be downloaded)."""
from __future__ import annotations
import argparse, os, sys, time
import numpy as np
import alloy
from alloy import Tensor, cat
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_model import GPT2Config, GPT2LMHeadModel, KVCache   # noqa: E402
from alloy.gathering import take   # noqa: E402

def pick(logits: Tensor, top_k: int | None, temperature: float = 1.0) -> Tensor:
  """The next token per row of logits (B, V), as (B, 1) int32: the argmax, or a sample from the top_k (Gumbel-max
  over the top values: the argmax of logits/T + Gumbel noise draws from their softmax)."""
  B = logits.shape[0]
  if not top_k: return logits.argmax(-1).cast(alloy.int32).reshape(B, 1)
  vals, idx = logits.topk(top_k)
  gumbel = -(-Tensor.rand(B, top_k, device=logits.device).clamp(1e-10, 1.0).log()).log()
  choice = (vals.float() / temperature + gumbel).argmax(-1).reshape(B, 1)
  return take(idx, 1, choice).cast(alloy.int32)

class Generator:
  """Prefill then decode steps over one fixed-size cache, each under @jit: `decode` is the decode step's @jit object
  (its replay says how), `prefills` the prefill's, one per prompt shape (a jitted function takes one shape)."""
  def __init__(self, model: GPT2LMHeadModel, top_k: int | None = None, temperature: float = 1.0):
    self.model, self.top_k, self.temperature = model, top_k, temperature
    self.cache: KVCache | None = None
    self.decode = alloy.jit(self._decode)
    self.prefills: dict = {}

  def _decode(self, tok: Tensor, pos: int) -> Tensor:
    with alloy.no_grad(): return pick(self.model(tok, pos, self.cache)[:, -1], self.top_k, self.temperature)

  def _prefill(self, ids: Tensor) -> Tensor:
    with alloy.no_grad(): return pick(self.model(ids, 0, self.cache, logits_to_keep=1)[:, -1], self.top_k, self.temperature)

  def prefill(self, prompt: np.ndarray, max_len: int, jit: bool = True) -> Tensor:
    """Fills a new cache from the prompt (B, L) and returns the first new token (B, 1). jit: through the prompt
    shape's @jit object (a repeated prefill of that shape replays its launches), else eagerly."""
    device = self.model.transformer.wte.weight.device
    dtype = self.model.transformer.wte.weight.dtype
    if self.cache is None or (self.cache.batch, self.cache.max_len) != (prompt.shape[0], max_len):
      self.cache = KVCache(self.model.config, prompt.shape[0], max_len, dtype=dtype, device=device)
      self.decode.reset()   # a new cache: the captures held the old one
      self.prefills.clear()
    else:   # what the last prompt left past this one's positions is never read (the causal mask), but is cleared
      with alloy.no_grad():
        for k, v in self.cache.layers: k.zero_().realize(); v.zero_().realize()   # a jitted prefill binds realized state
    ids = Tensor(prompt.astype(np.int32), device=device)
    if not jit: return self._prefill(ids).realize()
    if (step := self.prefills.get(prompt.shape)) is None: step = self.prefills[prompt.shape] = alloy.jit(self._prefill)
    return step(ids)

  def generate(self, prompt: np.ndarray, max_new_tokens: int, progress: bool = False) -> np.ndarray:
    """prompt (B, L) token ids -> (B, L + max_new_tokens)."""
    prompt = np.atleast_2d(np.asarray(prompt))
    vocab = self.model.config.vocab_size
    if prompt.size == 0 or prompt.min() < 0 or prompt.max() >= vocab: raise ValueError(f"generate: token ids must be in [0, {vocab})")
    if max_new_tokens < 1: return prompt
    L = prompt.shape[1]
    tok = self.prefill(prompt, L + max_new_tokens)
    out = [tok]
    steps = range(L, L + max_new_tokens - 1)
    if progress:
      from tqdm import tqdm
      steps = tqdm(steps, desc="decode", leave=False)
    for pos in steps:
      tok = self.decode(tok, pos)
      out.append(tok)
    return np.concatenate([prompt, cat(out, 1).numpy()], 1)

def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  ap.add_argument("--weights", help="safetensors file in Hugging Face GPT-2's layout (default: random weights)")
  ap.add_argument("--tokens", type=int, nargs="+", help="prompt token ids")
  ap.add_argument("--prompt", help="prompt token ids, comma or space separated")
  ap.add_argument("--max-new-tokens", type=int, default=20)
  ap.add_argument("--top-k", type=int, default=0, help="sample from the k most likely tokens (0: greedy)")
  ap.add_argument("--temperature", type=float, default=1.0)
  ap.add_argument("--batch", type=int, default=1, help="rows generated side by side (the prompt repeated)")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--layers", type=int, default=12, help="random weights only: fewer layers for a quick run")
  ap.add_argument("--device", default=None, help="CPU, CUDA, METAL (default: DEV or the best present)")
  a = ap.parse_args(argv)
  if a.device: os.environ["DEV"] = a.device
  alloy.manual_seed(a.seed)
  if a.tokens and a.prompt: ap.error("give --tokens or --prompt, not both")
  ids = a.tokens or ([int(t) for t in a.prompt.replace(",", " ").split()] if a.prompt else [464, 2068, 7586, 21831])
  config = GPT2Config() if a.weights else GPT2Config(n_layer=a.layers)
  model = GPT2LMHeadModel(config)
  if a.device: model = model.to(a.device)
  if a.weights: model.load_hf(a.weights)
  gen = Generator(model, a.top_k or None, a.temperature)
  prompt = np.tile(np.asarray(ids, np.int64), (a.batch, 1))
  t0 = time.perf_counter()
  out = gen.generate(prompt, a.max_new_tokens, progress=True)
  seconds = time.perf_counter() - t0
  for row in out: print(" ".join(map(str, row.tolist())))
  print(f"{a.max_new_tokens} new tokens x {a.batch} rows in {seconds:.2f} s (first two calls compile and capture) on "
        f"{a.device or alloy.default_device()}", file=sys.stderr)
  if gen.decode.replay is not None:   # how the decode step replays: its graphs and its number argument
    print("decode step " + next(p for p in gen.decode.replay.describe().split("; ") if p.startswith("replays")), file=sys.stderr)

if __name__ == "__main__":
  main()
