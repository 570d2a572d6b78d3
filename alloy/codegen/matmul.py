"""Recognising the contraction a matrix engine can take: `match_matmul(ast) -> MatmulSpec | None`.

A kernel is a matmul when its AST computes

    out[i...] = epilogue(acc[b..., m, n])     acc[b..., m, n] = sum_k A[b..., m, k] * B[b..., k, n]

where A and B are loads of two input buffers (through views and widening float casts only) whose element addresses
are affine in (b..., m, k) and (b..., k, n): `offset + sum(batch_strides * b) + stride * m|n + k_stride * k`, with
no mask; and the epilogue reaches the reduction only through elementwise ops and a reshape that drops its reduced
axis, so the epilogue reads each accumulator at its own output element (bias, activation, residual add, cast: any
elementwise function of the accumulator and of other loads, evaluated per output element).

This is the interface the tensor-core lowerings build on (mma.sync here, wgmma and Metal's simdgroup matrices
elsewhere), so its fields are kept stable:

- `MatmulSpec.M, N, K`: the sizes; `batch`: the sizes of the batch axes (every other output axis, () for a 2-D
  matmul); `out_axes`: for each axis of the output (`ast.root.shape`), "b<j>" (batch axis j), "m", "n" or "1" (an
  axis of length 1 that indexes nothing).
- `a`, `b`: `MatmulOperand`s: the buffer slot, its stored dtype, the element `offset`, `batch_strides` (0 where the
  operand is broadcast along a batch axis), `stride` along its own free axis (A: m, B: n), `k_stride`, and `casts`
  (the dtypes it goes through before the multiply). `k_major` says the reduction is its contiguous axis.
- `mul_dtype`: the dtype the products are computed in; `acc_dtype`: the reduction's; `out_dtype`: the kernel's.
- `reduce`: the REDUCE node (a lowering replaces its value by the accumulator tile and lowers the rest of the AST, the
  epilogue, around it); `epilogue_ops`: the elementwise ops between the accumulator and the output, in AST order
  (empty for a plain matmul); `epilogue_inputs`: the buffer slots the epilogue reads besides A and B.
- `rounded`: the CAST to a 16-bit float through which every path of the epilogue reads the reduction (the graph
  rounds a float16 or bfloat16 matmul to its dtype before anything else reads it), or None: then a kernel may keep
  the matmul in 16 bits between its main loop and its epilogue (tensor_core.py's persistent WGMMA tile).

Exactness: the widening casts and the products are exact in `mul_dtype` for 16-bit float operands, so a tensor core
multiplying the stored operands and accumulating in `acc_dtype` computes the same sum up to its order.
"""
from __future__ import annotations
from dataclasses import dataclass
from alloy.dtype import DType, widens
from alloy.helpers import prod, strides_for_shape
from alloy.ir import symbolic as sym
from alloy.ir.kernel import KernelAST
from alloy.ir.node import Node
from alloy.ir.ops import Op, ELEMENTWISE

@dataclass(frozen=True)
class MatmulOperand:
  """One operand of a matmul as it lies in its buffer (see the module docstring)."""
  slot: int
  dtype: DType
  offset: int
  batch_strides: tuple
  stride: int
  k_stride: int
  casts: tuple = ()
  @property
  def k_major(self) -> bool:
    """The reduction runs along memory (A row-major, B transposed: nn.Linear's weight)."""
    return self.k_stride == 1

@dataclass(frozen=True)
class MatmulSpec:
  """out = epilogue(sum_k A[b..., m, k] * B[b..., k, n]): see the module docstring for each field."""
  M: int
  N: int
  K: int
  batch: tuple
  out_axes: tuple
  a: MatmulOperand
  b: MatmulOperand
  mul_dtype: DType
  acc_dtype: DType
  out_dtype: DType
  reduce: Node
  epilogue_ops: tuple = ()
  epilogue_inputs: tuple = ()
  rounded: Node | None = None

  @property
  def flops(self) -> int: return 2 * self.M * self.N * self.K * prod(self.batch)
  @property
  def operand_dtype(self) -> DType | None:
    """The stored dtype both operands share, or None where they differ."""
    return self.a.dtype if self.a.dtype == self.b.dtype else None
  @property
  def plain(self) -> bool:
    """No epilogue but the cast to the output dtype, stored as (batch..., m, n) in order: what a matmul kernel rendered
    whole (engine/wgmma.py, engine/cpu_bf16.py) computes."""
    if tuple(op.name for op in self.epilogue_ops) != ("CAST",) or self.epilogue_inputs: return False
    return [ax for ax in self.out_axes if ax != "1"] == [f"b{j}" for j in range(len(self.batch))] + ["m", "n"]

def flat_batch_stride(op: MatmulOperand, sizes: tuple) -> int | None:
  """The operand's batch axes (of these sizes) as one: the stride of the flat batch index (0 where every batch
  element shares the operand), or None where its batch axes are not one run of memory."""
  strides = op.batch_strides
  if not any(strides): return 0
  for j in range(len(sizes) - 1):
    if strides[j] != strides[j + 1] * sizes[j + 1]: return None
  return strides[-1]

