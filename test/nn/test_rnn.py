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

@pytest.mark.parametrize("name", ["LSTM", "GRU", "RNN"])
def test_packed_sequences_match_torch(device, name):
  # unsorted lengths, two bidirectional layers, initial states in the batch's own order; outputs, states, gradients
  tr, r = torch.nn.utils.rnn, nn.utils.rnn
  rng = np.random.default_rng(2)
  x, lengths = rng.standard_normal((6, 4, 3)).astype(np.float32), [3, 6, 1, 4]
  torch.manual_seed(0)
  theirs = getattr(torch.nn, name)(3, 5, num_layers=2, bidirectional=True)
  mine = getattr(nn, name)(3, 5, num_layers=2, bidirectional=True).to(device)
  mine.load_state_dict({k: Tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
  h0 = rng.standard_normal((4, 4, 5)).astype(np.float32)
  xt, xa = torch.tensor(x, requires_grad=True), Tensor(x, device=device, requires_grad=True)
  hx_t = (torch.tensor(h0), torch.tensor(h0 * 0.5)) if name == "LSTM" else torch.tensor(h0)
  hx_a = (Tensor(h0, device=device), Tensor(h0 * 0.5, device=device)) if name == "LSTM" else Tensor(h0, device=device)
  out_t, state_t = theirs(tr.pack_padded_sequence(xt, lengths, enforce_sorted=False), hx_t)
  out_a, state_a = mine(r.pack_padded_sequence(xa, lengths, enforce_sorted=False), hx_a)
  assert out_a.batch_sizes == out_t.batch_sizes.tolist()
  np.testing.assert_allclose(out_a.data.numpy(), out_t.data.detach().numpy(), rtol=1e-5, atol=1e-6)
  states_t, states_a = (state_t, state_a) if name == "LSTM" else ((state_t,), (state_a,))
  for a, t in zip(states_a, states_t): np.testing.assert_allclose(a.numpy(), t.detach().numpy(), rtol=1e-5, atol=1e-6)
  padded, got_lengths = r.pad_packed_sequence(out_a, batch_first=True, total_length=7)
  want, want_lengths = tr.pad_packed_sequence(out_t, batch_first=True, total_length=7)
  np.testing.assert_allclose(padded.numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(got_lengths.numpy(), want_lengths.numpy())
  w = rng.standard_normal(tuple(out_t.data.shape)).astype(np.float32)
  ((out_t.data * torch.tensor(w)).sum() + states_t[0].sum()).backward()
  ((out_a.data * Tensor(w, device=device)).sum() + states_a[0].sum()).backward()
  np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-6)
  np.testing.assert_allclose(mine.weight_hh_l1_reverse.grad.numpy(), theirs.weight_hh_l1_reverse.grad.numpy(), rtol=1e-4, atol=1e-6)
  seqs = [rng.standard_normal((k, 3)).astype(np.float32) for k in (2, 4, 1)]
  back = r.unpack_sequence(r.pack_sequence([Tensor(s, device=device) for s in seqs], enforce_sorted=False))
  assert all(np.array_equal(b.numpy(), s) for b, s in zip(back, seqs))
  with pytest.raises(ValueError, match="decreasing"): r.pack_padded_sequence(Tensor(x, device=device), lengths)
