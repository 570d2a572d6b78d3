"""nn.Parameter, a Tensor a Module registers as a weight, and rebind: the one place a tensor's value is replaced.

Tensors are values here (no in-place ops yet), so an initializer, an optimizer step, load_state_dict and Module.to
give a tensor a new value by rebinding its node (and device) while the Python object, its requires_grad and its
identity (the optimizer's and the state dict's handle on it) stay. Once in-place ops land (Tensor.copy_), rebind is
the function to replace.
"""
from __future__ import annotations
from alloy.tensor import Tensor

class Parameter(Tensor):
  """A Tensor that is a Module's weight: assigning one to a Module attribute registers it; requires grad by default."""
  def __init__(self, data=None, requires_grad: bool = True):
    if data is None: data = Tensor.empty(0)
    if not isinstance(data, Tensor): data = Tensor(data)
    self._ag = None
    self.node, self.device = data.detach().node, data.device
    if requires_grad: self.requires_grad_()
  def __repr__(self): return "Parameter containing:\n" + super().__repr__()
  def __reduce__(self): return (Parameter, (self.detach(), self.requires_grad))

def rebind(t: Tensor, value: Tensor) -> Tensor:
  """Give t the value `value` (same shape; cast to t's dtype), keeping t's identity and requires_grad. A move to
  another device drops t's gradient (it lived on the old device)."""
  if not isinstance(value, Tensor): value = Tensor(value, device=t.device)
  if tuple(value.shape) != tuple(t.shape):
    raise RuntimeError(f"cannot give a tensor of shape {tuple(t.shape)} a value of shape {tuple(value.shape)}")
  if value.dtype is not t.dtype and value.device == t.device: value = value.cast(t.dtype)
  if value.device != t.device and t.grad is not None: t.grad = None
  t.node, t.device = value.detach().node, value.device
  t._base = None   # a value of its own: no longer a view whose writes go to a base (which may be on the old device)
  return t

def retype(t: Tensor, value: Tensor) -> Tensor:
  """Give t a value of another dtype or device (Module.to, .half()); a gradient of the old dtype is dropped."""
  if t.grad is not None and (value.dtype is not t.dtype or value.device != t.device): t.grad = None
  t.node, t.device = value.detach().node, value.device
  t._base = None   # as in rebind
  return t
