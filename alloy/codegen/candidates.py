"""What BEAM search (engine/search.py) tries next: the lists one transform away from a list.

Each neighbour adds, changes or removes one transform (an UPCAST's lanes, a PAD to the tile where it does not divide
its axis, the UNROLL, the threadgroup's size, CPU threads, a loop swap, operand staging), or swaps the GPU's grouped
form for the thread-per-tile one and back; a tensor-core list's neighbours are its other tiles and pipeline depths,
and the plain GPU form. Only lists the validator (plan.check) accepts are returned, each once.
"""
from __future__ import annotations
from alloy.helpers import prod
from alloy.ir.ops import Op
from alloy.ir.kernel import KernelAST
from alloy.caps import DeviceCaps
from alloy.codegen.transforms import Opt, OptKind, upcast, unroll, local, group, thread, swap, stage, pad, loop_order, tensor_core
from alloy.codegen.tensor_core import TILES
from alloy.codegen.plan import check, make_plan
from alloy.codegen.opts import row_axes

LANES = (2, 4, 8, 16, 32, 64)
UNROLLS = (1, 4, 8, 16, 32)
THREADS = (32, 64, 128, 256, 512, 1024)
MIN_THREADS_FRACTION = 16   # a GPU candidate keeps at least 1/16 of its parent's threads

def _normalized(shape: tuple, opts: list) -> tuple:
  """THREAD follows the outermost loop (a swap may have moved it); UNROLL's axis must stay upcast."""
  ups = {o.axis for o in opts if o.kind is OptKind.UPCAST}
  out = []
  for o in opts:
    if o.kind is OptKind.THREAD:
      first = next((a for a in loop_order(len(shape), opts) if shape[a] > 1), None)
      if first is None: continue
      o = thread(first)
    if o.kind is OptKind.UNROLL and o.axis is not None and o.axis not in ups: o = unroll(o.arg)
    out.append(o)
  return tuple(out)

def neighbours(ast: KernelAST, caps: DeviceCaps, opts) -> list[tuple]:
  root, shape = ast.root, ast.root.shape
  opts = list(opts)
  kinds = {o.kind: o for o in opts}
  has_reduce = any(m.op is Op.REDUCE for m in root.toposort())
  found: list = []
  def without(o: Opt) -> list: return [x for x in opts if x is not o]
  def add(new: list) -> None: found.append(_normalized(shape, new))
  if (tco := kinds.get(OptKind.TENSOR_CORE)) is not None:
    for arg in range(len(TILES)):
      for depth in (None, 2, 3, 4, 5):
        add([tensor_core(tco.axis, arg)] + ([] if depth is None else [stage(tco.axis, depth)]))
    add([local(caps.default_local)])
  ups = {o.axis: o for o in opts if o.kind is OptKind.UPCAST}
  pads = {o.axis: o for o in opts if o.kind is OptKind.PAD}
  for a, s in enumerate(shape):
    if s < 2: continue
    for n in LANES:
      if n > s:   # a tile longer than the axis: one padded tile
        if a not in ups and a not in pads: add(opts + [pad(a, n), upcast(a, n)])
        break
      if a not in ups: add(opts + [upcast(a, n)])
      elif ups[a].arg != n: add([upcast(a, n) if x is ups[a] else x for x in opts if x is not pads.get(a)])
    if a in ups: add([x for x in opts if x is not ups[a] and x is not pads.get(a)])
    if a in pads: add(without(pads[a]))
    elif a in ups and s % ups[a].arg: add(opts + [pad(a, ups[a].arg)])   # whole tiles instead of an overlapping last one
  if has_reduce:
    u = kinds.get(OptKind.UNROLL)
    for n in UNROLLS:
      if u is None: add(opts + [unroll(n)])
      elif u.arg not in (0, n): add([unroll(n, u.axis) if x is u else x for x in opts])
    if u is not None and u.arg:
      add(without(u))
      for a in ups:
        if a != u.axis: add([unroll(u.arg, a) if x is u else x for x in opts])
      if u.axis is not None: add([unroll(u.arg) if x is u else x for x in opts])
  if caps.threads:
    if (g := kinds.get(OptKind.GROUP)) is not None:
      for n in THREADS:
        if n != g.arg: add([group(g.axis, n) if x is g else x for x in opts])
      add([local(caps.default_local)])   # the thread-per-output form instead
    else:
      l = kinds.get(OptKind.LOCAL)
      for n in THREADS:
        if l is None: add(opts + [local(n)])
        elif n != l.arg: add([local(n) if x is l else x for x in opts])
      if has_reduce: add([group(row_axes(root), caps.default_local)])   # the grouped form: a threadgroup per row
  else:
    if (t := kinds.get(OptKind.THREAD)) is not None: add(without(t))
    else: add(opts + [thread(0)])   # _normalized puts it on the outermost loop
    swaps = [o for o in opts if o.kind is OptKind.SWAP]
    for o in swaps: add(without(o))
    if not swaps:
      big = [a for a, s in enumerate(shape) if s > 1]
      for i, a in enumerate(big):
        for b in big[i + 1:]: add(opts + [swap(a, b)])
    if (st := kinds.get(OptKind.STAGE)) is not None: add(without(st))
    elif len(ups) == 2:
      for a in ups: add(opts + [stage(a)])
  seen, out = {tuple(opts)}, []
  threads = _threads(ast, caps, opts) if caps.threads else 0
  for cand in found:
    if cand in seen: continue
    seen.add(cand)
    if check(ast, caps, cand) is not None: continue
    # far fewer GPU threads than the list it comes from leaves the GPU idle for a long time (a search cannot stop
    # a GPU kernel once it runs): not tried
    if caps.threads and _threads(ast, caps, cand) * MIN_THREADS_FRACTION < threads: continue
    out.append(cand)
  return out

def _threads(ast: KernelAST, caps: DeviceCaps, opts) -> int:
  plan = make_plan(ast, caps, opts)
  return prod(plan.global_size) * prod(plan.local_size)
