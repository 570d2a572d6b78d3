"""The heuristics: the list of transforms (transforms.py) a kernel gets without search, and the analyses of a kernel's
loads they and the validator (plan.py) share.

A device describes itself with a `DeviceCaps` (alloy/caps.py); codegen only reads its fields.
"""
from __future__ import annotations
from alloy.helpers import prod, strides_for_shape
from alloy.ir import symbolic as sym
from alloy.ir.node import Node
from alloy.ir.ops import Op, ELEMENTWISE
from alloy.ir.kernel import KernelAST
from alloy.caps import DeviceCaps
from alloy.codegen.transforms import Opt, upcast as up, unroll as unroll_opt, local, group, thread, swap, stage, loop_order, tensor_core
from alloy.codegen.matmul import MatmulSpec, match_matmul
from alloy.codegen import tensor_core as tc

PARALLEL_MIN_WORK = 1 << 15   # elements; below this, threads cost more than they save
ROW_STREAMS = 4               # rows a row reduction reads side by side
COLUMN_LANES = 64             # lanes of a column reduction: 8 vectors of 8 four-byte elements
CPU_LANES = 8                 # independent accumulators / unrolled outputs: covers add latency x issue width
# a register tile: rows x columns of accumulators, half the registers (caps.registers counts 32-bit lanes): AVX2's
# 16 registers of 8 lanes give 8 x 8 (8 x 16 left none for the operands and spilled: with packed panels 8 x 8 runs
# 10-50% faster, 1024^3 to 2048^3, 2-core VM); AVX-512's 32 of 16 give 8 x 32, two vectors of 16 per row (16
# accumulators, 2 panel loads and a broadcast per row step: 1024^3 ~100 -> ~300 GFLOP/s on the same VM; 6 x 32,
# 4 x 64 and 16 x 16 measured no faster)
TILE_ROWS, TILE_COLS = 8, 8
SHORT_TILE_COLS = 4          # columns of the tile of an innermost axis shorter than TILE_COLS
TILE_OUTER_MIN = 8            # column tiles needed to put their loop outermost (it is the one split across cores)
GPU_TILE = (4, 4)             # GPU register tile: rows x columns of outputs per thread
GPU_TILE_MIN_THREADS = 1 << 12  # tiles at least: fewer threads than this leave a big GPU idle
GPU_TILE_MIN_REDUCE = 16      # a shorter reduction gains little from reuse
GPU_THREAD_BYTES = 16         # bytes a GPU thread of a 16- or 32-bit elementwise kernel writes (_narrow_upcasts)
GROUP_MIN_REDUCE = 128        # a reduction shorter than this is cheaper done by one thread
GROUP_MAX_ROWS = 1 << 17      # with this many rows, one thread per row already fills a big GPU

TINY_OUTPUTS, TINY_WORK = 16, 256   # a kernel this small is one thread with everything unrolled
TENSOR_CORE_MIN = 16          # M, N and K at least: a thinner matmul wastes most of each 16x8x16 tile
TENSOR_CORE_BIG_TILES = 96    # 128x128 threadgroups at least (about an H200's 132 SMs): else the 64x64 tile
SIMDGROUP_BIG_TILES = 64      # Metal: 64x64 threadgroups at least (a few per GPU core of an M-series chip): else 32x32
SIMT_HUGE_TILES = 384         # CUDA's 256 x 128 float32 tile: about three waves of an H200's 132 SMs (fewer: the tail costs)
SIMT_MIN_ROWS = 64            # CUDA's float32 tiles: at least a small tile's rows (fewer: a decode step's rows, where a
                              # few threadgroups would each walk all of K; the register tile or a group per row instead,
                              # unless the small tile's threadgroups fill the GPU along N)
FEW_ROWS_LOCAL = 64           # threads per group of a matmul of a few rows (_few_rows_opts; 32 to 256 within 5%)
FEW_ROWS_MIN_THREADS = 1 << 15   # two rows a thread only where that leaves this many threads
WGMMA_MIN_ROWS = 64           # Hopper's tile takes 64 rows per warpgroup: fewer rows leave most of it idle
TENSOR_CORE_SHORT_K = 64      # K at most this: one slice of it, tile 19, whatever the size (a threadgroup's time is
                              # mostly its loads' round trip and its stores; tile 19's figures in codegen/tensor_core.py)