def folds_batch_into_rows(spec: MatmulSpec) -> bool:
  """x @ W: B shared by every batch element and A (along K) one run of rows across them, so a kernel may compute one
  matmul of batch * M rows (engine/wgmma.py's and engine/cpu_bf16.py's both do)."""
  return (prod(spec.batch) > 1 and spec.a.k_major and flat_batch_stride(spec.b, spec.batch) == 0
          and flat_batch_stride(spec.a, spec.batch) == spec.M * spec.a.stride)

def _address(n: Node, idx: tuple) -> tuple | None:
  """(slot, stored dtype, flat index, casts) of a chain of views and widening casts down to an input, read at idx;
  None where the chain holds anything else, or a view masks it."""
  casts = []
  while True:
    if n.op is Op.CAST:
      if not widens(n.src[0].dtype, n.dtype) and n.src[0].dtype != n.dtype: return None
      casts.append(n.dtype)
      n = n.src[0]
    elif n.op is Op.VIEW:
      flat, valid = n.arg.index(list(idx))
      if not valid.is_true: return None
      src = n.src[0]
      if src.op is Op.INPUT: return src.arg, src.dtype, flat, tuple(reversed(casts))
      idx = tuple(sym.mod(sym.div(flat, st), sz) if st else sym.Const(0) for sz, st in zip(src.shape, strides_for_shape(src.shape)))
      n = src
    elif n.op is Op.INPUT: return n.arg, n.dtype, idx[0], tuple(reversed(casts))
    else: return None

def _affine(flat: sym.Expr, variables: list) -> tuple | None:
  """(offset, coefficient of each variable) where flat is an affine function of them, else None."""
  if isinstance(flat, sym.Const): return flat.v, [0] * len(variables)
  if isinstance(flat, sym.Var): terms, const = ((flat, 1),), 0
  elif isinstance(flat, sym.Sum): terms, const = flat.terms, flat.const
  else: return None
  coefs = {v: 0 for v in variables if isinstance(v, sym.Var)}
  for t, c in terms:
    if not isinstance(t, sym.Var) or t not in coefs: return None
    coefs[t] += c
  return const, [coefs.get(v, 0) for v in variables]

def _reduce_index(root: Node, reduce: Node) -> tuple | None:
  """The epilogue's path from the root to the reduction: (the root's index variables, the reduction's index as
  expressions of them, the elementwise ops met), or None where it is not elementwise ops and views only, or the
  reduction is reached more than once."""
  variables = tuple(sym.Var(f"o{a}", 0, s - 1) if s > 1 else sym.Const(0) for a, s in enumerate(root.shape))
  found, ops, inputs, seen = [], [], set(), set()
  def walk(n: Node, idx: tuple) -> bool:
    if (id(n), idx) in seen: return True
    seen.add((id(n), idx))
    if n is reduce:
      found.append(idx)
      return True
    if n.op in (Op.CONST, Op.VAR, Op.ARANGE): return True
    if n.op is Op.INPUT:
      inputs.add(n.arg)
      return True
    if n.op is Op.VIEW:
      flat, valid = n.arg.index(list(idx))
      src = n.src[0]
      if src.op is Op.INPUT:
        inputs.add(src.arg)
        return True
      if not _contains(src, reduce): return _leaf_loads(src, inputs)
      if not valid.is_true: return False
      return walk(src, tuple(sym.mod(sym.div(flat, st), sz) if st else sym.Const(0) for sz, st in zip(src.shape, strides_for_shape(src.shape))))
    if n.op in ELEMENTWISE:
      if _contains(n, reduce) and all(m is not n for m in ops): ops.append(n)
      return all(walk(s, idx) for s in n.src)
    return _leaf_loads(n, inputs) and not _contains(n, reduce)
  if not walk(root, variables) or len(set(found)) != 1: return None
  order = {id(m): k for k, m in enumerate(root.toposort())}
  return variables, found[0], tuple(m.op for m in sorted(ops, key=lambda m: order[id(m)])), inputs

def _contains(n: Node, target: Node) -> bool: return any(m is target for m in n.toposort())

def _leaf_loads(n: Node, inputs: set) -> bool:
  """Records the inputs a part of the epilogue that does not hold the reduction reads; any such part is fine."""
  inputs.update(m.arg for m in n.toposort() if m.op is Op.INPUT)
  return not any(m.op is Op.REDUCE for m in n.toposort())

