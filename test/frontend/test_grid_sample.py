"""affine_grid and grid_sample against torch on every device: 4-D and 5-D, every mode, padding mode and align_corners,
grids reaching past the edges; gradients for the input and the grid."""
import numpy as np, pytest
from alloy import Tensor
import alloy.nn.functional as F

torch = pytest.importorskip("torch")

@pytest.mark.parametrize("d", [2, 3])
def test_affine_grid_and_grid_sample_match_torch(device, d):
  rng = np.random.default_rng(d)
  theta = (rng.standard_normal((2, d, d + 1)) * 0.5).astype(np.float32)
  size = (2, 3, 4, 5) if d == 2 else (2, 3, 3, 4, 5)
  for align in (False, True):
    np.testing.assert_allclose(F.affine_grid(Tensor(theta, device=device), size, align).numpy(),
                               torch.nn.functional.affine_grid(torch.tensor(theta), size, align).numpy(), atol=1e-6)
  x = rng.standard_normal((2, 3, 5, 6) if d == 2 else (2, 3, 4, 5, 6)).astype(np.float32)
  grid = rng.uniform(-1.4, 1.4, (2, 4, 7, d) if d == 2 else (2, 3, 4, 5, d)).astype(np.float32)
  for mode in ("bilinear", "nearest"):
    for padding in ("zeros", "border", "reflection"):
      for align in (False, True):
        got = F.grid_sample(Tensor(x, device=device), Tensor(grid, device=device), mode, padding, align).numpy()
        want = torch.nn.functional.grid_sample(torch.tensor(x), torch.tensor(grid), mode, padding, align).numpy()
        np.testing.assert_allclose(got, want, atol=2e-6, err_msg=f"{mode} {padding} {align}")
  with pytest.raises(NotImplementedError, match="bicubic"): F.grid_sample(Tensor(x, device=device), Tensor(grid, device=device), "bicubic")

def test_gradients_match_torch(device):
  rng = np.random.default_rng(7)
  x, theta = rng.standard_normal((1, 2, 5, 6)).astype(np.float32), np.array([[[0.9, 0.2, 0.1], [-0.3, 1.1, -0.2]]], np.float32)
  for padding in ("zeros", "border", "reflection"):
    xa, ta = Tensor(x, device=device, requires_grad=True), Tensor(theta, device=device, requires_grad=True)
    xt, tt = torch.tensor(x, requires_grad=True), torch.tensor(theta, requires_grad=True)
    out_a = F.grid_sample(xa, F.affine_grid(ta, (1, 2, 4, 4), False), padding_mode=padding)
    out_t = torch.nn.functional.grid_sample(xt, torch.nn.functional.affine_grid(tt, (1, 2, 4, 4), False), padding_mode=padding, align_corners=False)
    w = rng.standard_normal(tuple(out_t.shape)).astype(np.float32)
    (out_a * Tensor(w, device=device)).sum().backward()
    (out_t * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(xa.grad.numpy(), xt.grad.numpy(), atol=1e-5, err_msg=padding)
    np.testing.assert_allclose(ta.grad.numpy(), tt.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=padding)
