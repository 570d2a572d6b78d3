"""alloy: a small tensor compiler. Lazy Tensors, fused kernels, generated source, three devices."""
from alloy.tensor import Tensor, cat, stack, where, from_dlpack
from alloy.dtype import (DType, bool_ as bool, int8, uint8, int16, int32, int64, float16, bfloat16, float32, float64,
                         promote_types)
from alloy.runtime.device import CompileError
from alloy.helpers import set_float32_matmul_precision, float32_matmul_precision as get_float32_matmul_precision
from alloy.runtime.registry import default_device, get_device
from alloy import dtype as dtypes
from alloy.jit import jit, JitError
from alloy.engine.trace import trace
from alloy.engine.search import beam
from alloy.state import save, load
from alloy.autograd import no_grad, enable_grad, is_grad_enabled, set_grad_enabled
from alloy.grad_transforms import grad, value_and_grad
# ops in their own modules, bound below as Tensor methods where PyTorch has them (alloy.nn.functional re-exports one_hot, embedding)
from alloy.gathering import gather, take_along_dim, index_select, masked_scatter
from alloy.ordering import (sort, argsort, topk, kthvalue, median, nanmedian, searchsorted, bucketize, unique, unique_consecutive,
                            mode)
from alloy.trig import atan, atan2, asin, acos, sinh, cosh, asinh, acosh, atanh
from alloy.special import lgamma, digamma, erfinv, polygamma, mvlgamma, erfc, i0
from alloy.windows import hann_window, hamming_window, blackman_window, bartlett_window, kaiser_window
from alloy.scans import cumprod, cummax, cummin, logcumsumexp
from alloy.contraction import einsum
from alloy.triangular import tril, triu
from alloy.logexp import log1p, expm1, logaddexp, logaddexp2
from alloy.vector_norm import norm
from alloy.rearrange import (narrow, roll, movedim, unfold as _unfold, swapaxes, t, select, unbind, unflatten, broadcast_to,
                             broadcast_tensors, tile, tensor_split, repeat_interleave, diff, fliplr, flipud, rot90, meshgrid,
                             atleast_1d, atleast_2d, atleast_3d, hstack, vstack, dstack, column_stack)
from alloy.matrices import (cross, mm, bmm, mv, outer, inner, addmm, baddbmm, addmv, tensordot, kron, cdist, diagonal, trace as _trace, diag,
                            diag_embed)
from alloy.mathfuncs import (log10, logit, xlogy, frac, fmod, signbit, nan_to_num, logical_and, logical_or, logical_xor, bitwise_and,
                             bitwise_or, bitwise_xor, bitwise_not, true_divide, negative, absolute, isclose, allclose, equal,
                             count_nonzero, nansum, nanmean, aminmax, histc, sgn, positive, deg2rad,
                             rad2deg, isposinf, isneginf, isreal, sinc, hypot, copysign, heaviside, float_power, hardshrink, renorm,
                             clamp_min, clamp_max, fix, ldexp, frexp, nextafter, gcd, lcm)
from alloy.sampling import multinomial, bernoulli, randperm, normal
from alloy import linalg
from alloy.bounds import run_deferred as _run_deferred
from alloy.linalg import det, logdet, slogdet, inv as inverse
from alloy.linalg.jacobi import torch_svd as svd
from alloy.linalg.least_squares import pinverse
from alloy.linalg.lu import cholesky_solve, cholesky_inverse
from alloy.linalg.matrix_exp import matrix_exp
from alloy.stats import (var_mean, std_mean, cov, corrcoef, quantile, nanquantile, bincount, trapezoid, cumulative_trapezoid, histogram,
                         gradient)
from alloy.structured import (cartesian_prod, combinations, block_diag, diagflat, vander, tril_indices, triu_indices, masked_select, argwhere,
                              isin, flat_take as take)
from alloy.torch_functions import FUNCTIONS as _FUNCTIONS
from alloy.multi import ShardedTensor, shard   # several devices: Tensor.shard, collectives in alloy.collectives

