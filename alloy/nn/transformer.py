"""torch.nn's Transformer layers: TransformerEncoderLayer, TransformerDecoderLayer, their stacks TransformerEncoder
and TransformerDecoder, and Transformer, with PyTorch's parameter names (so its state dicts load as they are), post-
or pre-norm (norm_first), relu or gelu (or any callable) in the feed-forward block, and its masks."""
from __future__ import annotations
import copy
from alloy.nn.module import Module
from alloy.nn.containers import ModuleList
from alloy.nn.linear import Linear
from alloy.nn.norm import LayerNorm
from alloy.nn.dropout import Dropout
from alloy.nn.attention import MultiheadAttention
from alloy.nn import functional as F

def _activation(activation):
  if callable(activation): return activation
  if activation == "relu": return F.relu
  if activation == "gelu": return F.gelu
  raise ValueError(f"Transformer: activation must be 'relu', 'gelu' or a callable, got {activation!r}")

class _Layer(Module):
  """What the encoder and decoder layers share, under PyTorch's attribute names: self-attention (and, for the
  decoder, attention over the memory), the feed-forward block, `norms` LayerNorms and as many dropouts."""
  def __init__(self, d_model: int, nhead: int, dim_feedforward: int, dropout: float, activation, layer_norm_eps: float,
               batch_first: bool, norm_first: bool, bias: bool, norms: int, device, dtype):
    super().__init__()
    kw = dict(device=device, dtype=dtype)
    def attention(): return MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw)
    self.self_attn = attention()
    if norms == 3: self.multihead_attn = attention()
    self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
    self.dropout = Dropout(dropout)
    self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
    self.activation = _activation(activation)
    self.norm_first = norm_first
    for k in range(1, norms + 1): setattr(self, f"norm{k}", LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
    for k in range(1, norms + 1): setattr(self, f"dropout{k}", Dropout(dropout))
  def _sa_block(self, x, mask, padding, is_causal):
    return self.dropout1(self.self_attn(x, x, x, key_padding_mask=padding, need_weights=False, attn_mask=mask, is_causal=is_causal)[0])
  def _ff_block(self, x, dropout: Dropout): return dropout(self.linear2(self.dropout(self.activation(self.linear1(x)))))

class TransformerEncoderLayer(_Layer):
  def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1, activation="relu",
               layer_norm_eps: float = 1e-5, batch_first: bool = False, norm_first: bool = False, bias: bool = True, device=None, dtype=None):
    super().__init__(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first, bias, 2, device, dtype)
  def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal: bool = False):
    x = src
    if self.norm_first:
      x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
      return x + self._ff_block(self.norm2(x), self.dropout2)
    x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
    return self.norm2(x + self._ff_block(x, self.dropout2))

class TransformerDecoderLayer(_Layer):
  def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1, activation="relu",
               layer_norm_eps: float = 1e-5, batch_first: bool = False, norm_first: bool = False, bias: bool = True, device=None, dtype=None):
    super().__init__(d_model, nhead, dim_feedforward, dropout, activation, layer_norm_eps, batch_first, norm_first, bias, 3, device, dtype)
  def _mha_block(self, x, memory, mask, padding, is_causal):
    out = self.multihead_attn(x, memory, memory, key_padding_mask=padding, need_weights=False, attn_mask=mask, is_causal=is_causal)[0]
    return self.dropout2(out)
  def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
              tgt_is_causal: bool = False, memory_is_causal: bool = False):
    x = tgt
    if self.norm_first:
      x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
      x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
      return x + self._ff_block(self.norm3(x), self.dropout3)
    x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
    x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
    return self.norm3(x + self._ff_block(x, self.dropout3))

class TransformerEncoder(Module):
  """num_layers copies of encoder_layer (each its own parameters), then norm if given."""
  def __init__(self, encoder_layer: TransformerEncoderLayer, num_layers: int, norm=None, enable_nested_tensor: bool = True, mask_check: bool = True):
    super().__init__()
    self.layers = ModuleList([copy.deepcopy(encoder_layer) for _ in range(num_layers)])
    self.num_layers, self.norm = num_layers, norm
  def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
    x = src
    for layer in self.layers: x = layer(x, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
    return self.norm(x) if self.norm is not None else x

class TransformerDecoder(Module):
  def __init__(self, decoder_layer: TransformerDecoderLayer, num_layers: int, norm=None):
    super().__init__()
    self.layers = ModuleList([copy.deepcopy(decoder_layer) for _ in range(num_layers)])
    self.num_layers, self.norm = num_layers, norm
  def forward(self, tgt, memory, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
              tgt_is_causal=None, memory_is_causal: bool = False):
    x = tgt
    for layer in self.layers:
      x = layer(x, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask, bool(tgt_is_causal), memory_is_causal)
    return self.norm(x) if self.norm is not None else x

class Transformer(Module):
  """An encoder of num_encoder_layers and a decoder of num_decoder_layers, each closed by a LayerNorm, as torch.nn.Transformer."""
  def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6, num_decoder_layers: int = 6,
               dim_feedforward: int = 2048, dropout: float = 0.1, activation="relu", custom_encoder=None, custom_decoder=None,
               layer_norm_eps: float = 1e-5, batch_first: bool = False, norm_first: bool = False, bias: bool = True, device=None, dtype=None):
    super().__init__()
    kw = dict(device=device, dtype=dtype)
    layer = dict(dim_feedforward=dim_feedforward, dropout=dropout, activation=activation, layer_norm_eps=layer_norm_eps,
                 batch_first=batch_first, norm_first=norm_first, bias=bias, **kw)
    self.encoder = custom_encoder or TransformerEncoder(TransformerEncoderLayer(d_model, nhead, **layer), num_encoder_layers,
                                                        LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
    self.decoder = custom_decoder or TransformerDecoder(TransformerDecoderLayer(d_model, nhead, **layer), num_decoder_layers,
                                                        LayerNorm(d_model, eps=layer_norm_eps, bias=bias, **kw))
    self.d_model, self.nhead, self.batch_first = d_model, nhead, batch_first
  def forward(self, src, tgt, src_mask=None, tgt_mask=None, memory_mask=None, src_key_padding_mask=None, tgt_key_padding_mask=None,
              memory_key_padding_mask=None, src_is_causal=None, tgt_is_causal=None, memory_is_causal: bool = False):
    memory = self.encoder(src, src_mask, src_key_padding_mask, src_is_causal)
    return self.decoder(tgt, memory, tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask, tgt_is_causal, memory_is_causal)
  @staticmethod
  def generate_square_subsequent_mask(sz: int, device=None, dtype=None):
    """A float mask with -inf above the diagonal (positions a query may not attend to) and 0 elsewhere."""
    from alloy.tensor import Tensor, where
    i = Tensor.arange(sz, device=device)
    mask = where(i.reshape(1, sz) > i.reshape(sz, 1), float("-inf"), 0.0)
    return mask.cast(dtype) if dtype is not None else mask
