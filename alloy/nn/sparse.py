"""Embedding: a lookup table of num_embeddings rows, initialized N(0, 1) with the padding row zero (PyTorch's);
EmbeddingBag: the same table, its rows summed, averaged or maxed per bag (alloy/functional/embedding_bag.py)."""
from __future__ import annotations
from alloy.tensor import Tensor
from alloy.nn.module import Module
from alloy.nn.parameter import Parameter, rebind
from alloy.nn import init
from alloy.gathering import embedding
from alloy.functional.embedding_bag import MODES, embedding_bag
from alloy.autograd import no_grad

class Embedding(Module):
  def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx: int | None = None, max_norm=None, norm_type: float = 2.0,
               scale_grad_by_freq: bool = False, sparse: bool = False, _weight=None, _freeze: bool = False, device=None, dtype=None):
    super().__init__()
    if padding_idx is not None:
      if not -num_embeddings <= padding_idx < num_embeddings:
        raise ValueError(f"Embedding: padding_idx {padding_idx} must be within num_embeddings {num_embeddings}")
      padding_idx %= num_embeddings
    self.num_embeddings, self.embedding_dim, self.padding_idx = num_embeddings, embedding_dim, padding_idx
    self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse = max_norm, norm_type, scale_grad_by_freq, sparse
    if _weight is None:
      self.weight = Parameter(Tensor.empty(num_embeddings, embedding_dim, dtype=dtype, device=device), requires_grad=not _freeze)
      self.reset_parameters()
    else:
      if tuple(_weight.shape) != (num_embeddings, embedding_dim):
        raise ValueError(f"Embedding: _weight has shape {tuple(_weight.shape)}, expected {(num_embeddings, embedding_dim)}")
      self.weight = Parameter(_weight, requires_grad=not _freeze)
  def reset_parameters(self):
    init.normal_(self.weight)
    if self.padding_idx is not None:
      with no_grad():
        row = Tensor.arange(self.num_embeddings, device=self.weight.device).reshape(-1, 1) == self.padding_idx
        rebind(self.weight, self.weight.masked_fill(row, 0.0).realize())
  def forward(self, x): return embedding(x, self.weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq, self.sparse)
  @classmethod
  def from_pretrained(cls, embeddings: Tensor, freeze: bool = True, padding_idx=None, **kw):
    if embeddings.ndim != 2: raise ValueError(f"Embedding.from_pretrained: embeddings must be 2-D, got shape {tuple(embeddings.shape)}")
    return cls(*embeddings.shape, padding_idx=padding_idx, _weight=embeddings, _freeze=freeze, **kw)
  def extra_repr(self):
    return f"{self.num_embeddings}, {self.embedding_dim}" + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None else "")

class EmbeddingBag(Embedding):
  def __init__(self, num_embeddings: int, embedding_dim: int, max_norm=None, norm_type: float = 2.0, scale_grad_by_freq: bool = False,
               mode: str = "mean", sparse: bool = False, _weight=None, include_last_offset: bool = False, padding_idx: int | None = None,
               device=None, dtype=None):
    if mode not in MODES: raise ValueError(f"EmbeddingBag: mode must be one of {MODES}, got {mode!r}")
    super().__init__(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse, _weight, device=device,
                     dtype=dtype)
    self.mode, self.include_last_offset = mode, include_last_offset
  def forward(self, input, offsets=None, per_sample_weights=None):
    return embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq, self.mode, self.sparse,
                         per_sample_weights, self.include_last_offset, self.padding_idx)
  def extra_repr(self): return super().extra_repr() + f", mode={self.mode!r}"
