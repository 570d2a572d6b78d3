"""scaled_dot_product_attention with PyTorch's signature: softmax(q k^T * scale + mask) v.

Where the device has a fused kernel for it (codegen/attention.py's `fits`: a CUDA GPU; for a few query rows or a
boolean attn_mask, a threadgroup per query row in any float dtype; else FlashAttention-2's tiles, float16 or bfloat16
on mma.sync with a head size a multiple of 16 up to 128, float32 on the CUDA cores with one a multiple of 32 up to
128) and nothing needs what the kernels do not give (a float mask, dropout, a gradient), it is one ATTENTION node
(ir/attention.py), which never stores the scores. Elsewhere it is two matmuls and a fused softmax row in between,
which autograd differentiates."""
from __future__ import annotations
import math
from alloy import dtype as dt
from alloy.codegen.attention import fits
from alloy.ir.attention import attention_node

def causal_mask(l: int, s: int, device):
  """(L, S) bool, True where query i may attend to key j: j <= i (top-left aligned, as PyTorch's is_causal)."""
  from alloy.tensor import Tensor
  return Tensor.arange(l, device=device).reshape(l, 1) >= Tensor.arange(s, device=device).reshape(1, s)

def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
  from alloy.tensor import where
  from alloy.functional.dropout import dropout
  if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
    raise ValueError(f"scaled_dot_product_attention: query, key and value need at least 2 dims, got {query.shape}, {key.shape}, {value.shape}")
  if query.shape[-1] != key.shape[-1]:
    raise ValueError(f"scaled_dot_product_attention: query's embedding size {query.shape[-1]} differs from key's {key.shape[-1]}")
  if key.shape[-2] != value.shape[-2]:
    raise ValueError(f"scaled_dot_product_attention: key has {key.shape[-2]} positions, value {value.shape[-2]}")
  if attn_mask is not None and is_causal: raise ValueError("scaled_dot_product_attention: pass either attn_mask or is_causal, not both")
  if attn_mask is not None and attn_mask.device != query.device:
    raise ValueError(f"scaled_dot_product_attention: attn_mask is on {attn_mask.device}, query on {query.device}")
  if enable_gqa and query.ndim >= 3 and key.shape[-3] != query.shape[-3]:
    hq, hk = query.shape[-3], key.shape[-3]
    if hq % hk: raise ValueError(f"scaled_dot_product_attention: enable_gqa needs the {hq} query heads to be a multiple of the {hk} key heads")
    rep = hq // hk
    def spread(t):   # each key/value head serves rep query heads: (..., Hk, S, E) -> (..., Hk*rep, S, E), a view
      return t.unsqueeze(-3).expand(t.shape[:-2] + (rep,) + t.shape[-2:]).reshape(t.shape[:-3] + (hq,) + t.shape[-2:])
    key, value = spread(key), spread(value)
  l, s = query.shape[-2], key.shape[-2]
  scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
  if dropout_p == 0 and (fused := _fused(query, key, value, scale, is_causal, attn_mask)) is not None: return fused
  scores = (query @ key.transpose(-2, -1)) * scale
  if is_causal: attn_mask = causal_mask(l, s, query.device)
  if attn_mask is not None:
    if attn_mask.dtype.is_bool: scores = where(attn_mask, scores, float("-inf"))
    else: scores = scores + attn_mask.cast(scores.dtype)
  weights = scores.softmax(-1)
  if dropout_p > 0: weights = dropout(weights, dropout_p, True)
  return weights.cast(dt.promote_types(weights.dtype, value.dtype)) @ value

def _fused(query, key, value, scale: float, causal: bool, attn_mask):
  """The ATTENTION node for query, key and value (and a boolean attn_mask) where the device's fused kernel serves
  them, else None."""
  from alloy.autograd import is_grad_enabled
  from alloy.runtime.registry import get_device
  from alloy.tensor import broadcast_shape
  ts = (query, key, value)
  if len({t.device for t in ts}) != 1 or len({t.dtype for t in ts}) != 1 or not isinstance(query.device, str): return None
  if value.shape[-1] != query.shape[-1] or any(0 in t.shape for t in ts): return None
  if is_grad_enabled() and any(t.requires_grad for t in ts): return None   # the kernel has no backward pass yet
  if attn_mask is not None and (not attn_mask.dtype.is_bool or attn_mask.ndim < 2): return None   # its device: checked above
  L, S = query.shape[-2], key.shape[-2]
  if not fits(get_device(query.device).caps, query.dtype, query.shape[-1], L, attn_mask is not None): return None
  masks = [attn_mask.shape[:-2]] if attn_mask is not None else []
  try:
    lead = broadcast_shape(query.shape[:-2], key.shape[:-2], value.shape[:-2], *masks)
    if masks and broadcast_shape(attn_mask.shape[-2:], (L, S)) != (L, S): return None
  except ValueError: return None   # the composed path names the shapes
  q, k, v = (t.expand(lead + t.shape[-2:]) for t in ts)
  mask = attn_mask.expand(lead + (L, S)).node if masks else None
  # stored (..., L, heads, D) and handed out as PyTorch's (..., heads, L, D): the usual next step, a transpose and a
  # reshape to (..., L, heads * D) for the output projection, is then a view and no copy
  heads_inside = len(lead) > 0 and lead[-1] > 1
  out = query._new(attention_node(q.node, k.node, v.node, scale, causal, heads_inside, mask))
  return out.transpose(-3, -2) if heads_inside else out
