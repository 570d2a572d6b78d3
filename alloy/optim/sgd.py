"""SGD with PyTorch's momentum, dampening, Nesterov and weight-decay rules (torch.optim.SGD's update, fused)."""
from __future__ import annotations
from alloy.optim.optimizer import Optimizer, required

class SGD(Optimizer):
  def __init__(self, params, lr=1e-3, momentum: float = 0.0, dampening: float = 0.0, weight_decay: float = 0.0,
               nesterov: bool = False, maximize: bool = False):
    if lr is required: raise ValueError("SGD: pass lr")
    super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                  nesterov=nesterov, maximize=maximize))
  def check_hyperparameters(self, g):
    super().check_hyperparameters(g)
    if g["nesterov"] and (g["momentum"] <= 0 or g["dampening"] != 0): raise ValueError("Nesterov momentum requires a momentum and zero dampening")
  @property
  def state_names(self): return ("momentum_buffer",) if any(g["momentum"] != 0 for g in self.param_groups) else ()

  zero_tested = ("momentum", "weight_decay")

  def update(self, group, h, step, values, grads, state, first):
    d_p = -grads if group["maximize"] else grads
    if group["weight_decay"] != 0: d_p = d_p + values * h["weight_decay"]
    new_state = {}
    if group["momentum"] != 0:
      buf = d_p if first else state["momentum_buffer"] * h["momentum"] + d_p * (1 - h["dampening"])
      new_state["momentum_buffer"] = buf
      d_p = d_p + buf * h["momentum"] if group["nesterov"] else buf
    elif "momentum_buffer" in state: new_state["momentum_buffer"] = state["momentum_buffer"]
    return values - d_p * h["lr"], new_state
