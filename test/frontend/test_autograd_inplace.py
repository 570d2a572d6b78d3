"""Autograd with in-place ops (version counters, the leaf rule), hooks, retain_grad, create_graph and nested grad,
retain_graph and the errors of backward, against PyTorch and finite differences."""
import numpy as np, pytest
import alloy
from alloy import Tensor
from test_autograd import numeric_grad

try: import torch
except ImportError: torch = None

def test_inplace_on_a_saved_tensor_is_refused_naming_it():
  x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
  y = x.exp()
  y += 1                                   # exp saved its output
  with pytest.raises(RuntimeError, match=r"float32 tensor of shape \(3,\) that exp saved \(its output\) is at version 1; expected version 0"):
    y.sum().backward()
  w = Tensor([[1.0, 2.0]], requires_grad=True)
  h = w * 2
  z = (h * w).sum()                        # mul saved h for w's gradient
  h[0, 1] = 5
  with pytest.raises(RuntimeError, match=r"shape \(1, 2\) that mul saved \(its input 0\)"): z.backward()
  a = Tensor([1.0, 2.0], requires_grad=True)
  b = a * 1
  c = (b + 1).sum()                        # add saves nothing: changing b after is fine, as in PyTorch
  b *= 3
  c.backward()
  np.testing.assert_array_equal(a.grad.numpy(), [1.0, 1.0])

@pytest.mark.skipif(torch is None, reason="PyTorch is not installed")
def test_version_errors_where_torch_raises():
  def prog(lib_tensor, where):
    x = lib_tensor([0.5, 1.0, 1.5])
    y = x.tanh() if where != "sigmoid" else x.sigmoid()
    y.mul_(2) if where != "none" else None
    return y.sum()
  for case in ("tanh", "sigmoid"):
    with pytest.raises(RuntimeError, match="modified by an inplace operation"): prog(lambda v: torch.tensor(v, requires_grad=True), case).backward()
  with pytest.raises(RuntimeError, match="tanh saved"): prog(lambda v: Tensor(v, requires_grad=True), "tanh").backward()
  prog(lambda v: Tensor(v, requires_grad=True), "none").backward()

def test_leaf_rules():
  w = Tensor([1.0, 2.0], requires_grad=True)
  with pytest.raises(RuntimeError, match=r"a leaf tensor that requires grad \(float32, shape \(2,\)\) is being used in an in-place"): w += 1
  with pytest.raises(RuntimeError, match="a view of a leaf tensor"): w[0] += 1
  with pytest.raises(RuntimeError, match="leaf"): w[1] = 3
  with pytest.raises(RuntimeError, match="leaf"): w.zero_()
  (w * w).sum().backward()
  with alloy.no_grad():
    w -= 0.5 * w.grad                      # an optimizer step: the graph and .grad stay with the leaf
    w[0] = w[0] * 2
  assert w.requires_grad and w.is_leaf
  np.testing.assert_allclose(w.numpy(), [0.0, 0.0])
  w.grad.zero_()
  np.testing.assert_array_equal(w.grad.numpy(), [0.0, 0.0])
  w.detach().add_(1)                       # detach() shares the values, and is allowed
  np.testing.assert_array_equal(w.numpy(), [1.0, 1.0])
  w.data -= 1
  np.testing.assert_array_equal(w.numpy(), [0.0, 0.0])
  with pytest.raises(RuntimeError, match="floating point"): Tensor([1, 2], requires_grad=True)

def test_inplace_ops_are_differentiable(rng):
  def f(a, b):
    y = a * 1
    y += b
    v = y[:, 1:]
    v -= a[:, :2]                          # through a view: y changes, and so does the gradient
    y[1] *= b[0]
    y.clamp_(max=1.5)
    y.exp_()
    z = a.clone()
    z.copy_(y.sigmoid())
    return (y * z).sum() + z.scatter_add(1, Tensor([[0, 0, 2], [1, 1, 1]]), b).sum()
  xs = [rng.uniform(-1, 1, (2, 3)), rng.uniform(-1, 1, (2, 3))]
  ts = [Tensor(x, requires_grad=True) for x in xs]
  f(*ts).backward()
  def fn(*arrs): return f(*[Tensor(x) for x in arrs]).item()
  for k in range(2): np.testing.assert_allclose(ts[k].grad.numpy(), numeric_grad(fn, xs, k), atol=1e-6, rtol=1e-6)
  if torch is not None:
    tt = [torch.tensor(x, requires_grad=True) for x in xs]
    def tf(a, b):
      y = a * 1
      y += b
      v = y[:, 1:]
      v -= a[:, :2]
      y[1] *= b[0]
      y.clamp_(max=1.5)
      y.exp_()
      z = a.clone()
      z.copy_(y.sigmoid())
      return (y * z).sum() + z.scatter_add(1, torch.tensor([[0, 0, 2], [1, 1, 1]]), b).sum()
    tf(*tt).backward()
    for k in range(2): np.testing.assert_allclose(ts[k].grad.numpy(), tt[k].grad.numpy(), rtol=1e-10)

