"""Where to cut the lazy graph into kernels.

Rules: movement ops are views and never cut; elementwise ops fuse with everything around them;
a reduction fuses into its consumer when its result is only broadcast there and its kept axes
lead the consumer's loop order (so it is computed once per output row, not once per element), unless it is a
matmul or convolution (is_contraction) read by a reduction or broadcast further: that one gets its own kernel;
otherwise, and when it feeds several kernels or a gather, it becomes a kernel of its own. A contraction's operand
that is computed (beneath its views and widening casts: a layer norm, a cast down to float16) is a kernel of its own
(_computed_operand), as PyTorch's matmul reads a materialized input. Before any of this, a few long reductions are
split into partial results and a final reduction (split.py).

Constants become kernel arguments (VAR leaves of the AST) where their value does not shape the code, so a new
value reuses the kernel: the schedule cache keys those by dtype and shape only, and each kernel comes with the
graph constants that give its arguments' values (constants.py: which are lifted, which stay literal).
"""
from __future__ import annotations
import itertools
from alloy.dtype import widens
from alloy.helpers import prod, strides_for_shape
from alloy.ir.attention import stored_operand
from alloy.ir.node import Node, constant_signature
from alloy.schedule.constants import MAX_KERNEL_VARS, VALUE_OPS, constant_part, forced, lifted, literal_use
from alloy.ir.ops import Op
from alloy.ir.view import ShapeTracker
from alloy.ir.kernel import KernelAST
from alloy.schedule import split
from alloy.schedule.wide import split_wide
from alloy.schedule.contractions import is_contraction, product

def _pure_expand_dims(view_node: Node) -> list[bool] | None:
  """For VIEW(reduce) that only broadcasts (and adds or drops size-1 axes): per axis, True where the value varies."""
  st: ShapeTracker = view_node.arg
  if len(st.views) != 1: return None
  v = st.views[0]
  if v.mask is not None or v.offset != 0: return None
  src_shape = view_node.src[0].shape
  want = [(s, st_) for s, st_ in zip(src_shape, strides_for_shape(src_shape)) if s != 1]
  have = [(s, st_) for s, st_ in zip(v.shape, v.strides) if s != 1 and st_ != 0]
  if want != have: return None
  return [s != 1 and st_ != 0 for s, st_ in zip(v.shape, v.strides)]

def loop_order(root: Node) -> list[int]:
  """Kernel loop axes (indices into the full shape): output axes first, then reduced axes."""
  if root.op is Op.REDUCE:
    axes = root.arg[1]
    return [i for i in range(len(root.shape)) if i not in axes] + list(axes)
  return list(range(len(root.shape)))

def _fusable_reduce(reduce: Node, view: Node | None, consumer_root: Node, path_has_view: bool) -> bool:
  if view is None or path_has_view: return False
  varies = _pure_expand_dims(view)
  if varies is None: return False
  full_shape = consumer_root.src[0].shape if consumer_root.op is Op.REDUCE else consumer_root.shape
  if tuple(view.shape) != tuple(full_shape): return False
  if len(varies) != len(full_shape): return False
  order = [a for a in loop_order(consumer_root) if full_shape[a] != 1]
  seen_broadcast = False
  for a in order:
    if varies[a] and seen_broadcast: return False
    if not varies[a]: seen_broadcast = True
  return True

def _computed_operand(x: Node) -> Node | None:
  """What a contraction's operand computes beneath its views and widening float casts, or None where it reads a
  buffer or a constant as it is. Such an operand gets its own kernel, as PyTorch's matmul reads a materialized
  input: fused, it is recomputed for every element of the other operand's free axis (a layer norm inside GPT-2's
  c_attn, N = 2304 times), and the matrix engines take only loads (codegen/matmul.py)."""
  x = _read_operand(x)
  return None if x.op in (Op.BUFFER, Op.CONST, Op.CONTIGUOUS) or not x.src else x

