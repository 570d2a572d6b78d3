"""alloy.linalg's LU family, triangular solves and matrix_exp against torch, on every device: LAPACK's packed LU and
pivots exactly, P L U for square, tall and wide matrices, lu_solve in every left/adjoint form, solve_triangular reading
only its triangle, cholesky_solve and cholesky_inverse, matrix_exp across the scaling range; gradients against torch."""
import numpy as np, pytest
import alloy
from alloy import Tensor, linalg
from op_grads import check_grads

torch = pytest.importorskip("torch")

def _t(x, device): return Tensor(x.astype(np.float32), device=device)

@pytest.mark.parametrize("shape", [(4, 4), (2, 5, 5), (5, 3), (3, 5)])
def test_lu_matches_torch(device, rng, shape):
  a = rng.standard_normal(shape).astype(np.float32)
  LU, pivots = linalg.lu_factor(_t(a, device))
  tLU, tpivots = torch.linalg.lu_factor(torch.tensor(a))
  np.testing.assert_array_equal(pivots.numpy(), tpivots.numpy())
  np.testing.assert_allclose(LU.numpy(), tLU.numpy(), rtol=1e-5, atol=1e-5)
  for got, want in zip(linalg.lu(_t(a, device)), torch.linalg.lu(torch.tensor(a))):
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)

def test_solves_match_torch(device, rng):
  a, b = rng.standard_normal((2, 4, 4)).astype(np.float32), rng.standard_normal((2, 4, 3)).astype(np.float32)
  LU, pivots = torch.linalg.lu_factor(torch.tensor(a))
  for left in (True, False):
    for adjoint in (False, True):
      rhs = b if left else np.swapaxes(b, -1, -2).copy()
      got = linalg.lu_solve(_t(LU.numpy(), device), Tensor(pivots.numpy(), device=device), _t(rhs, device), left=left, adjoint=adjoint)
      want = torch.linalg.lu_solve(LU, pivots, torch.tensor(rhs), left=left, adjoint=adjoint)
      np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4, err_msg=f"left={left} adjoint={adjoint}")
  t = np.tril(rng.standard_normal((4, 4))) + 3 * np.eye(4)
  for upper in (False, True):
    tri = t.T if upper else t
    garbage = tri + (np.tril(np.full((4, 4), 9.0), -1) if upper else np.triu(np.full((4, 4), 9.0), 1))   # never read
    for left in (True, False):
      for unit in (False, True):
        rhs = b[0] if left else b[0].T
        got = linalg.solve_triangular(_t(garbage, device), _t(rhs, device), upper=upper, left=left, unitriangular=unit)
        want = torch.linalg.solve_triangular(torch.tensor(garbage, dtype=torch.float32), torch.tensor(rhs), upper=upper, left=left,
                                             unitriangular=unit)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-4, atol=1e-4, err_msg=f"upper={upper} left={left} unit={unit}")
  spd = a @ np.swapaxes(a, -1, -2) + 4 * np.eye(4)
  ch = np.linalg.cholesky(spd).astype(np.float32)
  for upper, factor in ((False, ch), (True, np.swapaxes(ch, -1, -2).copy())):
    np.testing.assert_allclose(_t(b, device).cholesky_solve(_t(factor, device), upper).numpy(),
                               torch.cholesky_solve(torch.tensor(b), torch.tensor(factor), upper).numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(alloy.cholesky_inverse(_t(factor[0], device), upper).numpy(),
                               torch.cholesky_inverse(torch.tensor(factor[0]), upper).numpy(), rtol=1e-4, atol=1e-5)
  with pytest.raises(ValueError, match="rows"): linalg.solve_triangular(_t(t, device), _t(b[0, :3], device), upper=False)

def test_matrix_exp_matches_torch(device, rng):
  for scale in (0.01, 1.0, 5.0, 30.0):   # no squaring up to five of them
    a = (rng.standard_normal((2, 5, 5)) * scale).astype(np.float32)
    want = torch.linalg.matrix_exp(torch.tensor(a, dtype=torch.float64)).numpy()
    got = _t(a, device).matrix_exp().numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=5e-6 * np.abs(want).max(), err_msg=str(scale))
  z = alloy.matrix_exp(Tensor(np.zeros((3, 3), np.float32), device=device)).numpy()
  np.testing.assert_array_equal(z, np.eye(3))

def test_gradients(device, rng):
  a, b = rng.standard_normal((3, 3)) + 2 * np.eye(3), rng.standard_normal((3, 2))
  lib = lambda t: linalg if isinstance(t, Tensor) else torch.linalg
  check_grads(lambda A, B: (lib(A).solve_triangular(A, B, upper=True) * B).sum(), [a, b], device, rtol=1e-5)
  check_grads(lambda A, B: (lib(A).matrix_exp(A * 0.7) * B[:, :1]).sum(), [a, b], device, rtol=1e-5)
  check_grads(lambda A, B: sum((t * w).sum() for t, w in zip(lib(A).lu(A)[1:], (A.T, B[:, :1]))), [a, b], device, rtol=1e-5)
