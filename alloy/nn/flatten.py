"""Flatten and Unflatten: reshapes as modules (a Sequential between convolutions and Linear layers)."""
from __future__ import annotations
from alloy.nn.module import Module

class Flatten(Module):
  def __init__(self, start_dim: int = 1, end_dim: int = -1):
    super().__init__()
    self.start_dim, self.end_dim = start_dim, end_dim
  def forward(self, x): return x.flatten(self.start_dim, self.end_dim)
  def extra_repr(self): return f"start_dim={self.start_dim}, end_dim={self.end_dim}"

class Unflatten(Module):
  def __init__(self, dim: int, unflattened_size):
    super().__init__()
    self.dim, self.unflattened_size = dim, tuple(unflattened_size)
  def forward(self, x):
    d = self.dim % x.ndim
    return x.reshape(x.shape[:d] + self.unflattened_size + x.shape[d + 1:])
  def extra_repr(self): return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