def _read_operand(x: Node) -> Node:
  """A contraction's operand beneath its views and widening float casts: what the matrix engines read (a computed
  one is stored first, _computed_operand), its dtype the operand's stored dtype."""
  while x.op is Op.VIEW or (x.op is Op.CAST and widens(x.src[0].dtype, x.dtype)): x = x.src[0]
  return x

def _broadcast_further(view: Node | None) -> bool:
  """Whether the consumer reads a reduction's result broadcast along an axis of length > 1."""
  varies = _pure_expand_dims(view) if view is not None else None
  return varies is not None and any(not v and n > 1 for v, n in zip(varies, view.shape))

# schedules by graph structure: the same computation on other buffers (and other values of its lifted constants)
# reuses the kernels' cut and ASTs. Per key, variants by the values of the constants kept literal past
# MAX_KERNEL_VARS (usually none, so one variant). One table per value of schedule's (`threads`, `whole`).
_schedules: dict = {}
SCHEDULE_CACHE_SIZE, SCHEDULE_VARIANTS = 4096, 4

def _table(tables: dict, threads: bool, whole: tuple) -> dict:
  """tables' table for schedule's (threads, whole), made the first time it is asked for."""
  if (table := tables.get((threads, whole))) is None: table = tables[(threads, whole)] = {}
  return table

def schedule(targets: list[Node], walked: tuple | None = None, threads: bool = False,
             whole: tuple = ()) -> list[tuple[Node, KernelAST, list, list]]:
  """Kernels in dependency order: (node realized, its AST, the nodes bound as its inputs [0]=itself, the CONST nodes
  whose values are its scalar arguments). A pure function of the graph, of `threads` (the device launches a grid of
  threads, caps.threads: its contractions of few outputs are split along K, split.py) and of `whole` (caps.whole_matmuls:
  the operand dtypes whose plain matmuls the device renders whole, each stored as its cast before its epilogue):
  which nodes were computed before is the engine's to know (engine/values.py); it hands in the targets not computed
  yet. walked: _structure(targets), where the caller has it (one_kernel's)."""
  order, position, key = walked or _structure(targets)
  cache = _table(_schedules, threads, whole)
  if (variants := cache.get(key)) is not None:
    for pinned, hit, has_split in variants:
      if not pinned or all(order[p].key[2] == v for p, v in pinned):
        at = order.__getitem__
        if has_split:   # a split reduction's kernels are no nodes of the graph: made again from the reduction
          made = {k: split.made_again(order, k, threads) for k, *_ in hit if k < 0}
          at = lambda k: order[k] if k >= 0 else made[k]
        return [(at(k), ast, [at(i) for i in inputs], [order[c] for c in consts]) for k, ast, inputs, consts in hit]
  items, pinned, made = _schedule(targets, threads, whole)
  if len(cache) >= SCHEDULE_CACHE_SIZE: cache.clear()
  variants = cache.setdefault(key, [])
  if len(variants) >= SCHEDULE_VARIANTS: del variants[0]
  def place(n: Node) -> int: return position[n] if n in position else split.place(position[made[id(n)][0]], made[id(n)][1])
  variants.append((tuple((position[n], n.key[2]) for n in pinned),
                   [(place(n), ast, [place(i) for i in inputs], [position[c] for c in consts]) for n, ast, inputs, consts in items], bool(made)))
  return items

def _structure(targets: list[Node]) -> tuple:
  """(every node under the targets, each after its sources; node -> place in that order; the graph with
  its buffers replaced by their places, equal for the same computation on other data: each node's signature
  followed by its sources' places, flat). One pass, no recursion (graphs can be deeper than Python's stack)."""
  position, parts = {}, []
  for t in targets:
    if t in position: continue
    stack = [(t, iter(t.src))]
    while stack:
      n, srcs = stack[-1]
      for s in srcs:
        if s in position: continue
        if s.src:
          stack.append((s, iter(s.src)))
          break
        position[s] = len(position)   # a leaf goes straight in (pushing it costs 5% of a small realize)
        parts.append(s.sig if s.sig is not None else constant_part(s) if s.op is Op.CONST else s.signature)
      else:
        stack.pop()
        parts.append(n.sig if n.sig is not None else constant_part(n) if n.op is Op.CONST else n.signature)
        for s in n.src: parts.append(position[s])
        if n.op in VALUE_OPS:   # a constant kept literal for this use: its value, marked apart from places (< -1)
          for k, s in enumerate(n.src):
            if literal_use(n, k) and lifted(s): parts.append(-2 - constant_signature(s, with_value=True))
        position[n] = len(position)
  parts.append(-1)   # then the targets' places (a signature fixes its node's source count, so this parses one way)
  for t in targets: parts.append(position[t])
  return list(position), position, tuple(parts)

