"""Lowering one kernel AST to a linear program.

Longer than the house's 400 lines: one pass whose parts share the Lowerer's state (open loops, lanes, packed panels).
It reads a Plan (plan.py) made from a list of typed transforms (transforms.py); the passes after lowering (index
arithmetic, hoisting, address stepping, unrolling) are codegen/passes.py's.

Every node is evaluated at a symbolic index. Each instruction is placed in the innermost open
loop whose variable it uses, so loop-invariant work (a broadcast row maximum, say) is computed
once, above the loop that does not need it. A reduction opens its own loops at the level of its
index, which lets several row reductions and their epilogue share one kernel (softmax).
"""
from __future__ import annotations
from alloy import dtype as dt
from alloy.helpers import prod, strides_for_shape
from alloy.ir import symbolic as sym
from alloy.ir.node import Node
from alloy.ir.ops import Op, FLOP_COST, ELEMENTWISE
from alloy.codegen.program import Instr, Kind, KernelMeta, LinearProgram
from alloy.codegen.opts import choose_opts
from alloy.codegen.plan import Plan, make_plan, padded_shape
from alloy.codegen.vectorize import vectorize
from alloy.codegen.passes import after_lowering
from alloy.codegen.tensor_core import EPILOGUE_LANES, MMA_SYNC, STAGE_PAD, WGMMA, accumulator_index, grid, tile_origin
from alloy.ir.kernel import KernelAST

GROUP_VECTOR = 4   # elements a grouped-reduction thread takes at once: one 16-byte access for 4-byte types
PAIR_STORE_DTYPES = ("float16", "bfloat16", "float32")   # TENSOR_CORE outputs stored two at a time (CUDA's 2-wide types)
STAGE_VECTOR = 8   # a staged 16-bit tile's copy-out: 16 bytes a thread

REDUCE_IDENTITY = {Op.ADD: lambda d: False if d.is_bool else 0, Op.MUL: lambda d: True if d.is_bool else 1,
                   Op.MAX: dt.min_value, Op.MIN: dt.max_value}

class _Level:
  """One open loop: its body, where new instructions go (before the open child loop), and an optional
  guard that skips the body (the tail of a loop whose step does not divide its length)."""
  __slots__ = ("body", "insert_at", "var", "cse_keys", "guard")
  def __init__(self, var, guard=None):
    self.body, self.insert_at, self.var, self.cse_keys, self.guard = [], None, var, [], guard
  def add(self, item):
    if self.insert_at is None: self.body.append(item)
    else:
      self.body.insert(self.insert_at, item)
      self.insert_at += 1

class _Loop:
  __slots__ = ("var", "level", "parallel")
  def __init__(self, var, level, parallel): self.var, self.level, self.parallel = var, level, parallel

