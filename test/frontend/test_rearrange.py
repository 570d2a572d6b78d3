"""alloy/rearrange.py: narrow, roll, Tensor.unfold and movedim against NumPy on each device, their gradients against
finite differences and PyTorch, and their errors."""
import numpy as np, pytest
import alloy
from alloy import Tensor
from conftest import rand_np
from op_grads import check_grads, weights

def _windows(x: np.ndarray, dim: int, size: int, step: int) -> np.ndarray:
  """NumPy's Tensor.unfold: windows along dim, then the window entries as the last axis."""
  w = np.lib.stride_tricks.sliding_window_view(x, size, axis=dim)
  return np.take(w, np.arange(0, w.shape[dim], step), axis=dim)

def test_values_against_numpy(device, rng):
  x = rand_np(rng, (3, 5, 4))
  t = Tensor(x, device=device)
  cases = [
    (t.narrow(1, 1, 3), x[:, 1:4]), (t.narrow(2, -3, 2), x[:, :, 1:3]), (alloy.narrow(t, 0, 0, 0), x[:0]),
    (t.roll(2, 1), np.roll(x, 2, 1)), (t.roll(-7, 2), np.roll(x, -7, 2)), (t.roll((1, -2), (0, -1)), np.roll(x, (1, -2), (0, 2))),
    (t.roll(5), np.roll(x, 5)), (t.roll(0, 1), x), (t.roll(5, 1), x),
    (t.unfold(1, 2, 1), _windows(x, 1, 2, 1)), (t.unfold(1, 3, 2), _windows(x, 1, 3, 2)), (t.unfold(-1, 4, 3), _windows(x, 2, 4, 3)),
    (t.unfold(0, 1, 5), _windows(x, 0, 1, 5)),
    (t.movedim(0, -1), np.moveaxis(x, 0, -1)), (t.movedim((0, 1), (2, 0)), np.moveaxis(x, (0, 1), (2, 0))),
    (alloy.moveaxis(t, -1, 0), np.moveaxis(x, -1, 0)),
  ]
  for got, want in cases:
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)
  # fused with the work around them: one realize of a roll of a computed value
  np.testing.assert_allclose(((t * 2).roll(1, 1) + 1).sum(0).numpy(), (np.roll(x * 2, 1, 1) + 1).sum(0), rtol=1e-6)

def test_gradients(device, rng):
  x = rand_np(rng, (4, 5), "float64")
  check_grads(lambda a: (a.roll((1, -2), (0, 1)) * weights(a, 4, 5)).sum(), [x], device)
  check_grads(lambda a: (a.narrow(1, 1, 3) * weights(a, 4, 3)).sum(), [x], device)
  check_grads(lambda a: (a.unfold(1, 3, 1) * weights(a, 4, 3, 3)).sum(), [x], device)   # overlapping windows add up
  check_grads(lambda a: (a.unfold(0, 2, 2) * weights(a, 2, 5, 2)).sum(), [x], device)
  check_grads(lambda a: (a.movedim(0, 1) * weights(a, 5, 4)).sum(), [x], device)

def test_errors(device):
  t = Tensor(np.ones((2, 3), np.float32), device=device)
  with pytest.raises(ValueError, match=r"narrow: start \(2\) \+ length \(2\) exceeds dimension 1 of size 3"): t.narrow(1, 2, 2)
  with pytest.raises(IndexError, match="narrow: start 5 is out of range"): t.narrow(1, 5, 0)
  with pytest.raises(TypeError, match="narrow: start must be an int, got float"): t.narrow(1, 1.0, 1)
  with pytest.raises(ValueError, match="roll: shifts and dims must have the same length"): t.roll((1, 2), 0)
  with pytest.raises(ValueError, match="roll: with dims None, shifts must be one int"): t.roll((1, 2))
  with pytest.raises(IndexError, match="dimension"): t.roll(1, 4)
  with pytest.raises(ValueError, match="unfold: step must be positive, got 0"): t.unfold(1, 2, 0)
  with pytest.raises(ValueError, match="unfold: size 4 is out of range for dimension 1 of size 3"): t.unfold(1, 4, 1)
  with pytest.raises(ValueError, match="movedim: repeated dims"): t.movedim((0, 0), (0, 1))
  with pytest.raises(ValueError, match="chunk: chunks must be a positive int, got 0"): t.chunk(0)
