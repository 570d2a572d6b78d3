"""alloy.nn.functional losses against PyTorch on every device (values and gradients, each reduction, weights,
ignore_index, label smoothing, class-probability targets) and against finite differences (float64, CPU)."""
import numpy as np, pytest
from alloy import Tensor
import alloy.nn.functional as F
from functional_check import rand, against_torch, finite_differences

torch = pytest.importorskip("torch")
TF = torch.nn.functional

def _targets(rng, n, c, ignore=None, *extra):
  t = rng.integers(0, c, size=(n,) + extra).astype(np.int64)
  if ignore is not None: t.flat[::3] = ignore
  return t

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("variant", ["plain", "weight", "ignore", "smooth", "smooth_weight_ignore", "spatial"])
def test_cross_entropy(variant, reduction, device):
  rng = np.random.default_rng(1)
  n, c = 5, 4
  x = rand(rng, n, c, 3) if variant == "spatial" else rand(rng, n, c)
  ignore = 1 if "ignore" in variant else -100
  t = _targets(rng, n, c, ignore if "ignore" in variant else None, *((3,) if variant == "spatial" else ()))
  w = rand(rng, c, low=0.2, high=2.0) if "weight" in variant else None
  kw = dict(reduction=reduction, ignore_index=ignore, label_smoothing=0.2 if "smooth" in variant else 0.0)
  against_torch(lambda x, t, w: F.cross_entropy(x, t, w, **kw), lambda x, t, w: TF.cross_entropy(x, t, w, **kw), [x, t, w], device, grads=[0])

@pytest.mark.parametrize("smoothing", [0.0, 0.3])
def test_cross_entropy_probabilities(smoothing, device):
  rng = np.random.default_rng(2)
  x, p = rand(rng, 4, 5), rng.dirichlet(np.ones(5), size=4).astype(np.float32)
  w = rand(rng, 5, low=0.2, high=2.0)
  for reduction in ("mean", "sum", "none"):
    kw = dict(reduction=reduction, label_smoothing=smoothing)
    against_torch(lambda x, p, w: F.cross_entropy(x, p, w, **kw), lambda x, p, w: TF.cross_entropy(x, p, w, **kw), [x, p, w], device, grads=[0, 1])

def test_cross_entropy_unbatched(device):
  rng = np.random.default_rng(3)
  against_torch(F.cross_entropy, TF.cross_entropy, [rand(rng, 6), np.array(2, dtype=np.int64)], device)

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss(reduction, device):
  rng = np.random.default_rng(4)
  x = np.log(rng.dirichlet(np.ones(4), size=6)).astype(np.float32)
  t, w = _targets(rng, 6, 4, 0), rand(rng, 4, low=0.5, high=2.0)
  kw = dict(reduction=reduction, ignore_index=0)
  against_torch(lambda x, t, w: F.nll_loss(x, t, w, **kw), lambda x, t, w: TF.nll_loss(x, t, w, **kw), [x, t, w], device, grads=[0])

@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_regression_losses(name, reduction, device):
  rng = np.random.default_rng(5)
  against_torch(getattr(F, name), getattr(TF, name), [rand(rng, 3, 5), rand(rng, 3, 5)], device, kw=dict(reduction=reduction))

@pytest.mark.parametrize("name", ["mse_loss", "l1_loss", "huber_loss"])
def test_weighted_regression_losses(name, device):
  rng = np.random.default_rng(10)
  x, t, w = rand(rng, 3, 4), rand(rng, 3, 4), rand(rng, 3, 4, low=0.1, high=2)
  for reduction in ("mean", "sum", "none"):
    against_torch(lambda x, t, w: getattr(F, name)(x, t, reduction=reduction, weight=w),
                  lambda x, t, w: getattr(TF, name)(x, t, reduction=reduction, weight=w), [x, t, w], device)

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy(reduction, device):
  rng = np.random.default_rng(6)
  x, t, w = rng.uniform(0.05, 0.95, (4, 3)).astype(np.float32), rng.uniform(0, 1, (4, 3)).astype(np.float32), rand(rng, 3)
  against_torch(lambda x, t, w: F.binary_cross_entropy(x, t, w, reduction=reduction),
                lambda x, t, w: TF.binary_cross_entropy(x, t, w, reduction=reduction), [x, t, w], device, grads=[0, 1])

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_cross_entropy_with_logits(reduction, device):
  rng = np.random.default_rng(7)
  x, t = rand(rng, 4, 3, low=-30, high=30), rng.uniform(0, 1, (4, 3)).astype(np.float32)
  w, pw = rand(rng, 3, low=0.2, high=2), rand(rng, 3, low=0.2, high=3)
  for args in ([x, t, None, None], [x, t, w, pw]):
    against_torch(lambda x, t, w, pw: F.binary_cross_entropy_with_logits(x, t, w, reduction=reduction, pos_weight=pw),
                  lambda x, t, w, pw: TF.binary_cross_entropy_with_logits(x, t, w, reduction=reduction, pos_weight=pw),
                  args, device, grads=[0, 1])

def test_kl_div(device):
  rng = np.random.default_rng(8)
  x = np.log(rng.dirichlet(np.ones(4), size=3)).astype(np.float32)
  p = rng.dirichlet(np.ones(4), size=3).astype(np.float32)
  p[0, 1] = 0
  for kw in (dict(reduction="batchmean"), dict(reduction="sum"), dict(reduction="none")):
    against_torch(F.kl_div, TF.kl_div, [x, p], device, grads=[0], kw=kw)
  against_torch(F.kl_div, TF.kl_div, [x, np.log(p + 0.1)], device, kw=dict(reduction="sum", log_target=True))

