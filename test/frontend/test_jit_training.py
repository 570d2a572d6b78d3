"""A whole training step (forward, backward, parameter update in place) under @jit: captured once, replayed as
device graphs without scheduling or compiling again, with the same numbers as the eager steps."""
import numpy as np, pytest
import alloy
from alloy import Tensor, jit, JitError
from alloy.engine import realize as engine

def _data(device):
  rng = np.random.default_rng(5)
  w1, w2 = rng.uniform(-0.5, 0.5, (8, 16)).astype(np.float32), rng.uniform(-0.5, 0.5, (16, 4)).astype(np.float32)
  xs = [rng.uniform(-1, 1, (6, 8)).astype(np.float32) for _ in range(6)]
  ys = [rng.uniform(-1, 1, (6, 4)).astype(np.float32) for _ in range(6)]
  return w1, w2, xs, ys

def step(x, y, w1, w2, lr):
  loss = (((x @ w1).relu() @ w2 - y) ** 2).mean()
  loss.backward()
  with alloy.no_grad():
    for p in (w1, w2):
      p -= lr * p.grad
      p.grad = None
  return loss

def _eager(device, lrs):
  w1, w2, xs, ys = _data(device)
  p1, p2 = Tensor(w1, device=device, requires_grad=True), Tensor(w2, device=device, requires_grad=True)
  losses = [step(Tensor(x, device=device), Tensor(y, device=device), p1, p2, lr).item() for x, y, lr in zip(xs, ys, lrs)]
  return losses, p1.numpy(), p2.numpy()

@pytest.mark.parametrize("graph", [True, False])
def test_training_step_replays_without_recompiling(device, graph, monkeypatch):
  lrs = [0.1, 0.1, 0.1, 0.05, 0.2, 0.1]
  want_losses, want1, want2 = _eager(device, lrs)
  w1, w2, xs, ys = _data(device)
  p1, p2 = Tensor(w1, device=device, requires_grad=True), Tensor(w2, device=device, requires_grad=True)
  f = jit(step, graph=graph)
  losses = []
  for k, (x, y, lr) in enumerate(zip(xs, ys, lrs)):
    if k == 2:   # from here on every call is a replay: nothing may be scheduled or compiled
      assert f.replay is not None and f.replay.launches
      def boom(*a, **kw): raise AssertionError("a replay scheduled or compiled")
      monkeypatch.setattr(engine, "run_schedule", boom)
      monkeypatch.setattr(engine, "compile_kernel", boom)
    losses.append(f(Tensor(x, device=device), Tensor(y, device=device), p1, p2, lr).item())
    assert p1.requires_grad and p1.is_leaf and p1.grad is None
  np.testing.assert_allclose(losses, want_losses, rtol=1e-5)
  np.testing.assert_allclose(p1.numpy(), want1, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(p2.numpy(), want2, rtol=1e-5, atol=1e-6)
  if graph: assert any(g is not None for g, *_ in f.replay.graphs), f.replay.graph_off   # replayed as device graphs

def test_accumulated_grads_are_inputs(device):
  """A step that leaves .grad in place: the grad is bound per call; dropping it between calls is refused."""
  def accumulate(x, w):
    (x * w).sum().backward()
    return w.grad * 1
  w = Tensor(np.ones(3, np.float32), device=device, requires_grad=True)
  f = jit(accumulate)
  for k in range(4): out = f(Tensor(np.full(3, k + 1.0, np.float32), device=device), w)
  np.testing.assert_array_equal(out.numpy(), np.full(3, 10.0))
  np.testing.assert_array_equal(w.grad.numpy(), np.full(3, 10.0))
  w.grad = None
  with pytest.raises(JitError, match="had a .grad at capture"): f(Tensor(np.ones(3, np.float32), device=device), w)

def test_state_reached_through_a_closure_is_carried_over(device):
  """Tensors changed in place that are not arguments (a module's weights, a running sum) are state each replay binds
  and rebinds; leaves reached that way get the .grad backward gave them."""
  total = Tensor(np.zeros(3, np.float32), device=device)
  w = Tensor(np.ones(3, np.float32), device=device, requires_grad=True)
  def accumulate(x):
    total.add_(x)
    w.grad = None
    (x * w).sum().backward()
    with alloy.no_grad(): w.sub_(w.grad * 0.5)
    local = x * 1
    local += 1                               # a temporary changed in place is no state
    return local
  f = jit(accumulate)
  want_w = np.ones(3, np.float32)
  for k in range(5):
    x = np.full(3, k + 1.0, np.float32)
    np.testing.assert_array_equal(f(Tensor(x, device=device)).numpy(), x + 1)
    want_w = want_w - 0.5 * x
  assert f.replay is not None
  np.testing.assert_array_equal(total.numpy(), np.full(3, 15.0, np.float32))
  np.testing.assert_allclose(w.numpy(), want_w)
  np.testing.assert_array_equal(w.grad.numpy(), np.full(3, 5.0, np.float32))

def test_state_a_replay_cannot_bind_is_refused():
  w = Tensor(np.ones(3, np.float32), requires_grad=True)
  def closure_grad(x):
    (x * w).sum().backward()                 # adds into the .grad w had when the call began
    return x * 1
  f = jit(closure_grad)
  f(Tensor(np.ones(3, np.float32)))
  with pytest.raises(JitError, match="backward adds into the .grad a tensor reached through a closure or self had"):
    f(Tensor(np.ones(3, np.float32)))
  kept = []
  def made_inside(x):
    t = x * 2
    t += 1                                   # made in the function and kept: its value at the call is unknown
    kept.append(t)
    return x * 1
  g = jit(made_inside)
  g(Tensor(np.ones(3, np.float32)))
  with pytest.raises(JitError, match="whose value was not computed when the call began"): g(Tensor(np.ones(3, np.float32)))
