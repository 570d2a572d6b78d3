"""Convolutions with PyTorch's signatures: conv1d/2d/3d and conv_transpose1d/2d/3d.

The forward is one reduction over a window view of the (padded) input times the broadcast weight: no im2col copy.
On a GPU, a convolution big enough for the matrix engines (im2col) copies its windows out as the rows of a matrix
and runs the forward, the input gradient and the weight gradient as matmuls (the tensor cores take only plain
strided operands).
A convolution is recorded for autograd as one node whose rule is again convolutions: the input's gradient is a
convolution of the (dilated, padded) output gradient with the flipped, transposed weight, and the weight's gradient
a reduction over the input's window view times the output gradient. A transposed convolution is the same pair of
functions with their roles swapped.
"""
from __future__ import annotations
import numbers
from alloy import autograd, dtype as dt
from alloy.helpers import prod, strides_for_shape
from alloy.runtime.registry import get_device
from alloy.functional.window import computed, dilate, pad_spatial, strided, windows

def accumulator(d): return dt.float32 if d in (dt.float16, dt.bfloat16) else d

def _is_int(x) -> bool: return isinstance(x, numbers.Integral) and not isinstance(x, bool)

def int_tuple(v, nd: int, name: str, op: str, minimum: int) -> tuple:
  """An int or a sequence of nd ints, each at least `minimum`, as a tuple of nd ints."""
  t = (v,) * nd if _is_int(v) else tuple(v) if isinstance(v, (tuple, list)) else None
  if t is None or len(t) != nd or not all(_is_int(x) for x in t):
    raise TypeError(f"{op}: {name} must be an int or a sequence of {nd} ints, got {v!r}")
  t = tuple(int(x) for x in t)
  if any(x < minimum for x in t):
    raise ValueError(f"{op}: {name} must be {'non-negative' if minimum == 0 else 'positive'}, got {v!r}")
  return t

def _check(x, w, nd: int, op: str, groups, transposed=False):
  from alloy.tensor import Tensor
  for name, t in (("input", x), ("weight", w)):
    if not isinstance(t, Tensor): raise TypeError(f"{op}: {name} must be a Tensor, got {type(t).__name__}")
    if not t.dtype.is_float: raise TypeError(f"{op}: {name} must be floating point, got {t.dtype.name}")
  if x.device != w.device: raise ValueError(f"{op}: input is on {x.device}, weight on {w.device}")
  if w.ndim != nd + 2: raise ValueError(f"{op}: expected a {nd + 2}-D weight, got shape {w.shape}")
  if x.ndim not in (nd + 1, nd + 2):
    raise ValueError(f"{op}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, got shape {x.shape}")
  if not _is_int(groups) or groups < 1: raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
  c = x.shape[-nd - 1]
  if transposed:
    if w.shape[0] != c: raise ValueError(f"{op}: input has {c} channels, the weight {w.shape} expects {w.shape[0]}")
    if c % groups: raise ValueError(f"{op}: groups ({groups}) must divide the input's {c} channels")
  else:
    if w.shape[0] % groups: raise ValueError(f"{op}: groups ({groups}) must divide the weight's {w.shape[0]} output channels")
    if c != w.shape[1] * groups:
      raise ValueError(f"{op}: input has {c} channels, the weight {w.shape} with groups={groups} expects {w.shape[1] * groups}")

def _padding(padding, nd: int, kernel: tuple, stride: tuple, dilation: tuple, op: str) -> tuple:
  """((before, after), ...) per spatial axis; 'same' pads the extra element after, as PyTorch does."""
  if isinstance(padding, str):
    if padding == "valid": return ((0, 0),) * nd
    if padding != "same": raise ValueError(f"{op}: padding must be an int, a tuple, 'same' or 'valid', got {padding!r}")
    if any(s != 1 for s in stride): raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
    return tuple((d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2) for k, d in zip(kernel, dilation))
  return tuple((p, p) for p in int_tuple(padding, nd, "padding", op, 0))