def match_matmul(ast: KernelAST) -> MatmulSpec | None:
  """The kernel as a matmul with an elementwise epilogue (module docstring), or None where it is not one."""
  root = ast.root
  reduces = [n for n in root.toposort() if n.op is Op.REDUCE]
  if len(reduces) != 1: return None
  reduce = reduces[0]
  op, axes = reduce.arg
  if op is not Op.ADD or len(axes) != 1 or not reduce.dtype.is_float: return None
  (kax,), src = axes, reduce.src[0]
  if src.op is not Op.MUL or src.dtype != reduce.dtype: return None
  K = src.shape[kax]
  if K < 1: return None
  path = _reduce_index(root, reduce)
  if path is None: return None
  out_vars, red_idx, epilogue_ops, epilogue_inputs = path
  # the epilogue must read each accumulator at its own output element: the reduction's index is the output's
  # variables (axes of length 1 excepted), each once, in any order (a transposed output), 0 on the reduced axis
  live = {v: a for a, (v, s) in enumerate(zip(out_vars, root.shape)) if s > 1}
  picked = [e for a, e in enumerate(red_idx) if a != kax and src.shape[a] > 1]
  if sorted(map(repr, picked)) != sorted(map(repr, live)) or any(not isinstance(e, sym.Var) for e in picked): return None
  if not isinstance(red_idx[kax], sym.Const) or red_idx[kax].v != 0: return None
  # each operand's address in variables of the reduction's source axes
  svars = [sym.Var(f"s{a}", 0, s - 1) if s > 1 else sym.Const(0) for a, s in enumerate(src.shape)]
  lhs, rhs = src.src
  parts = []
  for x in (lhs, rhs):
    if (addr := _address(x, tuple(svars))) is None: return None
    slot, dtype, flat, casts = addr
    if (aff := _affine(flat, svars)) is None: return None   # (a length-1 axis' coefficient is 0)
    parts.append((slot, dtype, casts, *aff))
  free = [a for a in range(len(src.shape)) if a != kax and src.shape[a] > 1]
  def uses(p, a): return p[4][a] != 0
  # m: the last axis only A varies along; n: the last only B varies along (tried both ways round). Where the matmul
  # has one such axis (a vector times a matrix), the multiply's left operand is A: M or N is then 1
  for pa, pb in ((parts[0], parts[1]), (parts[1], parts[0])):
    ms = [a for a in free if uses(pa, a) and not uses(pb, a)]
    ns = [a for a in free if uses(pb, a) and not uses(pa, a)]
    if ms and ns: break
  else:
    pa, pb = parts
    ms = [a for a in free if uses(pa, a) and not uses(pb, a)]
    ns = [a for a in free if uses(pb, a) and not uses(pa, a)]
    if bool(ms) == bool(ns): return None
  m_ax, n_ax = (ms[-1] if ms else None), (ns[-1] if ns else None)
  if m_ax is not None and n_ax is not None and m_ax > n_ax: pa, pb, m_ax, n_ax = pb, pa, n_ax, m_ax   # out[.., m, n]
  batch_axes = [a for a in range(len(src.shape)) if a not in (kax, m_ax, n_ax) and src.shape[a] > 1]
  def operand(p, own):
    slot, dtype, casts, offset, coefs = p
    return MatmulOperand(slot, dtype, offset, tuple(coefs[a] for a in batch_axes), 0 if own is None else coefs[own], coefs[kax], casts)
  a, b = operand(pa, m_ax), operand(pb, n_ax)
  if a.slot == 0 or b.slot == 0: return None
  # the output's axes: each live axis of the reduction's source lands on the root's axis its variable names
  out_axes = ["1"] * len(root.shape)
  for ax in range(len(src.shape)):
    if ax != kax and src.shape[ax] > 1:
      out_axes[live[red_idx[ax]]] = "m" if ax == m_ax else "n" if ax == n_ax else f"b{batch_axes.index(ax)}"
  mul_dtype = src.dtype
  if any(c != mul_dtype for c in (a.casts[-1:] or (a.dtype,))) or any(c != mul_dtype for c in (b.casts[-1:] or (b.dtype,))):
    return None
  return MatmulSpec(M=1 if m_ax is None else src.shape[m_ax], N=1 if n_ax is None else src.shape[n_ax], K=K,
                    batch=tuple(src.shape[ax] for ax in batch_axes),
                    out_axes=tuple(out_axes), a=a, b=b, mul_dtype=mul_dtype, acc_dtype=reduce.dtype, out_dtype=root.dtype,
                    reduce=reduce, epilogue_ops=epilogue_ops, epilogue_inputs=tuple(sorted(epilogue_inputs - {a.slot, b.slot})),
                    rounded=_rounding_cast(root, reduce))

def _rounding_cast(root: Node, reduce: Node) -> Node | None:
  """The one CAST to a 16-bit float (over views of the reduction) that every path from root to reduce passes, or None."""
  casts, seen = set(), set()
  def walk(n: Node) -> bool:   # False: a path reaches the reduction without such a cast
    if id(n) in seen: return True
    seen.add(id(n))
    if n is reduce: return False
    if n.op is Op.CAST and n.dtype.is_float and n.dtype.itemsize == 2:
      x = n.src[0]
      while x.op is Op.VIEW: x = x.src[0]
      if x is reduce:
        casts.add(n)
        return True
    return all(walk(x) for x in n.src)
  return next(iter(casts)) if walk(root) and len(casts) == 1 else None
