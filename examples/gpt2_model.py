"""GPT-2 written with alloy.nn, in Hugging Face's parameter layout (GPT2LMHeadModel's state dict loads as it is: Conv1D
weights stored (in, out), the lm_head tied to the token embedding), with a fixed-size KV cache.

The KV cache is one (batch, heads, max_len, head_dim) key and value tensor per layer, changed in place, and the
position is a runtime number: a decode step writes its key and value where `arange(max_len) == pos` and attends over
the cache with a mask `arange(max_len) <= pos` (on a GPU one fused kernel, which skips the masked keys). Under
@alloy.jit a decode step's `pos` is a replay argument (a kernel scalar), so every token replays the same captured
kernels. Chosen over a symbolic shape because alloy has none (a size is part of a kernel): a cache that grew would
compile new kernels per length. The price is a rewrite of each layer's cache (2 x 12 x B x max_len x 768 floats for
the 124M model) per token, and, where no fused kernel skips the masked keys (a CPU), attention over all max_len of
them: a one-row write at a runtime offset would need a kernel that stores through a view into a live buffer, which
alloy's value semantics do not have yet.
"""
from __future__ import annotations
from dataclasses import dataclass
import alloy
from alloy import Tensor, nn, where
import alloy.nn.functional as F
from alloy.gathering import take, positions_along

@dataclass
class GPT2Config:
  """Hugging Face GPT2Config's names and defaults (the 124M model)."""
  vocab_size: int = 50257
  n_positions: int = 1024
  n_embd: int = 768
  n_layer: int = 12
  n_head: int = 12
  layer_norm_epsilon: float = 1e-5

class Conv1D(nn.Module):
  """GPT-2's linear layer as Hugging Face stores it: weight (in, out), y = x @ weight + bias."""
  def __init__(self, n_in: int, n_out: int):
    super().__init__()
    self.weight = nn.Parameter((alloy.randn(n_in, n_out) * 0.02).realize())   # realized: a lazy draw reruns its generator in every reader
    self.bias = nn.Parameter(alloy.zeros(n_out))
  def forward(self, x: Tensor) -> Tensor: return x @ self.weight + self.bias

class KVCache:
  """Per layer a key and a value tensor of (batch, heads, max_len, head_dim), zero where nothing is written yet."""
  def __init__(self, config: GPT2Config, batch: int, max_len: int, dtype=None, device=None):
    if max_len > config.n_positions: raise ValueError(f"KVCache: max_len {max_len} is past the model's {config.n_positions} positions")
    shape = (batch, config.n_head, max_len, config.n_embd // config.n_head)
    self.batch, self.max_len = batch, max_len
    self.layers = [(Tensor.zeros(*shape, dtype=dtype, device=device).realize(), Tensor.zeros(*shape, dtype=dtype, device=device).realize())
                   for _ in range(config.n_layer)]

class Attention(nn.Module):
  def __init__(self, config: GPT2Config):
    super().__init__()
    self.n_head, self.n_embd = config.n_head, config.n_embd
    self.c_attn = Conv1D(config.n_embd, 3 * config.n_embd)
    self.c_proj = Conv1D(config.n_embd, config.n_embd)

  def forward(self, x: Tensor, start, cache: tuple | None) -> Tensor:
    """x (B, L, C) at positions start..start+L-1; cache: this layer's (key, value), written in place."""
    B, L, C = x.shape
    H, D = self.n_head, C // self.n_head
    # .contiguous(): kernel cuts where PyTorch has them; left to itself, the schedule fuses a one-token step's
    # attention, MLP and logits into one kernel that recomputes each reduction inside the next (minutes on a CPU)
    q, k, v = [t.reshape(B, L, H, D).permute(0, 2, 1, 3) for t in self.c_attn(x).contiguous().split(C, dim=-1)]
    if L > 1 and isinstance(start, int) and start == 0:
      # a prompt from the start sees only its own keys: PyTorch's causal attention, one fused kernel where the device
      # has it (a GPU in float16 or bfloat16: FlashAttention's forward pass, the scores never stored)
      if cache is not None: _write(cache[0], k, 0), _write(cache[1], v, 0)
      y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
      return self.c_proj(y.permute(0, 2, 1, 3).reshape(B, L, C).contiguous())   # the fused kernel's output as it is: no copy
    if cache is not None:
      k, v = _write(cache[0], k, start), _write(cache[1], v, start)
    T = k.shape[2]
    keys = Tensor.arange(T, device=x.device).reshape(1, T)
    allowed = keys <= Tensor.arange(L, device=x.device).reshape(L, 1) + start   # causal, and nothing past what is written
    # a GPU's fused kernel for a few query rows and a mask (one threadgroup a row, the scores never stored); elsewhere
    # its two matmuls and the softmax between them
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
    return self.c_proj(y.permute(0, 2, 1, 3).reshape(B, L, C).contiguous())

def _write(cache: Tensor, new: Tensor, start) -> Tensor:
  """cache with new (B, H, L, D) written at positions start..start+L-1, in place. One token (L 1) at a runtime
  position: a where over the cache's positions; a prompt: at a plain start, padded into place."""
  T, L = cache.shape[2], new.shape[2]
  where_at = Tensor.arange(T, device=cache.device).reshape(T, 1)
  if L == 1: value = where(where_at == start, new, cache)
  elif isinstance(start, int) and start == 0 and L == T: value = new   # the whole cache: a copy, no read of the old one
  else:
    if not isinstance(start, int): raise TypeError("KV cache: a prompt of several tokens needs a plain int start")
    if start + L > T: raise ValueError(f"KV cache: positions {start}..{start + L - 1} are past its {T}")
    placed = new.pad(((0, 0), (0, 0), (start, T - start - L), (0, 0)))
    value = where((where_at >= start) & (where_at < start + L), placed, cache)
  cache.copy_(value)
  return cache

class MLP(nn.Module):
  def __init__(self, config: GPT2Config):
    super().__init__()
    self.c_fc = Conv1D(config.n_embd, 4 * config.n_embd)
    self.c_proj = Conv1D(4 * config.n_embd, config.n_embd)
  def forward(self, x: Tensor) -> Tensor: return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh").contiguous())   # HF's "gelu_new"

class Block(nn.Module):
  def __init__(self, config: GPT2Config):
    super().__init__()
    self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
    self.attn = Attention(config)
    self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)
    self.mlp = MLP(config)
  def forward(self, x: Tensor, start, cache) -> Tensor:
    x = (x + self.attn(self.ln_1(x), start, cache)).contiguous()
    return (x + self.mlp(self.ln_2(x))).contiguous()

