"""torch.nn.functional.ctc_loss: the negative log-likelihood of each target sequence summed over its alignments with
the input frames (Graves et al. 2006), by the forward recursion in log space: over the target with a blank before,
between and after its labels (2S + 1 states), each frame's states are the log-sum-exp of the state itself, the one
before, and the one two before where that skips a blank between two different labels, plus the frame's log-probability
of the state's label. All samples and states advance together, one frame a step (each step realized, so one compiled
step serves every frame); a sample past its own input length keeps its states. The gradient is the alpha-beta one
(its own rule): the backward recursion from each sample's last frame, then per frame and class
-exp(logsumexp over the class's states of alpha + beta - log_prob + loss). Autograd through the recursion would fuse
every frame's three shifted reads into one expression that triples a frame."""
from __future__ import annotations
import numpy as np
from alloy import autograd, dtype as dt
from alloy.functional.loss import reduction_arg
from alloy.realize_tensors import realize as realize_all
from alloy.tensor import Tensor, stack, where

NEG_INF = float("-inf")

def _shift_left(x: Tensor, k: int, fill) -> Tensor:
  """x moved k states back along the last axis, fill coming in at the end."""
  return x[..., k:].cat(x[..., :1].full_like(fill).expand(*x.shape[:-1], k), dim=-1)

def _shift(x: Tensor, k: int, fill=NEG_INF) -> Tensor:
  """x moved k states along the last axis, fill coming in."""
  return x[..., :1].full_like(fill).expand(*x.shape[:-1], k).cat(x[..., :-k], dim=-1)

def _lengths(v, n: int, what: str, device) -> Tensor:
  t = v if isinstance(v, Tensor) else Tensor(list(v) if not isinstance(v, int) else [v] * n, device=device)
  if t.ndim != 1 or t.shape[0] != n: raise ValueError(f"ctc_loss: {what} must have one entry per sample ({n}), got shape {tuple(t.shape)}")
  return t.cast(dt.int64)

def ctc_loss(log_probs: Tensor, targets: Tensor, input_lengths, target_lengths, blank: int = 0, reduction: str = "mean",
             zero_infinity: bool = False) -> Tensor:
  """log_probs (T, N, C) or (T, C) (log-softmax over C); targets (N, S) padded, or 1-D, the targets concatenated."""
  reduction = reduction_arg(None, None, reduction, "ctc_loss")
  unbatched = log_probs.ndim == 2
  lp = log_probs.unsqueeze(1) if unbatched else log_probs
  if lp.ndim != 3: raise ValueError(f"ctc_loss: log_probs must be (T, N, C) or (T, C), got {tuple(log_probs.shape)}")
  frames, n, classes = lp.shape
  if not 0 <= blank < classes: raise ValueError(f"ctc_loss: blank {blank} is not a class of the {classes}")
  ins, outs = _lengths(input_lengths, n, "input_lengths", lp.device), _lengths(target_lengths, n, "target_lengths", lp.device)
  if targets.ndim == 1 and not unbatched:   # concatenated: each sample's labels padded out to the longest
    out_list = [int(v) for v in outs.numpy()]
    longest, starts = max(out_list + [0]), [sum(out_list[:i]) for i in range(n)]
    flat = targets.numpy().reshape(-1)
    padded = np.full((n, max(longest, 1)), blank, dtype=np.int64)
    for i, (s, k) in enumerate(zip(starts, out_list)): padded[i, :k] = flat[s:s + k]
    labels = Tensor(padded, device=lp.device)
  else: labels = (targets.unsqueeze(0) if unbatched else targets).cast(dt.int64)
  s_max = labels.shape[1]
  states = 2 * s_max + 1
  position = Tensor.arange(states, device=lp.device)
  label_at = labels.gather(1, ((position - 1) // 2).clamp(0, max(s_max - 1, 0)).unsqueeze(0).expand(n, states))
  extended = where(position % 2 == 0, blank, label_at)   # (N, 2S + 1): blank, l1, blank, l2, ..., blank
  skip = (position % 2 == 1) & (extended != _shift(extended, 2, -1))   # a label two states after a different one
  emit = lp.detach().gather(2, extended.unsqueeze(0).expand(frames, n, states))   # (T, N, 2S + 1)
  alphas = [where(position <= 1, emit[0], NEG_INF)]
  for t in range(1, frames):
    alpha = alphas[-1]
    step = _lse(stack([alpha, _shift(alpha, 1), where(skip, _shift(alpha, 2), NEG_INF)], -1)) + emit[t]
    alphas.append(where((ins > t).unsqueeze(1), step, alpha).realize())
  last = (2 * outs).unsqueeze(1)
  finals = (position == last) | (position == last - 1)
  loss = -_lse(where(finals, alphas[-1], NEG_INF))
  if lp._ag is not None: loss = autograd.record(loss, _ctc_rule, (lp,), lp.detach(), alphas, emit, extended, skip, finals, ins)
  if zero_infinity: loss = where(loss == float("inf"), 0.0, loss)
  if reduction == "none": return loss.squeeze(0) if unbatched else loss
  if reduction == "sum": return loss.sum()
  return (loss / outs.cast(loss.dtype).maximum(1)).mean()

def _ctc_rule(loss, g, logp, alphas, emit, extended, skip, finals, ins):
  """d loss / d log_probs by the alpha-beta recursion (betas include their frame's emission, as the alphas do)."""
  frames = emit.shape[0]
  beta = where(finals & (ins == frames).unsqueeze(1), emit[-1], NEG_INF)
  ahead_skip = _shift_left(skip, 2, False)   # s may jump to s + 2
  per_class = [None] * frames
  onehot = (extended.unsqueeze(-1) == Tensor.arange(logp.shape[-1], device=emit.device)).cast(emit.dtype)   # (N, 2S + 1, C)
  for t in reversed(range(frames)):
    if t < frames - 1:
      step = _lse(stack([beta, _shift_left(beta, 1, NEG_INF), where(ahead_skip, _shift_left(beta, 2, NEG_INF), NEG_INF)], -1)) + emit[t]
      beta = where((ins - 1 == t).unsqueeze(1) & finals, emit[t], where((ins - 1 > t).unsqueeze(1), step, NEG_INF))
    both = alphas[t] + beta   # (N, 2S + 1): log of the probability mass through each state at t, times its emission
    top = both.amax(-1, keepdim=True)
    top = where(top == NEG_INF, 0.0, top)
    mass = ((both - top).exp().unsqueeze(-2) @ onehot).squeeze(-2)   # (N, C): each class's states added
    per_class[t] = where(mass > 0, where(mass > 0, mass, 1.0).log() + top, NEG_INF)
    realize_all([beta, per_class[t]])
  finite = loss != float("inf")   # an impossible alignment (inf loss) passes no gradient, as torch's
  scale = where(finite, g, 0.0).unsqueeze(-1)
  return (-(stack(per_class) - logp + where(finite, loss, 0.0).unsqueeze(-1)).exp() * scale,)

def _lse(x: Tensor) -> Tensor:
  """log-sum-exp over the last axis, -inf (no NaN gradient) where all are -inf."""
  m = x.amax(-1, keepdim=True)
  m_safe = where(m == NEG_INF, 0.0, m)
  total = (x - m_safe).exp().sum(-1)
  return where(total > 0, m_safe.squeeze(-1) + where(total > 0, total, 1.0).log(), NEG_INF)
