"""Buffers of results nobody holds go back to the allocator."""
import gc, weakref
import numpy as np
import alloy
from alloy import Tensor

def test_dropped_results_free_their_buffers(device, rng):
  x = Tensor(rng.uniform(1, 2, 256).astype(np.float32), device=device)
  y = (x * 2 + 1).realize()
  buf = weakref.ref(y.node.src[0].arg)
  np.testing.assert_allclose(y.numpy(), x.numpy() * 2 + 1)
  alloy.get_device(device).synchronize()
  del y
  gc.collect()
  assert buf() is None, "a realized result's buffer outlived every tensor that refers to it"

def test_repeated_work_reuses_buffers(device, rng):
  x = Tensor(rng.uniform(1, 2, 4096).astype(np.float32), device=device)
  dev = alloy.get_device(device)
  (x * 3).realize(); dev.synchronize()
  cached = dev.allocator.cached_bytes
  for _ in range(5): (x * 3).realize(); dev.synchronize()
  assert dev.allocator.cached_bytes == cached   # the same freed buffer is handed out again each time
