"""Upsample, PixelShuffle and PixelUnshuffle over nn.functional, and the layers of distances and of sliding blocks:
CosineSimilarity, PairwiseDistance, Fold, Unfold."""
from __future__ import annotations
from alloy.nn.module import Module
from alloy.nn import functional as F

class Upsample(Module):
  def __init__(self, size=None, scale_factor=None, mode: str = "nearest", align_corners=None, recompute_scale_factor=None):
    super().__init__()
    self.size, self.scale_factor, self.mode, self.align_corners = size, scale_factor, mode, align_corners
    self.recompute_scale_factor = recompute_scale_factor
  def forward(self, x):
    return F.interpolate(x, self.size, self.scale_factor, self.mode, self.align_corners, recompute_scale_factor=self.recompute_scale_factor)
  def extra_repr(self):
    return (f"size={self.size}" if self.size is not None else f"scale_factor={self.scale_factor}") + f", mode={self.mode!r}"

class PixelShuffle(Module):
  def __init__(self, upscale_factor: int):
    super().__init__()
    self.upscale_factor = upscale_factor
  def forward(self, x): return F.pixel_shuffle(x, self.upscale_factor)
  def extra_repr(self): return f"upscale_factor={self.upscale_factor}"

class PixelUnshuffle(Module):
  def __init__(self, downscale_factor: int):
    super().__init__()
    self.downscale_factor = downscale_factor
  def forward(self, x): return F.pixel_unshuffle(x, self.downscale_factor)
  def extra_repr(self): return f"downscale_factor={self.downscale_factor}"

class CosineSimilarity(Module):
  def __init__(self, dim: int = 1, eps: float = 1e-8):
    super().__init__()
    self.dim, self.eps = dim, eps
  def forward(self, x1, x2): return F.cosine_similarity(x1, x2, self.dim, self.eps)

class PairwiseDistance(Module):
  def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False):
    super().__init__()
    self.norm, self.eps, self.keepdim = p, eps, keepdim
  def forward(self, x1, x2): return F.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)

class Unfold(Module):
  def __init__(self, kernel_size, dilation=1, padding=0, stride=1):
    super().__init__()
    self.kernel_size, self.dilation, self.padding, self.stride = kernel_size, dilation, padding, stride
  def forward(self, x): return F.unfold(x, self.kernel_size, self.dilation, self.padding, self.stride)

class Fold(Module):
  def __init__(self, output_size, kernel_size, dilation=1, padding=0, stride=1):
    super().__init__()
    self.output_size, self.kernel_size, self.dilation, self.padding, self.stride = output_size, kernel_size, dilation, padding, stride
  def forward(self, x): return F.fold(x, self.output_size, self.kernel_size, self.dilation, self.padding, self.stride)

class UpsamplingNearest2d(Upsample):
  def __init__(self, size=None, scale_factor=None): super().__init__(size, scale_factor, "nearest")
class UpsamplingBilinear2d(Upsample):
  def __init__(self, size=None, scale_factor=None): super().__init__(size, scale_factor, "bilinear", align_corners=True)

class ChannelShuffle(Module):
  def __init__(self, groups: int):
    super().__init__()
    self.groups = groups
  def forward(self, x): return F.channel_shuffle(x, self.groups)
  def extra_repr(self): return f"groups={self.groups}"
