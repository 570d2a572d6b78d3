"""What the fused attention kernels take of an ATTENTION kernel, and which devices and operands they serve.

All are FlashAttention's online softmax: a running max and sum per query row while the keys stream past, the scores
never stored. Which kernel takes an ATTENTION node:
- a few query rows (at most ROWS_MAX_L: a decode step's one), or a boolean attn_mask (renderer/cuda_attention_rows.py):
  a threadgroup per query row, its keys split among groups of threads that each hold one key's row across their lanes;
  float16, bfloat16 and float32, accumulating in float32; head sizes a multiple of one 16-byte load up to 128; any
  CUDA device (SIMT_F32 in its caps);
- else float16 and bfloat16 (renderer/cuda_attention.py): FlashAttention-2's tiles on mma.sync tensor cores; head
  sizes a multiple of 16 up to 128; a device whose `caps.tensor_cores` lists mma.sync;
- else float32 (renderer/cuda_attention_f32.py): the same tiles on the CUDA cores in exact float32; head sizes a
  multiple of 32 up to 128; a CUDA device whose opt-in shared memory holds the kernel's tiles.
`ALLOY_FUSED_ATTENTION=0` turns them off (attention is then its two matmuls and the softmax between them).
"""
from __future__ import annotations
from dataclasses import dataclass
from alloy import dtype as dt
from alloy.caps import DeviceCaps
from alloy.helpers import getenv, prod, strides_for_shape
from alloy.ir.attention import MaskLayout, RowLayout, mask_layout, row_layout
from alloy.ir.kernel import KernelAST
from alloy.ir.ops import Op
from alloy.codegen.tensor_core import MMA_SYNC, SIMT_F32

MMA_DTYPES = (dt.float16, dt.bfloat16)
DTYPES = (*MMA_DTYPES, dt.float32)
MAX_HEAD = 128   # past it a thread's accumulators would spill (16-bit: 64 + the scores' 32 floats at 128)
ROWS_MAX_L = 8   # query rows at most for the row kernel: past it the tiled kernels, which read k and v once per 64 rows
                 # where the row kernel reads them once per row (a mask then keeps attention composed)

def takes_rows(L: int, masked: bool) -> bool:
  """Whether the row kernel takes an attention of L query rows (masked: with a boolean attn_mask)."""
  return masked or L <= ROWS_MAX_L

def head_step(dtype, rows: bool = False) -> int:
  """Head sizes a kernel for dtype takes are multiples of this: the row kernel's one 16-byte load per lane; mma's k
  of 16; a float32 tile thread's 4 columns of 8."""
  if rows: return 16 // dtype.itemsize
  return 16 if dtype in MMA_DTYPES else 32

def fits(caps: DeviceCaps, dtype, head: int, L: int, masked: bool = False) -> bool:
  """Whether a device with caps runs a fused kernel for L query rows of dtype with head size `head` (masked: with a
  boolean attn_mask, which only the row kernel takes, for at most ROWS_MAX_L rows)."""
  rows = takes_rows(L, masked)
  if not getenv("ALLOY_FUSED_ATTENTION", 1) or dtype not in DTYPES or head % head_step(dtype, rows) or not 0 < head <= MAX_HEAD: return False
  if masked and L > ROWS_MAX_L: return False
  if rows: return SIMT_F32 in caps.tensor_cores
  if dtype in MMA_DTYPES: return MMA_SYNC in caps.tensor_cores
  return SIMT_F32 in caps.tensor_cores and caps.dynamic_shared_bytes >= f32_shared_bytes(head)

F32_THREADS, F32_BLOCK_N = 128, 64   # the float32 kernel's threadgroup and key block

def f32_rows_per_thread(D: int) -> int:
  """A float32 thread's query rows: 8 up to D = 64, 4 past it (its registers hold R x 8 scores and R x D / 8 outputs);
  a threadgroup's 16 x R."""
  return 8 if D <= 64 else 4

def f32_shared_bytes(D: int) -> int:
  """The float32 kernel's shared memory: q's 16 R rows and k's 64 (padded by 4 floats), v's 64, P's 16 R x 72."""
  bm = 16 * f32_rows_per_thread(D)
  return 4 * ((bm + F32_BLOCK_N) * (D + 4) + F32_BLOCK_N * D + bm * (F32_BLOCK_N + 8))

