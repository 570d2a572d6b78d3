"""scaled_dot_product_attention with PyTorch's signature, as softmax(q k^T * scale + mask) v: two matmuls and a
fused softmax row in between (no fused flash kernel yet)."""
from __future__ import annotations
import math
from alloy import dtype as dt

def causal_mask(l: int, s: int, device):
  """(L, S) bool, True where query i may attend to key j: j <= i (top-left aligned, as PyTorch's is_causal)."""
  from alloy.tensor import Tensor
  return Tensor.arange(l, device=device).reshape(l, 1) >= Tensor.arange(s, device=device).reshape(1, s)

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
  from alloy.tensor import where
  from alloy.functional.norm import dropout
  if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
    raise ValueError(f"scaled_dot_product_attention: query, key and value need at least 2 dims, got {query.shape}, {key.shape}, {value.shape}")
  if query.shape[-1] != key.shape[-1]:
    raise ValueError(f"scaled_dot_product_attention: query's embedding size {query.shape[-1]} differs from key's {key.shape[-1]}")
  if key.shape[-2] != value.shape[-2]:
    raise ValueError(f"scaled_dot_product_attention: key has {key.shape[-2]} positions, value {value.shape[-2]}")
  if attn_mask is not None and is_causal: raise ValueError("scaled_dot_product_attention: pass either attn_mask or is_causal, not both")
  if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
    hq, hk = query.shape[-3], key.shape[-3]
    if hq % hk: raise ValueError(f"scaled_dot_product_attention: enable_gqa needs the {hq} query heads to be a multiple of the {hk} key heads")
    rep = hq // hk
    def spread(t):   # each key/value head serves rep query heads: (..., Hk, S, E) -> (..., Hk*rep, S, E), a view
      return t.unsqueeze(-3).expand(t.shape[:-2] + (rep,) + t.shape[-2:]).reshape(t.shape[:-3] + (hq,) + t.shape[-2:])
    key, value = spread(key), spread(value)
  l, s = query.shape[-2], key.shape[-2]
  scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
  scores = (query @ key.transpose(-2, -1)) * scale
  if is_causal: attn_mask = causal_mask(l, s, query.device)
  if attn_mask is not None:
    if attn_mask.dtype.is_bool: scores = where(attn_mask, scores, float("-inf"))
    else: scores = scores + attn_mask.cast(scores.dtype)
  weights = scores.softmax(-1)
  if dropout_p > 0: weights = dropout(weights, dropout_p, True)
  return weights.cast(dt.promote_types(weights.dtype, value.dtype)) @ value
