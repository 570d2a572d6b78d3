"""RMSprop with torch.optim.RMSprop's update: a running mean of squared gradients (centered: minus the squared mean
gradient), eps added after the root, optional momentum on the scaled step."""
from __future__ import annotations
from alloy.optim.optimizer import Optimizer

class RMSprop(Optimizer):
  def __init__(self, params, lr=1e-2, alpha: float = 0.99, eps: float = 1e-8, weight_decay: float = 0.0, momentum: float = 0.0,
               centered: bool = False, maximize: bool = False):
    super().__init__(params, dict(lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay, momentum=momentum, centered=centered,
                                  maximize=maximize))
  @property
  def state_names(self):
    groups = self.param_groups
    return (("square_avg",) + (("momentum_buffer",) if any(g["momentum"] != 0 for g in groups) else ())
            + (("grad_avg",) if any(g["centered"] for g in groups) else ()))

  zero_tested = ("momentum", "weight_decay")

  def update(self, group, h, step, values, grads, state, first):
    lr, alpha, eps = h["lr"], h["alpha"], h["eps"]
    g = -grads if group["maximize"] else grads
    if group["weight_decay"] != 0: g = g + values * h["weight_decay"]
    square_avg = state["square_avg"] * alpha + g * g * (1 - alpha)
    new_state = {"square_avg": square_avg}
    if group["centered"]:
      grad_avg = new_state["grad_avg"] = state["grad_avg"] + (g - state["grad_avg"]) * (1 - alpha)
      avg = (square_avg - grad_avg * grad_avg).sqrt() + eps
    else:
      avg = square_avg.sqrt() + eps
      if "grad_avg" in state: new_state["grad_avg"] = state["grad_avg"]
    if group["momentum"] != 0:
      buf = new_state["momentum_buffer"] = state["momentum_buffer"] * h["momentum"] + g / avg
      return values - buf * lr, new_state
    if "momentum_buffer" in state: new_state["momentum_buffer"] = state["momentum_buffer"]
    return values - g / avg * lr, new_state
