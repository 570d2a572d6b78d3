"""Vector packing keeps every value defined before its use: a scalar that one vector broadcasts is not also packed
as a lane of another vector placed after that broadcast (the renderer found no name for it)."""
import numpy as np
from alloy import Tensor
from conftest import assert_close

def test_broadcast_scalar_is_not_packed_after_its_broadcast(device):
  # the gradient of a Linear layer's bias under a mean loss: (dy * 1/n) broadcast over features, times tanh's slope
  rng = np.random.default_rng(0)
  a, h, w = (rng.standard_normal(s).astype(np.float32) for s in ((16, 1), (16, 8), (8,)))
  got = ((Tensor(a, device=device) * (Tensor(2.0, device=device) / 16.0)).expand(16, 8) * Tensor(w, device=device) * Tensor(h, device=device)).sum(0)
  assert_close(got.numpy(), ((a * np.float32(2 / 16)) * w * h).sum(0), atol=1e-6, rtol=1e-5)
