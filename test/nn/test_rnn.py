"""alloy.nn's RNN, LSTM, GRU and cells against torch.nn's with its weights loaded: outputs and final states for each
layout (batch_first, unbatched, bidirectional, stacked, LSTM projections), given initial states, the gradients of
every weight through time, a training step under @jit, and the errors."""
import numpy as np, pytest
import alloy
from alloy import Tensor, nn, optim

torch = pytest.importorskip("torch")

CONFIGS = {
  "LSTM": (lambda m: m.LSTM(5, 7), (6, 3, 5)),
  "LSTM_stacked_bidirectional_proj": (lambda m: m.LSTM(5, 7, 2, batch_first=True, bidirectional=True, proj_size=4), (3, 6, 5)),
  "LSTM_unbatched": (lambda m: m.LSTM(5, 6, 2), (4, 5)),
  "GRU_bidirectional": (lambda m: m.GRU(5, 7, 2, bidirectional=True), (20, 2, 5)),   # past REALIZE_EVERY steps
  "GRU_batch_first": (lambda m: m.GRU(4, 3, batch_first=True), (2, 5, 4)),
  "RNN_tanh": (lambda m: m.RNN(5, 7, 3), (6, 2, 5)),
  "RNN_relu_no_bias": (lambda m: m.RNN(5, 7, nonlinearity="relu", bias=False), (6, 5)),
  "LSTMCell": (lambda m: m.LSTMCell(5, 7), (3, 5)), "GRUCell": (lambda m: m.GRUCell(5, 7), (3, 5)),
  "RNNCell_unbatched": (lambda m: m.RNNCell(5, 7, nonlinearity="relu"), (5,)),
}

def _flat(out) -> list:
  if not isinstance(out, tuple): return [out]
  return [o for item in out for o in _flat(item)]

def _pair(make, device):
  torch.manual_seed(0)
  theirs = make(torch.nn).eval()
  mine = make(nn).to(device).eval()
  assert list(mine.state_dict()) == list(theirs.state_dict()), "PyTorch's parameter names, in its order"
  mine.load_state_dict({k: Tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
  return mine, theirs

@pytest.mark.filterwarnings("ignore:LSTM with projections")
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_matches_torch(device, name):
  make, shape = CONFIGS[name]
  mine, theirs = _pair(make, device)
  x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
  got = _flat(mine(Tensor(x, device=device)))
  with torch.no_grad(): want = _flat(theirs(torch.from_numpy(x)))
  assert [tuple(g.shape) for g in got] == [tuple(w.shape) for w in want]
  for g, w in zip(got, want): np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=1e-5, atol=1e-5, err_msg=name)

def test_initial_state_and_gradients_through_time(device):
  mine, theirs = _pair(lambda m: m.LSTM(4, 5, 2, bidirectional=True), device)
  rng = np.random.default_rng(2)
  x, h0, c0 = (rng.standard_normal(s).astype(np.float32) for s in ((7, 3, 4), (4, 3, 5), (4, 3, 5)))
  w = rng.standard_normal((7, 3, 10)).astype(np.float32)
  out, (h, c) = mine(Tensor(x, device=device), (Tensor(h0, device=device), Tensor(c0, device=device)))
  ((out * Tensor(w, device=device)).sum() + h.sum() + (c * c).sum()).backward()
  tout, (th, tc) = theirs(torch.from_numpy(x), (torch.from_numpy(h0), torch.from_numpy(c0)))
  ((tout * torch.from_numpy(w)).sum() + th.sum() + (tc * tc).sum()).backward()
  grads = dict(theirs.named_parameters())
  for name, p in mine.named_parameters():
    np.testing.assert_allclose(p.grad.numpy(), grads[name].grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)

def test_training_step_under_jit(device):
  def run(jitted):
    alloy.manual_seed(0)
    rnn, head = nn.GRU(3, 8, batch_first=True).to(device), nn.Linear(8, 1).to(device)
    opt = optim.Adam(list(rnn.parameters()) + list(head.parameters()), lr=0.01)
    def step(x, y):
      opt.zero_grad()
      out, _ = rnn(x)
      loss = ((head(out[:, -1]) - y) ** 2).mean()
      loss.backward()
      opt.step()
      return loss
    f = alloy.jit(step) if jitted else step
    rng = np.random.default_rng(3)
    losses = [f(Tensor(rng.standard_normal((4, 6, 3)).astype(np.float32), device=device),
                Tensor(rng.standard_normal((4, 1)).astype(np.float32), device=device)).item() for _ in range(5)]
    if jitted: assert f.replay is not None
    return losses
  np.testing.assert_allclose(run(True), run(False), rtol=1e-5)

def test_errors():
  with pytest.raises(ValueError, match="hidden_size must be a positive int"): nn.LSTM(3, 0)
  with pytest.raises(ValueError, match="proj_size"): nn.GRU(3, 4, proj_size=2)
  with pytest.raises(ValueError, match="nonlinearity must be 'tanh' or 'relu'"): nn.RNN(3, 4, nonlinearity="gelu")
  with pytest.raises(ValueError, match=r"input.size\(-1\) must be 3, got 4"): nn.LSTM(3, 4)(Tensor(np.ones((2, 1, 4), np.float32)))
  with pytest.raises(ValueError, match="expected hidden size"):
    nn.GRU(3, 4)(Tensor(np.ones((2, 1, 3), np.float32)), Tensor(np.ones((1, 2, 4), np.float32)))