class Transformer(nn.Module):
  def __init__(self, config: GPT2Config):
    super().__init__()
    self.wte = nn.Embedding(config.vocab_size, config.n_embd)
    self.wpe = nn.Embedding(config.n_positions, config.n_embd)
    with alloy.no_grad():
      for e in (self.wte, self.wpe): e.weight.copy_((alloy.randn(*e.weight.shape) * 0.02).realize())
    self.h = nn.ModuleList([Block(config) for _ in range(config.n_layer)])
    self.ln_f = nn.LayerNorm(config.n_embd, eps=config.layer_norm_epsilon)

def _rows(weight: Tensor, index: Tensor) -> Tensor:
  """weight's rows at index (any shape), unchecked: a gather on the device with no bounds check. nn.Embedding's check
  reads the indices back (eagerly, or under @jit after every replay): a sync per decode step, whose token is computed
  on the device and in range by construction, where the decode loop otherwise never waits."""
  flat = index.reshape(-1, 1).expand(index.numel(), weight.shape[1])
  return take(weight, 0, flat, positions_along(flat.shape, 0, weight.device)).reshape(index.shape + (weight.shape[1],))

class GPT2LMHeadModel(nn.Module):
  """Hugging Face's GPT2LMHeadModel: forward(ids (B, L) int, start=0, cache=None) -> logits (B, L, vocab)."""
  def __init__(self, config: GPT2Config | None = None):
    super().__init__()
    self.config = config or GPT2Config()
    self.transformer = Transformer(self.config)

  def forward(self, ids: Tensor, start=0, cache: KVCache | None = None, logits_to_keep: int = 0) -> Tensor:
    """logits_to_keep: as transformers' argument, the logits of only the last that many positions (0: all). A prompt's
    next token needs the last position's: the others cost a (B, L, vocab) matmul that nothing reads."""
    t = self.transformer
    L = ids.shape[1]
    if cache is None and not isinstance(start, int): raise TypeError("GPT2: a runtime position needs a KV cache")
    positions = Tensor.arange(L, dtype=alloy.int32, device=ids.device).reshape(1, L) + start
    x = _rows(t.wte.weight, ids) + _rows(t.wpe.weight, positions)
    for k, block in enumerate(t.h): x = block(x, start, cache.layers[k] if cache is not None else None)
    if logits_to_keep: x = x[:, -logits_to_keep:]
    return t.ln_f(x) @ t.wte.weight.T   # the lm_head is tied to the token embedding

  def load_hf(self, path: str) -> "GPT2LMHeadModel":
    """Loads a safetensors file in Hugging Face GPT-2's layout (GPT2LMHeadModel's or GPT2Model's keys: with or without
    'transformer.'; the tied lm_head.weight and the old attn.bias/masked_bias mask buffers are skipped)."""
    state = {}
    for k, v in alloy.load(path).items():
      if k == "lm_head.weight" or k.endswith((".attn.bias", ".attn.masked_bias")): continue
      state[k if k.startswith("transformer.") else "transformer." + k] = v
    ref = self.transformer.wte.weight
    self.load_state_dict({k: v.to(ref.device).cast(ref.dtype) for k, v in state.items()})
    return self
