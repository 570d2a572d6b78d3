"""Contractions: the reductions that are matmuls or convolutions, which the schedule gives kernels of their own
(fusion.py) and splits along K where they have few outputs (split.py)."""
from __future__ import annotations
from alloy.ir.node import Node
from alloy.ir.ops import Op

def is_contraction(red: Node) -> bool:
  """A matmul or convolution: a sum of products of two operands (through casts), each the same along an output axis
  the other varies along (A[m, k] * B[k, n]; a window view times a weight), not a row's dot product. It gets its own
  kernel (the register tile, the matmul lowerings, the matrix engines) where its consumer is a reduction (nested in
  a softmax's max and sum over attention scores it was recomputed for each: GPT-2 prefill 8x1024 took 7.6 s on the
  H200) or broadcasts it further (conv2's input gradient inside a max-pool's backward ran as that kernel's scalar
  loop: 1.5 ms of the digits CNN step; cut, 0.10 ms plus 0.14 ms for the pool's backward). An elementwise consumer
  still fuses into it as its epilogue."""
  if (body := product(red)) is None: return False
  kept = [a for a in range(len(body.shape)) if a not in red.arg[1] and body.shape[a] != 1]
  def constant_axes(x: Node) -> set:
    while x.op is Op.CAST: x = x.src[0]
    if x.op is not Op.VIEW: return set()
    v = x.arg.views[-1]
    return {a for a in kept if v.strides[a] == 0 and (v.mask is None or v.mask[a] == (0, v.shape[a]))}
  a, b = constant_axes(body.src[0]), constant_axes(body.src[1])
  return bool(a) and bool(b) and a != b

def product(red: Node) -> Node | None:
  """The MUL of two operands a sum reduces (through casts), or None where it reduces anything else."""
  if red.arg[0] is not Op.ADD: return None
  body = red.src[0]
  while body.op is Op.CAST: body = body.src[0]
  return body if body.op is Op.MUL and len(body.src) == 2 else None
