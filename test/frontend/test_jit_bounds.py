"""Index bounds under @jit (alloy/bounds.py): gather, index_select, nn.Embedding, x[idx] and scatter replay with new
indices and match NumPy; an index out of range raises the eager path's IndexError at the capture call or at a replay
(the check runs on the device), never reads outside the tensor, and the calls after it are right again."""
import numpy as np, pytest
import alloy
from alloy import Tensor, nn
import alloy.nn.functional as F

def _calls(f, device, make, want, n=4):
  """n calls of jitted f on make(rng) index arrays, each checked against want(index); the capture and replays ran."""
  rng = np.random.default_rng(0)
  for _ in range(n):
    idx = make(rng)
    np.testing.assert_allclose(f(Tensor(idx, device=device)).numpy(), want(idx), rtol=1e-6, atol=1e-6)
  assert f.replay is not None, "the calls replayed a capture"

def test_gather_family_replays_new_indices(device, rng):
  x_np = rng.standard_normal((6, 5)).astype(np.float32)
  x = Tensor(x_np, device=device)
  cases = [
    (lambda i: alloy.gather(x, 1, i) * 2, lambda r: r.integers(0, 5, (6, 3)), lambda i: np.take_along_axis(x_np, i, 1) * 2),
    (lambda i: alloy.index_select(x, 0, i) + 1, lambda r: r.integers(0, 6, (4,)), lambda i: x_np[i] + 1),
    (lambda i: x[i] - 1, lambda r: r.integers(-6, 6, (2, 3)), lambda i: x_np[i] - 1),   # negative indices wrap
    (lambda i: x[:, i].sum(0), lambda r: r.integers(-5, 5, (3,)), lambda i: x_np[:, i].sum(0)),
  ]
  for fn, make, want in cases: _calls(alloy.jit(fn), device, make, want)

def test_embedding_forward_and_backward_under_jit(device):
  alloy.manual_seed(0)
  emb = nn.Embedding(7, 3).to(device)
  @alloy.jit
  def step(tok):
    out = emb(tok)
    (out * out).sum().backward()
    return out
  rng = np.random.default_rng(1)
  for _ in range(4):
    emb.weight.grad = None
    tok = rng.integers(0, 7, (5,))
    w = emb.weight.numpy()
    np.testing.assert_allclose(step(Tensor(tok, device=device)).numpy(), w[tok], rtol=1e-6)
    grad = np.zeros_like(w)
    np.add.at(grad, tok, 2 * w[tok])
    np.testing.assert_allclose(emb.weight.grad.numpy(), grad, rtol=1e-5, atol=1e-6)
  assert step.replay is not None

def test_out_of_range_raises_at_replay_and_later_calls_are_right(device):
  x_np = np.arange(1, 21, dtype=np.float32).reshape(5, 4)
  x = Tensor(x_np, device=device)
  f = alloy.jit(lambda i: F.embedding(i, x) * 3)
  for k in range(3): f(Tensor(np.array([k, 4]), device=device))
  assert f.replay is not None
  # far outside: the replay's kernel reads at a clamped index, the jit raises the eager path's error
  for bad, shown in ((np.array([1, 5]), 5), (np.array([-1, 2]), -1), (np.array([0, 1 << 40]), 1 << 40)):
    with pytest.raises(IndexError, match=f"index_select: index {shown} is out of bounds for dimension 0 with size 5"):
      f(Tensor(bad, device=device))
  np.testing.assert_allclose(f(Tensor(np.array([3, 0]), device=device)).numpy(), x_np[[3, 0]] * 3)
  g = alloy.jit(lambda i: x[i])
  for k in range(3): g(Tensor(np.array([k]), device=device))
  with pytest.raises(IndexError, match="index -6 is out of bounds for dimension 0 with size 5"): g(Tensor(np.array([-6]), device=device))

def test_out_of_range_at_the_capture_call_captures_again(device):
  x = Tensor(np.arange(8, dtype=np.float32), device=device)
  f = alloy.jit(lambda i: alloy.gather(x, 0, i))
  f(Tensor(np.array([1, 2]), device=device))
  with pytest.raises(IndexError, match="gather: index 8 is out of bounds for dimension 0 with size 8"):
    f(Tensor(np.array([8, 2]), device=device))
  assert f.replay is None
  for k in range(3): np.testing.assert_array_equal(f(Tensor(np.array([k, 7]), device=device)).numpy(), [k, 7])
  assert f.replay is not None

def test_index_computed_on_the_device_and_narrow_dtypes(device):
  x_np = np.random.default_rng(2).standard_normal((300, 2)).astype(np.float32)
  x = Tensor(x_np, device=device)
  # computed from the argument inside the function: checked on the device, as the eager path reads it back
  f = alloy.jit(lambda i: alloy.index_select(x, 0, i * 2 + 1))
  _calls(f, device, lambda r: r.integers(0, 150, (5,)), lambda i: x_np[i * 2 + 1])
  with pytest.raises(IndexError, match="index 301 is out of bounds for dimension 0 with size 300"):
    f(Tensor(np.array([3, 150, 0, 1, 2]), device=device))
  # uint8 indices into 300 rows: the upper bound does not fit the dtype (no clamp there), the lower is 0
  g = alloy.jit(lambda i: alloy.index_select(x, 0, i))
  _calls(g, device, lambda r: r.integers(0, 256, (6,)).astype(np.uint8), lambda i: x_np[i])

def test_scatter_out_of_range_raises_under_jit(device):
  base = Tensor(np.zeros(4, np.float32), device=device)
  f = alloy.jit(lambda i, v: base.scatter(0, i, v))
  v = Tensor(np.array([1.0, 2.0], np.float32), device=device)
  for k in range(3): np.testing.assert_array_equal(f(Tensor(np.array([k, 3]), device=device), v).numpy(), np.bincount([k, 3], [1, 2], 4))
  with pytest.raises(IndexError, match="scatter: index 4 is out of bounds for dimension 0 with size 4"):
    f(Tensor(np.array([4, 0]), device=device), v)
