"""Long reductions as two kernels: partial results, then their reduction.

A few long reductions (a full sum, a handful of long rows) would each run on one thread group, or one core: the
schedule rewrites each as `parts` slices reduced in parallel into a buffer of partial results, then a reduction of
those. A contraction of float32 operands with few outputs (a decode step's matmuls, 32 rows) is split along K the same way
(split-K), its slices leading, so that the partial results are a batched matmul whose threads still read B's rows
side by side, and the reduction of the slices takes the matmul's epilogue (bias, residual, activation). The rules
read only the graph (the reduction's shape, axes and whether it is a contraction), like the rest of the schedule;
their figures hold for every device (enough partials for several waves of blocks on a big GPU, and for every core
of a CPU).
"""
from __future__ import annotations
import functools
from alloy.helpers import prod
from alloy.ir.node import Node, moved
from alloy.ir.ops import Op
from alloy import dtype as dt
from alloy.schedule.contractions import is_contraction, product

SPLIT_MIN_LENGTH = 1 << 15    # reductions shorter than this run in one stage
SPLIT_PARTIALS = 4096         # about this many partial results: several waves of blocks on a big GPU (small tail), all cores busy

@functools.lru_cache(maxsize=4096)
def split_count(shape: tuple, axes: tuple) -> int:
  """How many slices to cut each reduction of `shape` over `axes` into; 1 for no split. Only trailing axes are cut."""
  if not axes or axes != tuple(range(axes[0], len(shape))): return 1
  n, rows = prod(shape[a] for a in axes), prod(shape[:axes[0]])
  if n < SPLIT_MIN_LENGTH or not rows or rows * 64 > SPLIT_PARTIALS: return 1   # no rows: nothing to compute
  # the most slices (at most SPLIT_PARTIALS // rows, each at least 256 long, at least 16 of them) that divide n
  return next((p for p in range(min(SPLIT_PARTIALS // rows, n // 256), 15, -1) if n % p == 0), 1)

# split-K: H200, float32, 32 rows (probe of this rule, device time of the partials): 32x3072 @ 3072x768 42 us in
# one kernel -> 12.9 us in 32 slices (torch 30 us); 32x768 @ 768x768, x2304, x3072: 17, 24, 25 -> 7.4, 11.6, 11.7 us
# in 16 (torch 28, 21, 25)
SPLIT_K_OUTPUTS = 1 << 17     # contractions with fewer outputs than this: one thread each would leave a big GPU idle
SPLIT_K_MIN_LENGTH = 48       # each slice of K at least this long
SPLIT_K_MAX = 32              # slices at most

@functools.lru_cache(maxsize=4096)
def split_k(shape: tuple, axes: tuple) -> int:
  """How many slices to cut a float32 contraction's K into (the last axis of its product's `shape`); 1 for none."""
  if axes != (len(shape) - 1,) or prod(shape[:-1]) >= SPLIT_K_OUTPUTS: return 1
  parts = SPLIT_K_MAX
  while parts > 1 and (shape[-1] % parts or shape[-1] // parts < SPLIT_K_MIN_LENGTH): parts //= 2
  return parts

def _slices_of_k(red: Node, threads: bool) -> int:
  """split_k's slices for reduction red on a device of threads (caps.threads: a CPU's register tile already reads
  each operand once per tile, and measured slower split) where it is a contraction of float32 operands (16-bit ones
  take the tensor cores' tiles), else 1. An operand is float32 where it is so at every view and cast down to what it
  reads: a float32 array cast to float16 is a 16-bit operand."""
  if not threads or red.dtype is not dt.float32 or not is_contraction(red): return 1
  for x in product(red).src:
    while x.dtype is dt.float32 and x.op in (Op.VIEW, Op.CAST): x = x.src[0]
    if x.dtype is not dt.float32: return 1
  return split_k(red.src[0].shape, red.arg[1])

def parts_of(red: Node, threads: bool) -> tuple[int, bool]:
  """(the slices the schedule cuts reduction red into, 1 for none; whether they are split-K's, which lead)."""
  if (k := _slices_of_k(red, threads)) > 1: return k, True
  return split_count(red.src[0].shape, red.arg[1]), False

def partials(red: Node, threads: bool, src: Node | None = None) -> Node:
  """The first kernel of a split reduction: its partial results, stored (shape: the kept axes, then the slices and a
  1; split-K's: the slices, then the kept axes and a 1). src: red's source as rewritten, where it was."""
  src = red.src[0] if src is None else src
  op, axes = red.arg
  (parts, leading), k, n = parts_of(red, threads), axes[0], prod(src.shape[a] for a in axes)
  sliced = moved(src, "reshape", src.shape[:k] + (parts, n // parts))
  if leading:
    sliced = moved(sliced, "permute", (k,) + tuple(range(k)) + (k + 1,))
    shape = (parts,) + src.shape[:k] + (1,)
  else: shape = src.shape[:k] + (parts, 1)
  return Node(Op.CONTIGUOUS, (Node(Op.REDUCE, (sliced,), (op, (len(shape) - 1,)), red.dtype, shape),), None, red.dtype, shape)

def final(red: Node, threads: bool, p: Node | None = None) -> Node:
  """The second: the reduction of the partial results p (shape: the kept axes, then 1, 1; split-K's: 1, the kept
  axes, 1; red's is a reshape of it)."""
  p = partials(red, threads) if p is None else p
  if parts_of(red, threads)[1]: return Node(Op.REDUCE, (p,), (red.arg[0], (0,)), red.dtype, (1,) + p.shape[1:])
  k = red.arg[1][0]
  return Node(Op.REDUCE, (p,), (red.arg[0], (k,)), red.dtype, p.shape[:k] + (1, 1))

# The kernels of a split are no nodes of the graph; the schedule cache names them by their reduction's place
def place(reduction: int, stage) -> int: return ~(2 * reduction + (stage is final))
def made_again(order: list, k: int, threads: bool) -> Node: return (final if ~k & 1 else partials)(order[~k >> 1], threads)

def split(targets: list[Node], threads: bool = False) -> tuple[list[Node], dict, dict, set]:
  """The targets with every long reduction under them split, into the graph the front end once built: (the new
  targets; id(new node) -> the node of the targets' graph it stands for, where it differs; id(partial results or final
  reduction) -> (their reduction, partials or final); the ids of the targets' graph). A split reduction stands as a
  reshape of its final one, a view of it as one view of that (composed as the front end did), and a target as the
  final one itself (the engine's peeled reshape): the same kernels as then. No split: (targets, {}, {}, set()).
  threads: schedule's (split-K only for a device of threads)."""
  new: dict[int, Node] = {}
  stands_for, made, finals = {}, {}, {}
  for t in targets:
    for n in t.toposort():
      if id(n) in new: continue
      src = tuple(new[id(s)] for s in n.src)
      if n.op is Op.REDUCE and parts_of(n, threads)[0] > 1:
        p = partials(n, threads, src[0])
        f = finals[id(n)] = final(n, threads, p)
        made[id(p)], made[id(f)] = (n, partials), (n, final)
        m = moved(f, "reshape", n.shape)
        if (sliced := p.src[0].src[0]).op is Op.CONST: stands_for[id(sliced)] = src[0]   # a constant's value, in another shape
      elif n.op is Op.VIEW and (f := finals.get(id(n.src[0]))) is not None:
        m = f if n.arg.is_contiguous and n.arg.shape == f.shape else Node(Op.VIEW, (f,), n.arg, n.dtype, n.shape)
      elif src == n.src: m = n
      else: m = Node(n.op, src, n.arg, n.dtype, n.shape)
      new[id(n)] = m
      if m is not n: stands_for[id(m)] = n
  # no split, or a new node is one of the graph's own (a split written out by hand beside the plain reduction): a kernel
  # could not name both
  if not made or stands_for.keys() & new.keys(): return targets, {}, {}, set()
  out = [finals.get(id(t), new[id(t)]) for t in targets]
  for t, o in zip(targets, out): stands_for[id(o)] = t
  return out, stands_for, made, set(new)