# ---- one kernel's graph: the eager path's schedule lookup
# structure key -> (a number naming it, the AST, the places (in _structure's order) of its input BUFFER nodes, of the
# CONST nodes of its scalar arguments) where the graph is one kernel computing its root with no constant kept literal
# past MAX_KERNEL_VARS; None where it is not
_one_kernel: dict = {}   # by schedule's (`threads`, `whole`)
_kernel_numbers = itertools.count()

def one_kernel(n: Node, threads: bool = False, whole: tuple = ()) -> tuple:
  """(_structure([n]), _one_kernel's entry for n's graph). A graph seen the first time is scheduled through schedule(),
  so that one that is not one kernel finds its schedule cached there."""
  walked, known = _structure([n]), _table(_one_kernel, threads, whole)
  if (hit := known.get(walked[2], known)) is not known: return walked, hit
  hit = None
  if not is_buffer_view(n) and 0 not in n.shape:
    items = schedule([n], walked, threads, whole)
    pinned = any(p for p, *_ in _table(_schedules, threads, whole).get(walked[2], ()))
    if len(items) == 1 and items[0][0] is n and not pinned and all(i.op is Op.BUFFER for i in items[0][2][1:]):
      _, ast, inputs, consts = items[0]
      position = walked[1]
      hit = (next(_kernel_numbers), ast, tuple(position[i] for i in inputs[1:]), tuple(position[c] for c in consts))
  if len(known) >= SCHEDULE_CACHE_SIZE: known.clear()
  known[walked[2]] = hit
  return walked, hit

# ---- the eager path's lookup without a walk
# Node.structure, made from its sources' when first asked for: (a number naming its graph, equal for equal _structure
# keys; its leaves in first-use order, or None where they are its one source's (a view holds no more BUFFER node:
# results.py counts those) or it is a leaf). The number keys its signature on its sources' numbers and the places of
# each later source's leaves among the earlier ones: nodes are hash-consed, so graphs built alike over one pattern of
# leaves share subexpressions alike. So a new tiny graph is named from its few new nodes; _structure walks them all.
_structures: dict = {}
_structure_numbers = itertools.count(-2, -1)   # negative: never a leaf's signature, which names a leaf's structure
MAX_STRUCTURE_LEAVES, MAX_STRUCTURE_DEPTH = 8, 100   # past that depth of new nodes, their sources first by a stack
_LARGE = (None, None)   # a graph of more leaves: the eager path walks it (_structure)