def test_no_grad_inplace_builds_no_graph():
  w = Tensor([1.0, 2.0], requires_grad=True)
  t = Tensor([0.0, 0.0])
  with alloy.no_grad():
    t += w * 3
    t[0] = w[1]
  assert t._ag is None and not t.requires_grad
  t += w                                    # with grad on, t joins the graph
  assert t.requires_grad and not t.is_leaf
  t.sum().backward()
  np.testing.assert_array_equal(w.grad.numpy(), [1.0, 1.0])

def test_backward_errors_and_retain_graph():
  a = Tensor([1.0, 2.0], requires_grad=True)
  loss = (a.exp() * a).sum()
  loss.backward(retain_graph=True)
  loss.backward()
  np.testing.assert_allclose(a.grad.numpy(), 2 * (np.exp([1.0, 2.0]) * (1 + np.array([1.0, 2.0]))), rtol=1e-6)
  with pytest.raises(RuntimeError, match=r"backward through the graph a second time \(the saved state of [\w ]+ was freed\)"): loss.backward()
  y = a * a
  with pytest.raises(RuntimeError, match=r"gradient has shape \(3,\), the output has shape \(2,\)"): y.backward(Tensor([1.0, 1.0, 1.0]))
  with pytest.raises(RuntimeError, match="does not require grad"): Tensor([1.0]).register_hook(lambda g: g)
  with pytest.raises(RuntimeError, match="does not require grad"): Tensor([1.0]).retain_grad()

def test_retain_grad_and_hooks(device):
  x = Tensor([1.0, 2.0, 3.0], device=device, requires_grad=True)
  h = x * x
  h.retain_grad()
  assert h.retains_grad and not x.retains_grad
  seen = []
  handle = h.register_hook(lambda g: seen.append(g.numpy()) or g * 10)   # changes what flows on to x
  x.register_hook(lambda g: g + 1)
  (h * 2).sum().backward()
  np.testing.assert_array_equal(seen[0], [2.0, 2.0, 2.0])
  np.testing.assert_array_equal(h.grad.numpy(), [20.0, 20.0, 20.0])    # retain_grad keeps the gradient after h's hooks, as PyTorch
  np.testing.assert_array_equal(x.grad.numpy(), 40 * np.array([1.0, 2.0, 3.0]) + 1)
  handle.remove()
  x.grad = None
  (x * x * 2).sum().backward()
  np.testing.assert_array_equal(x.grad.numpy(), 4 * np.array([1.0, 2.0, 3.0]) + 1)
  if torch is not None:
    tx = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    th = tx * tx
    th.retain_grad()
    th.register_hook(lambda g: g * 10)
    tx.register_hook(lambda g: g + 1)
    (th * 2).sum().backward()
    np.testing.assert_array_equal(th.grad.numpy(), [20.0, 20.0, 20.0])
    np.testing.assert_array_equal(tx.grad.numpy(), 40 * np.array([1.0, 2.0, 3.0]) + 1)

def test_create_graph_and_nested_grad(device):
  x = Tensor([0.5, 1.0, 2.0], device=device, requires_grad=True)
  (x ** 3).sum().backward(create_graph=True)
  g = x.grad
  assert g.requires_grad
  np.testing.assert_allclose(g.numpy(), 3 * np.array([0.5, 1.0, 2.0]) ** 2, rtol=1e-6)
  x.grad = None
  g.sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), 6 * np.array([0.5, 1.0, 2.0]), rtol=1e-6)
  def f(v): return (v.sin() * v).sum()
  d2 = alloy.grad(lambda v: alloy.grad(f)(v).sum())(Tensor([0.3, 1.2], device=device))
  v = np.array([0.3, 1.2])
  np.testing.assert_allclose(d2.numpy(), 2 * np.cos(v) - v * np.sin(v), rtol=1e-5)
  if torch is not None:
    tx = torch.tensor([0.5, 1.0, 2.0], requires_grad=True)
    (gx,) = torch.autograd.grad((tx.tanh() * tx).sum(), tx, create_graph=True)
    gx.sum().backward()
    ax = Tensor([0.5, 1.0, 2.0], device=device, requires_grad=True)
    (gax,) = alloy.autograd.grad_of((ax.tanh() * ax).sum(), ax, create_graph=True)
    gax.sum().backward()
    np.testing.assert_allclose(ax.grad.numpy(), tx.grad.numpy(), rtol=1e-5)

def test_gradient_across_devices(device):
  x = Tensor([1.0, 2.0, 3.0], device="CPU", requires_grad=True)
  y = x.to(device)                          # a copy to the device (none on CPU); its gradient comes back to CPU
  assert y.requires_grad and y.device == device
  (y * y).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])
  assert x.grad.device == "CPU"
