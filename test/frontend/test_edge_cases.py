"""Edge cases an external op suite found: wrong values, crashes and silently accepted bad arguments (reliability
issue, items 3b and 4). Each compares with NumPy or PyTorch's documented behaviour, on every present device."""
import numpy as np, pytest
import alloy
from alloy import Tensor
from conftest import assert_close, rand_np

def test_padding_survives_a_reshape_to_0d(device):
  t = Tensor(np.array([0.5, 0.7], np.float32), device=device).pad(((1, 0),))
  assert t[0].numpy() == 0.0 and t[0].reshape(()).numpy() == 0.0
  assert t[1].item() == 0.5 and t[2].item() == pytest.approx(0.7)

@pytest.mark.parametrize("op", ["var", "std"])
def test_correction_past_the_sample_count_is_inf(device, op):
  x = np.array([1.0, 2.0], np.float32)
  got = getattr(Tensor(x, device=device), op)(correction=2).numpy()
  assert np.isinf(got) and got > 0                               # PyTorch divides by max(0, n - correction)
  assert np.isnan(getattr(Tensor(np.ones(2, np.float32), device=device), op)(correction=2).numpy())   # 0 / 0
  assert_close(getattr(Tensor(x, device=device), op)(correction=1).numpy(), getattr(np, op)(x, ddof=1))

@pytest.mark.parametrize("op, want", [("softmax", 1.0), ("log_softmax", 0.0), ("logsumexp", 3.0), ("amax", 3.0),
                                      ("amin", 3.0), ("mean", 3.0), ("sum", 3.0), ("argmax", 0), ("argmin", 0), ("cumsum", 3.0)])
@pytest.mark.parametrize("dim", [0, -1])
def test_0d_reductions_take_dim_0_and_minus_1(device, op, want, dim):
  got = getattr(Tensor(3.0, device=device), op)(dim)
  assert got.shape == () and got.item() == want

@pytest.mark.parametrize("op", ["softmax", "amax", "argmax", "cumsum", "sum"])
def test_0d_reductions_refuse_other_dims(op):
  with pytest.raises(IndexError, match=r"dimension 1 is out of range for a tensor with 0 dimensions"): getattr(Tensor(3.0), op)(1)

@pytest.mark.parametrize("make", [lambda: Tensor.zeros(-3, 2), lambda: Tensor.ones(2, -1), lambda: Tensor.full((-3,), 2),
                                  lambda: Tensor.empty(-1), lambda: Tensor.rand(-2), lambda: Tensor.randn(3, -2),
                                  lambda: Tensor.randint(0, 5, size=(-1,))])
def test_negative_sizes_are_refused_at_the_call(make):
  with pytest.raises(ValueError, match="sizes must be non-negative"): make()

def test_bad_arguments_raise():
  t = Tensor(np.ones((2, 2), np.float32))
  with pytest.raises(ValueError, match="more than once"): t.flip((0, 0))
  with pytest.raises(ValueError, match="more than once"): t.flip(1, -1)
  with pytest.raises(ValueError, match="rounding_mode"): t.div(2, rounding_mode="bogus")
  with pytest.raises(TypeError, match="linspace: dtype bool"): Tensor.linspace(0, 1, 5, dtype=alloy.bool)
  with pytest.raises(TypeError, match="unknown dtype ''"): t.sum(dtype="")
  with pytest.raises(TypeError, match="unknown dtype ''"): t.mean(dtype="")
  with pytest.raises(TypeError, match="unknown dtype ''"): t.cumsum(0, dtype="")

@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_statistics_accumulate_in_float32(device, dtype):
  x = np.full(4096, 20, np.float32)
  t = Tensor(x, dtype=dtype, device=device)
  assert t.mean().item() == 20 and t.mean().dtype.name == dtype
  assert t.var().item() == 0 and t.std().item() == 0 and t.var().dtype.name == dtype
  y = rand_np(np.random.default_rng(0), (3, 70000), low=10, high=11)   # a row sum of 70000 overflows float16
  ty = Tensor(y, dtype=dtype, device=device)
  ref = y.astype(np.float64) if dtype == "float16" else Tensor(y, dtype=dtype).float().numpy().astype(np.float64)
  e = np.exp(ref - ref.max(1, keepdims=True))
  assert_close(ty.softmax(1).float().numpy(), e / e.sum(1, keepdims=True), dtype, atol=1e-6, rtol=2e-2)
  assert_close(ty.logsumexp(1).float().numpy(), np.log(np.exp(ref - 11).sum(1)) + 11, dtype, rtol=1e-2)
  assert_close(ty.mean(1).float().numpy(), ref.mean(1), dtype, rtol=1e-2)
  c = np.full(3000, 0.01, np.float32)   # a float16 running sum ends at 32, not 30: past 16 each 0.01 step rounds to 0.0156
  assert_close(Tensor(c, dtype=dtype, device=device).cumsum(0).float().numpy()[-1], 30.0, dtype, rtol=2e-2)

def test_integer_division_by_a_python_zero_raises():
  t = Tensor(np.array([5, -7], np.int32))
  with pytest.raises(ZeroDivisionError, match="integer division by zero"): t // 0
  with pytest.raises(ZeroDivisionError, match="integer division by zero"): t % 0
  assert (t // 2).numpy().tolist() == [2, -4] and (Tensor(np.array([5.0])) // 0).item() == float("inf")

def test_integer_division_by_a_zero_tensor_gives_zero(device):
  """The documented value (docs/reliability.md) on every device: checking would read the divisor back."""
  a, z = Tensor(np.array([5, -7, 3], np.int32), device=device), Tensor(np.array([0, 0, 2], np.int32), device=device)
  assert (a // z).numpy().tolist() == [0, 0, 1] and (a % z).numpy().tolist() == [0, 0, 1]

def test_integers_to_negative_powers_raise():
  with pytest.raises(ValueError, match="negative integer powers"): Tensor([2]) ** -1
  with pytest.raises(ValueError, match="negative integer powers"): Tensor([2]).pow(-3)
  assert (Tensor([2.0]) ** -1).item() == 0.5 and (Tensor([2]) ** 3).item() == 8

def test_constant_graph_computed_on_two_devices():
  # a graph of constants names no device, so its nodes are shared: each device computes its own buffer of it
  for device in ("CPU", "METAL"):
    idx = Tensor(0, device=device).reshape(1)
    assert Tensor(5.0, device=device).reshape(1)[idx].reshape(()).item() == 5.0
    assert (Tensor(2.0, device=device) * 3).realize().item() == 6.0
