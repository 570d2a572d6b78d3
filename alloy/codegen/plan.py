"""From a list of transforms (transforms.py) to the plan the Lowerer reads: `check` says why a list is refused (or
None), `make_plan` turns a valid one into a `Plan`.

The plan also turns on one pass of its own where it applies, so no transform names it:
- the stash (CPU): a costly value that a row reduction along the last axis and the output both need at the same
  element (softmax's exp(x - max)) is computed once in the reduction's loop and kept in the output buffer, which the
  output loop of the row reads back (opts.output_stash finds it). Off where the threads split the last axis itself
  (each thread's reduction loop would store the whole row over outputs another thread has finished) and in a
  kernel without loops (UNROLL(-, 0)).
"""
from __future__ import annotations
from dataclasses import dataclass
from alloy.helpers import prod
from alloy.ir.node import Node
from alloy.ir.ops import Op
from alloy.ir.kernel import KernelAST
from alloy.caps import DeviceCaps
from alloy.codegen.transforms import Opt, OptKind, loop_order
from alloy.codegen.opts import output_stash, panel_operand, work
from alloy.codegen import tensor_core as tc
from alloy.codegen.matmul import match_matmul

FULL_UNROLL_MAX_WORK = 4096   # elements a kernel without loops may compute: each is a line of code

