"""What the fused attention kernel (renderer/cuda_attention.py) takes of an ATTENTION kernel, and which devices and
operands it serves.

The kernel is FlashAttention-2's forward pass on mma.sync tensor cores: a threadgroup owns 64 query rows, walks the
keys 64 at a time with a running max and sum per row (online softmax), and never stores the scores. So its operands
are 16-bit floats (float16 or bfloat16, accumulated in float32), its head size a multiple of 16 up to 128, and it
needs a device whose `caps.tensor_cores` lists mma.sync. `ALLOY_FUSED_ATTENTION=0` turns it off (attention is then its
two matmuls and the softmax between them).
"""
from __future__ import annotations
from dataclasses import dataclass
from alloy import dtype as dt
from alloy.caps import DeviceCaps
from alloy.helpers import getenv, prod, strides_for_shape
from alloy.ir.attention import RowLayout, row_layout
from alloy.ir.kernel import KernelAST
from alloy.ir.ops import Op
from alloy.codegen.tensor_core import MMA_SYNC

DTYPES = (dt.float16, dt.bfloat16)
MAX_HEAD = 128   # past it a thread's accumulators (64 + the scores' 32 floats at 128) would spill

def fits(caps: DeviceCaps, dtype, head: int) -> bool:
  """Whether a device with caps runs the fused kernel for operands of dtype with head size `head`."""
  return (MMA_SYNC in caps.tensor_cores and dtype in DTYPES and head % 16 == 0 and 16 <= head <= MAX_HEAD
          and bool(getenv("ALLOY_FUSED_ATTENTION", 1)))

@dataclass(frozen=True)
class AttentionSpec:
  """One ATTENTION kernel: q (*lead, L, D), k and v (*lead, S, D), each read from buffer `slots[i]` through
  `layouts[i]`; the output element (*lead, i, d) written to buffer 0 through `out`: (*lead, L, D) contiguous, or with
  heads_inside (ir/attention.py) (*lead[:-1], L, lead[-1], D)."""
  dtype: dt.DType
  lead: tuple
  L: int
  S: int
  D: int
  scale: float
  causal: bool
  slots: tuple
  layouts: tuple[RowLayout, ...]
  out: RowLayout
  n_buffers: int

  @property
  def flops(self) -> int:
    """The two matmuls' multiply-adds, halved under a causal mask (the kernel skips the blocks it hides)."""
    full = 4 * prod(self.lead) * self.L * self.S * self.D
    return full // 2 if self.causal else full

  @property
  def bytes(self) -> int: return (2 * self.L + 2 * self.S) * self.D * prod(self.lead) * self.dtype.itemsize

def attention_spec(ast: KernelAST) -> AttentionSpec | str:
  """The kernel's spec, or why the fused kernel cannot take it."""
  root = ast.root
  if root.op is not Op.ATTENTION: return f"the kernel computes {root.op.name}, not ATTENTION"
  (scale, causal, heads_inside), (q, k, v) = root.arg, root.src
  if len({q.dtype, k.dtype, v.dtype}) != 1 or q.dtype not in DTYPES:
    return f"attention on {q.dtype.name}, {k.dtype.name}, {v.dtype.name}: the fused kernel takes one of float16 or bfloat16"
  *lead, L, D = q.shape
  if k.shape != (*lead, k.shape[-2], D) or v.shape != k.shape:
    return f"attention shapes {q.shape}, {k.shape}, {v.shape}: the fused kernel takes (*lead, L, D), (*lead, S, D), (*lead, S, D)"
  if D % 16 or not 16 <= D <= MAX_HEAD: return f"head size {D}: the fused kernel takes multiples of 16 up to {MAX_HEAD}"
  slots, layouts = [], []
  for name, x in zip("qkv", (q, k, v)):
    inp = x.src[0] if x.op is Op.VIEW else x
    layout = row_layout(x.arg, x.dtype.itemsize) if x.op is Op.VIEW else None
    if inp.op is not Op.INPUT or layout is None: return f"operand {name} is not read as aligned rows of a buffer (ir/attention.py)"
    slots.append(inp.arg)
    layouts.append(layout)
  return AttentionSpec(q.dtype, tuple(lead), L, k.shape[-2], D, scale, causal, tuple(slots), tuple(layouts),
                       output_layout(tuple(lead), L, D, heads_inside), ast.n_buffers)

def output_layout(lead: tuple, L: int, D: int, heads_inside: bool) -> RowLayout:
  """Where output element (*lead, i, d) lies: (*lead, L, D) contiguous, or (*lead[:-1], L, lead[-1], D)."""
  if not heads_inside or not lead: return RowLayout(0, strides_for_shape(lead + (L, D))[:-2], D)
  heads = lead[-1]
  return RowLayout(0, strides_for_shape(lead[:-1] + (L, heads, D))[:-3] + (D,), heads * D)
