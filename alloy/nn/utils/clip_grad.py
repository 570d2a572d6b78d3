"""torch.nn.utils' gradient helpers: get_total_norm, clip_grads_with_norm_, clip_grad_norm_ (the two in turn),
clip_grad_value_, parameters_to_vector, vector_to_parameters. Gradient clipping stays on the device (the norm is a
tensor and scales the gradients without a host read), so a clipped training step is captured whole by @jit."""
from __future__ import annotations
import math
from alloy.tensor import Tensor, cat, stack
from alloy.autograd import no_grad

def _with_grads(parameters) -> list:
  ps = [parameters] if isinstance(parameters, Tensor) else list(parameters)
  return [p for p in ps if p.grad is not None]

def get_total_norm(tensors, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None) -> Tensor:
  """The norm of the tensors' norms (float32 and up); error_if_nonfinite reads it (a sync)."""
  ts = [tensors] if isinstance(tensors, Tensor) else [t for t in tensors if t is not None]
  if not ts: return Tensor.zeros(())
  norm_type = float(norm_type)
  with no_grad():
    if norm_type == math.inf: total = stack([t.abs().amax().float() for t in ts]).amax()
    else: total = stack([t.float().norm(norm_type) for t in ts]).norm(norm_type)
  if error_if_nonfinite and not bool(total.isfinite().item()):
    raise RuntimeError(f"the total norm of order {norm_type} of the gradients is non-finite, so they cannot be clipped")
  return total

def clip_grads_with_norm_(parameters, max_norm: float, total_norm: Tensor, foreach=None) -> None:
  """Scale the gradients in place by max_norm / (total_norm + 1e-6) clamped to 1, as PyTorch."""
  ps = _with_grads(parameters)
  with no_grad():
    coef = (max_norm / (total_norm + 1e-6)).clamp(max=1.0)
    for p in ps: p.grad = p.grad * coef.cast(p.grad.dtype)   # a new .grad, not mul_: a gradient may be a view of backward's work

def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0, error_if_nonfinite: bool = False, foreach=None) -> Tensor:
  """Scale the gradients in place so that their total norm is at most max_norm; returns the total norm."""
  ps = _with_grads(parameters)
  if not ps: return Tensor.zeros(())
  total = get_total_norm([p.grad for p in ps], norm_type, error_if_nonfinite)
  clip_grads_with_norm_(ps, max_norm, total)
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
