"""alloy.nn.functional convolutions: forwards against PyTorch on every device, gradients against PyTorch autograd and
(float64, CPU) central finite differences; odd shapes (stride, padding, 'same', dilation, groups, one channel,
non-square), the window view (one kernel, no im2col buffer; im2col and matmuls for big GPU convolutions) and the errors."""
import numpy as np, pytest
from alloy import Tensor
import alloy.nn.functional as F
from alloy.functional import conv as conv_module
from alloy.functional.conv import lane_device
from alloy.engine import realize
from alloy import realize_tensors
from alloy.schedule.fusion import schedule
from test_autograd import numeric_grad

torch = pytest.importorskip("torch")
TF = torch.nn.functional

def rand(rng, *shape, dtype=np.float32):
  x = rng.uniform(-2, 2, shape)
  return np.where(np.abs(x) < 0.05, 0.5, x).astype(dtype)

# (input shape, weight shape, keyword arguments)
CONV2D = [((2, 3, 7, 9), (4, 3, 3, 3), dict(padding=1)),
          ((2, 4, 8, 7), (6, 2, 3, 2), dict(stride=2, padding=(1, 2), groups=2)),
          ((1, 1, 6, 5), (1, 1, 2, 2), dict(dilation=2)),
          ((2, 6, 9, 8), (6, 2, 3, 3), dict(padding="same", dilation=(2, 1), groups=3)),
          ((2, 2, 9, 8), (3, 2, 3, 3), dict(stride=(3, 2), padding=4)),
          ((1, 3, 5, 6), (2, 3, 2, 4), dict(padding="valid", stride=1)),
          ((3, 5, 4), (2, 3, 1, 3), dict(padding="same")),   # unbatched
          # window and output channels of IM2COL_MIN_DEPTH or more: im2col and a matmul on GPUs
          ((2, 8, 9, 10), (16, 8, 3, 3), dict(padding=1)),
          ((2, 8, 7, 6), (32, 4, 3, 2), dict(stride=2, padding=(1, 0), dilation=(1, 2), groups=2))]
CONV_T2D = [((2, 3, 5, 6), (3, 4, 3, 3), dict()),
            ((2, 4, 5, 4), (4, 3, 3, 3), dict(stride=2, padding=1, output_padding=1, groups=2)),
            ((1, 2, 4, 4), (2, 3, 2, 3), dict(stride=3, padding=(1, 0), output_padding=(2, 1), dilation=2)),
            ((1, 1, 3, 5), (1, 1, 3, 1), dict(stride=(1, 2), padding=(2, 0))),
            ((2, 2, 4, 3), (2, 2, 2, 3), dict(padding=1, output_padding=1, dilation=2))]

def _run(fn, tfn, x, w, b, kw, device, dtype=np.float32, tol=1e-4):
  gy_shape = tfn(torch.tensor(x), torch.tensor(w), torch.tensor(b) if b is not None else None, **kw).shape
  gy = rand(np.random.default_rng(7), *gy_shape, dtype=dtype)
  tx, tw = torch.tensor(x, requires_grad=True), torch.tensor(w, requires_grad=True)
  tb = torch.tensor(b, requires_grad=True) if b is not None else None
  ref = tfn(tx, tw, tb, **kw)
  ref.backward(torch.tensor(gy))
  ax, aw = Tensor(x, device=device, requires_grad=True), Tensor(w, device=device, requires_grad=True)
  ab = Tensor(b, device=device, requires_grad=True) if b is not None else None
  out = fn(ax, aw, ab, **kw)
  np.testing.assert_allclose(out.numpy(), ref.detach().numpy(), atol=tol, rtol=tol)
  out.backward(Tensor(gy, device=device))
  for a, t in ((ax, tx), (aw, tw), (ab, tb)):
    if t is not None: np.testing.assert_allclose(a.grad.numpy(), t.grad.numpy(), atol=tol, rtol=tol)

@pytest.mark.parametrize("case", range(len(CONV2D)))
def test_conv2d(case, device):
  xs, ws, kw = CONV2D[case]
  rng = np.random.default_rng(case)
  _run(F.conv2d, TF.conv2d, rand(rng, *xs), rand(rng, *ws), rand(rng, ws[0]) if case % 2 == 0 else None, kw, device)

@pytest.mark.parametrize("case", [0, 1, 3, 6])
def test_conv2d_weight_gradient_in_chunks(case, monkeypatch):
  """The CPU's matmul-shaped weight gradient sums its positions in chunks; small chunks that do not divide them."""
  monkeypatch.setattr(conv_module, "WEIGHT_GRAD_CHUNK", 7)
  xs, ws, kw = CONV2D[case]
  rng = np.random.default_rng(case)
  _run(F.conv2d, TF.conv2d, rand(rng, *xs), rand(rng, *ws), None, kw, "CPU")

