"""Sliding windows as views: convolution and pooling read their input through one strided view instead of a
copied im2col buffer, and the adjoint of that view (its gradient) as a sum of shifted views of the gradient."""
from __future__ import annotations
import itertools
from alloy import autograd
from alloy.helpers import strides_for_shape
from alloy.ir.node import Node
from alloy.ir.ops import Op
from alloy.ir.view import ShapeTracker, View

def out_size(n: int, k: int, s: int, d: int) -> int: return (n - d * (k - 1) - 1) // s + 1

def computed(x):
  """x, or a contiguous copy of it when it is work that a window view would redo once per window element."""
  n = x.node
  base = n.src[0] if n.op is Op.VIEW else n
  return x if base.op in (Op.BUFFER, Op.CONTIGUOUS) else x.contiguous()

def pad_spatial(x, pads: tuple, value=0.0):
  """x padded (pads[i] = (before, after) >= 0) or cropped (< 0) along its last len(pads) axes."""
  lead = ((0, 0),) * (x.ndim - len(pads))
  if any(b < 0 or a < 0 for b, a in pads):
    x = x.shrink(tuple((0, s) for s in x.shape[:len(lead)]) +
                 tuple((max(0, -b), s - max(0, -a)) for (b, a), s in zip(pads, x.shape[len(lead):])))
    pads = tuple((max(0, b), max(0, a)) for b, a in pads)
  return x if all(p == (0, 0) for p in pads) else x.pad(lead + pads, value=value)

def windows(x, kernel: tuple, stride: tuple, dilation: tuple):
  """x (..., *spatial) -> (..., *out, *kernel) with [..., o, k] = x[..., o*stride + k*dilation]. A view: it launches
  nothing, and the kernel reading it indexes x directly (the index algebra folds the view stack back to x's own)."""
  nd = len(kernel)
  if x._ag is not None:
    return autograd.record(windows(x.detach(), kernel, stride, dilation), window_rule, (x,), kernel, stride, dilation, x.shape)
  lead, spatial = x.shape[:-nd], x.shape[-nd:]
  out = tuple(out_size(n, k, s, d) for n, k, s, d in zip(spatial, kernel, stride, dilation))
  rows = strides_for_shape(x.shape)
  strides = rows[:len(lead)] + tuple(r * s for r, s in zip(rows[len(lead):], stride)) + tuple(r * d for r, d in zip(rows[len(lead):], dilation))
  return strided(x, lead + out + kernel, strides)

def strided(x, shape: tuple, strides: tuple):
  """A view of x's elements in row-major order, element [i...] at sum(i * strides) (strides may overlap): pushed
  over x's own tracker, so x is still read in place. No autograd: callers record their own rule."""
  n = x.node
  base, st = (n.src[0], n.arg) if n.op is Op.VIEW else (n, ShapeTracker.contiguous(x.shape))
  st = ShapeTracker(st.views + (View.create(shape, strides, 0),)).simplify()
  return x._new(Node(Op.VIEW, (base,), st, x.dtype, tuple(shape)))

def dilate(g, axis: int, s: int):
  """s-1 zeros between the elements of one axis: (n,) -> ((n-1)*s + 1,)."""
  if s == 1 or g.shape[axis] == 0: return g
  pre, n, post = g.shape[:axis], g.shape[axis], g.shape[axis + 1:]
  t = g.reshape(pre + (n, 1) + post).pad(((0, 0),) * len(pre) + ((0, 0), (0, s - 1)) + ((0, 0),) * len(post))
  t = t.reshape(pre + (n * s,) + post)
  return t.shrink(tuple((0, (n - 1) * s + 1) if i == axis else (0, d) for i, d in enumerate(t.shape)))

def window_adjoint(g, in_spatial: tuple, kernel: tuple, stride: tuple, dilation: tuple):
  """The gradient of windows(): g (..., *out, *kernel) -> (..., *in_spatial), each input element the sum of the
  window elements that read it. Windows that tile the input (stride == kernel, no dilation) are a reshape;
  otherwise one shifted, dilated view of g per kernel position, added up (elementwise: one fused kernel)."""
  nd = len(kernel)
  # g's values, stored: the padded views below would otherwise evaluate g's expression at the padding's
  # out-of-range indices, whose loads the lowering does not guard (a masked view over a computed value)
  g = computed(g)
  lead = g.shape[:-2 * nd]
  out = g.shape[len(lead):len(lead) + nd]
  if all(s == k and d == 1 for s, k, d in zip(stride, kernel, dilation)):
    order = tuple(range(len(lead))) + tuple(x for i in range(nd) for x in (len(lead) + i, len(lead) + nd + i))
    t = g.permute(order).reshape(lead + tuple(o * k for o, k in zip(out, kernel)))
    return pad_spatial(t, tuple((0, n - o * k) for n, o, k in zip(in_spatial, out, kernel)))
  total = None
  for ks in itertools.product(*(range(k) for k in kernel)):
    part = g.shrink(tuple((0, s) for s in g.shape[:-nd]) + tuple((k, k + 1) for k in ks)).reshape(lead + out)
    for i, s in enumerate(stride): part = dilate(part, len(lead) + i, s)
    pads = tuple((k * d, n - k * d - ((o - 1) * s + 1)) for k, d, n, o, s in zip(ks, dilation, in_spatial, out, stride))
    part = pad_spatial(part, pads)
    total = part if total is None else total + part
  return total

def window_rule(out, g, kernel, stride, dilation, in_shape):
  return (window_adjoint(g, in_shape[-len(kernel):], kernel, stride, dilation),)
