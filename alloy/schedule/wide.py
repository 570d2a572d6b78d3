"""Kernels that would read too many buffers are split: a cat or stack of many tensors, or a sum of many, fuses into one
kernel with a buffer argument per input, past what devices bind (Metal: 31 buffers with the output and the scalars;
the CPU queue's native launch takes 32 pointers, a wider one runs on Python's thread). Such a kernel gets part of its
elementwise work cut into kernels of its own, each reading at most MAX_KERNEL_INPUTS, until it reads that many too.

Only elementwise nodes with no reduction below them in the kernel are cut: they compute a tensor of their own shape,
which their kernel would have computed anyway, and no reduction's fusion rule (fusion.py) is changed by it.
"""
from __future__ import annotations
from alloy.ir.node import Node
from alloy.ir.ops import Op, ELEMENTWISE

MAX_KERNEL_INPUTS = 24

def split_wide(nodes: dict, cut: set) -> None:
  """Add to cut (ids of kernel roots) until no kernel reads more than MAX_KERNEL_INPUTS buffers or kernels."""
  for root_id in list(cut):
    while True:
      reads, cuttable = _reads(nodes[root_id], cut)
      if len(reads[root_id]) <= MAX_KERNEL_INPUTS: break
      # the widest part that fits in a kernel of its own; parts of one input would not narrow the root
      best = max((n for n in cuttable if 1 < len(reads[id(n)]) <= MAX_KERNEL_INPUTS), key=lambda n: len(reads[id(n)]), default=None)
      if best is None: break   # nothing to cut (a few ops each reading many inputs): left to the device to refuse
      cut.add(id(best))

def _reads(root: Node, cut: set) -> tuple:
  """Per node of root's kernel, the ids of the buffers and other kernels it reads (below it, within the kernel), and
  the nodes that could be cut: elementwise, not the root, with no reduction below them in the kernel."""
  reads: dict = {}
  has_reduce: dict = {}
  cuttable: list = []
  start = root.src[0] if root.op is Op.CONTIGUOUS else root
  stack = [(start, False)]
  while stack:   # iterative post-order: a chain of thousands of adds is no recursion
    n, done = stack.pop()
    if id(n) in reads: continue
    if n is not start and (id(n) in cut or n.op is Op.BUFFER):
      reads[id(n)], has_reduce[id(n)] = frozenset((id(n),)), False
      continue
    if not done:
      stack.append((n, True))
      stack.extend((s, False) for s in n.src if id(s) not in reads)
      continue
    reads[id(n)] = frozenset().union(*(reads[id(s)] for s in n.src))
    has_reduce[id(n)] = n.op is Op.REDUCE or any(has_reduce[id(s)] for s in n.src)
    if n is not start and n.op in ELEMENTWISE and not has_reduce[id(n)]: cuttable.append(n)
  reads[id(root)] = reads[id(start)]
  return reads, cuttable
