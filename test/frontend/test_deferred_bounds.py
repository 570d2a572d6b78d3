"""Eager index checks on a GPU (alloy/bounds.py): a device-computed index is not read back at the op; its extremes,
one small kernel, are read at the next host read of any value or alloy.synchronize(), which raises the op's
IndexError; the read never reaches outside the tensor; the CPU device checks at once, as do constants and linalg's
singular-matrix errors; a @jit call raises what waits before it captures."""
import numpy as np, pytest
import alloy
from alloy import Tensor, bounds, linalg

def _bad_gather(device):
  x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device=device)
  return x, x.gather(1, Tensor(np.array([[0, 1, 5]]), device=device) + 0)   # computed on the device: no constant

def test_checked_at_the_next_host_read(device):
  if device == "CPU":
    with pytest.raises(IndexError, match="gather: index 5 is out of bounds for dimension 1 with size 4"): _bad_gather(device)
    return
  x, y = _bad_gather(device)   # no error, no read yet
  assert len(bounds._deferred.pending) == 1
  with pytest.raises(IndexError, match="gather: index 5 is out of bounds for dimension 1 with size 4"): (x * 3).numpy()   # any value's
  assert not bounds._deferred.pending and bounds._deferred not in alloy.engine.watch.watchers.attached   # raised once
  np.testing.assert_array_equal((x * 2).numpy(), np.arange(12).reshape(3, 4) * 2)
  got = alloy.realize_tensors.buffer_of(y, host=False).numpy().reshape(1, 3)   # what the kernel read: clamped into the row
  np.testing.assert_array_equal(got, [[0, 1, 3]])
  _bad_gather(device)
  with pytest.raises(IndexError, match="index 5"): alloy.synchronize(device)
  x, y = _bad_gather(device)
  np.testing.assert_array_equal(x.index_select(0, Tensor(np.array([2, 0]), device=device) + 0).shape, (2, 4))
  f = alloy.jit(lambda t: t * 2)
  f(x)   # the first call runs plainly, reading nothing
  with pytest.raises(IndexError, match="index 5"): f(x)   # the capture (the second call) reads what waits first

def test_good_indices_and_the_bound_on_waiting_checks(device, monkeypatch):
  monkeypatch.setattr(bounds, "DEFERRED_MAX", 3)
  x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device=device)
  outs = [x.gather(1, Tensor(np.array([[k % 4]]), device=device) + 0) for k in range(5)]
  assert len(bounds._deferred.pending) == (0 if device == "CPU" else 2)   # three were read at the third
  np.testing.assert_array_equal([o.item() for o in outs], [0, 1, 2, 3, 0])
  assert not bounds._deferred.pending

def test_singular_matrices_and_constants_raise_at_once(device):
  with pytest.raises(linalg.LinAlgError, match="singular"): linalg.inv(Tensor(np.ones((2, 2), np.float32), device=device) + 0)
  x = Tensor(np.ones(3, np.float32), device=device)
  with pytest.raises(IndexError, match="index 7 is out of bounds"): x.index_select(0, Tensor.full((1,), 7, dtype=alloy.int64, device=device))
