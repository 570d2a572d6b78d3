"""The loss modules over nn.functional: CrossEntropyLoss, NLLLoss, MSELoss, L1Loss, SmoothL1Loss, HuberLoss, BCELoss,
BCEWithLogitsLoss, KLDivLoss, PoissonNLLLoss, GaussianNLLLoss and the margin and embedding losses."""
from __future__ import annotations
from alloy.nn.module import Module
from alloy.nn import functional as F

class _Loss(Module):
  def __init__(self, reduction: str = "mean", **options):
    super().__init__()
    if reduction not in ("mean", "sum", "none"):
      raise ValueError(f"{type(self).__name__}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
    self.reduction, self.options = reduction, options
  def extra_repr(self): return f"reduction={self.reduction!r}"

class CrossEntropyLoss(_Loss):
  def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean", label_smoothing: float = 0.0):
    super().__init__(reduction, ignore_index=ignore_index, label_smoothing=label_smoothing)
    self.weight = weight
  def forward(self, input, target): return F.cross_entropy(input, target, self.weight, reduction=self.reduction, **self.options)
class NLLLoss(_Loss):
  def __init__(self, weight=None, ignore_index: int = -100, reduction: str = "mean"):
    super().__init__(reduction, ignore_index=ignore_index)
    self.weight = weight
  def forward(self, input, target): return F.nll_loss(input, target, self.weight, reduction=self.reduction, **self.options)
class MSELoss(_Loss):
  def forward(self, input, target): return F.mse_loss(input, target, reduction=self.reduction)
class L1Loss(_Loss):
  def forward(self, input, target): return F.l1_loss(input, target, reduction=self.reduction)
class SmoothL1Loss(_Loss):
  def __init__(self, reduction: str = "mean", beta: float = 1.0): super().__init__(reduction, beta=beta)
  def forward(self, input, target): return F.smooth_l1_loss(input, target, reduction=self.reduction, **self.options)
class HuberLoss(_Loss):
  def __init__(self, reduction: str = "mean", delta: float = 1.0): super().__init__(reduction, delta=delta)
  def forward(self, input, target): return F.huber_loss(input, target, reduction=self.reduction, **self.options)
class BCELoss(_Loss):
  def __init__(self, weight=None, reduction: str = "mean"):
    super().__init__(reduction)
    self.weight = weight
  def forward(self, input, target): return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)
class BCEWithLogitsLoss(_Loss):
  def __init__(self, weight=None, reduction: str = "mean", pos_weight=None):
    super().__init__(reduction)
    self.weight, self.pos_weight = weight, pos_weight
  def forward(self, input, target):
    return F.binary_cross_entropy_with_logits(input, target, self.weight, reduction=self.reduction, pos_weight=self.pos_weight)
class KLDivLoss(_Loss):
  def __init__(self, reduction: str = "mean", log_target: bool = False): super().__init__(reduction, log_target=log_target)
  def forward(self, input, target): return F.kl_div(input, target, reduction=self.reduction, **self.options)
class PoissonNLLLoss(_Loss):
  def __init__(self, log_input: bool = True, full: bool = False, size_average=None, eps: float = 1e-8, reduce=None, reduction: str = "mean"):
    super().__init__(reduction, log_input=log_input, full=full, eps=eps)
  def forward(self, log_input, target): return F.poisson_nll_loss(log_input, target, reduction=self.reduction, **self.options)
class GaussianNLLLoss(_Loss):
  def __init__(self, *, full: bool = False, eps: float = 1e-6, reduction: str = "mean"): super().__init__(reduction, full=full, eps=eps)
  def forward(self, input, target, var): return F.gaussian_nll_loss(input, target, var, reduction=self.reduction, **self.options)
class MarginRankingLoss(_Loss):
  def __init__(self, margin: float = 0.0, reduction: str = "mean"): super().__init__(reduction, margin=margin)
  def forward(self, input1, input2, target): return F.margin_ranking_loss(input1, input2, target, reduction=self.reduction, **self.options)
class HingeEmbeddingLoss(_Loss):
  def __init__(self, margin: float = 1.0, reduction: str = "mean"): super().__init__(reduction, margin=margin)
  def forward(self, input, target): return F.hinge_embedding_loss(input, target, reduction=self.reduction, **self.options)
class SoftMarginLoss(_Loss):
  def forward(self, input, target): return F.soft_margin_loss(input, target, reduction=self.reduction)
class MultiLabelSoftMarginLoss(_Loss):
  def __init__(self, weight=None, reduction: str = "mean"):
    super().__init__(reduction)
    self.weight = weight
  def forward(self, input, target): return F.multilabel_soft_margin_loss(input, target, self.weight, reduction=self.reduction)
class MultiLabelMarginLoss(_Loss):
  def forward(self, input, target): return F.multilabel_margin_loss(input, target, reduction=self.reduction)
class CTCLoss(_Loss):
  def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False):
    super().__init__(reduction)
    self.blank, self.zero_infinity = blank, zero_infinity
  def forward(self, log_probs, targets, input_lengths, target_lengths):
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank, self.reduction, self.zero_infinity)
class CosineEmbeddingLoss(_Loss):
  def __init__(self, margin: float = 0.0, reduction: str = "mean"): super().__init__(reduction, margin=margin)
  def forward(self, input1, input2, target): return F.cosine_embedding_loss(input1, input2, target, reduction=self.reduction, **self.options)
class TripletMarginLoss(_Loss):
  def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6, swap: bool = False, reduction: str = "mean"):
    super().__init__(reduction, margin=margin, p=p, eps=eps, swap=swap)
  def forward(self, anchor, positive, negative):
    return F.triplet_margin_loss(anchor, positive, negative, reduction=self.reduction, **self.options)
class TripletMarginWithDistanceLoss(_Loss):
  def __init__(self, *, distance_function=None, margin: float = 1.0, swap: bool = False, reduction: str = "mean"):
    super().__init__(reduction, distance_function=distance_function, margin=margin, swap=swap)
  def forward(self, anchor, positive, negative):
    return F.triplet_margin_with_distance_loss(anchor, positive, negative, reduction=self.reduction, **self.options)
class MultiMarginLoss(_Loss):
  def __init__(self, p: int = 1, margin: float = 1.0, weight=None, reduction: str = "mean"):
    super().__init__(reduction, p=p, margin=margin)
    self.weight = weight
  def forward(self, input, target): return F.multi_margin_loss(input, target, weight=self.weight, reduction=self.reduction, **self.options)
