"""Elementwise ops against NumPy on random non-zero data, across dtypes and non-contiguous views."""
import numpy as np, pytest
import alloy
from alloy import Tensor
from alloy.ir.ops import Op
from conftest import rand_np, assert_close, supported

SHAPES = [(), (1,), (7,), (3, 5), (2, 1, 4), (0, 3)]
FLOATS = ["float16", "float32", "float64"]
INTS = ["int8", "uint8", "int16", "int32", "int64"]

UNARY = {
  "neg": (lambda t: -t, lambda x: -x), "abs": (lambda t: t.abs(), np.abs),
  "exp": (lambda t: t.exp(), np.exp), "exp2": (lambda t: t.exp2(), np.exp2),
  "log": (lambda t: t.abs().log(), lambda x: np.log(np.abs(x))), "log2": (lambda t: t.abs().log2(), lambda x: np.log2(np.abs(x))),
  "sqrt": (lambda t: t.abs().sqrt(), lambda x: np.sqrt(np.abs(x))),
  "rsqrt": (lambda t: t.abs().rsqrt(), lambda x: 1 / np.sqrt(np.abs(x))),
  "reciprocal": (lambda t: t.reciprocal(), lambda x: 1 / x),
  "sin": (lambda t: t.sin(), np.sin), "cos": (lambda t: t.cos(), np.cos), "tan": (lambda t: t.tan(), np.tan),
  "tanh": (lambda t: t.tanh(), np.tanh), "sigmoid": (lambda t: t.sigmoid(), lambda x: 1 / (1 + np.exp(-x))),
  "relu": (lambda t: t.relu(), lambda x: np.maximum(x, 0)),
  "silu": (lambda t: t.silu(), lambda x: x / (1 + np.exp(-x))),
  "floor": (lambda t: t.floor(), np.floor), "ceil": (lambda t: t.ceil(), np.ceil),
  "round": (lambda t: (t * 2.5).round(), lambda x: np.round(x * 2.5)), "trunc": (lambda t: t.trunc(), np.trunc),
  "square": (lambda t: t.square(), np.square), "sign": (lambda t: t.sign(), np.sign),
}

def _erf(x):
  import math
  return np.vectorize(math.erf)(x.astype(np.float64))

@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_float(device, rng, name, dtype):
  f, ref = UNARY[name]
  for shape in SHAPES:
    x = rand_np(rng, shape, dtype)
    got = f(Tensor(x, device=device)).numpy()
    want = ref(x.astype(np.float64)).astype(dtype)
    rtol = 2e-3 if dtype == "float16" else 2e-6 if dtype == "float32" else 1e-12
    assert_close(got, want, dtype, atol=2e-3 if dtype == "float16" else 1e-5, rtol=rtol)

def test_erf_gelu(device, rng):
  x = rand_np(rng, (4, 9))
  t = Tensor(x, device=device)
  assert_close(t.erf().numpy(), _erf(x), atol=1e-6)
  assert_close(t.gelu().numpy(), 0.5 * x * (1 + _erf(x / np.sqrt(2))), atol=1e-6)
  assert_close(t.gelu(approximate="tanh").numpy(), 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))), atol=1e-6)

@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_activations_round_once(device, rng, dtype):
  """gelu, silu and sigmoid of 16-bit floats are computed in float32 and rounded once, as PyTorch's kernels do: within
  one unit in the last place of the same formula in float32 (rounding after every step strays several units)."""
  t = Tensor(np.linspace(-6, 6, 4001).astype(np.float32), device=device).cast(getattr(alloy, dtype))
  x = t.float().numpy()   # the inputs as the dtype holds them, in float32
  erf = _erf(x / np.float32(np.sqrt(2))).astype(np.float32)
  want = {"gelu": np.float32(0.5) * x * (1 + erf), "silu": x / (1 + np.exp(-x)), "sigmoid": 1 / (1 + np.exp(-x)),
          "tanh gelu": np.float32(0.5) * x * (1 + np.tanh(np.float32(np.sqrt(2 / np.pi)) * (x + np.float32(0.044715) * x * x * x)))}
  got = {"gelu": t.gelu(), "tanh gelu": t.gelu(approximate="tanh"), "silu": t.silu(), "sigmoid": t.sigmoid()}
  ulp = 2.0 ** -10 if dtype == "float16" else 2.0 ** -7   # relative spacing of the dtype's values
  # plus float32's own error where 1 + erf or 1 + tanh cancels (x below -3): a few of its units of x
  slack = np.maximum(np.abs(x), 1) * 2.0 ** -21 + 2.0 ** -24
  for name, g in got.items():
    assert g.dtype is getattr(alloy, dtype), name
    err = np.abs(g.float().numpy() - want[name]) / (ulp * np.abs(want[name]) + slack)
    assert err.max() <= 1, f"{name} in {dtype}: {err.max():.2f} of one unit in the last place"

BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum, "minimum": np.minimum}
@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("dtype", FLOATS + INTS)
def test_binary_broadcast(device, rng, op, dtype):
  for sa, sb in [((3, 4), (3, 4)), ((3, 1), (1, 4)), ((5,), (2, 1, 5)), ((), (4,)), ((0, 2), (1, 2))]:
    a, b = rand_np(rng, sa, dtype), rand_np(rng, sb, dtype)
    ta, tb = Tensor(a, device=device), Tensor(b, device=device)
    got = getattr(ta, op)(tb).numpy() if op in ("maximum", "minimum") else {"add": ta + tb, "sub": ta - tb, "mul": ta * tb}[op].numpy()
    want = BINARY[op](a, b)
    assert_close(got, want.astype(got.dtype) if dtype in INTS else want, dtype)

@pytest.mark.parametrize("dtype", FLOATS)
def test_div_pow(device, rng, dtype):
  a, b = rand_np(rng, (4, 5), dtype), rand_np(rng, (4, 5), dtype)
  ta, tb = Tensor(a, device=device), Tensor(b, device=device)
  assert_close((ta / tb).numpy(), a / b, dtype, atol=1e-3 if dtype == "float16" else None)
  assert_close((ta.abs() ** tb).numpy(), np.abs(a) ** b, dtype, atol=1e-2 if dtype == "float16" else 1e-5, rtol=1e-2 if dtype == "float16" else 1e-5)
  assert_close((ta // tb).numpy(), np.floor_divide(a, b), dtype, atol=1.01 if dtype == "float16" else None)
  assert_close((ta % tb).numpy(), np.mod(a, b), dtype, atol=1e-2 if dtype == "float16" else 1e-5)

@pytest.mark.parametrize("dtype", ["float32", "float16", "int32", "int8"])
def test_square_by_pow_is_a_multiply(device, rng, dtype):
  a = rand_np(rng, (5, 6), dtype)
  if dtype.startswith("float"): a.flat[:4] = [np.inf, -np.inf, np.nan, -0.0]
  t = Tensor(a, device=device)
  for y in (t ** 2, t ** 2.0, t.pow(2)):
    assert y.node.op is Op.MUL   # no pow kernel call
    got, want = y.numpy(), (a.astype(np.float32) ** 2).astype(y.dtype.name) if y.dtype.name != a.dtype.name else a * a
    np.testing.assert_array_equal(got, want)
  assert (2 ** t).node.op is Op.POW

@pytest.mark.parametrize("dtype", INTS)
def test_integer_ops(device, rng, dtype):
  a, b = rand_np(rng, (6, 7), dtype), rand_np(rng, (6, 7), dtype)
  ta, tb = Tensor(a, device=device), Tensor(b, device=device)
  np.testing.assert_array_equal((ta // tb).numpy(), a // b)
  np.testing.assert_array_equal((ta % tb).numpy(), a % b)
  np.testing.assert_array_equal((ta & tb).numpy(), a & b)
  np.testing.assert_array_equal((ta | tb).numpy(), a | b)
  np.testing.assert_array_equal((ta ^ tb).numpy(), a ^ b)
  np.testing.assert_array_equal((~ta).numpy(), ~a)
  np.testing.assert_array_equal((ta / tb).numpy(), (a / b).astype(np.float32))
  np.testing.assert_array_equal((ta.abs() ** 2).numpy(), np.abs(a) ** 2)

def test_comparisons_where(device, rng):
  a, b = rand_np(rng, (5, 6)), rand_np(rng, (5, 6))
  ta, tb = Tensor(a, device=device), Tensor(b, device=device)
  for f in (lambda x, y: x < y, lambda x, y: x <= y, lambda x, y: x > y, lambda x, y: x >= y, lambda x, y: x == y, lambda x, y: x != y):
    np.testing.assert_array_equal(f(ta, tb).numpy(), f(a, b))
  np.testing.assert_array_equal(ta.where(ta < tb, tb).numpy(), np.where(a < b, a, b))   # PyTorch: self where condition
  np.testing.assert_array_equal(alloy.where(ta > 0, ta, 0.0).numpy(), np.where(a > 0, a, 0))
  assert_close(ta.clamp(-0.5, 0.5).numpy(), np.clip(a, -0.5, 0.5))
  np.testing.assert_array_equal(((ta > 0) & (tb > 0)).numpy(), (a > 0) & (b > 0))
  np.testing.assert_array_equal((~(ta > 0)).numpy(), ~(a > 0))

def test_promotion(device):
  i8 = Tensor(np.array([1, 2, 3], np.int8), device=device)
  u8 = Tensor(np.array([1, 2, 3], np.uint8), device=device)
  f16 = Tensor(np.array([1, 2, 3], np.float16), device=device)
  assert (i8 + u8).dtype == alloy.int16
  assert (i8 + 1).dtype == alloy.int8
  assert (i8 + 1.5).dtype == alloy.float32
  assert (f16 + 1.5).dtype == alloy.float16
  assert (f16 + Tensor([1.0], dtype="bfloat16", device=device)).dtype == alloy.float32
  assert (Tensor([True], device=device) + 1).dtype == alloy.int64
  assert (i8 < 2).dtype == alloy.bool
  np.testing.assert_array_equal((i8 + u8).numpy(), np.array([2, 4, 6], np.int16))

@pytest.mark.parametrize("src", ["bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64"])
def test_casts(device, rng, src):
  x = rand_np(rng, (3, 4), src)
  t = Tensor(x, device=device)
  for dst in supported(device, ["bool", "int8", "uint8", "int32", "int64", "float16", "float32", "float64"]):
    want = x.astype(dst) if not (np.dtype(src).kind == "f" and np.dtype(dst).kind == "u") else np.abs(x).astype(dst)
    got = (t if not (np.dtype(src).kind == "f" and np.dtype(dst).kind == "u") else t.abs()).cast(dst).numpy()
    np.testing.assert_array_equal(got, want)

def test_bfloat16(device, rng):
  x = rand_np(rng, (4, 8))
  t = Tensor(x, dtype="bfloat16", device=device)
  assert t.dtype == alloy.bfloat16
  got = (t * 2 + 1).float().numpy()
  ref = x.astype(np.float32)
  assert_close(got, ref * 2 + 1, "bfloat16", atol=5e-2, rtol=1e-2)

def test_bitcast(device, rng):
  x = rand_np(rng, (10,))
  got = Tensor(x, device=device).bitcast(alloy.int32).numpy()
  np.testing.assert_array_equal(got, x.view(np.int32))
  with pytest.raises(TypeError, match="equal sizes"):
    Tensor(x, device=device).bitcast(alloy.int16)

def test_noncontiguous_inputs(device, rng):
  x = rand_np(rng, (6, 8))
  t = Tensor(x, device=device)
  views = [(t.T, x.T), (t[::2, 1::3], x[::2, 1::3]), (t[::-1, ::-2], x[::-1, ::-2]),
           (t.pad(((1, 2), (0, 1))), np.pad(x, ((1, 2), (0, 1)))), (t[:, :1].expand(6, 5), np.broadcast_to(x[:, :1], (6, 5)))]
  for tv, xv in views:
    assert_close((tv * 3 - 1).exp().numpy(), np.exp(xv * 3 - 1), rtol=1e-5)
