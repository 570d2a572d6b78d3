"""examples/gpt2.py's model against Hugging Face transformers' GPT2LMHeadModel (randomly initialised, saved with
save_pretrained(safe_serialization=True), loaded by alloy): logits agree to 1e-4 relative in float32 (skips where
transformers is absent). Without transformers: KV-cache decoding under @jit gives the tokens a full recompute
gives, and compiles nothing per token after its capture."""
import importlib.util, pathlib, sys
import numpy as np, pytest
import alloy
from alloy.engine import compiled, realize as engine

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples"

def _module(name):
  if name in sys.modules: return sys.modules[name]
  spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
  mod = importlib.util.module_from_spec(spec)
  sys.modules[name] = mod
  spec.loader.exec_module(mod)
  return mod

SMALL = dict(vocab_size=96, n_positions=32, n_embd=64, n_layer=2, n_head=4)

def _relative(got, want): return float(np.abs(got - want).max() / np.abs(want).max())

def test_logits_match_transformers(tmp_path, device):
  if device == "METAL": pytest.skip("float32 parity is checked on CPU and CUDA")
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  m = _module("gpt2_model")
  torch.manual_seed(0)
  hf = transformers.GPT2LMHeadModel(transformers.GPT2Config(**SMALL, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)).eval()
  with torch.no_grad():   # HF zeroes the biases and sets the LayerNorms to 1, 0: random ones check that they load
    for name, p in hf.named_parameters():
      if name.endswith("bias") or "ln_" in name: p.copy_(torch.randn_like(p) * 0.1 + (1.0 if "ln_" in name and name.endswith("weight") else 0.0))
  hf.save_pretrained(tmp_path, safe_serialization=True)
  ids = np.random.default_rng(1).integers(0, SMALL["vocab_size"], (2, 11))
  with torch.no_grad(): want = hf(torch.tensor(ids)).logits.numpy()
  model = m.GPT2LMHeadModel(m.GPT2Config(**SMALL)).to(device).load_hf(str(tmp_path / "model.safetensors"))
  with alloy.no_grad(): got = model(alloy.Tensor(ids.astype(np.int32), device=device)).numpy()
  assert got.shape == want.shape
  assert _relative(got, want) < 1e-4, _relative(got, want)
  with alloy.no_grad(): last = model(alloy.Tensor(ids.astype(np.int32), device=device), logits_to_keep=3).numpy()
  assert last.shape == (2, 3, SMALL["vocab_size"]) and _relative(last, want[:, -3:]) < 1e-4
  # the same logits through the KV cache: the prompt, then token by token
  cache = m.KVCache(model.config, 2, 16, device=device)
  with alloy.no_grad():
    first = model(alloy.Tensor(ids[:, :6].astype(np.int32), device=device), 0, cache).numpy()
    steps = [model(alloy.Tensor(ids[:, p:p + 1].astype(np.int32), device=device), p, cache).numpy() for p in range(6, 11)]
  assert _relative(np.concatenate([first] + steps, 1), want) < 1e-4
  # greedy generation: the tokens transformers' generate picks
  gen = _module("gpt2").Generator(model)
  with torch.no_grad():
    hf_tokens = hf.generate(torch.tensor(ids[:, :5]), max_new_tokens=8, do_sample=False, pad_token_id=0).numpy()
  np.testing.assert_array_equal(gen.generate(ids[:, :5], 8), hf_tokens)

def test_load_errors(tmp_path):
  m = _module("gpt2_model")
  model = m.GPT2LMHeadModel(m.GPT2Config(**SMALL))
  state = {k: v for k, v in model.state_dict().items() if k != "transformer.ln_f.bias"}
  alloy.save(state, str(tmp_path / "w.safetensors"))
  with pytest.raises(Exception, match="ln_f.bias"): m.GPT2LMHeadModel(m.GPT2Config(**SMALL)).load_hf(str(tmp_path / "w.safetensors"))

@pytest.mark.parametrize("top_k", [None, 5])
def test_jitted_decode_compiles_nothing_per_token(top_k, monkeypatch):
  m, g = _module("gpt2_model"), _module("gpt2")
  alloy.manual_seed(3)
  model = m.GPT2LMHeadModel(m.GPT2Config(**SMALL))
  prompt = np.random.default_rng(2).integers(0, SMALL["vocab_size"], (3, 4))
  gen = g.Generator(model, top_k=top_k)
  tok = gen.prefill(prompt, 16)
  out = [tok.numpy()]
  for pos in range(4, 15):
    if pos == 6:   # from the third decode step on, every call is a replay
      assert gen.decode.replay is not None and any(r is not None for r, *_ in gen.decode.replay.graphs), gen.decode.replay.graph_off
      compiles = compiled.compiles
      def boom(*a, **kw): raise AssertionError("a decode step scheduled or compiled")
      monkeypatch.setattr(engine, "run_schedule", boom)
      monkeypatch.setattr(engine, "compile_kernel", boom)
    tok = gen.decode(tok, pos)
    out.append(tok.numpy())
  monkeypatch.undo()
  assert compiled.compiles == compiles
  tokens = np.concatenate([prompt] + out, 1)
  assert tokens.shape == (3, 16) and tokens.min() >= 0 and tokens.max() < SMALL["vocab_size"]
  if top_k is None:   # greedy: what a full recompute without the cache picks at every position
    with alloy.no_grad(): logits = model(alloy.Tensor(tokens.astype(np.int32))).numpy()
    np.testing.assert_array_equal(logits[:, 3:-1].argmax(-1), tokens[:, 4:])
  else:   # sampled from the top k of the full recompute's logits at every position, not all alike
    with alloy.no_grad(): logits = model(alloy.Tensor(tokens.astype(np.int32))).numpy()
    top = np.argsort(-logits[:, 3:-1], -1)[..., :top_k]
    assert all(tokens[b, p + 4] in top[b, p] for b in range(3) for p in range(12))
    assert len(np.unique(tokens[:, 4:])) > 3

def test_jitted_prefill_replays_new_prompts(monkeypatch):
  """Generator.prefill runs under one @jit per prompt shape: from the third prompt of a shape on, a prefill replays
  (schedules and compiles nothing) and picks the token an eager prefill of that prompt picks; a new shape captures
  anew."""
  m, g = _module("gpt2_model"), _module("gpt2")
  alloy.manual_seed(5)
  gen = g.Generator(m.GPT2LMHeadModel(m.GPT2Config(**SMALL)))
  rng = np.random.default_rng(4)
  for i in range(5):
    prompt = rng.integers(0, SMALL["vocab_size"], (2, 6))
    want = gen.prefill(prompt, 12, jit=False).numpy()
    if i >= 2:
      def boom(*a, **kw): raise AssertionError("a replayed prefill scheduled or compiled")
      monkeypatch.setattr(engine, "run_schedule", boom)
      monkeypatch.setattr(engine, "compile_kernel", boom)
    got = gen.prefill(prompt, 12).numpy()
    monkeypatch.undo()
    np.testing.assert_array_equal(got, want)
  other = rng.integers(0, SMALL["vocab_size"], (2, 5))
  np.testing.assert_array_equal(gen.prefill(other, 12).numpy(), gen.prefill(other, 12, jit=False).numpy())
  assert set(gen.prefills) == {(2, 6), (2, 5)}
