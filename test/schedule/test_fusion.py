"""Kernel-count tests: the fusion rules of the schedule."""
import numpy as np
from alloy import Tensor
from alloy.engine import realize as engine
from conftest import rand_np, assert_close

def kernels_for(fn) -> int:
  before = engine.kernels_launched
  fn()
  return engine.kernels_launched - before

def test_movement_launches_nothing(rng):
  t = Tensor(rand_np(rng, (4, 6))).realize()
  assert kernels_for(lambda: (t.T.reshape(3, 8).permute(1, 0)[::2].pad(((1, 1), (0, 0))).flip(0), t[1:, None])) == 0

def test_elementwise_chain_is_one_kernel(rng):
  a, b, c = (Tensor(rand_np(rng, (64, 32))).realize() for _ in range(3))
  assert kernels_for(lambda: ((a * b + c).exp() / 3 - a.sqrt().abs()).realize()) == 1

def test_elementwise_into_reduce_is_one_kernel(rng):
  x = [rand_np(rng, (16, 24)) for _ in range(3)]
  a, b, c = (Tensor(v).realize() for v in x)
  out = None
  def run():
    nonlocal out
    out = ((a * b + c).exp()).sum(axis=1).realize()
  assert kernels_for(run) == 1
  assert_close(out.numpy(), np.exp(x[0] * x[1] + x[2]).sum(1), rtol=1e-5)

def test_softmax_is_one_kernel(rng):
  t = Tensor(rand_np(rng, (8, 40))).realize()
  assert kernels_for(lambda: t.softmax(-1).realize()) == 1

def test_broadcast_reduce_on_inner_axis_is_cut(rng):
  # mean over axis 0 broadcast back along axis 0 would be recomputed per row: it becomes its own kernel
  t = Tensor(rand_np(rng, (8, 40))).realize()
  assert kernels_for(lambda: (t - t.mean(0, keepdim=True)).realize()) == 2

def test_matmul_is_one_kernel(rng):
  a, b = Tensor(rand_np(rng, (8, 5))).realize(), Tensor(rand_np(rng, (5, 3))).realize()
  assert kernels_for(lambda: (a @ b).relu().realize()) == 1

def test_realized_intermediate_is_reused(rng):
  a = Tensor(rand_np(rng, (10, 10))).realize()
  b = (a * 2).exp()
  c = b + 1
  b.realize()
  assert kernels_for(lambda: c.realize()) == 1
  assert_close(c.numpy(), np.exp(a.numpy() * 2) + 1, rtol=1e-6)

def test_seed_example_is_one_kernel(rng):
  a = Tensor(rand_np(rng, (4, 3))).realize()
  assert kernels_for(lambda: a.T.pad(((1, 1), (1, 1))).sum(1).realize()) == 1

def test_schedule_reused_for_same_structure(rng):
  from alloy.schedule import fusion
  x, y = rng.uniform(1, 2, (8, 9)).astype(np.float32), rng.uniform(1, 2, (8, 9)).astype(np.float32)
  np.testing.assert_allclose((Tensor(x) * 3 + 1).sum(1).numpy(), (x * 3 + 1).sum(1), rtol=1e-6)
  cached = len(fusion._schedules)
  np.testing.assert_allclose((Tensor(y) * 3 + 1).sum(1).numpy(), (y * 3 + 1).sum(1), rtol=1e-6)   # other buffers: a hit
  assert len(fusion._schedules) == cached
  np.testing.assert_allclose((Tensor(y) * 4 + 1).sum(1).numpy(), (y * 4 + 1).sum(1), rtol=1e-6)   # other constant: new
  assert len(fusion._schedules) == cached + 1
