"""Dropout: zeroes elements with probability p while training (alloy's random stream), the identity in eval mode."""
from __future__ import annotations
from alloy.nn.module import Module
from alloy.nn import functional as F

class Dropout(Module):
  def __init__(self, p: float = 0.5, inplace: bool = False):
    super().__init__()
    if not 0.0 <= p <= 1.0: raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    self.p, self.inplace = p, inplace
  def forward(self, x): return F.dropout(x, self.p, self.training, self.inplace)
  def extra_repr(self): return f"p={self.p}, inplace={self.inplace}"