@dataclass(frozen=True)
class Plan:
  """What the Lowerer reads: the launch shape and the lowering's modes, all derived from `opts`."""
  threads: bool
  global_size: tuple
  local_size: tuple
  parallel: bool = False      # CPU: the outermost loop is split between threads (THREAD)
  group: int = 0              # GPU: threads of a row's threadgroup (GROUP) ...
  block_axes: int = 0         # ... and the leading output axes that pick the row
  upcast: tuple = ()          # ((output axis, lanes), ...); with `pack`, the staged axis last
  pad: tuple = ()             # ((output axis, padded length), ...): PAD's axes, tiled to the padded length
  loop_order: tuple = ()      # CPU: output axes outermost first (SWAP; default: in order)
  reduce_unroll: int = 1      # UNROLL's n
  unroll_lanes: bool = False  # UNROLL has an axis: the unroll applies to each of several lanes too
  full_unroll: bool = False   # UNROLL(-, 0)
  stash: Node | None = None   # the stash pass (module docstring): the value kept in the output ...
  stash_reduce: Node | None = None   # ... and the row reduction whose loop computes and stores it
  pack: Node | None = None    # STAGE: the operand copied per tile of the staged axis
  tensor_core: tuple | None = None   # TENSOR_CORE: (MatmulSpec, TensorCoreTile) (with STAGE's depth)
  applied: tuple = ()         # the transforms, then ("STASH", op) where the pass is on: KernelMeta.opts
  simd_width: int = 32        # GROUP: the caps' SIMD group ...
  shuffle_bytes: int = 8      # ... and the widest value its lanes shuffle
  def resident_blocks(self) -> int:
    """Threadgroups one multiprocessor should have room for (KernelMeta.min_blocks, CUDA's __launch_bounds__). Given
    only the block size, ptxas held row kernels to 32 registers (full occupancy) even where more pay: softmax rows ran
    at 2.8 TB/s with 32 and 3.77 with 55 on an H200. 512/threads resident blocks (a quarter of the threads, at most 128
    registers each) let it take what the kernel needs; a tensor-core tile's accumulators are its registers, and the
    float32 tiles on the CUDA cores measured 0-7% faster with all 255."""
    if self.tensor_core is None: return max(1, 512 // self.local_size[0])
    tile = self.tensor_core[1]
    # a WGMMA tile's consumers raise their registers past an even share of 384 threads (setmaxnreg): one block an SM
    return 1 if tile.accumulators > 64 or tile.instruction in (tc.SIMT_F32, tc.WGMMA) else 2

class InvalidOpts(ValueError):
  """A list of transforms the lowering cannot carry out for this kernel and device; the message says why."""

def _reduces(root: Node) -> list: return [m for m in root.toposort() if m.op is Op.REDUCE]

def padded(shape: tuple, opts) -> dict:
  """{axis: its length rounded up to PAD's multiple} for each padded axis."""
  return {o.axis: -(-shape[o.axis] // o.arg) * o.arg for o in opts if o.kind is OptKind.PAD}

def _stash(root: Node, threads: bool, full: bool, split_axis, pad: dict) -> tuple:
  # off with PAD: a padded lane computes (and would stash) an output another lane owns
  if threads or full or pad or not _reduces(root): return None, None
  if split_axis == len(root.shape) - 1: return None, None
  return output_stash(root)

def check(ast: KernelAST, caps: DeviceCaps, opts) -> str | None:
  """Why `opts` cannot lower this kernel on a device with these caps, or None where it can. The grid's size is left to
  each device's Program, which refuses a launch past its own limits with an error saying so."""
  root, shape = ast.root, ast.root.shape
  ndim, gpu = len(shape), caps.threads
  opts = list(opts)
  for o in opts:
    if not isinstance(o, Opt) or not isinstance(o.kind, OptKind): return f"{o!r} is not an Opt"
    if not isinstance(o.arg, int) or (o.axis is not None and not isinstance(o.axis, int)): return f"{o!r}: axis and arg are ints"
    if o.axis is None and o.kind is not OptKind.UNROLL: return f"{o!r}: needs an axis"
    limit = ndim + 1 if o.kind is OptKind.GROUP else ndim   # GROUP's axis counts leading axes: 0..ndim
    if o.axis is not None and not 0 <= o.axis < limit: return f"{o!r}: axis {o.axis} is out of range for the output's shape {shape}"
    if o.kind is OptKind.SWAP and not 0 <= o.arg < ndim: return f"{o!r}: axis {o.arg} is out of range for the output's shape {shape}"
  kinds = [o.kind for o in opts]
  for once in (OptKind.UNROLL, OptKind.LOCAL, OptKind.GROUP, OptKind.THREAD, OptKind.STAGE, OptKind.TENSOR_CORE):
    if kinds.count(once) > 1: return f"{once.value} appears {kinds.count(once)} times; a kernel takes one"
  if OptKind.TENSOR_CORE in kinds: return _check_tensor_core(ast, caps, opts)
  ups: dict = {}
  for o in opts:
    if o.kind is not OptKind.UPCAST: continue
    if o.axis in ups: return f"{o!r}: axis {o.axis} is already upcast"
    ups[o.axis] = o.arg
  pads = padded(shape, opts)
  for o in opts:
    if o.kind is not OptKind.PAD: continue
    if sum(p.axis == o.axis for p in opts if p.kind is OptKind.PAD) > 1: return f"{o!r}: axis {o.axis} is padded twice"
    s = shape[o.axis]
    if o.arg < 2 or s % o.arg == 0: return f"{o!r}: {s} is already a multiple of {o.arg}"
    if pads[o.axis] >= 2 * s: return f"{o!r}: padding {s} to {pads[o.axis]} would more than double the axis' work"
    if (n := ups.get(o.axis)) is not None and pads[o.axis] % n:
      return f"{o!r}: the padded length {pads[o.axis]} is not a multiple of the axis' UPCAST {n}"
  by = {o.kind: o for o in opts}
  unr = by.get(OptKind.UNROLL)
  full = unr is not None and unr.arg == 0
  reduces = _reduces(root)
  order = [a for a in loop_order(ndim, opts) if shape[a] > 1]
  split = by[OptKind.THREAD].axis if OptKind.THREAD in by else None
  stash = _stash(root, gpu, full, split, pads)[0]
  for a, n in ups.items():
    s = pads.get(a, shape[a])
    if n < 2 or n > s: return f"UPCAST({a}, {n}): lanes must be 2..{s} (the axis' length)"
    if s % n and s < 2 * n: return f"UPCAST({a}, {n}): {n} does not divide {s} and the axis is too short for an overlapping last tile"
    if s % n and stash is not None and a != order[-1]:
      return f"UPCAST({a}, {n}): with the stash, a tile that does not divide its axis is only possible on the innermost loop"
  if full:
    if unr.axis is not None: return f"{unr!r}: a full unroll takes no axis"
    if any(ups.get(a) != s for a, s in enumerate(shape) if s > 1): return f"{unr!r}: needs every axis upcast by its whole length {shape}"
    if set(kinds) - {OptKind.UPCAST, OptKind.UNROLL}: return f"{unr!r}: a kernel without loops takes no other transforms"
    if (w := work(root)) > FULL_UNROLL_MAX_WORK: return f"{unr!r}: {w} elements, over the {FULL_UNROLL_MAX_WORK} a kernel without loops may hold"
    return None
  accumulators = prod(ups.values())
  if unr is not None and unr.axis is None: accumulators = max(accumulators, unr.arg)   # a one-lane reduction's
  if unr is not None:
    if not reduces: return f"{unr!r}: the kernel has no reduction"
    if unr.arg < 1: return f"{unr!r}: n must be at least 1 (0: unroll everything)"
    if unr.axis is not None:
      if unr.axis not in ups: return f"{unr!r}: axis {unr.axis} is not upcast"
      accumulators *= unr.arg
  if reduces and accumulators > caps.registers // 2:
    return f"{accumulators} accumulators per thread: over half the device's {caps.registers} registers"
  if gpu:
    for k in (OptKind.THREAD, OptKind.SWAP):
      if k in by: return f"{by[k]!r}: CPU only (a GPU kernel's threads and order are its grid's)"
    if (st := by.get(OptKind.STAGE)) is not None:
      return (f"{st!r}: GPU shared-memory staging is not built yet (the Lowerer has no cooperative copy into threadgroup "
              f"memory with barriers)")
    vec = max(caps.widths_for(root.dtype.itemsize), default=1)
    if (n := ups.get(ndim - 1)) and n > vec and n % vec:
      return f"UPCAST({ndim - 1}, {n}): on the contiguous last axis a tile wider than a vector must be whole vectors of {vec} (aligned stores)"
    if (g := by.get(OptKind.GROUP)) is not None:
      if set(kinds) - {OptKind.GROUP, OptKind.UNROLL}: return f"{g!r}: the grouped lowering takes no register tile, LOCAL or staging"
      if not reduces: return f"{g!r}: the kernel has no reduction to split"
      if g.arg & (g.arg - 1) or not caps.simd_width <= g.arg <= caps.max_local:
        return f"{g!r}: threads must be a power of two from {caps.simd_width} (a SIMD group) to {caps.max_local}"
      if (nb := g.arg * max(r.dtype.itemsize for r in reduces)) > caps.shared_bytes:
        return f"{g!r}: {nb} bytes of shared memory, over the device's {caps.shared_bytes}"
      return None
    n = by[OptKind.LOCAL].arg if OptKind.LOCAL in by else 1
    if not 1 <= n <= caps.max_local: return f"LOCAL(0, {n}): threads per group must be 1..{caps.max_local}"
    return None
  for k in (OptKind.LOCAL, OptKind.GROUP):
    if k in by: return f"{by[k]!r}: GPU only (a CPU kernel has no threadgroups; its threads are THREAD)"
  if (t := by.get(OptKind.THREAD)) is not None:
    if t.arg != 0: return f"{t!r}: the CPU's threads are the runtime's, one per core: THREAD takes 0"
    if not order or t.axis != order[0]: return f"{t!r}: axis {t.axis} is not the outermost loop ({order[0] if order else 'none'})"
  if (st := by.get(OptKind.STAGE)) is not None:
    if st.arg != 1: return f"{st!r}: pipelined staging (depth > 1) is not built yet"
    if pads: return f"{st!r}: the panel copy takes no PAD (a padded lane's columns would wrap inside the panel)"
    if len(ups) != 2 or st.axis not in ups: return f"{st!r}: needs a register tile of two UPCASTs, one of them on axis {st.axis}"
    if len(reduces) != 1 or len(reduces[0].arg[1]) != 1: return f"{st!r}: needs one reduction over one axis"
    row = next(a for a in ups if a != st.axis)
    if panel_operand(root, row, st.axis, ups[st.axis], caps.shared_bytes) is None:
      return (f"{st!r}: no operand of the reduction is the same along axis {row} and varies along axis {st.axis}, "
              f"in a panel of at most {caps.shared_bytes} bytes")
  return None

def _tensor_core(ast: KernelAST, opts) -> tuple:
  """(the matmul, the tile with STAGE's depth) of a list holding TENSOR_CORE."""
  by = {o.kind: o for o in opts}
  tco, st = by[OptKind.TENSOR_CORE], by.get(OptKind.STAGE)
  return match_matmul(ast), tc.tile_for(tco.arg, None if st is None else st.arg)

def _check_tensor_core(ast: KernelAST, caps: DeviceCaps, opts) -> str | None:
  by = {o.kind: o for o in opts}
  tco = by[OptKind.TENSOR_CORE]
  if not caps.threads: return f"{tco!r}: GPU only"
  if set(by) - {OptKind.TENSOR_CORE, OptKind.STAGE}: return f"{tco!r}: takes no other transform but STAGE"
  if not 0 <= tco.arg < len(tc.TILES): return f"{tco!r}: no tile {tco.arg} (codegen/tensor_core.py has {len(tc.TILES)})"
  if (st := by.get(OptKind.STAGE)) is not None and st.axis != tco.axis: return f"{st!r}: stages TENSOR_CORE's axis {tco.axis}"
  spec, tile = _tensor_core(ast, opts)
  if spec is not None and spec.out_axes[tco.axis] != "n" and not (spec.N == 1 and "n" not in spec.out_axes):
    return f"{tco!r}: axis {tco.axis} is not the matmul's N axis (the output's axes: {spec.out_axes})"
  if (why := tc.check(spec, tile, caps)) is not None: return f"{tco!r}: {why}"
  return None

def validate(ast: KernelAST, caps: DeviceCaps, opts) -> None:
  if (why := check(ast, caps, opts)) is not None: raise InvalidOpts(f"kernel {ast.root.shape}: {why}")

def make_plan(ast: KernelAST, caps: DeviceCaps, opts) -> Plan:
  """The Lowerer's plan for a valid list (InvalidOpts saying why for another)."""
  opts = tuple(opts)
  validate(ast, caps, opts)
  root, shape = ast.root, ast.root.shape
  by = {o.kind: o for o in opts}
  ups = tuple((o.axis, o.arg) for o in opts if o.kind is OptKind.UPCAST)
  pads = padded(shape, opts)
  unr = by.get(OptKind.UNROLL)
  if unr is not None and unr.arg == 0: return Plan(caps.threads, (1, 1, 1), (1, 1, 1), full_unroll=True, applied=opts)
  if OptKind.TENSOR_CORE in by:
    spec, tile = _tensor_core(ast, opts)
    return Plan(True, (tc.launch_groups(spec, tile, caps), 1, 1), (tile.threads, 1, 1), tensor_core=(spec, tile), applied=opts)
  extra = dict(reduce_unroll=unr.arg if unr else 1, unroll_lanes=unr is not None and unr.axis is not None)
  if caps.threads:
    if (g := by.get(OptKind.GROUP)) is not None:
      return Plan(True, (max(prod(shape[:g.axis]), 1), 1, 1), (g.arg, 1, 1), group=g.arg, block_axes=g.axis, applied=opts,
                  simd_width=caps.simd_width, shuffle_bytes=caps.shuffle_bytes, **extra)
    n, lanes = (by[OptKind.LOCAL].arg if OptKind.LOCAL in by else 1), dict(ups)
    tiles = prod(-(-s // lanes.get(a, 1)) for a, s in enumerate(padded_shape(shape, pads)))
    return Plan(True, (max(1, -(-tiles // n)), 1, 1), (n, 1, 1), upcast=ups, pad=tuple(pads.items()), applied=opts, **extra)
  order = loop_order(len(shape), opts)
  parallel = OptKind.THREAD in by
  split = by[OptKind.THREAD].axis if parallel else None
  stash, stash_reduce = _stash(root, False, False, split, pads)
  pack = None
  if (st := by.get(OptKind.STAGE)) is not None:
    ups = tuple(sorted(ups, key=lambda u: u[0] == st.axis))   # the Lowerer reads (rows, staged columns)
    row = ups[0][0]
    pack = panel_operand(root, row, st.axis, dict(ups)[st.axis], caps.shared_bytes)
  outer = -(-pads.get(split, shape[split]) // dict(ups).get(split, 1)) if parallel else 1   # the split loop's length
  applied = opts + ((("STASH", stash.op.name),) if stash is not None else ())
  return Plan(False, (outer, 1, 1), (1, 1, 1), parallel, upcast=ups, loop_order=tuple(order) if OptKind.SWAP in by else (),
              stash=stash, stash_reduce=stash_reduce, pack=pack, pad=tuple(pads.items()), applied=applied, **extra)

def padded_shape(shape: tuple, pads: dict) -> tuple: return tuple(pads.get(a, s) for a, s in enumerate(shape))
