"""What the fused attention kernels take of an ATTENTION kernel, and which devices and operands they serve.

Both are FlashAttention-2's forward pass: a threadgroup owns a block of query rows, walks the keys 64 at a time with a
running max and sum per row (online softmax), and never stores the scores.
- float16 and bfloat16 (renderer/cuda_attention.py): on mma.sync tensor cores, accumulating in float32; head sizes a
  multiple of 16 up to 128; a device whose `caps.tensor_cores` lists mma.sync.
- float32 (renderer/cuda_attention_f32.py): on the CUDA cores in exact float32; head sizes a multiple of 32 up to 128;
  a CUDA device (SIMT_F32 in its caps) whose opt-in shared memory holds the kernel's tiles.
`ALLOY_FUSED_ATTENTION=0` turns both off (attention is then its two matmuls and the softmax between them).
"""
from __future__ import annotations
from dataclasses import dataclass
from alloy import dtype as dt
from alloy.caps import DeviceCaps
from alloy.helpers import getenv, prod, strides_for_shape
from alloy.ir.attention import RowLayout, row_layout
from alloy.ir.kernel import KernelAST
from alloy.ir.ops import Op
from alloy.codegen.tensor_core import MMA_SYNC, SIMT_F32

MMA_DTYPES = (dt.float16, dt.bfloat16)
DTYPES = (*MMA_DTYPES, dt.float32)
MAX_HEAD = 128   # past it a thread's accumulators would spill (16-bit: 64 + the scores' 32 floats at 128)

def head_step(dtype) -> int:
  """Head sizes the kernel for dtype takes are multiples of this: mma's k of 16; a float32 thread's 4 columns of 8."""
  return 16 if dtype in MMA_DTYPES else 32

def fits(caps: DeviceCaps, dtype, head: int) -> bool:
  """Whether a device with caps runs a fused kernel for operands of dtype with head size `head`."""
  if not getenv("ALLOY_FUSED_ATTENTION", 1) or dtype not in DTYPES or head % head_step(dtype) or not 0 < head <= MAX_HEAD: return False
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
    return f"attention on {q.dtype.name}, {k.dtype.name}, {v.dtype.name}: the fused kernels take one of float16, bfloat16 or float32"
  *lead, L, D = q.shape
  if k.shape != (*lead, k.shape[-2], D) or v.shape != k.shape:
    return f"attention shapes {q.shape}, {k.shape}, {v.shape}: the fused kernel takes (*lead, L, D), (*lead, S, D), (*lead, S, D)"
  if D % (step := head_step(q.dtype)) or not 0 < D <= MAX_HEAD:
    return f"head size {D}: the fused kernel for {q.dtype.name} takes multiples of {step} up to {MAX_HEAD}"
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
