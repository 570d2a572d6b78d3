"""PyTorch's signal windows (hann, hamming, blackman, bartlett, kaiser): made on the host in float64 with NumPy (they
depend on nothing but their length) and uploaded in the dtype asked for. periodic=True gives the window of length + 1
without its last point, for spectral analysis (torch.stft)."""
from __future__ import annotations
import numpy as np
from alloy import dtype as dt
from alloy.tensor import Tensor

def _window(length: int, periodic: bool, fn, dtype, device, op: str) -> Tensor:
  if not isinstance(length, int) or isinstance(length, bool) or length < 0:
    raise ValueError(f"{op}: window_length must be a non-negative int, got {length!r}")
  dtype = dtype or dt.default_float
  if length <= 1: return Tensor.ones(length, dtype=dtype, device=device)
  n = length + 1 if periodic else length
  values = fn(np.arange(length, dtype=np.float64), n - 1)
  return Tensor(values if dtype is dt.float64 else values.astype(np.float32), device=device).cast(dtype)

def hann_window(window_length: int, periodic: bool = True, *, dtype=None, device=None) -> Tensor:
  return _window(window_length, periodic, lambda k, m: 0.5 - 0.5 * np.cos(2 * np.pi * k / m), dtype, device, "hann_window")

def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54, beta: float = 0.46, *, dtype=None, device=None) -> Tensor:
  return _window(window_length, periodic, lambda k, m: alpha - beta * np.cos(2 * np.pi * k / m), dtype, device, "hamming_window")

def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, device=None) -> Tensor:
  return _window(window_length, periodic, lambda k, m: 0.42 - 0.5 * np.cos(2 * np.pi * k / m) + 0.08 * np.cos(4 * np.pi * k / m), dtype, device,
                 "blackman_window")

def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, device=None) -> Tensor:
  return _window(window_length, periodic, lambda k, m: 1 - np.abs(2 * k / m - 1), dtype, device, "bartlett_window")

def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *, dtype=None, device=None) -> Tensor:
  return _window(window_length, periodic, lambda k, m: np.i0(beta * np.sqrt(np.clip(1 - (2 * k / m - 1) ** 2, 0, None))) / np.i0(beta),
                 dtype, device, "kaiser_window")
