"""Buffers of results nobody holds go back to the allocator."""
import gc, weakref
import numpy as np, pytest
import alloy
from alloy import Tensor

def test_dropped_results_free_their_buffers(device, rng):
  # a result larger than what eager realizes keep for reuse (engine/realize.py EAGER_REUSE_MAX_BYTES)
  x = Tensor(rng.uniform(1, 2, 1 << 15).astype(np.float32), device=device)
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

def test_dropped_small_result_is_written_again(device, rng):
  # a small result nobody holds any more gives its buffer to the next equal-shaped result; a held one, or one a
  # lazy tensor still reads, keeps its values. A size no other test uses: another test's dropped results of the same
  # shape would be in the same pool, and the first dropped entry, not this one, is handed out.
  xs = rng.uniform(1, 2, 263).astype(np.float32)
  x = Tensor(xs, device=device)
  y = (x * 2 + 1).realize()
  first = weakref.ref(y.node.src[0].arg)   # (a strong reference would count as holding it)
  del y
  z = (x * 3 + 1).realize()
  assert z.node.src[0].arg is first()
  np.testing.assert_allclose(z.numpy(), xs * 3 + 1, rtol=1e-6)
  held = (x * 4 + 1).realize()            # z is held: a buffer of its own
  assert held.node.src[0].arg is not first()
  lazy = z * 10                           # z dropped, but a lazy tensor still reads its buffer
  del z
  w = (x * 5 + 1).realize()
  assert w.node.src[0].arg is not first()
  for t, want in ((lazy, (xs * 3 + 1) * 10), (held, xs * 4 + 1), (w, xs * 5 + 1)):
    np.testing.assert_allclose(t.numpy(), want, rtol=1e-6)
  same = (x * 2 + 1)                      # the node of a value computed before and still held elsewhere
  keep = same.realize()
  del same
  other = (x * 2 + 1).realize()           # one node: the value is shared, not recomputed into a reused buffer
  np.testing.assert_allclose(other.numpy(), xs * 2 + 1, rtol=1e-6)
  np.testing.assert_allclose(keep.numpy(), xs * 2 + 1, rtol=1e-6)

def test_reused_buffers_never_overwrite_live_values(device, rng):
  # random realizes, lazy tensors built on earlier results, drops and reads: every tensor still alive keeps its value
  import random
  pick = random.Random(int(rng.integers(1 << 30)))
  xs = rng.uniform(-1, 1, (8, 8)).astype(np.float32)
  x = Tensor(xs, device=device).realize()
  live = []
  for _ in range(200):
    r = pick.random()
    if r < 0.4 or not live:
      c = pick.randint(1, 50)
      t = x * c + 1
      live.append((t.realize() if pick.random() < 0.5 else t, xs.astype(np.float64) * c + 1))
    elif r < 0.7:
      t, v = pick.choice(live)
      c = pick.randint(1, 9)
      u = t * c - 2
      live.append((u.realize() if pick.random() < 0.5 else u, v * c - 2))
    elif r < 0.9: live.pop(pick.randrange(len(live)))
    else:
      t, v = pick.choice(live)
      np.testing.assert_allclose(t.numpy(), v, rtol=1e-5, atol=1e-4)
    if pick.random() < 0.05: gc.collect()
  for t, v in live: np.testing.assert_allclose(t.numpy(), v, rtol=1e-5, atol=1e-4)

def test_tensor_work_from_several_threads(device, rng):
  # eager realizes from four threads at once: schedules, caches, reused result buffers and the device are shared
  import threading
  inputs = [rng.uniform(-1, 1, (32, 300)).astype(np.float32) for _ in range(4)]   # small: results are reused
  results, errors = {}, []
  def work(i):
    try:
      x = Tensor(inputs[i], device=device)
      for j in range(30):
        x = ((x * 0.9 + 0.1 * j).sin() - x.mean(1, keepdim=True) * 0.5).realize()   # stays within [-2, 2]
      results[i] = x.numpy()
    except Exception as e: errors.append(e)
  threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
  for t in threads: t.start()
  for t in threads: t.join()
  assert not errors, errors
  for i in range(4):
    want = inputs[i].astype(np.float64)
    for j in range(30): want = np.sin(want * 0.9 + 0.1 * j) - want.mean(1, keepdims=True) * 0.5
    assert np.isfinite(want).all()
    np.testing.assert_allclose(results[i], want, rtol=1e-4, atol=1e-4)

def test_an_impossible_allocation_fails_cleanly(device):
  # a MemoryError where the allocation is refused; the software Metal device maps memory lazily and refuses the launch
  # instead (its grid passes 32-bit thread positions): either way an error at the call, never a crash
  with pytest.raises((MemoryError, RuntimeError), match=r"allocate|memory|does not fit"):
    (Tensor.zeros(10**12, dtype="uint8", device=device) + 1).realize()
  assert (Tensor(np.ones(4, np.float32), device=device) + 1).numpy().tolist() == [2.0] * 4   # the device still works

def test_many_realizes_leave_rss_flat(device, rng):
  import resource
  x = Tensor(rng.uniform(1, 2, (64,)).astype(np.float32), device=device)
  for _ in range(300): ((x * 2 + 1).sum()).item()   # warm: every cache filled
  before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
  for _ in range(3000): ((x * 2 + 1).sum()).item()
  grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
  assert grown_kb < 16 * 1024, f"RSS grew by {grown_kb} KB over 3000 realizes"
