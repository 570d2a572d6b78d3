"""What a user meets on day one: printing, iteration, pickling, NumPy interop, DLPack, and the small methods PyTorch
has (reliability issue, item 7)."""
import copy, pickle
import numpy as np, pytest
import alloy
from alloy import Tensor
from conftest import rand_np

def test_print_shows_values(device):
  t = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device=device)
  assert str(t) == repr(t) == f"Tensor([[0., 1., 2.],\n        [3., 4., 5.]], dtype=float32, device={device})"
  big = str(Tensor(np.arange(5000, dtype=np.int32), device=device))
  assert "..." in big and "4999" in big and len(big) < 200   # abbreviated, as NumPy and PyTorch do
  assert str(Tensor(2.5, device=device)) == f"Tensor(2.5, dtype=float32, device={device})"

def test_repr_inside_a_jit_capture_says_why_instead_of_raising():
  seen = []
  @alloy.jit
  def f(x):
    y = x * 2
    seen.append(repr(y))
    return y
  for _ in range(3): f(Tensor(np.ones(3, np.float32))).numpy()
  assert any("not readable here" in s for s in seen) and any(s.startswith("Tensor([2., 2., 2.]") for s in seen)

def test_format():
  assert f"{Tensor(3.14159):.2f}" == "3.14" and f"{Tensor(7):>3}" == "  7"
  with pytest.raises(TypeError, match="needs a 0-d tensor"): f"{Tensor([1.0, 2.0]):.2f}"
  assert f"{Tensor([1.0])}".startswith("Tensor([1.]")

def test_iteration():
  assert [x.item() for x in Tensor([[1, 2], [3, 4]])[:, 1]] == [2, 4]
  with pytest.raises(TypeError, match="iteration over a 0-d tensor"): list(Tensor(3.0))
  with pytest.raises(TypeError, match="len"): len(Tensor(3.0))

@pytest.mark.parametrize("dtype", ["float32", "int32", "bfloat16", "bool"])
def test_pickle_and_deepcopy_are_by_value(device, dtype):
  x = rand_np(np.random.default_rng(2), (3, 4), "float32" if dtype == "bfloat16" else dtype)
  t = Tensor(x, dtype=dtype, device=device) * 1 if dtype != "bool" else Tensor(x, device=device)
  for other in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t), copy.copy(t)):
    assert other.dtype is t.dtype and other.device == t.device and other.shape == t.shape
    np.testing.assert_array_equal(other.numpy(), t.numpy())

def test_numpy_scalars_and_arrays_defer_to_tensor_operators():
  t = Tensor(np.array([1.0, 2.0], np.float32))
  for got in (np.float64(2) * t, np.float32(2) * t, np.int64(2) * t, np.ones(2, np.float32) + t):
    assert isinstance(got, Tensor)
  np.testing.assert_array_equal((np.float64(2) * t).numpy(), [2.0, 4.0])
  np.testing.assert_array_equal((np.array([10.0, 20.0], np.float32) - t).numpy(), [9.0, 18.0])
  np.testing.assert_array_equal(np.asarray(t), [1.0, 2.0])

def test_small_methods(device):
  x = np.array([1.0, np.nan, np.inf, -np.inf, -2.0], np.float32)
  t = Tensor(x, device=device)
  np.testing.assert_array_equal(t.isnan().numpy(), np.isnan(x))
  np.testing.assert_array_equal(t.isinf().numpy(), np.isinf(x))
  np.testing.assert_array_equal(t.isfinite().numpy(), np.isfinite(x))
  i = Tensor(np.array([0, 3, 0, 5], np.int32), device=device)
  assert not i.isnan().numpy().any() and i.isfinite().numpy().all()
  assert t.astype("int32").dtype.name == "int32" and t.astype(alloy.float16).dtype.name == "float16"
  m = np.array([[0, 1, 0], [2, 0, 3]], np.int32)
  np.testing.assert_array_equal(Tensor(m, device=device).nonzero().numpy(), np.argwhere(m))
  rows, cols = Tensor(m, device=device).nonzero(as_tuple=True)
  np.testing.assert_array_equal(rows.numpy(), np.nonzero(m)[0]) and np.testing.assert_array_equal(cols.numpy(), np.nonzero(m)[1])
  assert Tensor(m, device=device).nonzero().dtype.name == "int64"

def test_dlpack_to_and_from_numpy_without_a_copy():
  t = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3), device="CPU") * 2
  a = np.from_dlpack(t)
  np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3) * 2)
  b = np.from_dlpack(t)
  assert a.ctypes.data == b.ctypes.data   # both views of the tensor's one buffer
  del t
  for _ in range(20): (Tensor(np.ones(6, np.float32), device="CPU") + 5).numpy()   # reuse of freed buffers must not touch a's memory
  np.testing.assert_array_equal(a, np.arange(6).reshape(2, 3) * 2)
  back = alloy.from_dlpack(np.arange(4, dtype=np.int32), device="CPU")
  assert back.dtype.name == "int32" and back.numpy().tolist() == [0, 1, 2, 3]

@pytest.mark.parametrize("dtype", ["float32", "int64", "bool", "bfloat16", "float16"])
def test_dlpack_to_and_from_torch(device, dtype):
  torch = pytest.importorskip("torch")
  if device == "METAL" or (device.startswith("CUDA") and not torch.cuda.is_available()): pytest.skip(f"no DLPack exchange with torch on {device}")
  x = np.arange(1, 13, dtype=np.float32).reshape(3, 4)
  t = (Tensor(x, device=device) * 2).cast(dtype)
  shared = torch.from_dlpack(t)                      # a view of alloy's buffer on the same device
  assert str(shared.dtype) == f"torch.{dtype}" and tuple(shared.shape) == (3, 4)
  assert shared.device.type == ("cuda" if device.startswith("CUDA") else "cpu")
  np.testing.assert_array_equal(shared.float().cpu().numpy(), (x * 2).astype(np.float32) if dtype != "bool" else (x * 2 != 0))
  del t
  for _ in range(20): (Tensor(np.ones((3, 4), np.float32), device=device) + 5).numpy()   # freed buffers are reused: not this one
  np.testing.assert_array_equal(shared.float().cpu().numpy(), (x * 2).astype(np.float32) if dtype != "bool" else (x * 2 != 0))
  src = torch.arange(12, dtype=torch.float32).reshape(3, 4).to(getattr(torch, dtype)).to("cuda" if device.startswith("CUDA") else "cpu")
  back = alloy.from_dlpack(src)
  assert back.device == ("CPU" if src.device.type == "cpu" else "CUDA") and back.dtype.name == dtype
  np.testing.assert_array_equal(back.float().numpy(), src.float().cpu().numpy())

def test_dlpack_refuses_what_it_cannot_export(device):
  if device == "METAL":
    with pytest.raises(BufferError, match="CPU and CUDA tensors"): np.from_dlpack(Tensor(np.ones(2, np.float32), device=device))
  with pytest.raises(BufferError, match="copy=True"): Tensor(np.ones(2, np.float32), device="CPU").__dlpack__(copy=True)
