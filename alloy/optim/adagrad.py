"""Adagrad with torch.optim.Adagrad's update: the sum of squared gradients from initial_accumulator_value, the
step scaled by lr / (1 + (step - 1) * lr_decay) over its root plus eps."""
from __future__ import annotations
from alloy.optim.optimizer import Optimizer

class Adagrad(Optimizer):
  state_names = ("sum",)
  zero_tested = ("weight_decay",)

  def __init__(self, params, lr=1e-2, lr_decay: float = 0.0, weight_decay: float = 0.0, initial_accumulator_value: float = 0.0,
               eps: float = 1e-10, maximize: bool = False):
    super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                  initial_accumulator_value=initial_accumulator_value, eps=eps, maximize=maximize))

  def update(self, group, h, step, values, grads, state, first):
    g = -grads if group["maximize"] else grads
    if group["weight_decay"] != 0: g = g + values * h["weight_decay"]
    start = state["sum"] + h["initial_accumulator_value"] if first else state["sum"]   # the first step makes the state
    total = start + g * g
    clr = h["lr"] / (1 + (step - 1) * h["lr_decay"])
    return values - g / (total.sqrt() + h["eps"]) * clr, {"sum": total}