manual_seed = Tensor.manual_seed
zeros, ones, full, empty, arange, linspace, eye = Tensor.zeros, Tensor.ones, Tensor.full, Tensor.empty, Tensor.arange, Tensor.linspace, Tensor.eye
rand, randn, randint = Tensor.rand, Tensor.randn, Tensor.randint
half, float, double = float16, float32, float64

def tensor(data, dtype=None, device=None) -> Tensor: return Tensor(data, dtype=dtype, device=device)
def zeros_like(t, **kw): return t.zeros_like(**kw)
def ones_like(t, **kw): return t.ones_like(**kw)
def full_like(t, v, **kw): return t.full_like(v, **kw)
def empty_like(t, **kw): return t.empty_like(**kw)
def rand_like(t, **kw): return t.rand_like(**kw)
def randn_like(t, **kw): return t.randn_like(**kw)
def maximum(a, b): return a.maximum(b)
def minimum(a, b): return a.minimum(b)
def matmul(a, b): return a.matmul(b)
def synchronize(device=None):
  """Wait for the device's queued work, then raise what the eager index checks waiting found (alloy/bounds.py)."""
  get_device(device or default_device()).synchronize()
  _run_deferred()

for _op in (gather, take_along_dim, index_select, sort, argsort, topk, cumprod, cummax, cummin, tril, triu, log1p, expm1,
            logaddexp, logaddexp2, norm, shard, narrow, roll, movedim, _unfold, multinomial, swapaxes, t, select, unbind, unflatten,
            broadcast_to, tile, tensor_split, repeat_interleave, diff, fliplr, flipud, rot90, mm, bmm, mv, outer, inner, addmm,
            baddbmm, addmv, kron, diagonal, _trace, diag, diag_embed, log10, logit, xlogy, frac, signbit, nan_to_num, logical_and,
            logical_or, logical_xor, bitwise_and, bitwise_or, bitwise_xor, bitwise_not, true_divide, negative, absolute, isclose,
            allclose, equal, count_nonzero, nansum, nanmean, aminmax, bernoulli, kthvalue, median, nanmedian, unique,
            unique_consecutive, atan, atan2, asin, acos, sinh, cosh, asinh, acosh, atanh, fmod, lgamma, digamma, erfinv, mode,
            histc, logcumsumexp, sgn, positive, deg2rad, rad2deg, isposinf, isneginf, isreal, sinc, hypot, copysign, heaviside,
            float_power, hardshrink, cross, renorm, masked_scatter, det, logdet, slogdet, mvlgamma, quantile, nanquantile, bincount,
            cov, corrcoef, diagflat, masked_select, argwhere, cholesky_inverse, matrix_exp, erfc, i0, fix, ldexp, frexp, nextafter, gcd,
            lcm, histogram, clamp_min, clamp_max):
  setattr(Tensor, _op.__name__, _op)   # _unfold is Tensor.unfold (nn.functional.unfold is im2col), _trace Tensor.trace (alloy.trace the tracer)
Tensor.moveaxis, Tensor.swapdims, Tensor.inverse, Tensor.svd, Tensor.pinverse = movedim, swapaxes, inverse, svd, pinverse
Tensor.take = take
Tensor.cholesky_solve = lambda self, L, upper=False: cholesky_solve(self, L, upper)   # torch's: self is B
trapz = trapezoid   # torch's older name
Tensor.polygamma = lambda self, n: polygamma(n, self)   # torch's order: Tensor.polygamma(n), torch.polygamma(n, x)
moveaxis, swapdims = movedim, swapaxes
# torch.<op>(x, ...) for the Tensor methods that have no function of their own above
globals().update({name: fn for name, fn in _FUNCTIONS.items() if name not in globals()})
arctan, arctan2, arcsin, arccos, arcsinh, arccosh, arctanh = atan, atan2, asin, acos, asinh, acosh, atanh   # NumPy's names, PyTorch's aliases
for _alias in ("arctan", "arctan2", "arcsin", "arccos", "arcsinh", "arccosh", "arctanh"): setattr(Tensor, _alias, globals()[_alias])
Tensor.byte, Tensor.short, Tensor.char = (lambda t: t.cast(uint8)), (lambda t: t.cast(int16)), (lambda t: t.cast(int8))
