"""alloy.nn.utils against torch.nn.utils: gradient clipping by norm (each norm type) and by value, the total norm
returned, the non-finite error, a clipped training step under @jit; parameters_to_vector and back."""
import numpy as np, pytest
import alloy
from alloy import Tensor, nn, optim

torch = pytest.importorskip("torch")

def _pairs(device, scale=3.0):
  ws = [np.random.default_rng(i).standard_normal(s).astype(np.float32) for i, s in enumerate([(3, 4), (5,), (2, 2)])]
  ap = [Tensor(w, device=device, requires_grad=True) for w in ws]
  tp = [torch.tensor(w, requires_grad=True) for w in ws]
  sum(((p * scale) ** 2).sum() for p in ap[:2]).backward()   # the third has no gradient: skipped, as in PyTorch
  sum(((p * scale) ** 2).sum() for p in tp[:2]).backward()
  return ap, tp

@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0, float("inf")])
def test_clip_grad_norm_matches_torch(device, norm_type):
  ap, tp = _pairs(device)
  got, want = nn.utils.clip_grad_norm_(ap, 1.5, norm_type), torch.nn.utils.clip_grad_norm_(tp, 1.5, norm_type)
  np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
  for a, t in zip(ap[:2], tp[:2]): np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-6, atol=1e-7)
  assert ap[2].grad is None
  ap, tp = _pairs(device, 0.01)   # already within the bound: unchanged
  nn.utils.clip_grad_norm_(ap, 100.0, norm_type), torch.nn.utils.clip_grad_norm_(tp, 100.0, norm_type)
  for a, t in zip(ap[:2], tp[:2]): np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), rtol=1e-6)

def test_clip_value_vectors_and_errors(device):
  ap, tp = _pairs(device)
  nn.utils.clip_grad_value_(ap, 0.5), torch.nn.utils.clip_grad_value_(tp, 0.5)
  for a, t in zip(ap[:2], tp[:2]): np.testing.assert_array_equal(a.grad.numpy(), t.grad.numpy())
  vec = nn.utils.parameters_to_vector(ap)
  np.testing.assert_array_equal(vec.numpy(), torch.nn.utils.parameters_to_vector(tp).detach().numpy())
  with alloy.no_grad(): nn.utils.vector_to_parameters(vec * 2, ap)
  np.testing.assert_array_equal(ap[1].numpy(), tp[1].detach().numpy() * 2)
  ap[0].grad = Tensor(np.full((3, 4), np.inf, np.float32), device=device)
  with pytest.raises(RuntimeError, match="non-finite"): nn.utils.clip_grad_norm_(ap, 1.0, error_if_nonfinite=True)

def test_clipped_step_under_jit_follows_eager(device):
  def run(jitted):
    alloy.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2)).to(device)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    def step(x, y):
      opt.zero_grad()
      loss = ((model(x) - y) ** 2).mean()
      loss.backward()
      norm = nn.utils.clip_grad_norm_(model.parameters(), 0.05)
      opt.step()
      return loss, norm
    f = alloy.jit(step) if jitted else step
    rng = np.random.default_rng(1)
    out = [tuple(t.numpy() for t in f(Tensor(rng.standard_normal((16, 4)).astype(np.float32) * 3, device=device),
                                      Tensor(rng.standard_normal((16, 2)).astype(np.float32), device=device))) for _ in range(5)]
    if jitted: assert f.replay is not None
    return out, [p.numpy() for p in model.parameters()]
  (eager, pe), (jit, pj) = run(False), run(True)
  for (l1, n1), (l2, n2) in zip(eager, jit): np.testing.assert_allclose([l1, n1], [l2, n2], rtol=1e-5)
  assert all(n > 0.05 for _, n in eager), "the norms exceed the bound: clipping ran"
  for a, b in zip(pe, pj): np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)

def test_pad_sequence_and_norm_reparametrizations_match_torch(device):
  tu = torch.nn.utils
  rng = np.random.default_rng(4)
  seqs = [rng.standard_normal((k, 3)).astype(np.float32) for k in (4, 2, 5)]
  for batch_first in (False, True):
    for side in ("right", "left"):
      got = nn.utils.rnn.pad_sequence([Tensor(s, device=device) for s in seqs], batch_first, -1.0, side).numpy()
      np.testing.assert_array_equal(got, tu.rnn.pad_sequence([torch.tensor(s) for s in seqs], batch_first, -1.0, side).numpy())
  back = nn.utils.rnn.unpad_sequence(nn.utils.rnn.pad_sequence([Tensor(s, device=device) for s in seqs]), [4, 2, 5])
  assert all(np.array_equal(b.numpy(), s) for b, s in zip(back, seqs))
  x = rng.standard_normal((3, 5)).astype(np.float32)
  for apply, remove in ((tu.weight_norm, tu.remove_weight_norm), (tu.spectral_norm, tu.remove_spectral_norm)):
    torch.manual_seed(0)
    theirs = apply(torch.nn.Linear(5, 4))
    mine = getattr(nn.utils, apply.__name__)(nn.Linear(5, 4)).to(device)
    assert sorted(mine.state_dict()) == sorted(theirs.state_dict())
    mine.load_state_dict({k: Tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    for _ in range(2):   # spectral_norm: a power-iteration step a training call
      want, got = theirs(torch.tensor(x)), mine(Tensor(x, device=device))
      np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6, err_msg=apply.__name__)
      want.sum().backward(); got.sum().backward()
    for (name, p), (_, q) in zip(sorted(mine.named_parameters()), sorted(theirs.named_parameters())):
      np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=f"{apply.__name__} {name}")
    getattr(nn.utils, remove.__name__)(mine)
    remove(theirs)
    np.testing.assert_allclose(mine.weight.numpy(), theirs.weight.detach().numpy(), rtol=1e-5, atol=1e-6)
  total = nn.utils.get_total_norm([Tensor(x, device=device), Tensor(x[:1], device=device)], 3.0)
  np.testing.assert_allclose(total.numpy(), tu.get_total_norm([torch.tensor(x), torch.tensor(x[:1])], 3.0).numpy(), rtol=1e-5)
