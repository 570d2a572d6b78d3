"""End to end through alloy.nn.functional: a small CNN (conv, batch_norm, relu, max_pool, dropout-free linear head,
cross-entropy) trained for a few SGD steps lands on the parameters PyTorch reaches from the same start."""
import numpy as np, pytest
from alloy import Tensor
from alloy.realize_tensors import realize
import alloy.nn.functional as F
from functional_check import rand

torch = pytest.importorskip("torch")
TF = torch.nn.functional

def _model(F, x, p, rm, rv):
  h = F.conv2d(x, p[0], p[1], padding=1)
  h = F.batch_norm(h, rm, rv, p[2], p[3], training=True, momentum=0.1)
  h = F.max_pool2d(F.relu(h), 2)
  h = F.conv2d(h, p[4], None, stride=2)
  h = F.adaptive_avg_pool2d(h, 1).flatten(1)
  return F.linear(h, p[5], p[6])

def test_cnn_sgd_steps_match_torch(device):
  rng = np.random.default_rng(0)
  shapes = [(6, 3, 3, 3), (6,), (6,), (6,), (8, 6, 3, 3), (5, 8), (5,)]
  params = [rand(rng, *s, low=-0.5, high=0.5) for s in shapes]
  params[2] = np.abs(params[2]) + 0.5
  data = [(rand(rng, 4, 3, 10, 10), rng.integers(0, 5, 4)) for _ in range(3)]
  ap = [Tensor(a, device=device, requires_grad=True) for a in params]
  tp = [torch.tensor(a, requires_grad=True) for a in params]
  arm, arv = Tensor(np.zeros(6, np.float32), device=device), Tensor(np.ones(6, np.float32), device=device)
  trm, trv = torch.zeros(6), torch.ones(6)
  for x, y in data:
    loss = F.cross_entropy(_model(F, Tensor(x, device=device), ap, arm, arv), Tensor(y, device=device), label_smoothing=0.1)
    loss.backward()
    realize([p.grad for p in ap])
    ap = [Tensor((p - p.grad * 0.1).numpy(), device=device, requires_grad=True) for p in ap]
    tloss = TF.cross_entropy(_model(TF, torch.tensor(x), tp, trm, trv), torch.tensor(y), label_smoothing=0.1)
    tloss.backward()
    with torch.no_grad(): tp = [(p - p.grad * 0.1).requires_grad_() for p in tp]
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-4)
  for a, t in zip(ap, tp): np.testing.assert_allclose(a.numpy(), t.detach().numpy(), rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(arm.numpy(), trm.numpy(), rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(arv.numpy(), trv.numpy(), rtol=1e-4, atol=1e-5)
