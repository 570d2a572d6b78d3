"""alloy/functional/more_losses.py and their modules against torch.nn.functional and torch.nn: values for each
reduction and the inputs' gradients, on each device, on random data (targets of each kind the loss takes)."""
import numpy as np, pytest
from alloy import Tensor, nn
import alloy.nn.functional as F

torch = pytest.importorskip("torch")

def _data(rng):
  x, y = rng.standard_normal((6, 5)).astype(np.float32), rng.standard_normal((6, 5)).astype(np.float32)
  sign = np.where(rng.random(6) > 0.5, 1.0, -1.0).astype(np.float32)
  return {
    "x": x, "y": y, "x1": x[:, 0], "x2": y[:, 0], "sign": sign, "count": rng.poisson(2.0, (6, 5)).astype(np.float32),
    "rate": np.abs(x) + 0.1, "var": np.abs(y) + 0.05, "var_col": (np.abs(y[:, :1]) + 0.05), "bits": (rng.random((6, 5)) > 0.5).astype(np.float32),
    "labels": rng.integers(0, 5, 6), "w5": (np.abs(y[0]) + 0.5).astype(np.float32), "sign_mixed": np.array([1, -1, 1, -1, 0, 1], np.float32),
  }

CASES = {   # name -> (function of (lib, functional namespace, tensors), the tensors that take gradients)
  "poisson_log": (lambda L, f, d: f.poisson_nll_loss(d["x"], d["count"], reduction=L), ["x"]),
  "poisson_full": (lambda L, f, d: f.poisson_nll_loss(d["rate"], d["count"], log_input=False, full=True, reduction=L), ["rate"]),
  "gaussian": (lambda L, f, d: f.gaussian_nll_loss(d["x"], d["y"], d["var"], reduction=L), ["x", "var"]),
  "gaussian_full_col": (lambda L, f, d: f.gaussian_nll_loss(d["x"], d["y"], d["var_col"], full=True, eps=0.3, reduction=L), ["x", "var_col"]),
  "margin_ranking": (lambda L, f, d: f.margin_ranking_loss(d["x1"], d["x2"], d["sign"], margin=0.2, reduction=L), ["x1", "x2"]),
  "hinge": (lambda L, f, d: f.hinge_embedding_loss(d["x1"], d["sign_mixed"], margin=0.5, reduction=L), ["x1"]),
  "soft_margin": (lambda L, f, d: f.soft_margin_loss(d["x"], d["sign"][:, None] * d["bits"] * 2 - 1, reduction=L), ["x"]),
  "multilabel_soft_margin": (lambda L, f, d: f.multilabel_soft_margin_loss(d["x"], d["bits"], d["w5"], reduction=L), ["x"]),
  "cosine_embedding": (lambda L, f, d: f.cosine_embedding_loss(d["x"], d["y"], d["sign"], margin=0.1, reduction=L), ["x", "y"]),
  "triplet": (lambda L, f, d: f.triplet_margin_loss(d["x"], d["y"], d["x"] * 0.5 + d["y"], margin=0.7, reduction=L), ["x", "y"]),
  "triplet_swap_p1": (lambda L, f, d: f.triplet_margin_loss(d["x"], d["y"], d["y"] * 2, p=1, swap=True, reduction=L), ["x", "y"]),
  "multi_margin": (lambda L, f, d: f.multi_margin_loss(d["x"], d["labels"], reduction=L), ["x"]),
  "multi_margin_p2_weight": (lambda L, f, d: f.multi_margin_loss(d["x"], d["labels"], p=2, margin=0.5, weight=d["w5"], reduction=L), ["x"]),
}

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(device, name, reduction):
  fn, grads = CASES[name]
  raw = _data(np.random.default_rng(0))
  mine = {k: Tensor(v, device=device, requires_grad=k in grads) for k, v in raw.items()}
  theirs = {k: torch.tensor(v, requires_grad=k in grads) for k, v in raw.items()}
  got, want = fn(reduction, F, mine), fn(reduction, torch.nn.functional, theirs)
  np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
  weights = np.random.default_rng(1).uniform(0.5, 1.5, tuple(want.shape)).astype(np.float32)
  (got * Tensor(weights, device=device)).sum().backward()
  (want * torch.from_numpy(weights)).sum().backward()
  for k in grads: np.testing.assert_allclose(mine[k].grad.numpy(), theirs[k].grad.numpy(), rtol=1e-4, atol=1e-6, err_msg=f"{name} d/d{k}")

def test_modules_match_functions(device):
  raw = _data(np.random.default_rng(2))
  t = {k: Tensor(v, device=device) for k, v in raw.items()}
  pairs = [(nn.PoissonNLLLoss(full=True), (t["x"], t["count"]), F.poisson_nll_loss(t["x"], t["count"], full=True)),
           (nn.GaussianNLLLoss(reduction="sum"), (t["x"], t["y"], t["var"]), F.gaussian_nll_loss(t["x"], t["y"], t["var"], reduction="sum")),
           (nn.MarginRankingLoss(0.1), (t["x1"], t["x2"], t["sign"]), F.margin_ranking_loss(t["x1"], t["x2"], t["sign"], 0.1)),
           (nn.HingeEmbeddingLoss(), (t["x1"], t["sign"]), F.hinge_embedding_loss(t["x1"], t["sign"])),
           (nn.SoftMarginLoss(), (t["x"], t["bits"] * 2 - 1), F.soft_margin_loss(t["x"], t["bits"] * 2 - 1)),
           (nn.MultiLabelSoftMarginLoss(), (t["x"], t["bits"]), F.multilabel_soft_margin_loss(t["x"], t["bits"])),
           (nn.CosineEmbeddingLoss(), (t["x"], t["y"], t["sign"]), F.cosine_embedding_loss(t["x"], t["y"], t["sign"])),
           (nn.TripletMarginLoss(swap=True), (t["x"], t["y"], t["y"] * 2), F.triplet_margin_loss(t["x"], t["y"], t["y"] * 2, swap=True)),
           (nn.MultiMarginLoss(p=2), (t["x"], t["labels"]), F.multi_margin_loss(t["x"], t["labels"], p=2))]
  for module, args, want in pairs: np.testing.assert_allclose(module(*args).numpy(), want.numpy(), rtol=1e-6, err_msg=type(module).__name__)
  with pytest.raises(ValueError, match="multi_margin_loss: p must be 1 or 2"): F.multi_margin_loss(t["x"], t["labels"], p=3)
  with pytest.raises(ValueError, match="gaussian_nll_loss: var of shape"): F.gaussian_nll_loss(t["x"], t["y"], t["var"][:, :2])
