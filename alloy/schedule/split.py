"""Long reductions as two kernels: partial results, then their reduction.

A few long reductions (a full sum, a handful of long rows) would each run on one thread group, or one core: the
schedule rewrites each as `parts` slices reduced in parallel into a buffer of partial results, then a reduction of
those. The rule reads only the graph (the reduction's shape and axes), like the rest of the schedule; its figures
hold for every device (enough partials for several waves of blocks on a big GPU, and for every core of a CPU).
"""
from __future__ import annotations
import functools
from alloy.helpers import prod
from alloy.ir.node import Node, moved
from alloy.ir.ops import Op

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

def partials(red: Node, src: Node | None = None) -> Node:
  """The first kernel of a split reduction: its partial results, stored (shape: the kept axes, then the slices and a
  1). src: red's source as rewritten, where it was."""
  src = red.src[0] if src is None else src
  op, axes = red.arg
  k, n, parts = axes[0], prod(src.shape[a] for a in axes), split_count(src.shape, axes)
  sliced = moved(src, "reshape", src.shape[:k] + (parts, n // parts))
  shape = src.shape[:k] + (parts, 1)
  return Node(Op.CONTIGUOUS, (Node(Op.REDUCE, (sliced,), (op, (k + 1,)), red.dtype, shape),), None, red.dtype, shape)

def final(red: Node, p: Node | None = None) -> Node:
  """The second: the reduction of the partial results p (shape: the kept axes, then 1, 1; red's is a reshape of it)."""
  p = partials(red) if p is None else p
  k = red.arg[1][0]
  return Node(Op.REDUCE, (p,), (red.arg[0], (k,)), red.dtype, p.shape[:k] + (1, 1))

# The kernels of a split are no nodes of the graph; the schedule cache names them by their reduction's place
def place(reduction: int, stage) -> int: return ~(2 * reduction + (stage is final))
def made_again(order: list, k: int) -> Node: return (final if ~k & 1 else partials)(order[~k >> 1])

def split(targets: list[Node]) -> tuple[list[Node], dict, dict, set]:
  """The targets with every long reduction under them split, into the graph the front end once built: (the new
  targets; id(new node) -> the node of the targets' graph it stands for, where it differs; id(partial results or final
  reduction) -> (their reduction, partials or final); the ids of the targets' graph). A split reduction stands as a
  reshape of its final one, a view of it as one view of that (composed as the front end did), and a target as the
  final one itself (the engine's peeled reshape): the same kernels as then. No split: (targets, {}, {}, set())."""
  new: dict[int, Node] = {}
  stands_for, made, finals = {}, {}, {}
  for t in targets:
    for n in t.toposort():
      if id(n) in new: continue
      src = tuple(new[id(s)] for s in n.src)
      if n.op is Op.REDUCE and split_count(n.src[0].shape, n.arg[1]) > 1:
        p = partials(n, src[0])
        f = finals[id(n)] = final(n, p)
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
