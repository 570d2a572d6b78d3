"""The pooling layers over nn.functional: MaxPool1d/2d/3d, AvgPool1d/2d/3d, AdaptiveAvgPool1d/2d/3d,
AdaptiveMaxPool1d/2d/3d, LPPool1d/2d/3d, MaxUnpool1d/2d/3d."""
from __future__ import annotations
from alloy.nn.module import Module
from alloy.nn import functional as F

class _MaxPool(Module):
  def __init__(self, kernel_size, stride=None, padding=0, dilation=1, return_indices: bool = False, ceil_mode: bool = False):
    super().__init__()
    self.kernel_size, self.stride, self.padding, self.dilation = kernel_size, stride if stride is not None else kernel_size, padding, dilation
    self.return_indices, self.ceil_mode = return_indices, ceil_mode
  def extra_repr(self):
    return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, dilation={self.dilation}, ceil_mode={self.ceil_mode}"
class MaxPool1d(_MaxPool):
  def forward(self, x): return F.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode, self.return_indices)
class MaxPool2d(_MaxPool):
  def forward(self, x): return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode, self.return_indices)

class MaxPool3d(_MaxPool):
  def forward(self, x): return F.max_pool3d(x, self.kernel_size, self.stride, self.padding, self.dilation, self.ceil_mode, self.return_indices)

class AvgPool1d(Module):
  def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True):
    super().__init__()
    self.kernel_size, self.stride, self.padding = kernel_size, stride if stride is not None else kernel_size, padding
    self.ceil_mode, self.count_include_pad = ceil_mode, count_include_pad
  def forward(self, x): return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad)
  def extra_repr(self): return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
class AvgPool2d(AvgPool1d):
  def __init__(self, kernel_size, stride=None, padding=0, ceil_mode: bool = False, count_include_pad: bool = True, divisor_override=None):
    super().__init__(kernel_size, stride, padding, ceil_mode, count_include_pad)
    self.divisor_override = divisor_override
  def forward(self, x):
    return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad, self.divisor_override)

class AdaptiveAvgPool1d(Module):
  def __init__(self, output_size):
    super().__init__()
    self.output_size = output_size
  def forward(self, x): return F.adaptive_avg_pool1d(x, self.output_size)
  def extra_repr(self): return f"output_size={self.output_size}"
class AdaptiveAvgPool2d(AdaptiveAvgPool1d):
  def forward(self, x): return F.adaptive_avg_pool2d(x, self.output_size)
class AvgPool3d(AvgPool2d):
  def forward(self, x):
    return F.avg_pool3d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode, self.count_include_pad, self.divisor_override)
class AdaptiveAvgPool3d(AdaptiveAvgPool1d):
  def forward(self, x): return F.adaptive_avg_pool3d(x, self.output_size)

class AdaptiveMaxPool1d(Module):
  def __init__(self, output_size, return_indices: bool = False):
    super().__init__()
    self.output_size, self.return_indices = output_size, return_indices
  def forward(self, x): return F.adaptive_max_pool1d(x, self.output_size, self.return_indices)
  def extra_repr(self): return f"output_size={self.output_size}"
class AdaptiveMaxPool2d(AdaptiveMaxPool1d):
  def forward(self, x): return F.adaptive_max_pool2d(x, self.output_size, self.return_indices)
class AdaptiveMaxPool3d(AdaptiveMaxPool1d):
  def forward(self, x): return F.adaptive_max_pool3d(x, self.output_size, self.return_indices)

class LPPool1d(Module):
  def __init__(self, norm_type: float, kernel_size, stride=None, ceil_mode: bool = False):
    super().__init__()
    self.norm_type, self.kernel_size, self.stride, self.ceil_mode = norm_type, kernel_size, stride, ceil_mode
  def forward(self, x): return F.lp_pool1d(x, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)
  def extra_repr(self): return f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, stride={self.stride}, ceil_mode={self.ceil_mode}"
class LPPool2d(LPPool1d):
  def forward(self, x): return F.lp_pool2d(x, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)
class LPPool3d(LPPool1d):
  def forward(self, x): return F.lp_pool3d(x, self.norm_type, self.kernel_size, self.stride, self.ceil_mode)

class MaxUnpool1d(Module):
  def __init__(self, kernel_size, stride=None, padding=0):
    super().__init__()
    self.kernel_size, self.stride, self.padding = kernel_size, stride if stride is not None else kernel_size, padding
  def forward(self, x, indices, output_size=None): return F.max_unpool1d(x, indices, self.kernel_size, self.stride, self.padding, output_size)
  def extra_repr(self): return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
class MaxUnpool2d(MaxUnpool1d):
  def forward(self, x, indices, output_size=None): return F.max_unpool2d(x, indices, self.kernel_size, self.stride, self.padding, output_size)
class MaxUnpool3d(MaxUnpool1d):
  def forward(self, x, indices, output_size=None): return F.max_unpool3d(x, indices, self.kernel_size, self.stride, self.padding, output_size)