def structure_of(n: Node, depth: int = 0) -> tuple:
  """n.structure, made where it is not yet (and its sources'); _LARGE for a graph of more than MAX_STRUCTURE_LEAVES
  leaves."""
  if (known := n.structure) is not None: return known
  src = n.src
  if not src:
    n.structure = known = (n.sig if n.sig is not None else constant_part(n) if n.op is Op.CONST else n.signature, None)
    return known
  if depth > MAX_STRUCTURE_DEPTH: _name_sources(n)   # Python's stack: the sources, without recursion
  number, leaves = src[0].structure or structure_of(src[0], depth + 1)
  if number is None: n.structure = _LARGE; return _LARGE
  key = [n.op, n.key[2], n.dtype, n.shape, number]
  if len(src) > 1:
    if leaves is None: leaves = leaves_of(src[0]) if src[0].src else (src[0],)
    for s in src[1:]:
      number, more = s.structure or structure_of(s, depth + 1)
      if number is None: n.structure = _LARGE; return _LARGE
      key.append(number)
      if more is None:
        if not s.src:   # a leaf: its place among the leaves so far (identity: nodes compare so), or None where it is new
          key.append(leaves.index(s) if s in leaves else None)
          if key[-1] is None: leaves += (s,)
          continue
        more = leaves_of(s)
      places = []   # each of its leaves' place among the leaves so far
      for leaf in more:
        if leaf not in leaves: leaves += (leaf,)
        places.append(leaves.index(leaf))
      key.append(tuple(places))
    if len(leaves) > MAX_STRUCTURE_LEAVES: n.structure = _LARGE; return _LARGE
  if n.op in VALUE_OPS:   # a constant kept literal for this use: its value, as in _structure
    for k, s in enumerate(src):
      if literal_use(n, k) and lifted(s): key.append(constant_signature(s, with_value=True))
  if (number := _structures.get(key := tuple(key))) is None:
    if len(_structures) >= 1 << 16: _structures.clear()   # numbers are never reused: a dropped one costs misses only
    number = _structures[key] = next(_structure_numbers)
  n.structure = known = (number, leaves if len(src) > 1 else None)
  return known

def _name_sources(n: Node) -> None:
  """structure_of for every node under n not named yet, each after its sources (so none recurses)."""
  stack = [n]
  while stack:
    for s in stack[-1].src:
      if s.structure is None and s.src:   # a leaf is named where it is met
        stack.append(s)
        break
    else:
      if (m := stack.pop()) is not n and m.structure is None: structure_of(m)

def leaves_of(n: Node) -> tuple:
  """n's leaves in first-use order (after structure_of(n))."""
  while (leaves := n.structure[1]) is None:
    if not n.src: return (n,)
    n = n.src[0]
  return leaves

# structure number -> one_kernel's entry for that graph, its places those of the graph's leaves (leaves_of)
_eager_kernels: dict = {}   # by schedule's (`threads`, `whole`)

def eager_kernel(n: Node, threads: bool = False, whole: tuple = ()) -> tuple:
  """(one_kernel's entry for n's graph, or None where it is not one kernel; the nodes its places index: n's leaves, or
  where the graph was walked, the walk's order; the walk, or None). A graph is walked the first time its structure is
  seen, and where it is large. threads, whole: schedule's."""
  number, leaves = n.structure or structure_of(n)
  known = _table(_eager_kernels, threads, whole)
  if number is not None and (hit := known.get(number, known)) is not known:
    return (hit, leaves or leaves_of(n), None) if hit is not None else (None, None, None)
  walked, hit = one_kernel(n, threads, whole)
  if number is not None:
    if len(known) >= SCHEDULE_CACHE_SIZE: known.clear()
    leaves, order = leaves_of(n), walked[0]
    known[number] = None if hit is None else (*hit[:2], *[tuple(leaves.index(order[p]) for p in ps) for ps in hit[2:]])
  return hit, walked[0], walked

def _schedule(targets: list[Node], threads: bool, whole: tuple) -> tuple[list[tuple[Node, KernelAST, list, list]], list, dict]:
  """schedule's kernels and the constants kept literal past MAX_KERNEL_VARS, made anew; and split.split's kernels
  that are no nodes of the targets' graph (a split reduction's partials and final one), by id."""
  # long reductions become two (split.py); the kernels then name the nodes of the targets' graph they stand for
  graph_targets = targets
  targets, stands_for, made, graph = split.split(targets, threads)
  out, pinned = _kernels(targets, whole)
  if not made: return out, pinned, made
  def was(n: Node) -> Node: return stands_for.get(id(n), n)
  out = [(was(n), ast, [was(i) for i in inputs], [was(c) for c in consts]) for n, ast, inputs, consts in out]
  named = [id(n) for n, *_ in out]
  if len(set(named)) < len(named) or any(k not in graph and k not in made for k in named):
    return (*_kernels(graph_targets, whole), {})   # two kernels for one node (a gather of a split reduction's result): unsplit
  return out, [was(c) for c in pinned], made

