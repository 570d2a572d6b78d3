"""Tensor.to and runtime.transfer.copy_buffer: copies between devices without a round trip through a NumPy array
where the devices allow it (CPU <-> METAL here; CUDA on a GPU), and copies on one device."""
import numpy as np, pytest
from alloy import Tensor
from alloy.dtype import float32, int32
from alloy.runtime.buffer import Buffer
from alloy.runtime.registry import device_available
from alloy.runtime.transfer import copy_buffer

DEVICES = ["CPU"] + [d for d in ("METAL", "CUDA") if device_available(d)]

@pytest.fixture
def no_host_arrays(monkeypatch):
  """Buffer.numpy (the old path of Tensor.to) refused while a copy runs."""
  def refuse(self): raise AssertionError(f"{self!r} was read into a host array")
  monkeypatch.setattr(Buffer, "numpy", refuse)
  return monkeypatch

@pytest.mark.parametrize("dst", DEVICES)
@pytest.mark.parametrize("src", DEVICES)
def test_to_between_devices(src, dst, no_host_arrays):
  rng = np.random.default_rng(0)
  x = rng.standard_normal((37, 5)).astype(np.float32)
  a = Tensor(x, device=src) * 2 + 1                     # computed on src: the copy waits for the kernel writing it
  b = a.to(dst)
  c = (b - 1).to(src)                                   # back again, through a kernel on dst
  no_host_arrays.undo()
  assert b.device == dst and c.device == src
  np.testing.assert_allclose(b.numpy(), x * 2 + 1, rtol=1e-6)
  np.testing.assert_allclose(c.numpy(), x * 2, rtol=1e-6)

@pytest.mark.parametrize("device", DEVICES)
def test_copy_on_one_device(device):
  src = Buffer(device, 100, int32).copyin(np.arange(100, dtype=np.int32))
  dst = Buffer(device, 100, int32)
  copy_buffer(dst, src)
  np.testing.assert_array_equal(dst.numpy(), np.arange(100))
  with pytest.raises(ValueError, match="sizes differ"): copy_buffer(Buffer(device, 99, int32), src)

@pytest.mark.parametrize("dst", DEVICES)
def test_copy_of_a_strided_view_and_an_empty_tensor(dst, no_host_arrays):
  x = np.arange(24, dtype=np.float32).reshape(4, 6)
  t = Tensor(x, device="CPU").T[1:3].to(dst)            # a view: copied into a buffer of its own first
  e = Tensor(np.zeros((0, 3), np.float32), device="CPU").to(dst)
  no_host_arrays.undo()
  np.testing.assert_array_equal(t.numpy(), x.T[1:3])
  assert e.numpy().shape == (0, 3)

def test_to_keeps_the_dtype_and_casts_when_asked():
  t = Tensor(np.arange(6, dtype=np.int32), device="CPU").to(DEVICES[-1], float32)
  assert t.dtype == float32 and t.device == DEVICES[-1]
  np.testing.assert_array_equal(t.numpy(), np.arange(6, dtype=np.float32))