@dataclass(frozen=True)
class AttentionSpec:
  """One ATTENTION kernel: q (*lead, L, D), k and v (*lead, S, D), each read from buffer `slots[i]` through
  `layouts[i]`; the output element (*lead, i, d) written to buffer 0 through `out`: (*lead, L, D) contiguous, or with
  heads_inside (ir/attention.py) (*lead[:-1], L, lead[-1], D). attn_mask: where a boolean mask (*lead, L, S) lies,
  from buffer `slots[3]`, or None."""
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
  attn_mask: MaskLayout | None = None

  @property
  def rows(self) -> bool:
    """Whether the row kernel takes it (renderer/cuda_attention_rows.py)."""
    return takes_rows(self.L, self.attn_mask is not None)

  @property
  def flops(self) -> int:
    """The two matmuls' multiply-adds, halved under a causal mask (the kernel skips the blocks it hides)."""
    full = 4 * prod(self.lead) * self.L * self.S * self.D
    return full // 2 if self.causal else full

  @property
  def bytes(self) -> int:
    mask = prod(self.lead) * self.L * self.S if self.attn_mask is not None else 0
    return (2 * self.L + 2 * self.S) * self.D * prod(self.lead) * self.dtype.itemsize + mask

def attention_spec(ast: KernelAST) -> AttentionSpec | str:
  """The kernel's spec, or why the fused kernel cannot take it."""
  root = ast.root
  if root.op is not Op.ATTENTION: return f"the kernel computes {root.op.name}, not ATTENTION"
  (scale, causal, heads_inside), (q, k, v), masks = root.arg, root.src[:3], root.src[3:]
  if len({q.dtype, k.dtype, v.dtype}) != 1 or q.dtype not in DTYPES:
    return f"attention on {q.dtype.name}, {k.dtype.name}, {v.dtype.name}: the fused kernels take one of float16, bfloat16 or float32"
  *lead, L, D = q.shape
  if k.shape != (*lead, k.shape[-2], D) or v.shape != k.shape:
    return f"attention shapes {q.shape}, {k.shape}, {v.shape}: the fused kernel takes (*lead, L, D), (*lead, S, D), (*lead, S, D)"
  rows = takes_rows(L, bool(masks))
  if masks and L > ROWS_MAX_L: return f"an attn_mask over {L} query rows: the fused kernel takes one for at most {ROWS_MAX_L}"
  if D % (step := head_step(q.dtype, rows)) or not 0 < D <= MAX_HEAD:
    return f"head size {D}: the fused kernel for {q.dtype.name} takes multiples of {step} up to {MAX_HEAD}"
  slots, layouts = [], []
  for name, x in zip("qkv", (q, k, v)):
    inp = x.src[0] if x.op is Op.VIEW else x
    layout = row_layout(x.arg, x.dtype.itemsize) if x.op is Op.VIEW else None
    if inp.op is not Op.INPUT or layout is None: return f"operand {name} is not read as aligned rows of a buffer (ir/attention.py)"
    slots.append(inp.arg)
    layouts.append(layout)
  allowed = None
  for mask in masks:
    inp = mask.src[0] if mask.op is Op.VIEW else mask
    allowed = mask_layout(mask.arg) if mask.op is Op.VIEW else None
    if inp.op is not Op.INPUT or allowed is None or mask.shape != (*lead, L, k.shape[-2]) or not mask.dtype.is_bool:
      return "the attn_mask is not read as a boolean (*lead, L, S) view of a buffer (ir/attention.py)"
    slots.append(inp.arg)
  return AttentionSpec(q.dtype, tuple(lead), L, k.shape[-2], D, scale, causal, tuple(slots), tuple(layouts),
                       output_layout(tuple(lead), L, D, heads_inside), ast.n_buffers, allowed)

def output_layout(lead: tuple, L: int, D: int, heads_inside: bool) -> RowLayout:
  """Where output element (*lead, i, d) lies: (*lead, L, D) contiguous, or (*lead[:-1], L, lead[-1], D)."""
  if not heads_inside or not lead: return RowLayout(0, strides_for_shape(lead + (L, D))[:-2], D)
  heads = lead[-1]
  return RowLayout(0, strides_for_shape(lead[:-1] + (L, heads, D))[:-3] + (D,), heads * D)
