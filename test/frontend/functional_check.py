"""Shared checks of the alloy.nn.functional tests: one call through alloy and through PyTorch on the same arrays,
the forward and the gradients compared; and gradients against central finite differences (float64, CPU)."""
import numpy as np
from alloy import Tensor
from test_autograd import numeric_grad

def rand(rng, *shape, dtype=np.float32, low=-2.0, high=2.0):
  """Random non-zero floats."""
  x = rng.uniform(low, high, shape)
  return np.where(np.abs(x) < 0.05, 0.5, x).astype(dtype)

def _probe(shape, dtype):
  """A fixed weighting of a result's elements, so its gradient is not the same for every element."""
  return (np.cos(np.arange(int(np.prod(shape)))).reshape(shape) + 1.5).astype(dtype)

def _scalar(out, probe_of):
  return out if out.ndim == 0 else (out * probe_of(out)).sum()

def against_torch(fn, tfn, arrays: list, device: str, grads=None, tol=1e-5, kw=None, tkw=None):
  """fn(*Tensors, **kw) and tfn(*torch tensors, **tkw) agree, and so do the gradients of every float array (or of
  the indices in grads)."""
  import torch
  kw, tkw = kw or {}, tkw if tkw is not None else (kw or {})
  grads = [i for i, a in enumerate(arrays) if a is not None and np.asarray(a).dtype.kind == "f"] if grads is None else grads
  ts = [None if a is None else torch.tensor(a, requires_grad=i in grads) for i, a in enumerate(arrays)]
  xs = [None if a is None else Tensor(a, device=device, requires_grad=i in grads) for i, a in enumerate(arrays)]
  ref, out = tfn(*ts, **tkw), fn(*xs, **kw)
  np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), atol=tol, rtol=tol)
  if not grads: return
  dtype = np.asarray(arrays[grads[0]]).dtype
  _scalar(ref, lambda o: torch.tensor(_probe(o.shape, dtype))).backward()
  _scalar(out, lambda o: Tensor(_probe(o.shape, dtype), device=device)).backward()
  for i in grads:
    np.testing.assert_allclose(xs[i].grad.numpy(), ts[i].grad.numpy(), atol=tol, rtol=tol, err_msg=f"gradient of argument {i}")

def finite_differences(fn, arrays: list, grads: list, kw=None, tol=1e-6):
  """The float64 gradients of fn's probe-weighted sum against central differences, on the CPU."""
  kw = kw or {}
  def f(*arrs):
    out = fn(*[None if a is None else Tensor(a) for a in arrs], **kw)
    return _scalar(out, lambda o: Tensor(_probe(o.shape, np.float64))).item()
  xs = [None if a is None else Tensor(a, requires_grad=i in grads) for i, a in enumerate(arrays)]
  _scalar(fn(*xs, **kw), lambda o: Tensor(_probe(o.shape, np.float64))).backward()
  for i in grads:
    np.testing.assert_allclose(xs[i].grad.numpy(), numeric_grad(f, list(arrays), i), atol=tol, rtol=tol, err_msg=f"gradient of argument {i}")
