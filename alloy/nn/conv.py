"""Conv1d, Conv2d, Conv3d and ConvTranspose1d/2d/3d over nn.functional, with PyTorch's weight layouts and default
initialization (init.default_weight_and_bias_)."""
from __future__ import annotations
from alloy.tensor import Tensor
from alloy.nn.module import Module
from alloy.nn.parameter import Parameter
from alloy.nn import init, functional as F

PADDING_MODES = ("zeros", "reflect", "replicate", "circular")

def _tuple(v, nd: int, name: str) -> tuple:
  t = tuple(v) if isinstance(v, (tuple, list)) else (v,) * nd
  if len(t) != nd or not all(isinstance(x, int) and not isinstance(x, bool) for x in t):
    raise ValueError(f"{name} must be an int or a tuple of {nd} ints, got {v!r}")
  return t

class _ConvNd(Module):
  nd: int
  transposed = False

  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1,
               bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None, output_padding=0):
    super().__init__()
    name = type(self).__name__
    if padding_mode not in PADDING_MODES:
      raise ValueError(f"{name}: padding_mode must be one of {PADDING_MODES}, but got padding_mode={padding_mode!r}")
    if self.transposed and padding_mode != "zeros": raise ValueError(f'{name}: only "zeros" padding mode is supported, got {padding_mode!r}')
    if groups <= 0 or in_channels % groups or out_channels % groups:
      raise ValueError(f"{name}: in_channels ({in_channels}) and out_channels ({out_channels}) must be divisible by groups ({groups})")
    self.in_channels, self.out_channels, self.groups, self.padding_mode = in_channels, out_channels, groups, padding_mode
    self.kernel_size, self.stride = _tuple(kernel_size, self.nd, "kernel_size"), _tuple(stride, self.nd, "stride")
    self.dilation, self.output_padding = _tuple(dilation, self.nd, "dilation"), _tuple(output_padding, self.nd, "output_padding")
    self.padding = padding if isinstance(padding, str) else _tuple(padding, self.nd, "padding")
    self._pad_pairs = _pad_pairs(self.padding, self.kernel_size, self.dilation)   # F.pad's order: the last dim first
    shape = (in_channels, out_channels // groups) if self.transposed else (out_channels, in_channels // groups)
    self.weight = Parameter(Tensor.empty(*shape, *self.kernel_size, dtype=dtype, device=device))
    self.bias = Parameter(Tensor.empty(out_channels, dtype=dtype, device=device)) if bias else None
    self.reset_parameters()
  def reset_parameters(self): init.default_weight_and_bias_(self.weight, self.bias)
  def extra_repr(self):
    s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
    if self.padding != (0,) * self.nd: s += f", padding={self.padding}"
    if self.dilation != (1,) * self.nd: s += f", dilation={self.dilation}"
    if self.groups != 1: s += f", groups={self.groups}"
    if self.padding_mode != "zeros": s += f", padding_mode={self.padding_mode}"
    return s + ("" if self.bias is not None else ", bias=False")
  def _conv(self, fn, x):
    """fn over x padded as padding_mode says: zeros by the convolution itself, else by F.pad first (as torch does)."""
    if self.padding_mode == "zeros": return fn(x, self.weight, self.bias, self.stride, self.padding, self.dilation, self.groups)
    return fn(F.pad(x, self._pad_pairs, mode=self.padding_mode), self.weight, self.bias, self.stride, 0, self.dilation, self.groups)

def _pad_pairs(padding, kernel_size: tuple, dilation: tuple) -> tuple:
  """F.pad's (before, after) pairs, last dim first, for a padding of ints or 'same' (the odd one after) or 'valid'."""
  if padding == "valid": return (0, 0) * len(kernel_size)
  if padding == "same":
    totals = [d * (k - 1) for d, k in zip(dilation, kernel_size)]
    return tuple(x for t in reversed(totals) for x in (t // 2, t - t // 2))
  return tuple(x for p in reversed(padding) for x in (p, p))

class Conv1d(_ConvNd):
  nd = 1
  def forward(self, x): return self._conv(F.conv1d, x)
class Conv2d(_ConvNd):
  nd = 2
  def forward(self, x): return self._conv(F.conv2d, x)
class Conv3d(_ConvNd):
  nd = 3
  def forward(self, x): return self._conv(F.conv3d, x)

class _ConvTransposeNd(_ConvNd):
  transposed = True
  def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1, bias=True, dilation=1,
               padding_mode="zeros", device=None, dtype=None):
    if isinstance(padding, str): raise ValueError(f"{type(self).__name__}: padding must be an int or a tuple, not a string")
    super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias, padding_mode, device, dtype, output_padding)
  def _transpose(self, fn, x):
    return fn(x, self.weight, self.bias, self.stride, self.padding, self.output_padding, self.groups, self.dilation)

class ConvTranspose1d(_ConvTransposeNd):
  nd = 1
  def forward(self, x): return self._transpose(F.conv_transpose1d, x)
class ConvTranspose2d(_ConvTransposeNd):
  nd = 2
  def forward(self, x): return self._transpose(F.conv_transpose2d, x)
class ConvTranspose3d(_ConvTransposeNd):
  nd = 3
  def forward(self, x): return self._transpose(F.conv_transpose3d, x)
