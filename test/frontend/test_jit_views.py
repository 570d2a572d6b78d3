"""Views that outlive a @jit call, as eagerly (PyTorch's views): a view made before the capture of a tensor the
function changes in place shows each replay's new value, and a view the function returns stays a view of its base,
so a later change of the base (by a replay or eagerly) reaches it and a write into it reaches the base."""
import numpy as np, pytest
from alloy import Tensor, jit
from alloy.engine import realize as engine

def _scenario(device, wrap, monkeypatch):
  """The same calls with f eager (wrap: identity) or jitted; every view's values after each call and at the end."""
  t = Tensor(np.arange(12, dtype=np.float32), device=device).realize()          # state reached through a closure
  a = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device=device).realize()   # state passed as an argument
  made_before = [t[1:], t.reshape(3, 4)[1], t.reshape(3, 4).permute(1, 0)[2:], t.detach(), a[:, ::2], a.T]
  def f(x, a):
    t.add_(x)
    a.mul_(2)
    return t[2:].reshape(2, 5), t.reshape(3, 4)[1:, 1], a.T[1], a
  g = wrap(f)
  returned, seen = [], []
  for k in range(5):
    x = Tensor(np.full(12, k + 1.0, np.float32), device=device)
    if k >= 2 and wrap is jit:
      assert g.replay is not None
      with monkeypatch.context() as m:   # a replay's rebinding of views is lazy movement: nothing scheduled
        m.setattr(engine, "run_schedule", lambda *a, **kw: pytest.fail("a replay scheduled"))
        out = g(x, a)
    else: out = g(x, a)
    returned.append(out[:3])
    seen.append([v.numpy() for v in made_before + [r for outs in returned for r in outs]])
  t.add_(Tensor(np.full(12, 100.0, np.float32), device=device))   # eagerly, after the calls: reaches every view of t
  a.sub_(1)
  seen.append([v.numpy() for v in made_before + [r for outs in returned for r in outs]])
  returned[-1][0][0, 0] = -7.0   # a write into a returned view writes through to its base, and the base's other views
  returned[-1][2].add_(1000)
  seen.append([v.numpy() for v in [t, a] + made_before + [r for outs in returned for r in outs]])
  return seen

def test_views_outlive_a_replay(device, monkeypatch):
  want = _scenario(device, lambda f: f, monkeypatch)
  got = _scenario(device, jit, monkeypatch)
  assert len(got) == len(want)
  for k, (g, w) in enumerate(zip(got, want)):
    assert len(g) == len(w)
    for i, (x, y) in enumerate(zip(g, w)): np.testing.assert_array_equal(x, y, err_msg=f"after call {k}, view {i}")

def test_a_returned_view_of_an_unchanged_argument_is_a_view(device):
  """f only reads its argument: the view it returns is still the argument's view, so an eager change reaches it."""
  f = jit(lambda x: x[1:])
  x = Tensor(np.arange(4, dtype=np.float32), device=device).realize()
  outs = [f(x) for _ in range(4)]
  assert f.replay is not None
  x.add_(Tensor(np.ones(4, np.float32), device=device))
  for v in outs: np.testing.assert_array_equal(v.numpy(), [2, 3, 4])
  outs[-1].mul_(10)
  np.testing.assert_array_equal(x.numpy(), [1, 20, 30, 40])
  np.testing.assert_array_equal(outs[0].numpy(), [20, 30, 40])

def test_returned_state_and_returned_temporaries(device):
  """A tensor the function changes in place and returns is state (the caller's object, rebound per replay); one it
  makes (from host data) and changes is a fresh temporary per call."""
  def run(wrap):
    cache = Tensor(np.zeros(4, np.float32), device=device).realize()
    def f(x):
      cache.add_(x)
      local = Tensor(np.full(4, 10.0, np.float32), device=device)
      local.sub_(x)
      return cache, local
    g, seen = wrap(f), []
    for k in range(5):
      c, local = g(Tensor(np.full(4, k + 1.0, np.float32), device=device))
      seen.append((c is cache, cache.numpy(), c.numpy(), local.numpy()))
    return seen
  want, got = run(lambda f: f), run(jit)
  for k, (w, g) in enumerate(zip(want, got)):
    assert g[0] == w[0], f"call {k}: the returned cache is {'not ' if w[0] else ''}the caller's tensor"
    for x, y in zip(g[1:], w[1:]): np.testing.assert_array_equal(x, y, err_msg=f"call {k}")