class Lowerer:
  def __init__(self, ast: KernelAST, opts: Plan):
    self.ast, self.opts = ast, opts
    self.stack: list[_Level] = [_Level(None)]
    self.level_of: dict[int, int] = {}     # id(instr) -> stack level
    self.var_level: dict = {}              # Var -> stack level
    self.cse: dict = {}
    self.memo: dict = {}
    self.n_vars = 0
    self.group_var = self.lane_var = None
    self.stashing = False                  # evaluating the stashed value inside its reduction (see opts.stash)
    # opts.pack: its reduced axis, the column tile's loop level and width, the row tiles' loop variable; the panel
    # (local array, the column slots it holds) once copied; whether the copy is being evaluated
    self.pack_axis = self.panel_level = self.panel_cols = self.row_var = self.panel = None
    self.packing = False
    self.n_locals = 0                      # local arrays made so far (one per grouped reduction or packed panel)
    self.mma = self.mma_lane = None        # TENSOR_CORE: the tile's MMA instruction, the accumulator being read
    self.staged = None                     # a persistent WGMMA tile's epilogue: the staged values of the lanes being stored
    self.params = [Instr(Kind.PARAM, ast.root.dtype if k == 0 else None, (), k) for k in range(ast.n_buffers)]
    self.buffer_dtypes = [None] * ast.n_buffers
    self.buffer_dtypes[0] = ast.root.dtype
    for p in self.params: self.stack[0].add(p); self.level_of[id(p)] = 0

  # ---- placement
  def _level_for(self, srcs, exprs=()) -> int:
    lvl = max((self.level_of.get(id(s), 0) for s in srcs), default=0)
    for e in exprs:
      for v in e.vars(): lvl = max(lvl, self.var_level.get(v, 0))
      lvl = max(lvl, self._opaque_level(e))
    return lvl
  def _opaque_level(self, e) -> int:
    if isinstance(e, sym.Opaque): return self.level_of.get(id(e.ref), 0)
    if isinstance(e, sym.Sum): return max((self._opaque_level(t) for t, _ in e.terms), default=0)
    if isinstance(e, (sym.Div, sym.Mod)): return self._opaque_level(e.a)
    return 0
  def emit(self, op, dtype, src=(), arg=None, exprs=(), cse=True) -> Instr:
    key = (op, dtype, tuple(id(s) for s in src), _hashable(arg)) if cse else None
    if key is not None and (hit := self.cse.get(key)) is not None: return hit
    ins = Instr(op, dtype, tuple(src), arg)
    lvl = self._level_for(src, exprs)
    self.stack[lvl].add(ins)
    self.level_of[id(ins)] = lvl
    if key is not None:
      self.cse[key] = ins
      self.stack[lvl].cse_keys.append(key)
    return ins
  def new_var(self, size: int, prefix: str) -> sym.Var:
    v = sym.Var(f"{prefix}{self.n_vars}", 0, size - 1)
    self.n_vars += 1
    return v
  def open_loop(self, var: sym.Var, at_level: int, parallel=False, guard: sym.Cond | None = None) -> list:
    """Open a loop as a child of stack[at_level]; returns the levels it displaced, to restore later."""
    saved = self.stack[at_level + 1:]
    del self.stack[at_level + 1:]
    parent = self.stack[at_level]
    rng = Instr(Kind.RANGE, _index_dtype(var.max + 1), (), (var, parallel))   # the counter reaches the bound
    parent.add(rng)
    body_pos = parent.insert_at if parent.insert_at is not None else len(parent.body)
    lvl = _Level(var, guard)
    lvl.body.append(rng)
    parent.body[body_pos - 1] = lvl          # the loop stands where its RANGE was added
    if parent.insert_at is not None: parent.insert_at -= 1
    parent.insert_at = body_pos - 1          # new work in the parent goes before this loop
    self.stack.append(lvl)
    self.var_level[var] = len(self.stack) - 1
    return saved
  def close_loop(self, saved: list):
    lvl = self.stack.pop()
    for key in lvl.cse_keys: self.cse.pop(key, None)
    self._forget_memo(len(self.stack))
    parent = self.stack[-1]
    parent.insert_at = None if not saved else parent.insert_at + 1
    if saved:
      # the displaced child loop goes on being the parent's open child, after the new loop
      parent.insert_at = parent.body.index(saved[0]) if saved[0] in parent.body else None
    self.stack.extend(saved)
  def _forget_memo(self, max_level: int):
    for k in [k for k, v in self.memo.items() if self.level_of.get(id(v), 0) > max_level]: del self.memo[k]

  # ---- evaluation of AST nodes at symbolic indices, one per lane (unrolled copies of the same work)
  def value(self, n: Node, lanes: tuple) -> tuple:
    """n's value at each lane's index; lanes asking for the same index share one evaluation."""
    key = (id(n), lanes)
    if (hit := self.memo.get(key)) is not None: return hit
    unique = tuple(dict.fromkeys(lanes))
    if len(unique) < len(lanes):
      vals = dict(zip(unique, self.value(n, unique)))
      out = tuple(vals[idx] for idx in lanes)
    else: out = self._value(n, lanes)
    self.memo[key] = out
    return out

  def _load(self, inp: Node, flat, valid: sym.Cond) -> Instr:
    slot = inp.arg
    self.buffer_dtypes[slot] = inp.dtype
    if valid.is_false: return self.emit(Kind.CONST, inp.dtype, arg=_zero(inp.dtype))
    exprs = [flat] + [c[1] for c in valid.clauses]
    return self.emit(Kind.LOAD, inp.dtype, (self.params[slot],), (flat, valid), exprs=exprs)

  def _value(self, n: Node, lanes: tuple) -> tuple:
    if n is self.opts.pack and not self.packing and (loads := self._panel_loads(n, lanes)) is not None: return loads
    if n is self.opts.stash and not self.stashing:   # computed by its reduction's loop, kept in the output
      # that loop stores what these loads read, so it is placed first, whichever operand asked for the reduction
      self.value(self.opts.stash_reduce, tuple(idx[:-1] + (sym.Const(0),) for idx in lanes))
      return tuple(self.emit(Kind.LOAD, n.dtype, (self.params[0],), (flat, sym.Cond()), exprs=[flat])
                   for flat in (self._output_flat(idx) for idx in lanes))
    if self.staged is not None and n is self.opts.tensor_core[0].rounded:   # the rounded matmul, as staged (_lower_persistent)
      assert len(lanes) == len(self.staged), "the epilogue reads the matmul at its own output elements"
      return self.staged
    if n.op is Op.CONST: return (self.emit(Kind.CONST, n.dtype, arg=n.arg),) * len(lanes)
    if n.op is Op.VAR: return (self.emit(Kind.VAR, n.dtype, arg=n.arg),) * len(lanes)   # a scalar argument, read once
    if n.op is Op.ARANGE: return tuple(self.emit(Kind.INDEX, n.dtype, arg=idx[0], exprs=[idx[0]]) for idx in lanes)
    if n.op is Op.INPUT: return tuple(self._load(n, idx[0], sym.Cond()) for idx in lanes)
    if n.op is Op.VIEW: return self._view(n, lanes)
    if n.op is Op.REDUCE: return self._reduce(n, lanes)
    if n.op is Op.GATHER: return self._gather(n, lanes)
    srcs = [self.value(s, lanes) for s in n.src]
    if n.op in (Op.CAST, Op.BITCAST):
      return tuple(self.emit(Kind.CAST if n.op is Op.CAST else Kind.BITCAST, n.dtype, (v,)) for v in srcs[0])
    if n.op in ELEMENTWISE:
      return tuple(self.emit(Kind.ALU, n.dtype, vs, n.op) for vs in zip(*srcs))
    raise NotImplementedError(f"cannot lower {n.op}")

  def _view(self, n: Node, lanes: tuple) -> tuple:
    src = n.src[0]
    where = [n.arg.index(list(idx)) for idx in lanes]
    if src.op is Op.INPUT: return tuple(self._load(src, flat, valid) for flat, valid in where)
    live = [k for k, (_, valid) in enumerate(where) if not valid.is_false]
    strides, total = strides_for_shape(src.shape), prod(src.shape)
    # a lane the mask drops still evaluates the source (then selects 0), so its index must stay inside the source:
    # where the flat index can be negative (the left pad), a whole number of source sizes is added first, which
    # moves no valid lane's index, and C's `%` of the result is never negative
    flats = {k: where[k][0] if where[k][0].min >= 0 else sym.add(where[k][0], -(where[k][0].min // total) * total) for k in live}
    inner = dict(zip(live, self.value(src, tuple(tuple(sym.mod(sym.div(flats[k], st), sz) if st else sym.Const(0)
                                                       for sz, st in zip(src.shape, strides)) for k in live)))) if live else {}
    zero = self.emit(Kind.CONST, n.dtype, arg=_zero(n.dtype))
    out = []
    for k, (_, valid) in enumerate(where):
      if valid.is_false: out.append(zero)
      elif valid.is_true: out.append(inner[k])
      else:
        cond = self.emit(Kind.COND, dt.bool_, arg=valid, exprs=[c[1] for c in valid.clauses])
        out.append(self.emit(Kind.ALU, n.dtype, (cond, inner[k], zero), Op.WHERE))
    return tuple(out)

  def _gather(self, n: Node, lanes: tuple) -> tuple:
    nb, x = len(n.src[1].shape), n.src[0]
    picks = [self.value(n.src[1 + k], tuple(idx[:nb] for idx in lanes)) for k in range(len(n.arg))]
    x_lanes = []
    for lane, idx in enumerate(lanes):
      rest, x_idx = list(idx[nb:]), []
      for a in range(len(x.shape)):
        if a in n.arg: x_idx.append(sym.Opaque(picks[n.arg.index(a)][lane], 0, x.shape[a] - 1))
        else: x_idx.append(rest.pop(0))
      x_lanes.append(tuple(x_idx))
    return self.value(x, tuple(x_lanes))

  def _reduce(self, n: Node, lanes: tuple) -> tuple:
    op, axes = n.arg
    src = n.src[0]
    identity = REDUCE_IDENTITY[op](n.dtype)
    if any(src.shape[a] == 0 for a in axes):
      return tuple(self.emit(Kind.ACC, n.dtype, (), identity, exprs=idx, cse=False) for idx in lanes)
    if self.mma is not None:   # the tensor-core tile's accumulator of the element being stored (_lower_tensor_core)
      assert len(lanes) == 1 and n is self.opts.tensor_core[0].reduce, "the epilogue reads the accumulators one at a time"
      return (self.emit(Kind.GEP, n.dtype, (self.mma,), self.mma_lane, cse=False),)
    if self.opts.group and len(lanes) == 1 and all(self._row_uniform(e) for e in lanes[0]):
      return (self._group_reduce(n, lanes[0]),)
    if self.opts.full_unroll: return self._unrolled_reduce(n, lanes)
    # the innermost reduced axis may be unrolled into independent accumulators (no add waits for the last); a
    # length the unroll does not divide ends in a remainder loop with an accumulator of its own per lane (the
    # unrolled ones then stay lanes of one vector accumulator)
    last, unroll = axes[-1], self.opts.reduce_unroll if len(lanes) == 1 or self.opts.unroll_lanes else 1
    if src.shape[last] < 4 * unroll: unroll = 1
    main, tail = divmod(src.shape[last], unroll)
    accs = [[self.emit(Kind.ACC, n.dtype, (), identity, exprs=idx, cse=False) for _ in range(unroll)] for idx in lanes]
    acc_level = max(self.level_of[id(a[0])] for a in accs)
    saved_all, loop_idx = [], {}
    def open_reduce_loop(size: int):
      if size <= 1: return sym.Const(0)
      var = self.new_var(size, "r")
      saved_all.append(self.open_loop(var, len(self.stack) - 1 if saved_all else acc_level))
      return var
    for a in axes: loop_idx[a] = open_reduce_loop(main if a == last else src.shape[a])
    first = loop_idx[last] * unroll
    self._accumulate(n, lanes, loop_idx, [first + c for c in range(unroll)], [a for group in accs for a in group])
    if tail:
      rest = [self.emit(Kind.ACC, n.dtype, (), identity, exprs=idx, cse=False) for idx in lanes]
      if main > 1: self.close_loop(saved_all.pop())
      loop_idx[last] = open_reduce_loop(tail)
      self._accumulate(n, lanes, loop_idx, [loop_idx[last] + main * unroll], rest)
      accs = [group + [r] for group, r in zip(accs, rest)]
    for saved in reversed(saved_all): self.close_loop(saved)
    return tuple(self._fold(group, op, n.dtype) for group in accs)

  def _accumulate(self, n: Node, lanes: tuple, loop_idx: dict, positions: list, accs: list) -> None:
    """Fold n's source at `positions` along its last reduced axis (and loop_idx on the others) into accs, one per
    lane and position (lane-major)."""
    op, axes = n.arg
    src = n.src[0]
    src_lanes = []
    for idx in lanes:
      for pos in positions:
        full = list(idx)
        for a in axes: full[a] = pos if a == axes[-1] else loop_idx[a]
        src_lanes.append(tuple(full))
    loop_vars = [v for v in loop_idx.values() if isinstance(v, sym.Var)]
    if src is self.opts.stash:   # keep each value in the output, where the output loop reads it back
      self.stashing = True
      vals = self.value(src, tuple(src_lanes))
      self.stashing = False
      for idx, v in zip(src_lanes, vals):
        flat = self._output_flat(idx)
        self.emit(Kind.STORE, None, (self.params[0], v), (flat, sym.Cond()), exprs=[flat], cse=False)
    else: vals = self.value(src, tuple(src_lanes))
    for acc, v in zip(accs, vals):
      self.emit(Kind.UPDATE, n.dtype, (acc, v), op, cse=False, exprs=loop_vars)

  def _unrolled_reduce(self, n: Node, lanes: tuple) -> tuple:
    """No loop: every reduced element is a lane, combined in a tree."""
    op, axes = n.arg
    src = n.src[0]
    points = _all_indices([src.shape[a] for a in axes])
    src_lanes = []
    for idx in lanes:
      for p in points:
        full = list(idx)
        for a, k in zip(axes, p): full[a] = k
        src_lanes.append(tuple(full))
    vals = self.value(src, tuple(src_lanes))
    return tuple(self._fold(list(vals[i * len(points):(i + 1) * len(points)]), op, n.dtype) for i in range(len(lanes)))

  def _fold(self, parts: list, op: Op, dtype) -> Instr:
    """Combine unrolled accumulators pairwise (a tree keeps the dependency chain short)."""
    while len(parts) > 1:
      parts = [self.emit(Kind.ALU, dtype, (parts[i], parts[i + 1]), op) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]

  def _row_uniform(self, e: sym.Expr) -> bool:
    """Whether e is the same for every thread of a group: it may use the group index and nothing else."""
    if isinstance(e, sym.Opaque): return False
    if isinstance(e, sym.Sum): return all(self._row_uniform(t) for t, _ in e.terms)
    if isinstance(e, (sym.Div, sym.Mod)): return self._row_uniform(e.a)
    return not isinstance(e, sym.Var) or e is self.group_var

  def _thread_stride(self, length: int, prefix: str) -> tuple:
    """Open the loop by which a group's threads cover `length` elements: each thread takes GROUP_VECTOR
    neighbours (one vector access) every width*GROUP_VECTOR elements, so neighbouring threads read
    neighbouring vectors. Returns (the levels to restore, each taken element's index)."""
    width = self.opts.group
    vec = GROUP_VECTOR if length % GROUP_VECTOR == 0 and length >= GROUP_VECTOR * width else 1
    step = self.new_var(-(-length // (width * vec)), prefix)
    base = (self.lane_var + step * width) * vec
    saved = self.open_loop(step, 0, guard=sym.Cond((("lt", base, length),)) if length % (width * vec) else None)
    if base.max > length - vec:   # name it once, with the range its guard gives it, so `% length` drops below
      base = sym.Opaque(self.emit(Kind.INDEX, _index_dtype(base), arg=base, exprs=[base]), 0, length - vec)
    return saved, [base + c for c in range(vec)]

  def _group_reduce(self, n: Node, idx: tuple) -> Instr:
    """The group's threads stride over the reduced elements (neighbours read neighbours), then combine: butterfly
    shuffles leave each SIMD group's result in all its lanes, one lane per SIMD group posts it to a slot of fast
    memory, and every thread combines the slots; a value too wide to shuffle is posted by every thread."""
    op, axes = n.arg
    acc = self.emit(Kind.ACC, n.dtype, (), REDUCE_IDENTITY[op](n.dtype), exprs=idx, cse=False)
    src, width = n.src[0], self.opts.group
    length = prod(src.shape[a] for a in axes)
    saved, taken = self._thread_stride(length, "r")
    lanes = []
    for r in taken:
      src_idx, stride = list(idx), length
      for a in axes:
        stride //= src.shape[a]
        src_idx[a] = sym.mod(sym.div(r, stride), src.shape[a]) if src.shape[a] > 1 else sym.Const(0)
      lanes.append(tuple(src_idx))
    for v in self.value(src, tuple(lanes)):
      self.emit(Kind.UPDATE, n.dtype, (acc, v), op, cse=False, exprs=[self.stack[-1].var])
    self.close_loop(saved)
    d, simd, lane, level = n.dtype, self.opts.simd_width, self.lane_var, self.level_of[id(acc)]
    if shuffles := d.itemsize <= self.opts.shuffle_bytes:
      offset = simd // 2
      while offset:
        self.emit(Kind.UPDATE, d, (acc, self.emit(Kind.SHUFFLE, d, (acc,), offset, cse=False)), op, cse=False)
        offset //= 2
      if width <= simd: return acc
    slots = width // simd if shuffles else width
    scratch = self.emit(Kind.LOCAL, d, (), (f"part{self.n_locals}", slots), cse=False)
    self.n_locals += 1
    if shuffles: self.stack[level].add(Instr(Kind.IF, None, (), sym.Cond((("lt", sym.mod(lane, simd), 1),))))
    self.emit(Kind.STORE, None, (scratch, acc), (sym.div(lane, simd) if shuffles else lane * 1, sym.Cond()), cse=False)
    if shuffles: self.stack[level].add(Instr(Kind.ENDIF, None))
    self.stack[level].add(Instr(Kind.BARRIER, None))
    total = self.emit(Kind.ACC, d, (), REDUCE_IDENTITY[op](d), exprs=idx, cse=False)
    slot = self.new_var(slots, "w")
    saved = self.open_loop(slot, level)
    self.emit(Kind.UPDATE, d, (total, self.emit(Kind.LOAD, d, (scratch,), (slot * 1, sym.Cond()), exprs=[slot], cse=False)), op,
              cse=False)
    self.close_loop(saved)
    return total

  # ---- the kernel
  def lower(self) -> LinearProgram:
    root, opts = self.ast.root, self.opts
    if opts.full_unroll: self._store([list(idx) for idx in _all_indices(root.shape)])
    elif opts.tensor_core is not None: self._lower_tensor_core()
    elif opts.group: self._lower_groups()
    elif opts.threads: self._lower_threads()
    else: self._lower_loops()
    instrs = _flatten(self.stack[0].body)
    for p, d in zip(self.params, self.buffer_dtypes): p.dtype = d or dt.uint8
    meta = KernelMeta(name=kernel_name(self.ast), global_size=opts.global_size, local_size=opts.local_size,
                      flops=estimate_flops(self.ast), bytes=estimate_bytes(self.ast), opts=opts.applied,
                      scalar_dtypes=self.ast.scalar_dtypes, min_blocks=opts.resident_blocks())
    return LinearProgram(instrs, meta, self.buffer_dtypes)

  def _output_flat(self, idx) -> sym.Expr:
    flat = sym.Const(0)
    for e, st in zip(idx, strides_for_shape(self.ast.root.shape)): flat = flat + e * st
    return flat

  def _store(self, lanes: list) -> None:
    """Each lane's output computed and stored. A lane past a padded axis' end (PAD) computes the output its index
    wraps to, whose loads all stay inside the buffers, and stores nothing: its store is guarded."""
    shape, pads = self.ast.root.shape, dict(self.opts.pad)
    reads = tuple(tuple(sym.mod(e, shape[a]) if a in pads else e for a, e in enumerate(idx)) for idx in lanes)
    for idx, val in zip(lanes, self.value(self.ast.root, reads)):
      flat = self._output_flat(idx)
      guard = sym.Cond()
      for a in pads: guard = guard & sym.lt(idx[a], shape[a])
      block = None if guard.is_true else self.stack[self._level_for((self.params[0], val), [flat])]
      if block is not None: block.add(Instr(Kind.IF, None, (), guard))
      self.emit(Kind.STORE, None, (self.params[0], val), (flat, sym.Cond()), exprs=[flat], cse=False)
      if block is not None: block.add(Instr(Kind.ENDIF, None))

  def _lower_loops(self) -> None:
    """CPU: a loop per output axis (in opts.loop_order), the outer one split across cores when the kernel is big;
    the upcast axes are unrolled into lanes that share each load of the others (a register tile for matmul).
    Where an upcast does not divide its axis, the last tile ends at the axis' end, overlapping the one before it:
    those outputs are computed twice, to the same value, and every tile stays vector code (no scalar tail)."""
    opts = self.opts
    shape = padded_shape(self.ast.root.shape, dict(opts.pad))
    saved, start, lanes_of = [], [sym.Const(0)] * len(shape), {}
    if opts.pack is not None: self.pack_axis = next(m for m in self.ast.root.toposort() if m.op is Op.REDUCE).arg[1][0]
    order = [a for a in opts.loop_order or range(len(shape)) if shape[a] > 1]
    tail = None   # (axis, its first index past the tiles) where a remainder loop follows the innermost one
    for a in order:
      s, unroll = shape[a], dict(opts.upcast).get(a, 1)
      if s % unroll and opts.stash is not None:
        # the output holds the stash between its loops, so no output may be computed twice: the tiles stop short
        # and one lane at a time does the rest (only the innermost axis: softmax's rows)
        assert a == order[-1], f"axis {a} of {shape}: a remainder loop only follows the innermost one"
        tail = (a, s - s % unroll)
      if s > unroll:
        var = self.new_var(s // unroll if tail else -(-s // unroll), "i")
        saved.append(self.open_loop(var, len(self.stack) - 1, parallel=not saved and opts.parallel))
        start[a] = var * unroll if tail else _tile_start(var, s, unroll)
      if unroll > 1: lanes_of[a] = unroll
      if opts.pack is not None:   # where the panel is copied (the column tile's level) and what a row tile varies
        (row, _), (cols_axis, cols) = opts.upcast
        if a == cols_axis: self.panel_level, self.panel_cols = len(self.stack) - 1, cols
        if a == row and s > unroll: self.row_var = var
    if prod(shape) > 0: self._store(_tile_lanes(start, lanes_of))
    if tail is not None:
      a, first = tail
      if shape[a] > lanes_of[a]: self.close_loop(saved.pop())   # the tiles' loop (opened where s > unroll)
      var = self.new_var(shape[a] - first, "i") if shape[a] - first > 1 else sym.Const(0)
      if isinstance(var, sym.Var): saved.append(self.open_loop(var, len(self.stack) - 1))
      del lanes_of[a]
      self._store(_tile_lanes(start[:a] + [var + first] + start[a + 1:], lanes_of))
    for sv in reversed(saved): self.close_loop(sv)

  def _panel_loads(self, n: Node, lanes: tuple) -> tuple | None:
    """opts.pack's values at the tile's lanes, read from a panel that holds them for the current column tile, side
    by side per step of the reduction (copied on first use, in a loop at the column tile's level). None where the
    lanes do not have the tile's form (then the operand is read in place)."""
    k, cols = self.pack_axis, self.panel_cols
    step = lanes[0][k]
    if not isinstance(step, sym.Var): return None
    keys = []
    for idx in lanes:
      if idx[k] != step: return None
      key = []
      for a, e in enumerate(idx):
        if a == k: continue
        used = e.vars()
        if step in used: return None
        if self.row_var in used:   # the operand is the same along rows: any row will do
          if used != {self.row_var}: return None
          e = sym.Const(0)
        if any(self.var_level.get(v, 0) > self.panel_level for v in e.vars()): return None
        key.append(e)
      keys.append(tuple(key))
    slots = list(dict.fromkeys(keys))
    if len(slots) != cols: return None
    if self.panel is None: self._copy_panel(n, slots)
    elif self.panel[1] != slots: return None
    panel = self.panel[0]
    return tuple(self.emit(Kind.LOAD, n.dtype, (panel,), (flat, sym.Cond()), exprs=[flat])
                 for flat in (step * cols + slots.index(key) for key in keys))

  def _copy_panel(self, n: Node, slots: list) -> None:
    k, cols = self.pack_axis, len(slots)
    length = n.shape[k]
    panel = self.emit(Kind.LOCAL, n.dtype, (), (f"panel{self.n_locals}", length * cols), cse=False)
    self.n_locals += 1
    step = self.new_var(length, "p")
    saved = self.open_loop(step, self.panel_level)
    self.packing = True
    values = self.value(n, tuple(key[:k] + (step,) + key[k:] for key in slots))
    self.packing = False
    for c, v in enumerate(values):
      flat = step * cols + c
      self.emit(Kind.STORE, None, (panel, v), (flat, sym.Cond()), exprs=[flat], cse=False)
    self.close_loop(saved)
    self.panel = (panel, slots)

  def _lower_threads(self) -> None:
    """GPU: one thread per output element, or per register tile of the upcast axes (neighbouring threads take
    neighbouring tiles along the innermost axis), flattened; a guard keeps the extra threads of the last block out."""
    opts = self.opts
    shape = padded_shape(self.ast.root.shape, dict(opts.pad))
    lanes_of = dict(opts.upcast)
    tiles = tuple(-(-s // lanes_of.get(a, 1)) for a, s in enumerate(shape))
    total = prod(tiles)
    # index math may assume gidx < total: the guard below makes that true
    gid = sym.Var("gidx", 0, max(total - 1, 0))
    # the extra threads of the last block count too: the guard compares their index, which must not wrap
    grid = opts.global_size[0] * opts.local_size[0]
    self.stack[0].add(Instr(Kind.SPECIAL, _index_dtype(grid), (), (gid, "global")))
    start = [_tile_start(e, s, lanes_of.get(a, 1)) for a, (e, s) in enumerate(zip(_unflatten(gid, tiles), shape))]
    guarded = grid > total
    if guarded: self.stack[0].add(Instr(Kind.IF, None, (), sym.Cond((("lt", gid, total),))))
    self._store(_tile_lanes(start, lanes_of))
    if guarded: self.stack[0].add(Instr(Kind.ENDIF, None))

  def _lower_groups(self) -> None:
    """GPU grouped reduction: the group index picks the row (the leading block_axes output axes); the
    row's reductions are shared by its threads; its other output elements are strided over the threads."""
    shape, opts = self.ast.root.shape, self.opts
    rows, width = prod(shape[:opts.block_axes]), opts.group
    self.group_var = sym.Var("gidx", 0, max(rows - 1, 0))
    self.lane_var = sym.Var("lidx", 0, width - 1)
    self.stack[0].add(Instr(Kind.SPECIAL, dt.int32, (), (self.group_var, "group")))
    self.stack[0].add(Instr(Kind.SPECIAL, dt.int32, (), (self.lane_var, "lane")))
    idx = _unflatten(self.group_var, shape[:opts.block_axes])
    per_row = prod(shape[opts.block_axes:])
    if per_row == 1:
      idx += [sym.Const(0)] * (len(shape) - opts.block_axes)
      self.value(self.ast.root, (tuple(idx),))   # every thread takes part in the reductions...
      self.stack[0].add(Instr(Kind.IF, None, (), sym.Cond((("lt", self.lane_var, 1),))))   # ...one stores
      self._store([idx])
      self.stack[0].add(Instr(Kind.ENDIF, None))
      return
    saved, taken = self._thread_stride(per_row, "j")
    self._store([idx + _unflatten(j, shape[opts.block_axes:]) for j in taken])
    self.close_loop(saved)

  def _lower_tensor_core(self) -> None:
    """TENSOR_CORE: a threadgroup per output tile (N fastest, then M, then the batch); one MMA instruction runs the
    tile's main loop into each thread's accumulators, then the epilogue (the AST above the reduction) is evaluated
    and stored at each accumulator's element, guarded where the tile passes the output's edge."""
    spec, tile = self.opts.tensor_core
    if tile.persistent: return self._lower_persistent(spec, tile)
    tiles_m, tiles_n, nb = grid(spec, tile)
    group = sym.Var("gidx", 0, tiles_m * tiles_n * nb - 1)
    # the epilogue's lanes: a WGMMA tile's producer threads leave inside the MMA, before anything reads lidx
    lane = sym.Var("lidx", tile.threads - tile.epilogue_threads, tile.threads - 1)
    self.stack[0].add(Instr(Kind.SPECIAL, dt.int32, (), (group, "group")))
    self.stack[0].add(Instr(Kind.SPECIAL, dt.int32, (), (lane, "lane")))
    m0, n0, batch_flat = tile_origin(spec, tile, group)
    batch = _unflatten(batch_flat, spec.batch)
    def offset(op) -> sym.Expr:
      flat = sym.Const(op.offset)
      for e, st in zip(batch, op.batch_strides): flat = flat + e * st
      return flat
    index = lambda e: self.emit(Kind.INDEX, _index_dtype(e), arg=e, exprs=[e])
    for op in (spec.a, spec.b): self.buffer_dtypes[op.slot] = op.dtype
    # a WGMMA tile's copy engine reads the batch element's coordinate, not its offsets
    batch_src = (index(batch_flat),) if tile.instruction == WGMMA else ()
    self.mma = self.emit(Kind.MMA, spec.acc_dtype, (self.params[spec.a.slot], self.params[spec.b.slot], index(offset(spec.a)),
                                                    index(offset(spec.b)), index(m0), index(n0), *batch_src), (spec, tile), cse=False)
    # accumulators 2j and 2j+1 are neighbours in a row: where N is the output's contiguous axis and even, one
    # 2-wide store writes both (4 or 8 bytes, aligned), under one guard
    pairs = spec.out_axes[-1] == "n" and spec.N % 2 == 0 and spec.out_dtype.name in PAIR_STORE_DTYPES
    staged = self._epilogue_stage(spec, tile)
    barrier = Instr(Kind.BARRIER, None, (), tile.epilogue_threads if tile.instruction == WGMMA else None)
    if staged is not None: self.stack[0].add(barrier)   # every warp's last reads of the pipeline are done
    where = accumulator_index(tile, lane)
    for k in range(0, len(where), 2 if pairs else 1):
      row, col = m0 + where[k][0], n0 + where[k][1]
      guard = sym.in_range(row, 0, spec.M) & sym.in_range(col, 0, spec.N)
      # each store's epilogue in its own guarded block: nothing computed inside one is reused by the next
      cse, memo = dict(self.cse), dict(self.memo)
      if not guard.is_true: self.stack[0].add(Instr(Kind.IF, None, (), guard))
      idxs, vals = [], []
      for j in range(k, k + 2) if pairs else (k,):
        r, c = m0 + where[j][0], n0 + where[j][1]
        idxs.append(_output_index(spec, r, c, batch))
        self.mma_lane = j
        vals += self.value(self.ast.root, tuple(idxs[-1:]))
      if staged is not None:
        at = where[k][0] * (tile.bn + STAGE_PAD) + where[k][1]
        self.emit(Kind.VSTORE, None, (staged, *vals), (at, 2), exprs=[at], cse=False)
      elif pairs:
        flat = self._output_flat(idxs[0])
        self.emit(Kind.VSTORE, None, (self.params[0], *vals), (flat, 2), exprs=[flat], cse=False)
      else: self._store([list(idxs[0])])
      if not guard.is_true: self.stack[0].add(Instr(Kind.ENDIF, None))
      self.cse, self.memo = cse, memo
    if staged is not None: self._copy_out_stage(spec, tile, staged, lane, m0, n0, batch, barrier)

  def _lower_persistent(self, spec, tile) -> None:
    """A persistent WGMMA tile (tensor_core.py): the MMA runs every tile's main loop and stages each tile, rounded to
    16 bits, in shared memory (its value: that memory). The epilogue threads walk this threadgroup's tiles in the same
    order: they wait for a tile's staging (HANDOFF), evaluate the epilogue at 8 neighbouring outputs of a row at a time
    from the staged values, store them, and hand the memory back. The threadgroup's last tile, which no main loop
    hides, the consumers (back from the MMA after it) share with them."""
    tiles, groups = prod(grid(spec, tile)), self.opts.global_size[0]
    group, lane = sym.Var("gidx", 0, groups - 1), sym.Var("lidx", EPILOGUE_LANES.start, tile.threads - 1)
    self.stack[0].add(Instr(Kind.SPECIAL, dt.int32, (), (group, "group")))
    self.stack[0].add(Instr(Kind.SPECIAL, dt.int32, (), (lane, "lane")))
    for op in (spec.a, spec.b): self.buffer_dtypes[op.slot] = op.dtype
    self.mma = self.emit(Kind.MMA, spec.rounded.dtype, (self.params[spec.a.slot], self.params[spec.b.slot]), (spec, tile), cse=False)
    it = self.new_var(-(-tiles // groups), "t")
    tile_index = group + it * groups
    saved = self.open_loop(it, 0, guard=sym.lt(tile_index, tiles) if tiles % groups else None)
    if tiles > groups:   # a tile before the threadgroup's last: the epilogue warps alone
      only = sym.in_range(lane, EPILOGUE_LANES.start, EPILOGUE_LANES.stop) & sym.lt(tile_index, tiles - groups)
      self._persistent_epilogue(spec, tile, tile_index, it, lane, only, len(EPILOGUE_LANES), release=True)
    last = sym.in_range(tile_index, max(tiles - groups, 0), tiles)
    self._persistent_epilogue(spec, tile, tile_index, it, lane, last, tile.threads - EPILOGUE_LANES.start, release=False)
    self.close_loop(saved)

  def _persistent_epilogue(self, spec, tile, tile_index, it, lane, where: sym.Cond, workers: int, release: bool) -> None:
    """One tile's epilogue in a block that runs where `where` holds, lanes EPILOGUE_LANES.start on as `workers` workers:
    HANDOFF's wait, each worker's chunks of 8 outputs, HANDOFF's release (not after the last tile: no main loop waits)."""
    cse, memo = dict(self.cse), dict(self.memo)   # nothing computed inside one block is reused by the next
    self.stack[-1].add(Instr(Kind.IF, None, (), where))
    m0, n0, batch_flat = tile_origin(spec, tile, tile_index)
    batch = _unflatten(batch_flat, spec.batch)
    self.emit(Kind.HANDOFF, None, (self.mma, self.emit(Kind.INDEX, _index_dtype(it), arg=it, exprs=[it])), "wait", cse=False)
    per_row = tile.bn // STAGE_VECTOR
    chunks = tile.bm * per_row
    k = self.new_var(-(-chunks // workers), "c")
    chunk = lane - EPILOGUE_LANES.start + k * workers
    saved = self.open_loop(k, len(self.stack) - 1, guard=sym.lt(chunk, chunks) if chunks % workers else None)
    r, c = sym.div(chunk, per_row), sym.mod(chunk, per_row) * STAGE_VECTOR
    at = r * (tile.bn + STAGE_PAD) + c
    vec = self.emit(Kind.VLOAD, spec.rounded.dtype, (self.mma,), (at, STAGE_VECTOR), exprs=[at], cse=False)
    self.staged = tuple(self.emit(Kind.GEP, spec.rounded.dtype, (vec,), j, cse=False) for j in range(STAGE_VECTOR))
    idxs = [_output_index(spec, m0 + r, n0 + c + j, batch) for j in range(STAGE_VECTOR)]
    vals = self.value(self.ast.root, tuple(idxs))
    self.staged = None
    # whole vectors where the output runs along N and N is whole chunks (16 bytes at a time); else element by element
    width = 16 // spec.out_dtype.itemsize if spec.out_axes[-1] == "n" and spec.N % STAGE_VECTOR == 0 else 1
    for j in range(0, STAGE_VECTOR, width):
      guard = sym.in_range(m0 + r, 0, spec.M) & sym.in_range(n0 + c + j, 0, spec.N)
      self.stack[-1].add(Instr(Kind.IF, None, (), guard))
      flat = self._output_flat(idxs[j])
      if width == 1: self.emit(Kind.STORE, None, (self.params[0], vals[j]), (flat, sym.Cond()), exprs=[flat], cse=False)
      else: self.emit(Kind.VSTORE, None, (self.params[0], *vals[j:j + width]), (flat, width), exprs=[flat], cse=False)
      self.stack[-1].add(Instr(Kind.ENDIF, None))
    self.close_loop(saved)
    if release: self.emit(Kind.HANDOFF, None, (self.mma,), "release", exprs=[it], cse=False)
    self.stack[-1].add(Instr(Kind.ENDIF, None))
    self.cse, self.memo = cse, memo

  def _epilogue_stage(self, spec, tile) -> Instr | None:
    """CUDA's mma.sync tile with a 16-bit output, N contiguous and a multiple of 8: a LOCAL array, in the pipeline's
    shared memory (free once the MMA is done), that the epilogue's values go to before they are copied out in whole
    rows. A thread's own accumulators are 2-element pairs 8 rows apart, so stored directly a warp writes 16 bytes of
    each of 8 rows: half sectors, and four times the store instructions of 16-byte ones (the attention scores' fp16
    output wrote at 1.2 TB/s that way)."""
    if tile.instruction not in (MMA_SYNC, WGMMA) or spec.out_dtype.itemsize != 2 or spec.out_axes[-1] != "n" or spec.N % STAGE_VECTOR:
      return None
    size = tile.bm * (tile.bn + STAGE_PAD)
    if size * 2 > tile.shared_bytes(spec.operand_dtype.itemsize): return None
    return self.emit(Kind.LOCAL, spec.out_dtype, (), ("stage", size, True), cse=False)

  def _copy_out_stage(self, spec, tile, staged: Instr, lane: sym.Expr, m0, n0, batch, barrier: Instr) -> None:
    """The staged tile to the output, 16 bytes a thread: a warp's 32 copies cover whole rows (full 128-byte lines)."""
    self.stack[0].add(barrier)
    per_row, chunks, threads = tile.bn // STAGE_VECTOR, tile.bm * tile.bn // STAGE_VECTOR, tile.epilogue_threads
    lane = lane - (tile.threads - threads)   # the epilogue's threads are the last ones (a WGMMA tile's consumers)
    for i in range(-(-chunks // threads)):
      chunk = lane + i * threads
      r, c = sym.div(chunk, per_row), sym.mod(chunk, per_row) * STAGE_VECTOR
      row, col = m0 + r, n0 + c
      guard = sym.in_range(row, 0, spec.M) & sym.in_range(col, 0, spec.N)
      if chunks % threads and (i + 1) * threads > chunks: guard = guard & sym.in_range(chunk, 0, chunks)
      if not guard.is_true: self.stack[0].add(Instr(Kind.IF, None, (), guard))
      at = r * (tile.bn + STAGE_PAD) + c
      vec = self.emit(Kind.VLOAD, spec.out_dtype, (staged,), (at, STAGE_VECTOR), exprs=[at], cse=False)
      flat = self._output_flat(_output_index(spec, row, col, batch))
      self.emit(Kind.VSTORE, None, (self.params[0], vec), (flat, STAGE_VECTOR), exprs=[flat], cse=False)
      if not guard.is_true: self.stack[0].add(Instr(Kind.ENDIF, None))

def _output_index(spec, row: sym.Expr, col: sym.Expr, batch: list) -> tuple:
  """The output element at the matmul's (row, column) of batch element `batch`, in the output's axes."""
  return tuple(row if a == "m" else col if a == "n" else sym.Const(0) if a == "1" else batch[int(a[1:])] for a in spec.out_axes)

def _flatten(body) -> list:
  out = []
  for item in body:
    if isinstance(item, _Level):
      inner = _flatten(item.body)
      if item.guard is not None: inner = inner[:1] + [Instr(Kind.IF, None, (), item.guard)] + inner[1:] + [Instr(Kind.ENDIF, None)]
      out.extend(inner)
      out.append(Instr(Kind.ENDRANGE, None))
    else: out.append(item)
  return out

def _index_dtype(bound) -> dt.DType:
  """The type of an index variable whose values (and the loop bound it is compared with) stay within `bound`, an
  int or an expression: int32 where that fits, as GPUs compute it faster; int64 past 2^31 elements."""
  return dt.int32 if sym.fits_int32(bound if isinstance(bound, sym.Expr) else sym.Const(bound)) else dt.int64

def _tile_start(tile: sym.Expr, size: int, lanes: int) -> sym.Expr:
  """The first index of tile number `tile` along an axis of `size`: where lanes do not divide it, the last tile
  ends at the axis' end, overlapping the one before (its outputs are computed twice, to the same value)."""
  if size % lanes == 0 or size < lanes: return tile * lanes
  return tile * lanes - sym.div(tile, size // lanes) * (lanes - size % lanes)

def _tile_lanes(start: list, lanes: dict) -> list:
  """The index of each lane of a tile: its first index plus every combination of offsets along the upcast axes."""
  out = [list(start)]
  for a, n in sorted(lanes.items()):
    out = [l[:a] + [l[a] + c] + l[a + 1:] for l in out for c in range(n)]
  return out

def _all_indices(shape) -> list:
  points = [()]
  for size in shape: points = [p + (sym.Const(k),) for p in points for k in range(size)]
  return points

def _unflatten(flat: sym.Expr, shape) -> list:
  """Per-axis indices of a row-major flat index."""
  return [sym.mod(sym.div(flat, st), s) if s > 1 else sym.Const(0) for s, st in zip(shape, strides_for_shape(shape))]

def _zero(d): return False if d.is_bool else 0.0 if d.is_float else 0

def _hashable(arg):
  if isinstance(arg, tuple): return tuple(_hashable(a) for a in arg)
  if isinstance(arg, float): return ("f", repr(arg))
  if isinstance(arg, (sym.Expr, sym.Cond)): return ("e", arg.key() if hasattr(arg, "key") else arg, repr(arg))
  return arg

def kernel_name(ast: KernelAST) -> str:
  reduces = [n for n in ast.root.toposort() if n.op is Op.REDUCE]
  dims = "_".join(str(s) for s in ast.root.shape if s != 1) or "1"
  if not reduces: return f"E_{dims}"
  rdims = "_".join(str(n.src[0].shape[a]) for n in reduces[:1] for a in n.arg[1])
  return f"r_{dims}_{rdims}"

def estimate_flops(ast: KernelAST) -> int:
  """Arithmetic per launch: each elementwise op once per element of its shape (a broadcast operand is not
  recomputed), each reduction once per element it folds in."""
  total = 0
  for n in ast.root.toposort():
    if n.op is Op.REDUCE: total += prod(n.src[0].shape)
    elif n.op in ELEMENTWISE: total += FLOP_COST.get(n.op, 1) * prod(n.shape)
  return total

def estimate_bytes(ast: KernelAST) -> int:
  seen, total = set(), prod(ast.root.shape) * ast.root.dtype.itemsize
  for n in ast.root.toposort():
    if n.op is Op.INPUT and n.arg not in seen:
      seen.add(n.arg)
      total += n.shape[0] * n.dtype.itemsize
  return total

def lower(ast: KernelAST, device_caps, opts=None) -> LinearProgram:
  """The kernel's linear program under `opts`, a list of transforms (codegen/transforms.py; default: the heuristics'
  choose_opts), which plan.make_plan validates (InvalidOpts saying why) and turns into the Lowerer's plan."""
  plan = make_plan(ast, device_caps, choose_opts(ast, device_caps) if opts is None else opts)
  prog = Lowerer(ast, plan).lower()
  prog.instrs, prog.meta.vector_widths = vectorize(prog.instrs, device_caps)
  prog.instrs = after_lowering(prog.instrs, device_caps)
  return prog
