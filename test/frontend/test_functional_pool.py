"""alloy.nn.functional pooling and interpolate against PyTorch on every device (values and gradients; max pooling's
gradient goes to each window's first maximum, as PyTorch routes it), finite differences (float64, CPU), errors."""
import numpy as np, pytest
from alloy import Tensor
import alloy.nn.functional as F
from functional_check import rand, against_torch, finite_differences

torch = pytest.importorskip("torch")
TF = torch.nn.functional

MAX_POOL = [((2, 3, 8, 8), dict(kernel_size=2)),
            ((1, 2, 7, 9), dict(kernel_size=3, stride=2, padding=1)),
            ((2, 1, 9, 7), dict(kernel_size=(3, 2), stride=(2, 1), dilation=(2, 1), ceil_mode=True)),
            ((1, 2, 6, 7), dict(kernel_size=3, stride=2, padding=1, ceil_mode=True)),
            ((3, 5, 5), dict(kernel_size=2, stride=1))]

@pytest.mark.parametrize("case", range(len(MAX_POOL)))
def test_max_pool2d(case, device):
  shape, kw = MAX_POOL[case]
  x = rand(np.random.default_rng(case), *shape)
  against_torch(lambda x: F.max_pool2d(x, **kw), lambda x: TF.max_pool2d(x, **kw), [x], device)

def test_max_pool_ties_go_to_the_first(device):
  x = np.array([[[[1.0, 3.0, 3.0, 0.0], [3.0, 2.0, 1.0, 3.0], [5.0, 5.0, 0.0, 0.0], [5.0, 5.0, 0.0, 0.0]]]], np.float32)
  for kw in (dict(kernel_size=2), dict(kernel_size=2, stride=1), dict(kernel_size=3, stride=1, padding=1)):
    against_torch(lambda x: F.max_pool2d(x, **kw), lambda x: TF.max_pool2d(x, **kw), [x], device)

def test_max_pool_return_indices(device):
  x = rand(np.random.default_rng(1), 2, 3, 7, 6)
  for kw in (dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=True)):
    v, i = F.max_pool2d(Tensor(x, device=device), return_indices=True, **kw)
    tv, ti = TF.max_pool2d(torch.tensor(x), return_indices=True, **kw)
    np.testing.assert_allclose(v.numpy(), tv.numpy())
    np.testing.assert_array_equal(i.numpy(), ti.numpy())

@pytest.mark.parametrize("fn, tfn, shape, kw", [
  (F.max_pool1d, TF.max_pool1d, (2, 3, 11), dict(kernel_size=3, stride=2, padding=1)),
  (F.max_pool3d, TF.max_pool3d, (1, 2, 4, 5, 4), dict(kernel_size=2, stride=(2, 1, 2))),
  (F.avg_pool1d, TF.avg_pool1d, (2, 3, 10), dict(kernel_size=4, stride=3, padding=2, ceil_mode=True, count_include_pad=False)),
  (F.avg_pool3d, TF.avg_pool3d, (1, 2, 4, 6, 5), dict(kernel_size=(2, 3, 2), padding=(1, 0, 1)))])
def test_pool_other_dims(fn, tfn, shape, kw, device):
  against_torch(lambda x: fn(x, **kw), lambda x: tfn(x, **kw), [rand(np.random.default_rng(2), *shape)], device)

AVG_POOL = [((2, 3, 8, 8), dict(kernel_size=2)),
            ((1, 2, 7, 9), dict(kernel_size=3, stride=2, padding=1)),
            ((1, 2, 7, 9), dict(kernel_size=3, stride=2, padding=1, count_include_pad=False)),
            ((2, 1, 9, 7), dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 1), ceil_mode=True)),
            ((2, 1, 9, 7), dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 1), ceil_mode=True, count_include_pad=False)),
            ((1, 2, 6, 6), dict(kernel_size=3, padding=1, divisor_override=5))]

@pytest.mark.parametrize("case", range(len(AVG_POOL)))
def test_avg_pool2d(case, device):
  shape, kw = AVG_POOL[case]
  x = rand(np.random.default_rng(case), *shape)
  against_torch(lambda x: F.avg_pool2d(x, **kw), lambda x: TF.avg_pool2d(x, **kw), [x], device)