@pytest.mark.parametrize("fn, arrays, grads", [
  (lambda x, t: F.cross_entropy(x, t, label_smoothing=0.1, ignore_index=2), "ce", [0]),
  (lambda x, p: F.cross_entropy(x, p, label_smoothing=0.1), "ce_prob", [0, 1]),
  (lambda x, t: F.binary_cross_entropy_with_logits(x, t, pos_weight=Tensor([1.5, 0.5, 2.0], dtype="float64")), "bce", [0, 1]),
  (lambda x, t: F.binary_cross_entropy(x.sigmoid(), t), "bce", [0, 1]),
  (lambda x, t: F.smooth_l1_loss(x, t, beta=0.7) + F.mse_loss(x, t) + F.l1_loss(x, t), "reg", [0, 1])])
def test_loss_finite_differences(fn, arrays, grads):
  rng = np.random.default_rng(9)
  data = {"ce": [rand(rng, 4, 3, dtype=np.float64), np.array([0, 2, 1, 2])],
          "ce_prob": [rand(rng, 4, 3, dtype=np.float64), rng.dirichlet(np.ones(3), size=4)],
          "bce": [rand(rng, 2, 3, dtype=np.float64), rng.uniform(0.1, 0.9, (2, 3))],
          "reg": [rand(rng, 2, 3, dtype=np.float64), rand(rng, 2, 3, dtype=np.float64)]}[arrays]
  finite_differences(fn, data, grads)

@pytest.mark.parametrize("call, err, match", [
  (lambda x, t: F.cross_entropy(x, t.cast("float32")), ValueError, "target size"),
  (lambda x, t: F.cross_entropy(x, t[:2]), ValueError, "expected a target of shape"),
  (lambda x, t: F.cross_entropy(x, t, reduction="avg"), ValueError, "reduction must be one of"),
  (lambda x, t: F.cross_entropy(x, t, label_smoothing=1.5), ValueError, "label_smoothing"),
  (lambda x, t: F.cross_entropy(x, t, Tensor([1.0, 2.0])), ValueError, "weight must have shape"),
  (lambda x, t: F.nll_loss(x, t.cast("bool")), TypeError, "must be integers"),
  (lambda x, t: F.mse_loss(x, x[:2]), ValueError, "same as input size")])
def test_loss_errors(call, err, match):
  x, t = Tensor(np.ones((4, 3), np.float32)), Tensor(np.array([0, 1, 2, 0]))
  with pytest.raises(err, match=match): call(x, t)

def test_legacy_reduction_flags():
  x, t = Tensor([[1.0, 2.0]]), Tensor([[0.0, 0.0]])
  assert F.mse_loss(x, t, size_average=False).item() == 5.0
  assert F.mse_loss(x, t, reduce=False).shape == (1, 2)

def test_loss_read_before_backward(device):
  """A training loop prints the loss, then calls backward: reading it realizes the tensor, and the gradient rules
  still see the ops it was recorded from."""
  x = Tensor([[0.5, -1.0, 2.0], [1.5, 0.2, -0.3]], device=device, requires_grad=True)
  loss = F.cross_entropy(x, Tensor(np.array([2, 0]), device=device)) / Tensor(2.0, device=device)
  value = loss.item()
  loss.backward()
  tx = torch.tensor(x.detach().numpy(), requires_grad=True)
  ref = TF.cross_entropy(tx, torch.tensor([2, 0])) / 2
  ref.backward()
  assert abs(value - ref.item()) < 1e-6
  np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("op", ["cross_entropy", "nll_loss"])
def test_class_targets_out_of_range_raise(device, op):
  fn = getattr(F, op)
  x = Tensor(np.random.default_rng(0).standard_normal((5, 3, 2)).astype(np.float32), device=device)
  good = np.array([[0, 2], [1, -100], [2, 2], [0, 1], [-100, 0]])
  for bad, shown in ((3, 3), (-1, -1), (-101, -101)):
    t = good.copy()
    t[3, 1] = bad
    with pytest.raises(IndexError, match=f"{op}: target {shown} is out of bounds for 3 classes"): fn(x, Tensor(t, device=device)).item()
  # ignore_index, and a class PyTorch takes: the loss is torch's
  ref = getattr(TF, op)(torch.from_numpy(x.numpy()), torch.from_numpy(good)).item()
  assert abs(fn(x, Tensor(good, device=device)).item() - ref) <= 1e-5 * abs(ref)
  # an ignore_index the target's dtype cannot hold: nothing is ignored, every class is checked
  with pytest.raises(IndexError, match="target 3 is out of bounds"): fn(x, Tensor(np.array([[0, 3]] * 5, np.uint8), device=device)).item()
  fn(x, Tensor(np.array([[0, 2]] * 5, np.uint8), device=device), ignore_index=-100).item()

def test_class_targets_are_checked_under_jit(device):
  import alloy
  x = Tensor(np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32), device=device)
  f = alloy.jit(lambda t: F.cross_entropy(x, t))
  for k in range(3): f(Tensor(np.array([k, 0, 1, 2]), device=device))
  assert f.replay is not None
  with pytest.raises(IndexError, match="cross_entropy: target 5 is out of bounds for 3 classes"): f(Tensor(np.array([0, 5, 1, 2]), device=device))
  want = TF.cross_entropy(torch.from_numpy(x.numpy()), torch.tensor([2, 1, 0, 0])).item()
  assert abs(f(Tensor(np.array([2, 1, 0, 0]), device=device)).item() - want) <= 1e-5 * abs(want)
