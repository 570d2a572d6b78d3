"""Dropout: zeroes elements with probability p while training (alloy's random stream), the identity in eval mode;
Dropout1d/2d/3d zero whole channels; AlphaDropout and FeatureAlphaDropout keep a SELU network's statistics
(alloy/functional/dropout.py)."""
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

class Dropout1d(Dropout):
  """Zeroes whole channels (dim 1 of (N, C, L), dim 0 of (C, L)) with probability p while training."""
  def forward(self, x): return F.dropout1d(x, self.p, self.training, self.inplace)
class Dropout2d(Dropout):
  def forward(self, x): return F.dropout2d(x, self.p, self.training, self.inplace)
class Dropout3d(Dropout):
  def forward(self, x): return F.dropout3d(x, self.p, self.training, self.inplace)

class AlphaDropout(Dropout):
  """Dropout for SELU networks: dropped values at SELU's saturation, the rest rescaled, mean and variance kept."""
  def forward(self, x): return F.alpha_dropout(x, self.p, self.training, self.inplace)
class FeatureAlphaDropout(Dropout):
  def forward(self, x): return F.feature_alpha_dropout(x, self.p, self.training, self.inplace)
