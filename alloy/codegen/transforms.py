"""A kernel's optimization as a list of typed transforms over its output axes: `Opt(kind, axis, arg)`.

The heuristics (opts.py) choose a list, BEAM search (engine/search.py) changes it one transform at a time, and
plan.py checks a list (a valid list, or a reason it is refused) and turns it into the plan the Lowerer reads. An
axis is an axis of the kernel's output (`ast.root.shape`); a reduction's own axes are reached through UNROLL.

Each kind, its `axis` and its `arg` (KIND_DOCS below is the one table of them):
- UPCAST(axis, n): n neighbouring outputs along axis are lanes of one thread (GPU) or loop iteration (CPU): unrolled
  copies of the work that share every load the others also need. Several UPCASTs make a register tile (matmul's
  rows x columns). Where n does not divide the axis the last tile overlaps the one before it (its outputs computed
  twice, to the same value), or, where a pass keeps values in the output between loops (the stash), a remainder loop
  finishes the innermost axis one output at a time.
- UNROLL(axis, n): the innermost reduced axis of each reduction is unrolled into n independent accumulators (no add
  waits for the one before); a length n does not divide ends in a remainder loop, and a reduction shorter than 4n is
  not unrolled. With axis None it applies to reductions evaluated at one lane; with an UPCAST axis, to each lane of
  that axis too (rows read side by side, each with its own accumulators). n = 0: no loops at all, every output a lane
  and every reduced element combined in a tree (a tiny kernel); it needs every axis upcast by its whole length.
- LOCAL(0, n): GPU: n threads per threadgroup. The GPU lowering flattens the grid (one thread per tile of the
  upcast axes), so LOCAL takes axis 0, the flat thread index.
- GROUP(k, n): GPU: a threadgroup of n threads per row, the output's leading k axes picking the row; the threads
  split the row's reductions (each strides over the reduced elements, then the group combines through SIMD shuffles
  and shared memory) and the row's other output elements.
- THREAD(axis, 0): CPU: the loop of axis, which must be the outermost, is split between the runtime's threads (one
  per core: arg 0 is the only size there is, the team is the runtime's).
- PAD(axis, m): the axis is tiled as if its length were the next multiple of m, so that an UPCAST the length does not
  divide gets whole tiles (no overlapping last tile) and an axis shorter than the tile can still be one. A lane past
  the end computes the output its index wraps to (modulo the length, so every load stays in bounds) and its store is
  guarded off. Refused where it would more than double the axis, with CPU STAGE, and in the grouped, tensor-core and
  loop-free forms.
- SWAP(a, b): CPU: the loops of output axes a and b trade places (loops run in axis order otherwise).
- STAGE(axis, depth): the operand of a register tile's reduction that is the same along the tile's other axis is
  copied, for each tile of `axis`, into fast memory that the tile's steps then read contiguously. On the CPU the
  copy is a panel on the kernel thread's stack (depth 1: copied, then used). On the GPU, with TENSOR_CORE on the
  same axis: both operands' slices go through shared memory `depth` slices in flight (cp.async); without it GPU
  staging is refused (not built).
- TENSOR_CORE(axis, arg): a matmul (codegen/matmul.py recognises it) on the GPU's matrix instructions (CUDA's tensor
  cores, Metal's simdgroup matrices: the tile's instruction must be in DeviceCaps.tensor_cores): a threadgroup per
  output tile of the shape TILES[arg] in codegen/tensor_core.py (its docstring is the table), `axis` the output axis
  holding N. Takes no other transform but STAGE.
"""
from __future__ import annotations
import enum
from typing import NamedTuple

class OptKind(str, enum.Enum):
  """The kinds of transform; a str so that an Opt compares equal to the plain tuple ("UPCAST", 0, 8)."""
  UPCAST = "UPCAST"
  UNROLL = "UNROLL"
  LOCAL = "LOCAL"
  GROUP = "GROUP"
  THREAD = "THREAD"
  PAD = "PAD"
  SWAP = "SWAP"
  STAGE = "STAGE"
  TENSOR_CORE = "TENSOR_CORE"
  def __str__(self): return self.value

KIND_DOCS = {
  OptKind.UPCAST: ("output axis", "lanes: neighbouring outputs one thread or iteration computes"),
  OptKind.UNROLL: ("None, or an upcast axis whose lanes each get the unroll", "accumulators per reduction (0: unroll everything)"),
  OptKind.LOCAL: ("0 (the flat thread index)", "threads per threadgroup"),
  OptKind.GROUP: ("leading output axes that pick a row", "threads per row's threadgroup"),
  OptKind.THREAD: ("the outermost loop's output axis", "0: the runtime's threads"),
  OptKind.PAD: ("output axis", "the multiple to pad to"),
  OptKind.SWAP: ("output axis", "the output axis whose loop it trades places with"),
  OptKind.STAGE: ("the register tile's axis per whose tiles the operand is copied", "pipeline depth (buffers in flight)"),
  OptKind.TENSOR_CORE: ("output axis", "the tensor-core shape's index"),
}

class Opt(NamedTuple):
  """One transform: what it does is KIND_DOCS[kind] and this module's docstring."""
  kind: OptKind
  axis: int | None
  arg: int
  def __repr__(self): return f"{self.kind.value}({'-' if self.axis is None else self.axis}, {self.arg})"

def upcast(axis: int, n: int) -> Opt: return Opt(OptKind.UPCAST, axis, n)
def unroll(n: int, axis: int | None = None) -> Opt: return Opt(OptKind.UNROLL, axis, n)
def local(n: int) -> Opt: return Opt(OptKind.LOCAL, 0, n)
def group(axes: int, n: int) -> Opt: return Opt(OptKind.GROUP, axes, n)
def thread(axis: int) -> Opt: return Opt(OptKind.THREAD, axis, 0)
def pad(axis: int, multiple: int) -> Opt: return Opt(OptKind.PAD, axis, multiple)
def swap(a: int, b: int) -> Opt: return Opt(OptKind.SWAP, a, b)
def stage(axis: int, depth: int = 1) -> Opt: return Opt(OptKind.STAGE, axis, depth)
def tensor_core(axis: int, tile: int = 0) -> Opt: return Opt(OptKind.TENSOR_CORE, axis, tile)

def loop_order(ndim: int, opts) -> list:
  """The CPU's loops, outermost first: the output axes in order, with each SWAP applied in turn."""
  order = list(range(ndim))
  for o in opts:
    if o.kind is OptKind.SWAP: order = [o.arg if x == o.axis else o.axis if x == o.arg else x for x in order]
  return order

def describe(opts) -> str:
  """A list as DEBUG=3 prints it: UPCAST(0, 8) UPCAST(1, 8) UNROLL(-, 32)."""
  return " ".join(repr(o) if isinstance(o, Opt) else f"{o[0]}({', '.join(map(str, o[1:]))})" for o in opts) or "(none)"
