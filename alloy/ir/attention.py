"""The ATTENTION node: softmax(q k^T * scale, causal or masked) v as one op, for a device with a fused kernel for it.

The front end makes one only where the device declares the kernel (functional/attention.py); elsewhere attention is
its two matmuls and the softmax between them. Its contract with the schedule and the kernels:
- sources (q, k, v): shapes (*lead, L, D), (*lead, S, D), (*lead, S, D), one dtype; arg (scale, causal, heads_inside);
  the node's dtype is the operands', its shape (*lead, L, D), or with heads_inside (*lead[:-1], L, lead[-1], D): the
  rows of every head of a position side by side, as a model's output projection reads them (FlashAttention's layout;
  the front end hands out the node transposed back, so a reshape to (..., L, heads * D) is a view). Causal is
  PyTorch's is_causal: query i sees keys j <= i. An optional fourth source is a boolean attn_mask of shape
  (*lead, L, S), True where a query sees a key (a decode step's `keys <= pos` over a fixed-size KV cache).
- the kernel reads each operand as rows: one strided view, unit stride along D, its offset and other strides whole
  multiples of 16 bytes (`row_layout`); the mask as any one strided view (`mask_layout`: broadcast over heads and
  batch, a stride of 0). The schedule hands it its operands so: a view of a stored value that is laid out like that
  is read in place (q, k and v as slices of one projection's output), anything else is stored first.
"""
from __future__ import annotations
from dataclasses import dataclass
from alloy.helpers import prod
from alloy.ir.node import Node
from alloy.ir.ops import Op
from alloy.ir.view import ShapeTracker

ROW_ALIGN_BYTES = 16   # the copy a kernel loads its tiles with (cp.async) moves 16 aligned bytes

def attention_node(q: Node, k: Node, v: Node, scale: float, causal: bool, heads_inside: bool = False, attn_mask: Node | None = None) -> Node:
  *lead, L, D = q.shape
  shape = (*lead[:-1], L, lead[-1], D) if heads_inside else q.shape
  src = (q, k, v) if attn_mask is None else (q, k, v, attn_mask)
  return Node(Op.ATTENTION, src, (float(scale), bool(causal), bool(heads_inside)), q.dtype, tuple(shape))

def read_view(n: Node) -> tuple[Node, ShapeTracker]:
  """(the node a kernel reads n from, the view it reads it through), as the schedule builds a kernel's input: views
  composed down to their base, a buffer's view over its flat elements, a computed base's over its stored shape."""
  views = []
  while n.op is Op.VIEW:
    views.append(n.arg)
    n = n.src[0]
  st = None if n.op is Op.BUFFER else ShapeTracker.contiguous((prod(n.shape),)).reshape(n.shape)
  for v in reversed(views): st = v if st is None else st.compose(v)
  return n, st if st is not None else ShapeTracker.contiguous(n.shape)

@dataclass(frozen=True)
class RowLayout:
  """An operand read as rows: element (*lead, i, d) at offset + sum(lead index * lead stride) + i * row_stride + d."""
  offset: int
  lead_strides: tuple
  row_stride: int

def row_layout(st: ShapeTracker, itemsize: int) -> RowLayout | None:
  """st as an ATTENTION kernel reads it, or None where it cannot (several views, a mask, D not contiguous, a stride or
  the offset not whole multiples of ROW_ALIGN_BYTES)."""
  if len(st.views) != 1 or (v := st.views[0]).mask is not None or len(v.shape) < 2: return None
  if v.strides[-1] != 1 and v.shape[-1] != 1: return None
  step = ROW_ALIGN_BYTES // itemsize
  if any(s % step for s in (v.offset, *v.strides[:-1])) or v.shape[-1] % step: return None
  return RowLayout(v.offset, v.strides[:-2], v.strides[-2])

@dataclass(frozen=True)
class MaskLayout:
  """A boolean attn_mask read element by element: (*lead, i, j) at offset + sum(lead index * lead stride) + i *
  row_stride + j * key_stride."""
  offset: int
  lead_strides: tuple
  row_stride: int
  key_stride: int

def mask_layout(st: ShapeTracker) -> MaskLayout | None:
  """st as a kernel reads an attn_mask through it, or None where it cannot (several views, a padding mask)."""
  if len(st.views) != 1 or (v := st.views[0]).mask is not None or len(v.shape) < 2: return None
  return MaskLayout(v.offset, v.strides[:-2], v.strides[-2], v.strides[-1])

def stored_operand(s: Node) -> Node | None:
  """What the schedule stores for the ATTENTION operand s: nothing where s reads a buffer in row layout (a mask: in
  any one view), s's base where s reads that so once stored (a slice of a projection's output), else s itself (a
  contiguous copy)."""
  base, st = read_view(s)
  if (mask_layout(st) if s.dtype.is_bool else row_layout(st, s.dtype.itemsize)) is None: return s
  return None if base.op is Op.BUFFER else base