def conv_forward(x, w, stride, pads, dilation, groups):
  """x (N, C, *S), w (Cout, C/groups, *K) -> (N, Cout, *O); no autograd."""
  nd = w.ndim - 2
  n, g, cg = x.shape[0], groups, w.shape[1]
  cout, kernel = w.shape[0], w.shape[2:]
  d = dt.promote_types(x.dtype, w.dtype)
  acc = accumulator(d)
  x = pad_spatial(computed(x.cast(d)), pads)
  # where kernels are loops over vector lanes (the CPU), a masked load of the padding breaks the vector loads along
  # a row: copying the padded input first (about the input's size, 2% of the convolution's time) makes the
  # forward 2.4x faster there (64 -> 64 channels, 56x56, 3x3: 13 -> 32 GFLOP/s on the 2-core VM)
  if any(p != (0, 0) for p in pads) and lane_device(x.device): x = x.contiguous()
  xw = windows(x.reshape((n, g, cg) + x.shape[2:]), kernel, stride, dilation)   # (N, G, Cg, *O, *K)
  o = xw.shape[3:3 + nd]
  sp, ks = tuple(range(3, 3 + nd)), tuple(range(3 + nd, 3 + 2 * nd))
  if im2col(x.device, cg, kernel, cout // g): return _forward_as_matmul(xw, w.cast(d))
  xw = xw.permute((0, 1) + sp + (2,) + ks).reshape((n, g, 1) + o + (cg,) + kernel)
  ww = w.cast(d).reshape((1, g, cout // g) + (1,) * nd + (cg,) + kernel)
  out = (xw.cast(acc) * ww.cast(acc)).sum(tuple(range(3 + nd, 4 + 2 * nd))).cast(d)
  return out.reshape((n, cout) + o)

IM2COL_MIN_DEPTH = 16   # a GPU convolution whose window (Cg x K) and output channels reach this runs as a matmul

def im2col(device: str, window_channels: int, kernel: tuple, out_channels: int) -> bool:
  """Whether a convolution (per group) runs as im2col and a matmul: on GPUs, where the matmul is big enough for the
  matrix engines' tiles to pay for the copy."""
  return not lane_device(device) and window_channels * prod(kernel) >= IM2COL_MIN_DEPTH and out_channels >= IM2COL_MIN_DEPTH

def _forward_as_matmul(xw, w):
  """A GPU convolution as im2col and a matmul: the window view copied out as an (N, G, Cg*K, O) matrix per image and
  group, whose rows are output positions in order, and the weight (G, Cout_g, Cg*K) times it, which leaves the output
  in its own (N, Cout, *O) layout. The copy costs the window's bytes (9x the input for 3x3), but the product then runs
  on the matrix engines (codegen/matmul.py takes plain strided operands only), where the reduction over the window
  view ran on the CUDA cores (2 TFLOP/s for 64 -> 64 channels at 56x56 on an H200). Output positions innermost make
  the copy read the input along its rows as it writes: threads side by side read neighbours (with positions outer
  and the window inner, they read a channel plane apart)."""
  n, g, cg = xw.shape[:3]
  o, kernel, sp, ks = _window_axes(xw)
  depth = cg * prod(kernel)
  # copied in the window view's own axes (N, G, Cg, *K, *O), then merged: a thread's lanes stay within one row of
  # one window offset, where an index over the merged axes would divide and take remainders lane by lane
  cols = xw.permute((0, 1, 2) + ks + sp).contiguous().reshape(n, g, depth, prod(o))
  cout = w.shape[0]
  out = w.reshape(g, cout // g, depth) @ cols   # (N, G, Cout_g, O), float32 sums for halves
  return out.reshape((n, cout) + o)

def _window_rows(xw) -> tuple:
  """(the window view (N, G, Cg, *O, *K) as rows (N, G, O, Cg*K), still a view; O's axes): im2col's matrix."""
  n, g, cg = xw.shape[:3]
  o, kernel, sp, ks = _window_axes(xw)
  return xw.permute((0, 1) + sp + (2,) + ks).reshape(n, g, prod(o), cg * prod(kernel)), o

def _window_axes(xw) -> tuple:
  """Of a window view (N, G, Cg, *O, *K): (O's sizes, K's sizes, O's axes, K's axes)."""
  nd = (xw.ndim - 3) // 2
  return xw.shape[3:3 + nd], xw.shape[3 + nd:], tuple(range(3, 3 + nd)), tuple(range(3 + nd, 3 + 2 * nd))

def conv_input_grad(gy, w, in_spatial: tuple, stride, pads_before, dilation, groups):
  """The input gradient of conv_forward, gy (N, Cout, *O) -> (N, C, *in_spatial): a stride-1 convolution of gy,
  dilated by the stride and padded, with the flipped weight, its channel axes swapped per group."""
  nd = w.ndim - 2
  cout, cg, kernel = w.shape[0], w.shape[1], w.shape[2:]
  o = gy.shape[2:]
  gy = computed(gy)
  for i, s in enumerate(stride): gy = dilate(gy, 2 + i, s)
  pads = tuple((d * (k - 1) - pb, n + pb - (m - 1) * s - 1) for k, d, pb, n, m, s in zip(kernel, dilation, pads_before, in_spatial, o, stride))
  wt = w.reshape((groups, cout // groups, cg) + kernel).transpose(1, 2).reshape((groups * cg, cout // groups) + kernel)
  wt = wt.flip(tuple(range(2, 2 + nd)))
  # the im2col matmul reads the weight as a matrix, which a flipped view (negative strides) is not: copied once
  if im2col(w.device, cout // groups, kernel, cg): wt = wt.contiguous()
  return conv_forward(gy, wt, (1,) * nd, pads, dilation, groups)

WEIGHT_GRAD_CHUNK = 1024   # positions per partial sum of the matmul-shaped weight gradient (see _weight_grad_as_matmul)

def lane_device(device: str) -> bool:
  """Whether the device runs a kernel as loops whose innermost outputs are vector lanes (the CPU), not threads."""
  return not get_device(device).caps.threads

def conv_weight_grad(x, gy, w_shape: tuple, stride, pads, dilation, groups):
  """The weight gradient of conv_forward: gw[co, ci, k] = sum over the batch and the output positions of the input's
  window element times gy; one reduction over the input's window view."""
  nd = len(w_shape) - 2
  n, g, cg, kernel = x.shape[0], groups, w_shape[1], tuple(w_shape[2:])
  cog = w_shape[0] // g
  d = dt.promote_types(x.dtype, gy.dtype)
  acc = accumulator(d)
  x = pad_spatial(computed(x.cast(d)), pads)
  if lane_device(x.device):
    # a strided convolution's weight gradient is the stride-1 one of gy dilated by the stride (zeros between its
    # elements): s^nd times the multiply-adds, still about 3x faster on the CPU than the generic reduction below
    gy = computed(gy.cast(d))
    for i, s in enumerate(stride): gy = dilate(gy, 2 + i, s)
    return _weight_grad_as_matmul(x, gy, w_shape, dilation, groups, acc)
  xw = windows(x.reshape((n, g, cg) + x.shape[2:]), kernel, stride, dilation)   # (N, G, Cg, *O, *K)
  o = gy.shape[2:]
  if xw.shape[3:3 + nd] != o: xw = xw.shrink(tuple((0, s) for s in xw.shape[:3]) + tuple((0, m) for m in o) + tuple((0, k) for k in kernel))
  sp, ks = tuple(range(3, 3 + nd)), tuple(range(3 + nd, 3 + 2 * nd))
  if im2col(x.device, cg, kernel, cog): return _weight_grad_as_gpu_matmul(xw, computed(gy.cast(d)), w_shape, acc)
  # computed as (G, Cg, *K, Cout_g), the output channels innermost: a register tile of input channels times output
  # channels, each loaded element serving a row or a column of it (matmul's), then viewed as the weight's layout
  xw = xw.permute((1, 2) + ks + (0,) + sp).reshape((g, cg) + kernel + (1, n) + o)
  gg = computed(gy.cast(d)).reshape((n, g, cog) + o).permute((1, 2, 0) + tuple(range(3, 3 + nd)))
  gg = gg.reshape((g, 1) + (1,) * nd + (cog, n) + o)
  gw = (xw.cast(acc) * gg.cast(acc)).sum(tuple(range(3 + nd, 4 + 2 * nd))).cast(d)   # (G, Cg, *K, Cout_g)
  return gw.permute((0, 2 + nd, 1) + tuple(range(2, 2 + nd))).reshape(w_shape)

WEIGHT_GRAD_BLOCKS = 264   # the GPU weight gradient's partial products: about two waves of 64 x 64 tiles on an H200

def _weight_grad_as_gpu_matmul(xw, gy, w_shape: tuple, acc):
  """The weight gradient on a GPU as matmuls: gw[g] = gy[g] (Cout_g, L) @ cols[g] (L, Cg*K) over the L = N*O
  positions, with the windows copied out as rows (the forward's im2col again). The product is small and L long, so
  it is cut into P chunks of L whose partial products (float32) run side by side as one batched matmul, then added."""
  rows, o = _window_rows(xw)
  n, g, positions, depth = rows.shape
  nd, cog = len(o), w_shape[0] // g
  length = n * positions
  tiles = -(-cog // 64) * -(-depth // 64)
  parts = max(1, min(-(-WEIGHT_GRAD_BLOCKS // tiles), length // 256))
  chunk = -(-length // parts)
  extra = parts * chunk - length   # zero positions past the end, so the chunks divide them
  cols = rows.permute(1, 0, 2, 3).reshape(g, length, depth).pad(((0, 0), (0, extra), (0, 0)))
  cols = cols.reshape(g, parts, chunk, depth).contiguous()
  gt = gy.reshape((n, g, cog) + o).permute((1, 2, 0) + tuple(range(3, 3 + nd))).reshape(g, cog, length).pad(((0, 0), (0, 0), (0, extra)))
  gt = gt.reshape(g, cog, parts, chunk).permute(0, 2, 1, 3).contiguous()   # (G, P, Cout_g, chunk)
  partial = gt.cast(acc) @ cols.cast(acc)   # (G, P, Cout_g, Cg*K): the 16-bit operands widen inside the matmul
  return (partial.sum(1) if parts > 1 else partial.reshape(g, cog, depth)).cast(gy.dtype).reshape(w_shape)

def _weight_grad_as_matmul(xp, gy, w_shape: tuple, dilation, groups, acc):
  """The stride-1 weight gradient (gy already dilated for a strided one) as one matmul-shaped reduction, for lane
  devices: with the padded input and gy (zero-padded to the same grid) flattened over (batch, *grid) into one axis
  j, gw[co, ci, k] = sum_j gy[co, j] * x[ci, j + shift(k)], shift(k) = sum_i k_i * dilation_i * (grid row stride)_i.
  A shift that runs past a row or an image meets gy's zero padding. One reduction axis, gy laid out (j, co): the CPU's matmul register tile
  with vector loads along co (64 -> 64 channels, 56x56, 3x3: 2-3 -> 26 GFLOP/s on the 2-core VM), where the
  three-axis reduction ran scalar multiply-adds."""
  nd, (n, g, cg), kernel = len(w_shape) - 2, (xp.shape[0], groups, w_shape[1]), tuple(w_shape[2:])
  cog = w_shape[0] // g
  grid = xp.shape[2:]
  p = prod(grid)
  rows = strides_for_shape(grid)
  span = sum((k - 1) * dl * r for k, dl, r in zip(kernel, dilation, rows))
  # the positions j whose every shift stays inside the flattened input (the rest are gy's padding), in chunks of
  # WEIGHT_GRAD_CHUNK summed apart, then the partial sums added: one chunk of both operands stays in cache while every
  # register tile passes over it (batch 64 at 56x56: 5.8 -> 28 GFLOP/s on the 2-core VM)
  chunk = WEIGHT_GRAD_CHUNK if n * p - span > 4 * WEIGHT_GRAD_CHUNK else n * p - span
  chunks = -(-(n * p - span) // chunk)
  extra = chunks * chunk + span - n * p   # zeros after the last image, so the chunks divide the positions
  length = n * p + extra
  # x as (G, Cg, N * grid) and gy as (G, N * grid, Cout_g), both contiguous copies (input- and output-sized)
  xt = xp.reshape((n, g, cg) + grid).permute((1, 2, 0) + tuple(range(3, 3 + nd))).reshape(g, cg, n * p)
  xt = xt.pad(((0, 0), (0, 0), (0, extra))).contiguous()
  gp = pad_spatial(computed(gy), tuple((0, s - o) for s, o in zip(grid, gy.shape[2:])))
  gt = gp.reshape((n, g, cog) + grid).permute((1, 0) + tuple(range(3, 3 + nd)) + (2,)).reshape(g, n * p, cog)
  gt = gt.pad(((0, 0), (0, extra), (0, 0))).contiguous()
  a = strided(xt, (chunks, g, cg) + kernel + (1, chunk),
              (chunk, cg * length, length) + tuple(dl * r for dl, r in zip(dilation, rows)) + (0, 1))
  b = gt.shrink(((0, g), (0, chunks * chunk), (0, cog))).reshape(g, chunks, chunk, cog).permute(1, 0, 3, 2)
  b = b.reshape((chunks, g, 1) + (1,) * nd + (cog, chunk))
  partial = (a.cast(acc) * b.cast(acc)).sum(-1)   # (chunks, G, Cg, *K, Cout_g)
  gw = (partial.contiguous().sum(0) if chunks > 1 else partial.reshape(partial.shape[1:])).cast(xp.dtype).reshape((g, cg) + kernel + (cog,))
  return gw.permute((0, 2 + nd, 1) + tuple(range(2, 2 + nd))).reshape(w_shape)

def _conv_rule(out, gy, x, w, stride, pads, dilation, groups):
  gx = conv_input_grad(gy, w, x.shape[2:], stride, tuple(p[0] for p in pads), dilation, groups)
  return gx, conv_weight_grad(x, gy, w.shape, stride, pads, dilation, groups)

def _transposed_rule(out, gy, x, w, stride, pads, dilation, groups):
  gx = conv_forward(gy, w, stride, pads, dilation, groups)
  if gx.shape[2:] != x.shape[2:]: gx = gx.shrink(tuple((0, s) for s in x.shape))
  return gx, conv_weight_grad(gy, x, w.shape, stride, pads, dilation, groups)

def _with_grad(out, rule, x, w, *args):
  if (x._ag is None and w._ag is None) or not autograd.is_grad_enabled(): return out
  return autograd.record(out, rule, (x, w), x.detach(), w.detach(), *args)

def _add_bias(out, bias, nd: int, op: str):
  if bias is None: return out
  if bias.shape != (out.shape[1],): raise ValueError(f"{op}: bias must have shape ({out.shape[1]},), got {bias.shape}")
  return out + bias.reshape((out.shape[1],) + (1,) * nd)

def conv(x, weight, bias, stride, padding, dilation, groups, nd: int, op: str):
  _check(x, weight, nd, op, groups)
  groups, kernel = int(groups), weight.shape[2:]
  stride, dilation = int_tuple(stride, nd, "stride", op, 1), int_tuple(dilation, nd, "dilation", op, 1)
  pads = _padding(padding, nd, kernel, stride, dilation, op)
  unbatched = x.ndim == nd + 1
  if unbatched: x = x.unsqueeze(0)
  for n, (b, a), k, d, i in zip(x.shape[2:], pads, kernel, dilation, range(nd)):
    if n + b + a < d * (k - 1) + 1:
      raise ValueError(f"{op}: the (padded) input's size {n + b + a} along spatial dim {i} is smaller than the dilated kernel's {d * (k - 1) + 1}")
  with autograd.no_grad(): out = conv_forward(x.detach(), weight.detach(), stride, pads, dilation, groups)
  out = _add_bias(_with_grad(out, _conv_rule, x, weight, stride, pads, dilation, groups), bias, nd, op)
  return out.squeeze(0) if unbatched else out

def conv_transpose(x, weight, bias, stride, padding, output_padding, groups, dilation, nd: int, op: str):
  _check(x, weight, nd, op, groups, transposed=True)
  groups, kernel = int(groups), weight.shape[2:]
  stride, dilation = int_tuple(stride, nd, "stride", op, 1), int_tuple(dilation, nd, "dilation", op, 1)
  if isinstance(padding, str): raise ValueError(f"{op}: padding must be an int or a tuple of ints, got {padding!r}")
  padding, output_padding = int_tuple(padding, nd, "padding", op, 0), int_tuple(output_padding, nd, "output_padding", op, 0)
  for p, s, d in zip(output_padding, stride, dilation):
    if p >= s and p >= d: raise ValueError(f"{op}: output_padding ({p}) must be smaller than either stride ({s}) or dilation ({d})")
  unbatched = x.ndim == nd + 1
  if unbatched: x = x.unsqueeze(0)
  size = tuple((i - 1) * s - 2 * p + d * (k - 1) + q + 1 for i, s, p, d, k, q in zip(x.shape[2:], stride, padding, dilation, kernel, output_padding))
  if any(n <= 0 for n in size): raise ValueError(f"{op}: the output size {size} is not positive")
  cog = weight.shape[1]
  with autograd.no_grad():
    out = conv_input_grad(x.detach(), weight.detach(), size, stride, padding, dilation, groups)
  pads = tuple((p, p) for p in padding)
  out = _add_bias(_with_grad(out, _transposed_rule, x, weight, stride, pads, dilation, groups), bias, nd, op)
  assert out.shape[1] == cog * groups
  return out.squeeze(0) if unbatched else out

def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
  return conv(input, weight, bias, stride, padding, dilation, groups, 1, "conv1d")
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
  return conv(input, weight, bias, stride, padding, dilation, groups, 2, "conv2d")
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
  return conv(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
  return conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 1, "conv_transpose1d")
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
  return conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 2, "conv_transpose2d")
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
  return conv_transpose(input, weight, bias, stride, padding, output_padding, groups, dilation, 3, "conv_transpose3d")
