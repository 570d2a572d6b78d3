"""prod's gradient where the reduced slice holds zeros (none, one, several): exact, no NaN or inf, as PyTorch's,
against float64 finite differences on the CPU and PyTorch autograd on every present device."""
import numpy as np, pytest
from op_grads import check_grads, alloy_grad, weights

try: import torch
except ImportError: torch = None

def _data(rng, shape, zeros: dict) -> np.ndarray:
  """Random non-zero values with exact zeros at the given {flat position: 0}."""
  x = rng.uniform(0.5, 1.5, shape) * rng.choice([-1.0, 1.0], shape)
  x.reshape(-1)[list(zeros)] = 0.0
  return x

# rows of a (3, 4): row 0 no zero, row 1 one zero, row 2 two zeros
ZEROS = {5: 0, 8: 0, 10: 0}

@pytest.mark.parametrize("dim", [None, 0, 1, -1])
def test_prod_grad_with_zeros(dim, device, rng):
  x = _data(rng, (3, 4), ZEROS)
  f = (lambda t: t.prod() * 1.5) if dim is None else (lambda t: (t.prod(dim) * weights(t, *((4, 3)[dim % 2],))).sum())
  check_grads(f, [x], device)

def test_prod_grad_single_zero_is_the_product_of_the_others(device, rng):
  x = _data(rng, (2, 5), {3: 0})
  (g,) = alloy_grad(lambda t: t.prod(1, keepdim=True).sum(), [x], device, np.float32)
  want = np.zeros_like(x)
  want[0, 3] = np.prod(np.delete(x[0], 3))
  want[1] = np.prod(x[1]) / x[1]
  assert np.isfinite(g).all()
  np.testing.assert_allclose(g, want, rtol=1e-5)

def test_prod_grad_all_zero_slices(device, rng):
  x = _data(rng, (2, 3, 4), {0: 0, 1: 0, 2: 0, 3: 0, 13: 0, 14: 0})
  check_grads(lambda t: (t.prod((0, 2)) * 2.0).sum(), [x], device,
              torch_f=lambda t: (t.permute(1, 0, 2).reshape(3, 8).prod(1) * 2.0).sum())   # torch's prod takes one dim

def test_prod_double_backward_without_zeros(rng):
  from alloy import Tensor, autograd
  x = _data(rng, (4,), {})
  t = Tensor(x, device="CPU", requires_grad=True)   # float64: the CPU
  (g,) = autograd.grad_of(t.prod(), [t], create_graph=True)
  (h,) = autograd.grad_of(g.sum(), [t])
  # d/dx_j sum_i prod/x_i = sum_{i != j} prod / (x_i x_j)
  p = np.prod(x)
  want = np.array([sum(p / (x[i] * x[j]) for i in range(4) if i != j) for j in range(4)])
  np.testing.assert_allclose(h.numpy(), want, rtol=1e-10)
