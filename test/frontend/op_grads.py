"""Gradient checks shared by the op test files: alloy's gradient against central finite differences (float64, CPU)
and against PyTorch autograd (float32, on the device) where PyTorch is installed."""
import numpy as np
try: import torch
except ImportError: torch = None
from alloy import Tensor
from test_autograd import numeric_grad

def alloy_grad(f, xs: list, device="CPU", dtype=None) -> list:
  ts = [Tensor(x if dtype is None else x.astype(dtype), device=device, requires_grad=True) for x in xs]
  f(*ts).backward()
  return [t.grad.numpy() if t.grad is not None else np.zeros_like(x) for t, x in zip(ts, xs)]

def check_grads(f, xs: list, device: str, torch_f=None, atol=1e-6, rtol=1e-6):
  """f maps Tensors (alloy or torch) to a scalar; torch_f is the same function in torch when it is spelled otherwise."""
  xs = [np.asarray(x, dtype=np.float64) for x in xs]
  if device == "CPU":
    got = alloy_grad(f, xs)
    def fn(*arrs): return f(*[Tensor(a) for a in arrs]).item()
    for k in range(len(xs)): np.testing.assert_allclose(got[k], numeric_grad(fn, xs, k), atol=atol, rtol=rtol, err_msg=f"argument {k}")
  if torch is None: return
  got = alloy_grad(f, xs, device, np.float32)
  ts = [torch.tensor(x.astype(np.float32), requires_grad=True) for x in xs]
  (torch_f or f)(*ts).backward()
  for k, t in enumerate(ts):
    want = t.grad.numpy() if t.grad is not None else np.zeros_like(xs[k])
    np.testing.assert_allclose(got[k], want, atol=1e-4, rtol=1e-4, err_msg=f"argument {k} against torch")

def weights(t, *shape):
  """Fixed non-uniform weights of t's library and dtype, so a sum of t * w tells the positions apart."""
  w = (np.arange(float(np.prod(shape))).reshape(shape) % 7 + 1) / 4
  if torch is not None and isinstance(t, torch.Tensor): return torch.tensor(w, dtype=t.dtype)
  return Tensor(w, dtype=t.dtype, device=t.device)
