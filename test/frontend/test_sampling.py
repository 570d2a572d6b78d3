"""alloy/sampling.py: multinomial against the law it samples (category frequencies of many draws, with and without replacement),
on each device; its shapes, errors, seeding, and fresh draws per @jit replay."""
import numpy as np, pytest
import alloy
from alloy import Tensor

P = np.array([0.1, 0.0, 0.5, 0.4, 0.0], np.float32)   # zero weights: never drawn

def _frequencies(draws: np.ndarray) -> np.ndarray: return np.bincount(draws.ravel(), minlength=len(P)) / draws.size

def test_with_replacement_follows_the_weights(device):
  alloy.manual_seed(0)
  draws = alloy.multinomial(Tensor(P * 3, device=device), 20000, replacement=True).numpy()   # unnormalized weights
  assert draws.shape == (20000,) and draws.dtype == np.int64
  np.testing.assert_allclose(_frequencies(draws), P, atol=0.015)   # 4 standard deviations of the largest
  rows = alloy.multinomial(Tensor(np.stack([P, P[::-1]]), device=device), 5000, replacement=True).numpy()
  np.testing.assert_allclose(_frequencies(rows[1]), P[::-1], atol=0.03)

def test_without_replacement(device):
  alloy.manual_seed(1)
  w = Tensor(np.tile(P, (4000, 1)), device=device)
  draws = w.multinomial(3).numpy()
  assert draws.shape == (4000, 3)
  assert all(len(set(r)) == 3 for r in draws) and not np.isin(draws, [1, 4]).any()   # distinct, never a zero weight
  np.testing.assert_allclose(_frequencies(draws[:, 0]), P, atol=0.03)   # the first draw follows the weights
  # the second draw, from the weights left after the first: P(second = j) = sum over i != j of p_i p_j / (1 - p_i)
  second = np.array([sum(P[i] * P[j] / (1 - P[i]) for i in range(len(P)) if i != j) for j in range(len(P))])
  np.testing.assert_allclose(_frequencies(draws[:, 1]), second, atol=0.03)

def test_seeded_and_fresh_under_jit(device):
  w = Tensor(np.ones(50, np.float32), device=device)
  alloy.manual_seed(7)
  a = alloy.multinomial(w, 10).numpy()
  alloy.manual_seed(7)
  np.testing.assert_array_equal(alloy.multinomial(w, 10).numpy(), a)
  f = alloy.jit(lambda x: alloy.multinomial(x, 10, replacement=True))
  calls = [f(w).numpy() for _ in range(4)]
  assert f.replay is not None and len({tuple(c) for c in calls}) == 4   # each replay draws anew

def test_errors(device):
  w = Tensor(P, device=device)
  with pytest.raises(ValueError, match="cannot draw 6 samples from 5 categories without replacement"): alloy.multinomial(w, 6)
  with pytest.raises(ValueError, match="num_samples must be a positive int, got 0"): alloy.multinomial(w, 0)
  with pytest.raises(TypeError, match="the weights must be floating point, got int64"): alloy.multinomial(Tensor(np.array([1, 2]), device=device), 1)
  with pytest.raises(ValueError, match=r"1-D or 2-D, got shape \(1, 1, 5\)"): alloy.multinomial(w.reshape(1, 1, 5), 1)

def test_bernoulli_randperm_normal(device):
  alloy.manual_seed(3)
  p = Tensor(np.array([0.0, 0.25, 0.9, 1.0], np.float32), device=device)
  draws = np.stack([alloy.bernoulli(p).numpy() for _ in range(1000)])
  assert draws.dtype == np.float32 and set(np.unique(draws)) <= {0.0, 1.0}
  np.testing.assert_allclose(draws.mean(0), p.numpy(), atol=0.05)
  np.testing.assert_allclose(p.bernoulli(0.5).numpy().shape, (4,))
  for n in (0, 1, 7, 1000):
    perm = alloy.randperm(n, device=device).numpy()
    assert perm.dtype == np.int64 and sorted(perm) == list(range(n))
  assert not np.array_equal(alloy.randperm(1000, device=device).numpy(), np.arange(1000))
  x = alloy.normal(2.0, 3.0, (20000,), device=device).numpy()
  assert abs(x.mean() - 2.0) < 0.1 and abs(x.std() - 3.0) < 0.1
  m = alloy.normal(Tensor(np.array([-5.0, 5.0], np.float32), device=device), 0.01).numpy()
  np.testing.assert_allclose(m, [-5, 5], atol=0.1)
  with pytest.raises(ValueError, match="randperm: n must be a non-negative int, got -1"): alloy.randperm(-1)
  with pytest.raises(ValueError, match="normal: with a number mean and std, give size"): alloy.normal(0.0, 1.0)

def test_in_place_draws_and_fill_diagonal(device):
  alloy.manual_seed(4)
  e = Tensor(np.zeros(20000, np.float32), device=device).exponential_(2.0).numpy()
  assert e.min() >= 0 and abs(e.mean() - 0.5) < 0.02 and abs(e.std() - 0.5) < 0.02
  g = Tensor(np.zeros(20000, np.float32), device=device).geometric_(0.25).numpy()
  assert g.min() == 1 and np.all(g == np.round(g)) and abs(g.mean() - 4.0) < 0.15
  r = Tensor(np.zeros(20000, np.int32), device=device).random_(3, 9).numpy()
  assert r.dtype == np.int32 and set(np.unique(r)) == set(range(3, 9))
  m = Tensor(np.ones((3, 5), np.float32), device=device)
  m.fill_diagonal_(7.0)
  want = np.ones((3, 5), np.float32)
  np.fill_diagonal(want, 7.0)
  np.testing.assert_array_equal(m.numpy(), want)
  cube = Tensor(np.zeros((3, 3, 3), np.float32), device=device).fill_diagonal_(1.0).numpy()
  assert cube.sum() == 3 and cube[1, 1, 1] == 1
  with pytest.raises(ValueError, match="exponential_: lambd must be positive"): Tensor(np.zeros(2, np.float32)).exponential_(0)
