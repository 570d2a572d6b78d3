"""MultiheadAttention with torch.nn.MultiheadAttention's parameters (in_proj_weight xavier-uniform, zero biases,
out_proj), layouts (batch_first or (L, N, E), unbatched (L, E)), masks (a bool True masks a position out, a float
one is added; key_padding_mask per key), returned weights (averaged over heads unless asked not to), and its extra keys:
add_bias_kv appends a learned key and value (bias_k, bias_v, xavier-normal) after the projected ones, add_zero_attn a
zero key and value per head after those; the masks allow both, and the weights show them as torch's do."""
from __future__ import annotations
import math
from alloy.tensor import Tensor, where
from alloy.nn.module import Module
from alloy.nn.parameter import Parameter
from alloy.nn.linear import Linear
from alloy.nn import init, functional as F

def _additive(mask: Tensor, dtype, extra: int = 0) -> Tensor:
  """A mask as a float term added to the scores: a bool True (not allowed) is -inf; `extra` keys appended, allowed."""
  m = where(mask, float("-inf"), 0.0).cast(dtype) if mask.dtype.is_bool else mask.cast(dtype)
  return m.cat(m.zeros_like()[..., :1].expand(*m.shape[:-1], extra), dim=-1) if extra else m

class MultiheadAttention(Module):
  def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True, add_bias_kv: bool = False,
               add_zero_attn: bool = False, kdim=None, vdim=None, batch_first: bool = False, device=None, dtype=None):
    super().__init__()
    if embed_dim <= 0 or num_heads <= 0 or embed_dim % num_heads:
      raise ValueError(f"MultiheadAttention: embed_dim ({embed_dim}) must be a positive multiple of num_heads ({num_heads})")
    self.embed_dim, self.num_heads, self.dropout, self.batch_first = embed_dim, num_heads, dropout, batch_first
    self.kdim, self.vdim, self.head_dim = kdim or embed_dim, vdim or embed_dim, embed_dim // num_heads
    self.packed = self.kdim == embed_dim and self.vdim == embed_dim
    kw = dict(dtype=dtype, device=device)
    if self.packed: self.in_proj_weight = Parameter(Tensor.empty(3 * embed_dim, embed_dim, **kw))
    else:
      self.q_proj_weight = Parameter(Tensor.empty(embed_dim, embed_dim, **kw))
      self.k_proj_weight = Parameter(Tensor.empty(embed_dim, self.kdim, **kw))
      self.v_proj_weight = Parameter(Tensor.empty(embed_dim, self.vdim, **kw))
    self.in_proj_bias = Parameter(Tensor.zeros(3 * embed_dim, **kw)) if bias else None
    self.bias_k = self.bias_v = None
    if add_bias_kv:
      self.bias_k, self.bias_v = (Parameter(Tensor.empty(1, 1, embed_dim, **kw)) for _ in range(2))
      init.xavier_normal_(self.bias_k)
      init.xavier_normal_(self.bias_v)
    self.add_zero_attn = add_zero_attn
    self.out_proj = Linear(embed_dim, embed_dim, bias=bias, **kw)
    for w in ([self.in_proj_weight] if self.packed else [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight]): init.xavier_uniform_(w)
    if bias: init.zeros_(self.out_proj.bias)

  def _project(self, x: Tensor, i: int) -> Tensor:
    e = self.embed_dim
    w = self.in_proj_weight[i * e:(i + 1) * e] if self.packed else (self.q_proj_weight, self.k_proj_weight, self.v_proj_weight)[i]
    y = x @ w.T
    return y if self.in_proj_bias is None else y + self.in_proj_bias[i * e:(i + 1) * e]

  def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True, attn_mask=None,
              average_attn_weights: bool = True, is_causal: bool = False):
    unbatched = query.ndim == 2
    if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
      raise ValueError(f"MultiheadAttention: query, key and value must all be 2-D (unbatched) or 3-D, got {query.shape}, {key.shape}, {value.shape}")
    if unbatched: query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
    elif self.batch_first: query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
    (l, n, e), s, h, d = query.shape, key.shape[0], self.num_heads, self.head_dim
    if e != self.embed_dim: raise ValueError(f"MultiheadAttention: query has embedding size {e}, the layer {self.embed_dim}")
    def heads(x, length): return x.reshape(length, n, h, d).permute(1, 2, 0, 3)   # (N, H, length, d)
    kp, vp = self._project(key, 1), self._project(value, 2)
    if self.bias_k is not None: kp, vp = kp.cat(self.bias_k.expand(1, n, e), dim=0), vp.cat(self.bias_v.expand(1, n, e), dim=0)
    extra = (self.bias_k is not None) + self.add_zero_attn   # keys past the given ones, every mask allowing them
    q, k, v = heads(self._project(query, 0), l), heads(kp, kp.shape[0]), heads(vp, vp.shape[0])
    if self.add_zero_attn: k, v = (x.cat(x.zeros_like()[..., :1, :], dim=2) for x in (k, v))
    mask = None
    if attn_mask is not None:
      if attn_mask.shape not in ((l, s), (n * h, l, s)):
        raise ValueError(f"MultiheadAttention: attn_mask must have shape {(l, s)} or {(n * h, l, s)}, got {attn_mask.shape}")
      mask = _additive(attn_mask, q.dtype, extra).reshape((1, 1, l, s + extra) if attn_mask.ndim == 2 else (n, h, l, s + extra))
    elif is_causal:
      mask = _additive(Tensor.arange(s, device=q.device).reshape(1, s) > Tensor.arange(l, device=q.device).reshape(l, 1), q.dtype, extra)
    if key_padding_mask is not None:
      kpm = key_padding_mask.unsqueeze(0) if unbatched else key_padding_mask
      if kpm.shape != (n, s): raise ValueError(f"MultiheadAttention: key_padding_mask must have shape {(n, s)}, got {key_padding_mask.shape}")
      kpm = _additive(kpm, q.dtype, extra).reshape(n, 1, 1, s + extra)
      mask = kpm if mask is None else mask + kpm
    p = self.dropout if self.training else 0.0
    if need_weights:
      scores = (q @ k.transpose(-2, -1)) * (1 / math.sqrt(d))
      weights = (scores if mask is None else scores + mask).softmax(-1)
      out = F.dropout(weights, p, True) @ v if p > 0 else weights @ v
    else: out, weights = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p), None
    out = self.out_proj(out.permute(2, 0, 1, 3).reshape(l, n, e))
    if weights is not None and average_attn_weights: weights = weights.mean(1)
    if unbatched: return out.squeeze(1), (weights.squeeze(0) if weights is not None else None)
    return (out.transpose(0, 1) if self.batch_first else out), weights