TENSOR_CORE_SHORT_K_TILE = 19

def choose_opts(ast: KernelAST, caps: DeviceCaps) -> list[Opt]:
  """The heuristics' transforms for this kernel on a device with these caps (plan.make_plan lowers them)."""
  n = prod(ast.root.shape)
  if 0 < n <= TINY_OUTPUTS and work(ast.root) <= TINY_WORK:
    # one thread, every loop unrolled: its loads and stores become a few vector accesses
    return [up(a, s) for a, s in enumerate(ast.root.shape) if s > 1] + [unroll_opt(0)]
  spec = match_matmul(ast) if caps.threads or caps.tensor_cores else None   # the matmul the GPU heuristics below read
  if caps.tensor_cores and (tiled := _tensor_core_opts(spec, caps)) is not None: return tiled
  if caps.threads and (few := _few_rows_opts(spec)) is not None: return few
  return _gpu_opts(ast.root, caps) if caps.threads else _cpu_opts(ast.root, caps)

def _few_rows_opts(spec: MatmulSpec | None) -> list[Opt] | None:
  """A GPU matmul of a few rows (a decode step's batch: 2 to SIMT_MIN_ROWS - 1), one thread per output or two: where
  B's rows run along N, neighbouring threads read neighbouring columns of it, every element once per row; where they
  run along K (x @ W.T), each thread walks its own row of B once, for every row of A. H200, float32, GFLOP/s (bench/
  small_m.py --sweep): 32x768 @ 768x3072 2370 -> 5665 (torch 5100-6500), 32x3072 @ 3072x768 313 -> 3808, 32x768 @
  768x50257.T 584 -> 6325 (torch 24000), against the register tile or a threadgroup per output (GROUP, whose threads
  read B's column a row apart)."""
  if spec is None or not 2 <= spec.M < SIMT_MIN_ROWS or spec.batch or spec.K < GPU_TILE_MIN_REDUCE: return None
  if tuple(a for a in spec.out_axes if a != "1") != ("m", "n"): return None
  m = spec.out_axes.index("m")
  if spec.b.k_major: return [local(FEW_ROWS_LOCAL), up(m, spec.M)]
  return [local(FEW_ROWS_LOCAL)] + ([up(m, 2)] if spec.M % 2 == 0 and spec.M * spec.N >= 2 * FEW_ROWS_MIN_THREADS else []) + [unroll_opt(4)]

def _tensor_core_opts(spec: MatmulSpec | None, caps: DeviceCaps) -> list[Opt] | None:
  """A matmul on the device's matrix instructions: CUDA's mma.sync (16-bit floats, float32 as tf32 where allowed) in
  the 128x128 tile where enough of them fill the GPU, else 64x64, or for a K of at most 64 the one-slice 128x64 tile;
  else CUDA's float32 tiles on the CUDA cores (256x128, 128x128, 128x64 or 64x64: the largest of which enough fill the
  GPU), for at least SIMT_MIN_ROWS rows, or 64x64 for fewer where enough of those fill the GPU (an lm_head's 50257
  columns); Metal's simdgroup matrices (fp16, fp32) in 64x64 tiles where enough of them fill the GPU, else 32x32."""
  if spec is None or min(spec.M, spec.N, spec.K) < TENSOR_CORE_MIN or "n" not in spec.out_axes: return None
  choices = []   # per instruction, by preference: (tile, the threadgroups it needs), largest first; then the smallest
  if tc.WGMMA in caps.tensor_cores and spec.K > TENSOR_CORE_SHORT_K and spec.M >= WGMMA_MIN_ROWS:
    wide = tc.wgmma_tile(spec.M, spec.N, prod(spec.batch))
    choices += [((tc.PERSISTENT[wide], 0),), ((wide, 0),)]   # persistent where the graph rounds the matmul (tensor_core.py)
  if tc.MMA_SYNC in caps.tensor_cores:
    choices.append(((0, TENSOR_CORE_BIG_TILES), (2, 0)) if spec.K > TENSOR_CORE_SHORT_K else ((TENSOR_CORE_SHORT_K_TILE, 0),))
  if tc.SIMT_F32 in caps.tensor_cores:
    huge, large, medium, small = tc.SIMT_TILES[:4]
    if spec.M >= SIMT_MIN_ROWS:
      choices.append(((huge, SIMT_HUGE_TILES), (large, TENSOR_CORE_BIG_TILES), (medium, TENSOR_CORE_BIG_TILES), (small, 0)))
    elif prod(tc.grid(spec, tc.TILES[small])) >= TENSOR_CORE_BIG_TILES:
      # a few rows but columns enough for the small tile's threadgroups to fill the GPU (a decode step's lm_head): the
      # tile reads each column of B once, where a thread per output would read all of A for each of its columns (H200,
      # GPT-2 decode at batch 32, fp32: 11579 -> 12434 tok/s; its lm_head 0.21 ms)
      choices.append(((small, 0),))
  if tc.SIMDGROUP_8X8 in caps.tensor_cores: choices.append(((tc.SIMDGROUP_TILES[1], SIMDGROUP_BIG_TILES), (tc.SIMDGROUP_TILES[0], 0)))
  for tiles in choices:
    arg = next(t for t, enough in tiles if prod(tc.grid(spec, tc.TILES[t])) >= enough)   # the largest that fills the GPU
    if tc.check(spec, tc.TILES[arg], caps) is None: return [tensor_core(spec.out_axes.index("n"), arg)]
  return None