@pytest.mark.parametrize("case", range(len(CONV_T2D)))
def test_conv_transpose2d(case, device):
  xs, ws, kw = CONV_T2D[case]
  rng = np.random.default_rng(case)
  cout = ws[1] * kw.get("groups", 1)
  _run(F.conv_transpose2d, TF.conv_transpose2d, rand(rng, *xs), rand(rng, *ws), rand(rng, cout) if case % 2 else None, kw, device)

@pytest.mark.parametrize("fn, tfn, xs, ws, kw", [
  (F.conv1d, TF.conv1d, (2, 3, 11), (4, 3, 3), dict(stride=2, padding=2, dilation=2)),
  (F.conv1d, TF.conv1d, (1, 4, 7), (4, 1, 3), dict(padding="same", groups=4)),
  (F.conv3d, TF.conv3d, (1, 2, 4, 5, 3), (3, 2, 2, 3, 2), dict(padding=(1, 0, 1), stride=(1, 2, 1))),
  (F.conv_transpose1d, TF.conv_transpose1d, (2, 3, 5), (3, 2, 3), dict(stride=2, output_padding=1)),
  (F.conv_transpose3d, TF.conv_transpose3d, (1, 2, 3, 2, 3), (2, 2, 2, 2, 2), dict(stride=(2, 1, 1), padding=(0, 1, 0)))])
def test_conv_other_dims(fn, tfn, xs, ws, kw, device):
  rng = np.random.default_rng(3)
  _run(fn, tfn, rand(rng, *xs), rand(rng, *ws), None, kw, device)

@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_conv_16_bit(dtype, device):
  """16-bit convolutions accumulate in float32, as PyTorch's do: within the 16-bit rounding of the float32 result."""
  rng = np.random.default_rng(6)
  x, w = rand(rng, 2, 4, 6, 5), rand(rng, 6, 2, 3, 3)
  out = F.conv2d(Tensor(x, device=device).cast(dtype), Tensor(w, device=device).cast(dtype), padding=1, groups=2)
  assert out.dtype.name == dtype
  ref = TF.conv2d(torch.tensor(x).to(getattr(torch, dtype)).float(), torch.tensor(w).to(getattr(torch, dtype)).float(), padding=1, groups=2)
  tol = 1e-2 if dtype == "float16" else 6e-2
  np.testing.assert_allclose(out.cast("float32").numpy(), ref.numpy(), atol=tol * 4, rtol=tol)

@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_conv_16_bit_gradients(dtype, device):
  """A convolution large enough for a GPU's im2col matmuls (forward, input and weight gradients), in 16 bits against
  PyTorch's float32 of the same 16-bit values, within 16-bit rounding of sums over 144 and 1600 products."""
  rng = np.random.default_rng(8)
  x, w, gy = rand(rng, 4, 16, 10, 10) / 2, rand(rng, 16, 16, 3, 3) / 8, rand(rng, 4, 16, 10, 10) / 2
  to16 = lambda a: torch.tensor(a).to(getattr(torch, dtype)).float()
  tx, tw = to16(x).requires_grad_(), to16(w).requires_grad_()
  ref = TF.conv2d(tx, tw, padding=1)
  ref.backward(to16(gy))
  ax, aw = (Tensor(a, device=device).cast(dtype).realize().requires_grad_() for a in (x, w))
  out = F.conv2d(ax, aw, padding=1)
  out.backward(Tensor(gy, device=device).cast(dtype))
  tol = 2e-2 if dtype == "float16" else 1e-1
  for got, want in ((out, ref), (ax.grad, tx.grad), (aw.grad, tw.grad)):
    np.testing.assert_allclose(got.cast("float32").numpy(), want.detach().numpy(), atol=tol * np.abs(want.detach().numpy()).max(), rtol=tol)

def test_conv_float64_against_torch():
  rng = np.random.default_rng(5)
  xs, ws, kw = CONV2D[1]
  _run(F.conv2d, TF.conv2d, rand(rng, *xs, dtype=np.float64), rand(rng, *ws, dtype=np.float64), None, kw, "CPU", np.float64, 1e-10)

@pytest.mark.parametrize("fn, xs, ws, kw", [(F.conv2d, (1, 2, 4, 5), (2, 1, 2, 3), dict(stride=(2, 1), padding=1, groups=2)),
                                            (F.conv_transpose2d, (1, 2, 3, 3), (2, 1, 2, 2), dict(stride=2, padding=(1, 0)))])
def test_conv_finite_differences(fn, xs, ws, kw):
  rng = np.random.default_rng(11)
  x, w = rand(rng, *xs, dtype=np.float64), rand(rng, *ws, dtype=np.float64)
  probe = rand(rng, *fn(Tensor(x), Tensor(w), **kw).shape, dtype=np.float64)   # a fixed weighting of the outputs
  def f(x, w): return (fn(Tensor(x), Tensor(w), **kw) * Tensor(probe)).sum().item()
  tx, tw = Tensor(x, requires_grad=True), Tensor(w, requires_grad=True)
  (fn(tx, tw, **kw) * Tensor(probe)).sum().backward()
  np.testing.assert_allclose(tx.grad.numpy(), numeric_grad(f, [x, w], 0), atol=1e-6, rtol=1e-6)
  np.testing.assert_allclose(tw.grad.numpy(), numeric_grad(f, [x, w], 1), atol=1e-6, rtol=1e-6)

