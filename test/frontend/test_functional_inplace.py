"""inplace=True in the functionals that take it (and their `_` spellings): the input itself takes the value and is
returned, gradients flow through it, and autograd refuses where PyTorch refuses; against PyTorch where installed."""
import numpy as np, pytest
import alloy
from alloy import Tensor
from alloy.nn import functional as F
from conftest import rand_np, assert_close

try: import torch
except ImportError: torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

CALLS = {"relu": lambda f, x: f.relu(x, inplace=True), "relu6": lambda f, x: f.relu6(x, inplace=True),
         "leaky_relu": lambda f, x: f.leaky_relu(x, 0.2, inplace=True), "elu": lambda f, x: f.elu(x, 0.7, inplace=True),
         "selu": lambda f, x: f.selu(x, inplace=True), "celu": lambda f, x: f.celu(x, 1.3, inplace=True),
         "silu": lambda f, x: f.silu(x, inplace=True), "mish": lambda f, x: f.mish(x, inplace=True),
         "hardtanh": lambda f, x: f.hardtanh(x, -0.5, 0.8, inplace=True), "hardsigmoid": lambda f, x: f.hardsigmoid(x, inplace=True),
         "hardswish": lambda f, x: f.hardswish(x, inplace=True), "threshold": lambda f, x: f.threshold(x, 0.3, -2.0, inplace=True),
         "relu_": lambda f, x: f.relu_(x), "leaky_relu_": lambda f, x: f.leaky_relu_(x, 0.1), "elu_": lambda f, x: f.elu_(x),
         "selu_": lambda f, x: f.selu_(x), "celu_": lambda f, x: f.celu_(x, 0.5), "hardtanh_": lambda f, x: f.hardtanh_(x, -1.0, 0.5),
         "threshold_": lambda f, x: f.threshold_(x, 0.1, 5.0)}

@needs_torch
@pytest.mark.parametrize("name", sorted(CALLS))
def test_in_place_value_and_gradient(name, device, rng):
  x = rand_np(rng, (3, 5))
  w = rand_np(rng, (3, 5))
  a = Tensor(x, device=device, requires_grad=True)
  t = a * 1.0                       # a non-leaf: in place is allowed
  out = CALLS[name](F, t)
  assert out is t
  (t * Tensor(w, device=device)).sum().backward()
  b = torch.tensor(x, requires_grad=True)
  u = b * 1.0
  assert CALLS[name](torch.nn.functional, u) is u
  (u * torch.tensor(w)).sum().backward()
  assert_close(t.numpy(), u.detach().numpy(), atol=1e-6, rtol=1e-5)
  assert_close(a.grad.numpy(), b.grad.numpy(), atol=1e-5, rtol=1e-5)

def test_in_place_changes_views_and_base(device):
  t = Tensor(np.array([[-1.0, 2.0], [3.0, -4.0]], np.float32), device=device)
  row = t[1]
  F.relu(row, inplace=True)         # writes through to t
  np.testing.assert_array_equal(t.numpy(), [[-1, 2], [3, 0]])
  col = t[:, 0]
  F.relu(t, inplace=True)           # t's views see it
  np.testing.assert_array_equal(col.numpy(), [0, 3])

@pytest.mark.parametrize("name", ["relu", "elu", "hardtanh", "threshold"])
def test_in_place_on_a_leaf_is_refused(name, device):
  x = Tensor(np.ones(4, np.float32), device=device, requires_grad=True)
  with pytest.raises(RuntimeError, match="a leaf tensor that requires grad"): CALLS[name](F, x)
  with pytest.raises(RuntimeError, match="a view of a leaf tensor"): CALLS[name](F, x[1:])
  with alloy.no_grad(): CALLS[name](F, x)   # allowed without grad mode, as in PyTorch
  if torch is not None:
    y = torch.ones(4, requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"): CALLS[name](torch.nn.functional, y)

@pytest.mark.parametrize("lib", ["alloy", "torch"])
def test_in_place_on_a_saved_value_makes_backward_refuse(lib):
  """exp saves its output, sin its input; an in-place activation of either invalidates the saved value: PyTorch's
  backward raises, and so does alloy's."""
  if lib == "torch" and torch is None: pytest.skip("PyTorch is not installed")
  f = torch.nn.functional if lib == "torch" else F
  mk = (lambda v: torch.tensor(v, requires_grad=True)) if lib == "torch" else (lambda v: Tensor(v, requires_grad=True))
  x = mk(np.array([-1.0, 0.5, 2.0], np.float32))
  y = x.exp()
  f.relu(y - 2.0, inplace=True)    # a temporary: fine
  f.relu(y, inplace=True)
  with pytest.raises(RuntimeError, match="modified by an in-?place operation"): y.sum().backward()
  t = x * 1.0
  z = t.sin()                     # sin saves its input
  f.leaky_relu(t, 0.1, inplace=True)
  with pytest.raises(RuntimeError, match="modified by an in-?place operation"): z.sum().backward()

def test_dropout_in_place(device, rng):
  x = rand_np(rng, (64, 8))
  a = Tensor(x, device=device, requires_grad=True)
  t = a * 1.0
  alloy.manual_seed(5)
  out = F.dropout(t, 0.25, inplace=True)
  assert out is t
  alloy.manual_seed(5)
  want = F.dropout(Tensor(x, device=device), 0.25).numpy()
  np.testing.assert_allclose(t.numpy(), want, rtol=1e-6)
  t.sum().backward()
  np.testing.assert_allclose(a.grad.numpy(), np.where(want != 0, 1 / 0.75, 0), rtol=1e-6)
  assert F.dropout(t, 0.5, training=False, inplace=True) is t
  F.dropout(t, 1.0, inplace=True)
  np.testing.assert_array_equal(t.numpy(), 0)
  with pytest.raises(RuntimeError, match="leaf"): F.dropout(a, 0.5, inplace=True)