def _kernels(targets: list[Node], whole: tuple = ()) -> tuple[list[tuple[Node, KernelAST, list, list]], list]:
  # 1. decide which nodes become kernels
  parents: dict[int, int] = {}
  nodes = {}
  for t in targets:
    for n in t.toposort():
      nodes[id(n)] = n
  parent_of: dict[int, Node] = {}   # a node's consumer (its only one where parents says 1)
  for n in nodes.values():
    for s in n.src: parents[id(s)], parent_of[id(s)] = parents.get(id(s), 0) + 1, n
  cut: set[int] = {id(t) for t in targets if not is_buffer_view(t)}
  for n in nodes.values():
    if n.op is Op.CONTIGUOUS: cut.add(id(n))
    if n.op is Op.ATTENTION:   # a kernel of its own, reading its operands as rows (ir/attention.py)
      cut.update([id(n)] + [id(x) for x in map(stored_operand, n.src) if x is not None])
    if n.op is Op.REDUCE and is_contraction(n):
      for operand in product(n).src:
        if (x := _computed_operand(operand)) is not None: cut.add(id(x))
      if whole and all(_read_operand(x).dtype.name in whole for x in product(n).src) and (cast := _stored_as(n, parents, parent_of)) is not n:
        cut.add(id(cast))   # a matmul the device renders whole: stored as its cast, its epilogue a kernel of its own
    if n.op is Op.GATHER and any(m.op is Op.REDUCE for m in n.src[0].toposort()):
      cut.add(id(n.src[0]))
  # reductions: walk each kernel root down to its reduces and check the fusion rule;
  # a reduction reached from two kernels would be computed twice, so it gets its own
  changed = True
  while changed:
    changed = False
    users: dict[int, set] = {}
    for root_id in list(cut):
      consumers = [nodes[root_id]]
      while consumers:   # the kernel's root, then each reduction fused into it: the reductions inside a fused one
        consumer = consumers.pop()   # are checked against it (else a matmul fused into a loss's sum ran once per row)
        for red, view, has_view in _reduces_in_kernel(consumer, cut):
          if id(red) in cut: continue
          users.setdefault(id(red), set()).add(root_id)
          own_kernel = is_contraction(red) and (_kernel_root(consumer).op is Op.REDUCE or _broadcast_further(view))
          if own_kernel or not _fusable_reduce(red, view, _kernel_root(consumer), has_view):
            # stored as its cast, unless that is cut already: then the cast's own kernel cannot take it either
            cut.add(id(red) if id(stored := _stored_as(red, parents, parent_of)) in cut else id(stored)); changed = True
          else: consumers.append(red)
    for red_id, roots in users.items():
      if len(roots) > 1 and red_id not in cut: cut.add(red_id); changed = True
  split_wide(nodes, cut)   # no kernel reads more buffers than devices bind (wide.py)
  # 2. build an AST per cut node, children first
  order = [n for n in _structure(targets)[0] if id(n) in cut]
  out, pinned = [], []
  for n in order:
    inputs: list[Node] = [n]
    consts: list[Node] = []
    ast_root = _to_ast(_kernel_root(n), cut, inputs, {}, (consts, pinned), top=True)
    out.append((n, KernelAST(ast_root, len(inputs)), inputs, consts))
  return out, pinned

def _stored_as(red: Node, parents: dict, parent_of: dict) -> Node:
  """The node a reduction with a kernel of its own is stored as: the cast down to its output dtype where that is its
  one consumer (through the reshape that drops the reduced axis), so the kernel writes and its reader reads the
  narrow values (GPT-2's fp16 attention scores: half the bytes of the float32 accumulators the softmax then cast;
  an fp16 convolution's output, reshaped into its image before a batch norm reads it), else the reduction itself."""
  n, stored = red, red
  while parents.get(id(n)) == 1:
    p = parent_of[id(n)]
    if p.op is Op.VIEW and p.arg.is_contiguous and prod(p.shape) == prod(n.shape): n = p
    elif p.op is Op.CAST and p.dtype.is_float and n.dtype.is_float and p.dtype.itemsize < n.dtype.itemsize: n = stored = p
    else: break
  return stored