@pytest.mark.parametrize("padding", [0, 1])
def test_conv_forward_is_one_kernel_over_a_window_view(padding, device):
  """The convolution is one reduction kernel reading the input buffer itself through a window view: no im2col
  buffer. Where kernels are vector loops (the CPU), a padded input is first copied once (conv.py says why)."""
  rng = np.random.default_rng(0)
  x, w = Tensor(rand(rng, 2, 8, 12, 12), device=device).realize(), Tensor(rand(rng, 8, 8, 3, 3), device=device).realize()
  out = F.conv2d(x, w, padding=padding, stride=2)
  kernels = schedule([out.node])
  copied = padding and lane_device(device)
  assert len(kernels) == (2 if copied else 1)
  _, ast, inputs, _ = kernels[-1]
  assert sorted(int(np.prod(n.shape)) for n in inputs[1:]) == [8 * 8 * 3 * 3, 2 * 8 * (14 if copied else 12) ** 2]
  if copied: assert int(np.prod(kernels[0][0].shape)) == 2 * 8 * 14 * 14   # the padded copy, nothing larger
  before = realize.kernels_launched
  out.realize()
  assert realize.kernels_launched - before == len(kernels)

def test_gpu_conv_runs_as_im2col_and_matmul(device):
  """On a GPU a convolution with window and output channels of IM2COL_MIN_DEPTH or more copies its windows out as
  the rows of a matrix and multiplies them by the weight (conv.py says why); below, or on the CPU, it does not."""
  if lane_device(device): pytest.skip("the CPU's convolution reads the window view (test above)")
  from alloy.codegen.matmul import match_matmul
  rng = np.random.default_rng(0)
  x = Tensor(rand(rng, 2, 16, 12, 12), device=device).realize()
  for cout, matmul in ((16, True), (8, False)):
    w = Tensor(rand(rng, cout, 16, 3, 3), device=device).realize()
    kernels = schedule([F.conv2d(x, w, padding=1).node])
    assert any(match_matmul(ast) is not None for _, ast, _, _ in kernels) == matmul
    if matmul: assert kernels[0][1].shape == (2, 1, 16, 3, 3, 12, 12)   # the windows as (N, groups, Cg, *K, *O)

def test_conv_backward_kernels(device):
  """The backward is a few kernels per gradient, not one per op."""
  rng = np.random.default_rng(0)
  x, w, b = (Tensor(rand(rng, *s), device=device, requires_grad=True).realize() for s in ((2, 4, 10, 10), (6, 4, 3, 3), (6,)))
  out = F.conv2d(x, w, b, padding=1).relu().sum()
  out.backward()
  before = realize.kernels_launched
  realize_tensors.realize([x.grad, w.grad, b.grad])
  # the forward (never realized here), the relu mask's gradient, the input gradient, the weight gradient and its
  # view as the weight's layout, the bias gradient; on the CPU also the padded copies the input gradient and the
  # matmul-shaped weight gradient read (x and the output gradient, each laid out once)
  assert realize.kernels_launched - before <= (10 if lane_device(device) else 6)

@pytest.mark.parametrize("call, err, match", [
  (lambda x, w: F.conv2d(x, w[:, :2]), ValueError, "input has 3 channels"),
  (lambda x, w: F.conv2d(x, w, groups=2), ValueError, "groups"),
  (lambda x, w: F.conv2d(x, w, padding=-1), ValueError, "padding must be non-negative"),
  (lambda x, w: F.conv2d(x, w, stride=0), ValueError, "stride must be positive"),
  (lambda x, w: F.conv2d(x, w, stride=2, padding="same"), ValueError, "strided"),
  (lambda x, w: F.conv2d(x, w, padding="full"), ValueError, "padding must be"),
  (lambda x, w: F.conv2d(x[0, 0], w), ValueError, "expected a 3-D"),
  (lambda x, w: F.conv2d(x[:, :, :2, :2], w), ValueError, "smaller than the dilated kernel"),
  (lambda x, w: F.conv2d(x, w, Tensor(np.zeros(3, np.float32))), ValueError, "bias must have shape"),
  (lambda x, w: F.conv2d(x, w, stride=(1, 2, 3)), TypeError, "sequence of 2 ints"),
  (lambda x, w: F.conv2d(x.cast("int32"), w), TypeError, "floating point"),
  (lambda x, w: F.conv_transpose2d(x, w[:3], stride=2, output_padding=2), ValueError, "output_padding"),
  (lambda x, w: F.conv_transpose2d(x[:, :2], w[:3]), ValueError, "input has 2 channels")])
def test_conv_errors(call, err, match):
  x, w = Tensor(np.ones((1, 3, 5, 5), np.float32)), Tensor(np.ones((4, 3, 3, 3), np.float32))
  with pytest.raises(err, match=match): call(x, w)