def _gpu_opts(root: Node, caps: DeviceCaps) -> list[Opt]:
  if (tiled := _gpu_register_tile(root, caps)) is not None: return tiled
  if (grouped := _grouped_opts(root, caps)) is not None: return grouped
  if not root.shape: return []   # a 0-d output (a reduction of a reduction) has no axis to spread over threads
  upcasts = _narrow_upcasts(root)
  lanes = prod(o.arg for o in upcasts)
  return [local(min(caps.default_local, max(32, _pow2_at_least(prod(root.shape) // lanes))))] + upcasts

def _narrow_upcasts(root: Node) -> list[Opt]:
  """A GPU elementwise kernel that writes 16-bit or 32-bit values: GPU_THREAD_BYTES of outputs a thread, for 16-bit 2
  along the last axis times 4 along the one before (else 8 along the last), for 32-bit 4 along the last, where they
  divide and enough threads remain (H200, float32: residual add 8x1024x768 32.5 -> 23.0 us, head transpose 36.8 ->
  17.1, a*b+c of 2^26 278 -> 249; 2 x 2 and 4 x 2 within 3% of 4). One 2-byte load a
  thread keeps too few bytes in flight to fill the memory system (an H200's SMs hold ~270k threads: ~0.5 MB against
  the ~3 MB its bandwidth times latency needs); 2 x 4 keeps a warp's loads one run of 128 bytes. H200, GPT-2 prefill
  shapes (8 x 1024 x 768, 8 x 12 x 1024 x 64; an add, transposes, a where): one a thread 32-44 us, 8 along the last
  axis 27-29, 2 x 4 18-22."""
  shape, size = root.shape, root.dtype.itemsize
  if size not in (2, 4) or any(m.op is Op.REDUCE for m in root.toposort()) or prod(shape) // (GPU_THREAD_BYTES // size) < PARALLEL_MIN_WORK: return []
  lanes, last = GPU_THREAD_BYTES // size, len(shape) - 1
  if size == 4: return [up(last, lanes)] if shape[-1] % lanes == 0 else []
  if last >= 1 and shape[-1] % 2 == 0 and shape[-2] % (lanes // 2) == 0: return [up(last, 2), up(last - 1, lanes // 2)]
  return [up(last, lanes)] if shape[-1] % lanes == 0 else []

def _cpu_opts(root: Node, caps: DeviceCaps) -> list[Opt]:
  shape = root.shape
  outer = next((s for s in shape if s > 1), 1)
  work = sum(m.shape[0] for m in root.toposort() if m.op is Op.INPUT) + prod(shape)
  parallel = work >= PARALLEL_MIN_WORK and outer > 1
  if not any(m.op is Op.REDUCE for m in root.toposort()): return [thread(_first_axis(shape))] if parallel else []
  # reductions: independent accumulators instead of one serial chain of adds; the innermost output axis
  # unrolled into lanes, so each loaded element of a shared operand serves several outputs
  inner = _last_axis(shape)
  stash, _ = output_stash(root)
  def fits(size: int, lanes: int) -> bool:
    # lanes that do not divide their axis overlap the last tile with the one before (lower.py), which computes
    # some outputs twice: not where the output holds the stash between its loops
    return size % lanes == 0 or (stash is None and size >= 2 * lanes)
  # (lanes along the stash's axis that do not divide it end in a remainder loop instead: lower._lower_loops)
  upcast = ((inner, CPU_LANES),) if inner is not None and (fits(shape[inner], CPU_LANES) or (
    stash is not None and inner == len(shape) - 1 and shape[inner] >= 2 * CPU_LANES)) else ()
  if upcast and shape[inner] == outer and parallel and shape[inner] // CPU_LANES < 2: upcast = ()
  opts = []
  tile = None
  for cols in _tile_widths(caps) if upcast else ():   # the widest tile whose columns fit the axis and are vector code
    tile = _register_tile(root, inner, fits, TILE_ROWS, cols)
    if tile is not None and (cols == TILE_COLS or _vector_columns(root, tile, caps)): break
    tile = None
  if not upcast and inner is not None and shape[inner] % SHORT_TILE_COLS == 0 and stash is None:
    # an innermost axis too short for 8 lanes (a small image's row in a convolution): a tile of rows x 4
    # columns, each column step one 4-lane load shared by the tile's rows
    tile = _register_tile(root, inner, fits, TILE_ROWS, SHORT_TILE_COLS)
  unroll, streams = CPU_LANES * 4, False   # one lane: 4 vectors of accumulators keep 4 loads in flight
  if tile is None and inner is not None: upcast, unroll, streams = _lanes_by_layout(root, inner, upcast, unroll, fits, caps)
  if tile is not None:
    upcast = tile
    (row, _), (_, cols) = tile
    if shape[inner] // cols >= TILE_OUTER_MIN:
      # columns outside rows: a column panel of the shared operand is reused by every row tile while it is
      # in cache (rows inside, it streams from memory once per row tile, a page per element)
      opts.append(swap(row, inner))
      if _staged(root, row, inner, cols, caps) is not None: opts.append(stage(inner))
  opts += [up(a, n) for a, n in upcast] + [unroll_opt(unroll, upcast[0][0] if streams else None)]
  if parallel:   # the outermost loop (the swap may have put the columns' there)
    opts.append(thread(next(a for a in loop_order(len(shape), opts) if shape[a] > 1)))
  return opts

def _tile_widths(caps: DeviceCaps) -> list[int]:
  """A CPU register tile's column counts, widest first: TILE_ROWS rows of accumulators filling half the registers,
  halved down to TILE_COLS (a narrower axis takes a narrower tile)."""
  cols, out = max(caps.registers // (2 * TILE_ROWS), TILE_COLS), []
  while cols >= TILE_COLS: out.append(cols); cols //= 2
  return out

def _staged(root: Node, row: int, inner: int, cols: int, caps: DeviceCaps) -> Node | None:
  """The operand the heuristics copy into panels (STAGE) for this tile, or None: with column tiles enough to put their
  loop outermost and row tiles enough to repay the copy."""
  if root.shape[inner] // cols < TILE_OUTER_MIN or root.shape[row] < 4 * TILE_ROWS: return None
  return panel_operand(root, row, inner, cols, caps.shared_bytes)

def _vector_columns(root: Node, tile: tuple, caps: DeviceCaps) -> bool:
  """Whether a tile wider than TILE_COLS is vector code: its column operand loaded from vector types, or copied into
  a panel of one (float16 and bfloat16 inputs become float32 panels). A scalar tile keeps TILE_COLS, whose
  accumulators a wider one would spill."""
  if all(m.dtype.name in caps.vector_dtypes for m in root.toposort() if m.op is Op.INPUT): return True
  (row, _), (inner, cols) = tile
  panel = _staged(root, row, inner, cols, caps)
  return panel is not None and panel.dtype.name in caps.vector_dtypes

def _lanes_by_layout(root: Node, inner: int, upcast: tuple, unroll: int, fits, caps: DeviceCaps) -> tuple:
  """(upcast, reduce unroll, whether the unroll applies to each lane) for a reduction without a register tile,
  from how its loads lie in memory along the output lanes and along the reduction."""
  shape = root.shape
  # the loads that differ from lane to lane: one the lanes share (a vector times a matrix: the vector) is
  # loaded once for all of them, however it lies in memory
  big, lane = _longest_reduce(root), f"o{inner}"
  loads = [l for l in _load_addresses(root) if l is None or any(v.name == lane for e in l for v in e.vars())]
  reduce_along_memory = _unit_stride(loads, _reduce_var(big, big.arg[1][-1]))
  if not _unit_stride(loads, lane):
    # Lanes would each read their own row. With the reduction along memory (row sums): ROW_STREAMS rows at once,
    # each with a vector of accumulators along its row, so a thread reads that many streams of memory at a time
    # (about 10% more bandwidth than one stream on the 2-core VM). Else one lane, its accumulators unrolled.
    if reduce_along_memory and fits(shape[inner], ROW_STREAMS) and shape[inner] >= 2 * ROW_STREAMS:
      return ((inner, ROW_STREAMS),), CPU_LANES, True
    return (), unroll, False
  if (upcast and not reduce_along_memory and big.src[0].dtype.name in caps.vector_dtypes
      and fits(shape[inner], COLUMN_LANES) and shape[inner] >= 2 * COLUMN_LANES):
    # Column sums: each step of the reduction moves to another row. 64 lanes (8 vectors of accumulators) read
    # 256 contiguous bytes of it where 8 lanes read 32 bytes of each line and page they touch (a 4096x4096
    # float32 column sum: 3.6 -> 8.7 GB/s on the 2-core VM).
    return ((inner, COLUMN_LANES),), unroll, False
  return upcast, unroll, False

COSTLY = {Op.EXP, Op.EXP2, Op.LOG, Op.LOG2, Op.SIN, Op.COS, Op.TAN, Op.TANH, Op.ERF, Op.POW}

def output_stash(root: Node) -> tuple:
  """A costly value that a reduction along the last axis and the output both need at the same element
  (softmax's exp(x - max)): computed once in the reduction's loop and kept in the output buffer, which the
  output loop of the same row then reads back instead of computing it again. Returns (value, its reduction), or
  (None, None)."""
  if not root.dtype.is_float or len(root.shape) == 0: return None, None
  # nodes evaluated at the output's own index: reached from the root through elementwise ops only
  at_output, stack = {}, [root]
  while stack:
    n = stack.pop()
    if id(n) in at_output or n.op not in ELEMENTWISE: continue
    at_output[id(n)] = n
    stack.extend(n.src)
  nodes = root.toposort()
  for r in nodes:
    if r.op is not Op.REDUCE or r.arg[1] != (len(root.shape) - 1,): continue
    s = r.src[0]
    if id(s) not in at_output or s is root or s.shape != root.shape or s.dtype is not root.dtype: continue
    if not any(m.op in COSTLY for m in s.toposort()): continue
    users = [m for m in nodes if any(x is s for x in m.src)]
    if all(m is r or id(m) in at_output for m in users): return s, r
  return None, None

def _first_axis(shape) -> int | None:
  """The outermost axis longer than 1 (the loop the CPU's threads split), None if there is none."""
  return next((a for a, s in enumerate(shape) if s > 1), None)

def _last_axis(shape) -> int | None:
  """The innermost axis longer than 1 (where lanes go first), None if there is none."""
  return max((a for a, s in enumerate(shape) if s > 1), default=None)

def _longest_reduce(root: Node) -> Node:
  return max((m for m in root.toposort() if m.op is Op.REDUCE), key=lambda r: prod(r.src[0].shape[a] for a in r.arg[1]))

def _gpu_register_tile(root: Node, caps: DeviceCaps) -> list[Opt] | None:
  """A register tile per GPU thread (matmul's): GPU_TILE outputs, so each loaded element of one operand serves a
  row of the tile and each of the other a column (the naive kernel loads both for every multiply-add). Only where
  enough threads remain to fill the GPU."""
  if not any(m.op is Op.REDUCE for m in root.toposort()) or _broadcasts_reduction(root): return None
  shape = root.shape
  inner = _last_axis(shape)
  big = _longest_reduce(root)
  if inner is None or prod(big.src[0].shape[a] for a in big.arg[1]) < GPU_TILE_MIN_REDUCE: return None
  # a tile that does not divide its axis overlaps the last one with the one before (lower._tile_start)
  tile = _register_tile(root, inner, lambda size, lanes: size % lanes == 0 or size >= 2 * lanes, *GPU_TILE)
  if tile is None: return None
  threads = prod(-(-s // dict(tile).get(a, 1)) for a, s in enumerate(shape))
  if threads < GPU_TILE_MIN_THREADS: return None
  return [local(min(caps.default_local, _pow2_at_least(threads)))] + [up(a, n) for a, n in tile]

def _broadcasts_reduction(root: Node) -> bool:
  """Whether the kernel reads a reduction's result broadcast along an axis (a layer norm's mean, a softmax's sum): each
  row's reduction is then shared by the row's outputs, which a threadgroup per row (GROUP) computes once; a register
  tile would recompute it for every tile of the row (GPT-2's layer norms on the H200, 8x1024 rows of 768: 0.27 ms
  each as 4 x 4 tiles, 192 times the row's reads)."""
  for m in root.toposort():
    if m.op is not Op.VIEW or m.arg.views[-1].mask is not None: continue
    v = m.arg.views[-1]
    if any(st == 0 and n > 1 for n, st in zip(v.shape, v.strides)) and any(x.op is Op.REDUCE for x in m.src[0].toposort()): return True
  return False

def _register_tile(root: Node, inner: int, fits, rows: int = TILE_ROWS, cols: int = TILE_COLS) -> tuple | None:
  """A 2D register tile (matmul's): rows of one output axis times columns of the innermost, when one operand
  of a reduction is the same along the columns and another the same along the rows, so each loaded
  element serves a whole row or column of the tile's accumulators. fits(size, lanes): whether lanes may tile size."""
  shape = root.shape
  if not fits(shape[inner], cols): return None
  uses = _axes_of_loads(root)
  for row in reversed(range(inner)):
    if not fits(shape[row], rows): continue
    if any(inner not in u and row in u for u in uses) and any(row not in u and inner in u for u in uses):
      return ((row, rows), (inner, cols))
  return None

def panel_operand(root: Node, row: int, inner: int, cols: int, max_bytes: int) -> Node | None:
  """The operand of a register tile's reduction that is the same along its rows (matmul's right-hand side), to be
  copied into a contiguous panel per column tile: read in place, its `cols` elements per step of the reduction lie
  a row apart, which for power-of-two widths puts every step in one cache set (2-core VM, 8 x 8 tiles: 1024^3
  55 -> 84 GFLOP/s, 2048^3 38 -> 73-80). An operand computed from its inputs is computed once per panel. Only for
  one reduction over one axis and a panel of at most max_bytes (the heuristics also want row tiles enough to repay
  the copy); the lowering checks the operand's indices and reads it in place where they do not have the expected form."""
  reduces = [m for m in root.toposort() if m.op is Op.REDUCE]
  if len(reduces) != 1 or len(reduces[0].arg[1]) != 1: return None
  (reduce,), (k,) = reduces, reduces[0].arg[1]
  operand = reduce.src[0]
  while True:   # down through the elementwise ops to the largest part that does not vary along the rows
    uses = _axes_of_loads(root, operand)
    if uses and all(row not in u for u in uses) and any(inner in u for u in uses): break
    if operand.op not in ELEMENTWISE and operand.op is not Op.CAST: return None
    parts = [s for s in operand.src if s.shape == operand.shape]
    candidates = [s for s in parts if (u := _axes_of_loads(root, s)) and all(row not in x for x in u)]
    if len(candidates) != 1: return None
    operand = candidates[0]
  if operand.shape[k] * cols * operand.dtype.itemsize > max_bytes: return None
  return operand

def _load_addresses(root: Node, under: Node | None = None) -> list:
  """Each load of an input as the expressions its address depends on, [flat index, mask conditions...], in
  variables o<axis> for the output's axes and r<reduction id>_<axis> for reduced axes (traced through views and
  reductions); None for a gather's data-dependent load. With `under`, only the loads of that node's value."""
  out, seen = [], set()
  def walk(n: Node, idx: tuple, inside: bool):
    inside = inside or n is under
    if (id(n), idx, inside) in seen: return
    seen.add((id(n), idx, inside))
    if n.op is Op.INPUT:
      if inside: out.append(list(idx[:1]))
    elif n.op is Op.VIEW:
      flat, valid = n.arg.index(list(idx))
      if valid.is_false: return   # never read: lowered to a constant
      if n.src[0].op is Op.INPUT:
        if inside: out.append([flat] + [c[1] for c in valid.clauses])
      else: walk(n.src[0], tuple(sym.mod(sym.div(flat, st), sz) if st else sym.Const(0)
                                 for sz, st in zip(n.src[0].shape, strides_for_shape(n.src[0].shape))), inside)
    elif n.op is Op.REDUCE:
      src = n.src[0]
      walk(src, tuple(sym.Var(_reduce_var(n, a), 0, src.shape[a] - 1) if a in n.arg[1] else e for a, e in enumerate(idx)), inside)
    elif n.op is Op.GATHER:
      if inside: out.append(None)
    else:
      for s in n.src: walk(s, idx, inside)
  walk(root, tuple(sym.Var(f"o{k}", 0, max(s - 1, 0)) for k, s in enumerate(root.shape)), under is None)
  return out

def _reduce_var(reduce: Node, axis: int) -> str: return f"r{id(reduce)}_{axis}"

def _axes_of_loads(root: Node, under: Node | None = None) -> list[set]:
  """For each load of an input (of `under`'s value only, if given), the output axes its address depends on (a
  gather's: every axis)."""
  return [set(range(len(root.shape))) if exprs is None else _output_axes(exprs) for exprs in _load_addresses(root, under)]

def _unit_stride(loads: list, var: str) -> bool:
  """Whether some load's address steps by one element as `var` does: neighbours along it are a vector."""
  for exprs in loads:
    if exprs is None: continue
    terms = exprs[0].terms if isinstance(exprs[0], sym.Sum) else ((exprs[0], 1),)
    if any(isinstance(t, sym.Var) and t.name == var and c == 1 for t, c in terms): return True
  return False

def _output_axes(exprs) -> set:
  return {int(v.name[1:]) for e in exprs for v in e.vars() if v.name.startswith("o")}

def row_axes(root: Node) -> int:
  """The leading output axes that pick a row of the longest reduction: the trailing ones it runs along (softmax's
  columns) or of length 1 belong to the row, not the grid (GROUP's axis)."""
  reduces = [m for m in root.toposort() if m.op is Op.REDUCE]
  big = max(reduces, key=lambda r: prod(r.src[0].shape[a] for a in r.arg[1]))
  shape, k = root.shape, len(root.shape)
  if len(big.shape) == len(shape):
    while k > 0 and (shape[k - 1] == 1 or ((k - 1) in big.arg[1] and big.src[0].shape[k - 1] == shape[k - 1])): k -= 1
  return k

def _grouped_opts(root: Node, caps: DeviceCaps) -> list[Opt] | None:
  """Rows of long reductions: a threadgroup per row, its threads striding over the row (coalesced loads)
  and combining partial results through SIMD shuffles and threadgroup memory."""
  reduces = [m for m in root.toposort() if m.op is Op.REDUCE]
  if not reduces or prod(root.shape) == 0: return None
  def length(r: Node) -> int: return prod(r.src[0].shape[a] for a in r.arg[1])
  big = max(reduces, key=length)
  k = row_axes(root)
  rows = prod(root.shape[:k])
  if length(big) < GROUP_MIN_REDUCE or rows >= GROUP_MAX_ROWS: return None
  local = max(caps.simd_width, min(caps.default_local, _pow2_at_least(length(big) // 8)))
  return [group(k, local)]

def work(root: Node) -> int:
  """Elements computed, counting each reduction's input."""
  return max([prod(root.shape)] + [prod(m.src[0].shape) for m in root.toposort() if m.op is Op.REDUCE])

def _pow2_at_least(n: int) -> int: return 1 << (max(n, 1) - 1).bit_length()
