"""A view read after its base changed in place sees the change, as in PyTorch (`v = t[1:]; t += 1; v` shows the new
values), through every kind of view, views of views and siblings, with autograd following; while a tensor that is
not a view keeps the value it read. Checked against PyTorch where installed, else against the values PyTorch gives."""
import numpy as np, pytest
import alloy
from alloy import Tensor

try: import torch
except ImportError: torch = None

def _both(fn):
  """fn(lib, make) run with alloy and with torch; the outputs (lists of arrays) must agree."""
  got = fn(alloy, lambda a, **kw: Tensor(np.asarray(a, np.float32), **kw))
  if torch is None: return got
  want = fn(torch, lambda a, **kw: torch.tensor(np.asarray(a, np.float32), **kw))
  for g, w in zip(got, want): np.testing.assert_allclose(g, w.detach().numpy() if hasattr(w, "detach") else w, rtol=1e-6)
  return got

def _np(t): return t.detach().numpy() if torch is not None and isinstance(t, torch.Tensor) else t.numpy()

VIEWS = {"slice": lambda t: t[1:], "int": lambda t: t[1], "step": lambda t: t[::2], "reshape": lambda t: t.reshape(-1),
         "view": lambda t: t.view(3, 4), "permute": lambda t: t.permute(1, 0), "T": lambda t: t.T,
         "unsqueeze": lambda t: t.unsqueeze(0), "squeeze": lambda t: t.reshape(1, 4, 3).squeeze(0),
         "chunk": lambda t: t.chunk(2, 1)[1], "detach": lambda t: t.detach(), "view of view": lambda t: t[1:][:, 1:]}

@pytest.mark.parametrize("kind", sorted(VIEWS))
def test_view_sees_in_place_change_of_base(kind):
  def fn(lib, make):
    t = make(np.arange(12.0).reshape(4, 3))
    v = VIEWS[kind](t)
    t += 1
    first = _np(v).copy()
    t.mul_(2)
    return [first, _np(v)]
  first, second = _both(fn)
  x = np.arange(12.0).reshape(4, 3)
  if kind in ("slice", "int", "step", "T", "view of view"):   # the same on NumPy arrays
    np.testing.assert_array_equal(first, VIEWS[kind](x + 1))
    np.testing.assert_array_equal(second, VIEWS[kind]((x + 1) * 2))

def test_slice_sees_the_change_without_torch():
  t = Tensor(np.arange(5.0, dtype=np.float32))
  v = t[1:]
  t += 1
  np.testing.assert_array_equal(v.numpy(), [2, 3, 4, 5])
  t[0] = 100   # written where v does not look
  t[2] = -1
  np.testing.assert_array_equal(v.numpy(), [2, -1, 4, 5])

def test_sibling_views_see_each_others_writes():
  def fn(lib, make):
    t = make(np.arange(12.0).reshape(4, 3))
    row, col = t[0], t[:, 1]
    row += 10   # writes through to t, so col sees it
    col *= 2    # and t, so row sees it
    return [_np(row), _np(col), _np(t)]
  row, col, t = _both(fn)
  np.testing.assert_array_equal(row, [10, 22, 12])

def test_a_value_that_read_the_base_keeps_it():
  def fn(lib, make):
    t = make(np.arange(4.0))
    u = t + 0        # not a view: its own value
    c = t.clone()
    t += 1
    return [_np(u), _np(c), _np(t)]
  u, c, t = _both(fn)
  np.testing.assert_array_equal(u, [0, 1, 2, 3])
  np.testing.assert_array_equal(c, [0, 1, 2, 3])

def test_gradient_flows_through_a_refreshed_view():
  def fn(lib, make):
    x = make(np.arange(1.0, 5.0), requires_grad=True)
    t = x * 1
    v = t[1:]
    t.mul_(x)   # t = x * x: v's gradient now goes through the multiplication
    (v * make([1.0, 2.0, 3.0])).sum().backward()
    return [_np(v), _np(x.grad)]
  v, g = _both(fn)
  np.testing.assert_allclose(g, [0, 2 * 2, 2 * 3 * 2, 3 * 2 * 4])

def test_view_of_a_leaf_updated_under_no_grad():
  def fn(lib, make):
    p = make(np.arange(6.0).reshape(2, 3), requires_grad=True)
    v = p.reshape(-1)
    with lib.no_grad(): p -= 1
    out = [_np(v).copy(), np.array(v.requires_grad)]
    (v * make(np.arange(6.0))).sum().backward()
    return out + [_np(p.grad)]
  v, rg, g = _both(fn)
  np.testing.assert_array_equal(v, np.arange(6.0) - 1)
  assert rg
  np.testing.assert_array_equal(g, np.arange(6.0).reshape(2, 3))

def test_saved_view_changed_through_its_base_is_refused():
  """The view shares its base's version, as in PyTorch: a product that saved the view refuses to backward once the
  base changed."""
  x = Tensor(np.arange(1.0, 5.0, dtype=np.float32), requires_grad=True)
  w = Tensor(np.ones(3, np.float32), requires_grad=True)
  t = x * 1
  y = (t[1:] * w).sum()
  t += 1
  with pytest.raises(RuntimeError, match="modified by an in-place operation"): y.backward()
  if torch is not None:
    x, w = torch.arange(1.0, 5.0, requires_grad=True), torch.ones(3, requires_grad=True)
    t = x * 1
    y = (t[1:] * w).sum()
    t += 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"): y.backward()

def test_dead_views_are_forgotten():
  import gc
  t = Tensor(np.zeros(4, np.float32))
  for _ in range(200): t[1:].numpy()
  gc.collect()
  t += 1
  assert len(getattr(t, "_views", None) or ()) < 64