def _kernel_root(n: Node) -> Node:
  return n.src[0] if n.op is Op.CONTIGUOUS else n

def is_buffer_view(n: Node) -> bool:
  return n.op is Op.BUFFER or (n.op is Op.VIEW and n.src[0].op is Op.BUFFER and n.arg.is_contiguous and n.arg.size() == n.src[0].shape[0])

def _reduces_in_kernel(root: Node, cut: set):
  """(reduce, the VIEW above it or None, whether another VIEW lies on the path) inside root's kernel."""
  found, stack, seen = [], [(_kernel_root(root), None, False, True)], set()
  while stack:
    n, view, has_view, is_root = stack.pop()
    key = (id(n), id(view), has_view)
    if key in seen: continue
    seen.add(key)
    if not is_root and id(n) in cut: continue
    if n.op is Op.REDUCE and not is_root:
      found.append((n, view, has_view)); continue
    if n.op is Op.VIEW:
      stack.append((n.src[0], n, has_view or view is not None, False)); continue
    for s in n.src: stack.append((s, view, has_view, False))
  return found

def _to_ast(n: Node, cut: set, inputs: list, memo: dict, held: tuple, top=False) -> Node:
  """n inside its kernel's AST. held: (the kernel's constants that became VARs, in VAR order; the constants kept
  literal past MAX_KERNEL_VARS, for the schedule cache to check)."""
  if id(n) in memo: return memo[id(n)]
  if not top and (id(n) in cut or n.op is Op.BUFFER):
    slot = _slot(inputs, n)
    size = n.shape[0] if n.op is Op.BUFFER else prod(n.shape)
    inp = Node(Op.INPUT, (), slot, n.dtype, (size,))
    out = inp if n.op is Op.BUFFER else Node(Op.VIEW, (inp,), ShapeTracker.contiguous((size,)).reshape(n.shape), n.dtype, n.shape)
  elif n.op is Op.VIEW and (id(n.src[0]) in cut or n.src[0].op is Op.BUFFER) and not top:
    src = n.src[0]
    slot = _slot(inputs, src)
    size = src.shape[0] if src.op is Op.BUFFER else prod(src.shape)
    inp = Node(Op.INPUT, (), slot, n.dtype, (size,))
    st = n.arg if src.op is Op.BUFFER else ShapeTracker.contiguous((size,)).reshape(src.shape).compose(n.arg)
    out = Node(Op.VIEW, (inp,), st, n.dtype, n.shape)
  elif n.op is Op.VIEW and n.src[0].op is Op.VIEW:
    inner = n.src[0]
    merged = inner.arg.compose(n.arg)
    out = _to_ast(Node(Op.VIEW, (inner.src[0],), merged, n.dtype, n.shape), cut, inputs, memo, held)
  elif n.op is Op.CONTIGUOUS and not top:
    out = _to_ast(n.src[0], cut, inputs, memo, held)
  elif n.op is Op.CONST and lifted(n):
    consts, pinned = held
    if forced(n) or len(consts) < MAX_KERNEL_VARS:
      out = Node(Op.VAR, (), len(consts), n.dtype, n.shape)
      consts.append(n)
    else:
      out = n
      pinned.append(n)
  else:   # a source whose value this node's code reads stays the literal constant it is
    out = Node(n.op, tuple(s if literal_use(n, k) else _to_ast(s, cut, inputs, memo, held) for k, s in enumerate(n.src)),
               n.arg, n.dtype, n.shape)
  memo[id(n)] = out
  return out

def _slot(inputs: list, n: Node) -> int:
  for i, m in enumerate(inputs):
    if m is n: return i
  inputs.append(n)
  return len(inputs) - 1
