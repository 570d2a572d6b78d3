"""torch.nn.utils' training helpers: clip_grad_norm_, clip_grad_value_, parameters_to_vector, vector_to_parameters.
Gradient clipping stays on the device (the norm is a tensor and scales the gradients without a host read),
so a clipped training step is captured whole by @jit."""
from __future__ import annotations
import math
from alloy.tensor import Tensor, cat, stack
from alloy.autograd import no_grad

def _with_grads(parameters) -> list:
  ps = [parameters] if isinstance(parameters, Tensor) else list(parameters)
  return [p for p in ps if p.grad is not None]

def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None) -> Tensor:
  """Scale the gradients in place so that their total norm (of the per-parameter norms) is at most max_norm, by
  max_norm / (total + 1e-6) clamped to 1, as PyTorch; returns the total norm. error_if_nonfinite reads it (a sync)."""
  ps = _with_grads(parameters)
  if not ps: return Tensor.zeros(())
  norm_type = float(norm_type)
  with no_grad():
    grads = [p.grad for p in ps]
    if norm_type == math.inf: total = stack([g.abs().amax() for g in grads]).amax()
    else: total = stack([g.float().norm(norm_type) for g in grads]).norm(norm_type)
    if error_if_nonfinite and not bool(total.isfinite().item()):
      raise RuntimeError(f"clip_grad_norm_: the total norm of order {norm_type} of the gradients is non-finite, so they cannot be clipped")
    coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
    for p in ps: p.grad = p.grad * coef.cast(p.grad.dtype)   # a new .grad, not mul_: a gradient may be a view of backward's work
  return total

def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
  """Clamp every gradient entry to [-clip_value, clip_value] in place."""
  with no_grad():
    for p in _with_grads(parameters): p.grad.clamp_(-clip_value, clip_value)

def parameters_to_vector(parameters) -> Tensor:
  return cat([p.reshape(-1) for p in parameters])

def vector_to_parameters(vec: Tensor, parameters) -> None:
  """Copy consecutive slices of vec into the parameters, in place."""
  start = 0
  with no_grad():
    for p in parameters:
      n = p.numel()
      p.copy_(vec[start:start + n].reshape(p.shape))
      start += n