@pytest.mark.parametrize("shape, size", [((2, 3, 8, 8), 4), ((1, 2, 7, 9), (3, 4)), ((1, 2, 5, 7), (None, 3)), ((2, 4, 6, 5), 1)])
def test_adaptive_avg_pool2d(shape, size, device):
  x = rand(np.random.default_rng(3), *shape)
  against_torch(lambda x: F.adaptive_avg_pool2d(x, size), lambda x: TF.adaptive_avg_pool2d(x, size), [x], device)

def test_adaptive_avg_pool_other_dims(device):
  rng = np.random.default_rng(4)
  against_torch(lambda x: F.adaptive_avg_pool1d(x, 3), lambda x: TF.adaptive_avg_pool1d(x, 3), [rand(rng, 2, 3, 7)], device)
  against_torch(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 1)), lambda x: TF.adaptive_avg_pool3d(x, (2, 3, 1)), [rand(rng, 1, 2, 4, 5, 3)], device)

INTERPOLATE = [((1, 2, 4, 5), dict(scale_factor=2, mode="nearest")),
               ((1, 2, 5, 4), dict(size=(7, 3), mode="nearest")),
               ((1, 2, 5, 4), dict(scale_factor=1.7, mode="nearest-exact")),
               ((2, 1, 4, 5), dict(scale_factor=2, mode="bilinear")),
               ((2, 1, 4, 5), dict(size=(7, 3), mode="bilinear", align_corners=True)),
               ((2, 1, 4, 5), dict(scale_factor=(1.5, 0.6), mode="bilinear", align_corners=False)),
               ((2, 3, 6), dict(scale_factor=1.5, mode="linear")),
               ((1, 1, 3, 4, 2), dict(size=(4, 5, 3), mode="trilinear", align_corners=True)),
               ((1, 2, 7, 9), dict(size=(3, 4), mode="area"))]

@pytest.mark.parametrize("case", range(len(INTERPOLATE)))
def test_interpolate(case, device):
  shape, kw = INTERPOLATE[case]
  x = rand(np.random.default_rng(case), *shape)
  against_torch(lambda x: F.interpolate(x, **kw), lambda x: TF.interpolate(x, **kw), [x], device)

@pytest.mark.parametrize("fn", [
  lambda x: F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True),
  lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
  lambda x: F.adaptive_avg_pool2d(x, (2, 3)),
  lambda x: F.interpolate(x, scale_factor=1.5, mode="bilinear"),
  lambda x: F.interpolate(x, size=(7, 4), mode="nearest")])
def test_pool_finite_differences(fn):
  finite_differences(fn, [rand(np.random.default_rng(5), 1, 2, 5, 4, dtype=np.float64)], [0])

@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=(2, 3), stride=(2, 1), padding=1, dilation=(1, 2))])
def test_unfold_fold(kw, device):
  rng = np.random.default_rng(6)
  x = rand(rng, 2, 3, 6, 7)
  against_torch(lambda x: F.unfold(x, **kw), lambda x: TF.unfold(x, **kw), [x], device)
  cols = TF.unfold(torch.tensor(x), **kw).numpy()
  against_torch(lambda c: F.fold(c, (6, 7), **kw), lambda c: TF.fold(c, (6, 7), **kw), [cols], device)

@pytest.mark.parametrize("call, err, match", [
  (lambda x: F.max_pool2d(x, 2, padding=2), ValueError, "at most half"),
  (lambda x: F.max_pool2d(x, 0), ValueError, "kernel_size must be positive"),
  (lambda x: F.max_pool2d(x, 7), ValueError, "too small"),
  (lambda x: F.max_pool2d(x[0, 0, 0], 2), ValueError, "expected a 3-D"),
  (lambda x: F.avg_pool2d(x, 2, divisor_override=0), ValueError, "divisor_override"),
  (lambda x: F.adaptive_avg_pool2d(x, (2, 0)), ValueError, "positive"),
  (lambda x: F.interpolate(x), ValueError, "exactly one of size and scale_factor"),
  (lambda x: F.interpolate(x, scale_factor=2, mode="cubic"), ValueError, "mode must be one of"),
  (lambda x: F.interpolate(x, scale_factor=2, mode="linear"), NotImplementedError, "needs a 3-D input"),
  (lambda x: F.interpolate(x, scale_factor=2, mode="nearest", align_corners=True), ValueError, "align_corners"),
  (lambda x: F.interpolate(x, scale_factor=2, mode="bicubic"), NotImplementedError, "bicubic")])
def test_pool_errors(call, err, match):
  x = Tensor(np.ones((1, 2, 5, 5), np.float32))
  with pytest.raises(err, match=match): call(x)
