"""Adamax with torch.optim.Adamax's update: Adam's first moment, and for the second the running maximum of
beta2 * it and |g| + eps (the infinity norm), the step size bias-corrected for the first moment only."""
from __future__ import annotations
from alloy.optim.optimizer import Optimizer

class Adamax(Optimizer):
  state_names = ("exp_avg", "exp_inf")
  zero_tested = ("weight_decay",)

  def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps: float = 1e-8, weight_decay: float = 0.0, maximize: bool = False):
    super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay, maximize=maximize))

  def update(self, group, h, step, values, grads, state, first):
    (beta1, beta2), eps = h["betas"], h["eps"]
    g = -grads if group["maximize"] else grads
    if group["weight_decay"] != 0: g = g + values * h["weight_decay"]
    m = state["exp_avg"] + (g - state["exp_avg"]) * (1 - beta1)
    u = (state["exp_inf"] * beta2).maximum(g.abs() + eps)
    return values - m / u * (h["lr"] / (1 - beta1 ** step)), {"exp_avg": m, "exp_inf": u}
