"""Runs of scalar loads and stores at consecutive addresses become vector loads and stores; on the CPU,
the arithmetic on their lanes then becomes vector arithmetic too.

Unrolled lanes (an upcast axis, a tiny kernel's elements) read and write neighbours; a 4-wide
access moves them in one instruction. GPUs need the vector aligned to its size, so there a run
must start at a multiple of the width; the C vector types used on the CPU take any address.

A C compiler does not reliably turn the unrolled scalar arithmetic of a register tile into SIMD
instructions, so `pack_arithmetic` does it here: starting from the lanes of each vector load, a
set of like instructions, one per lane, whose operands are the lanes of one vector (or one scalar
shared by all lanes, broadcast) becomes one vector instruction; accumulators updated lane by lane
become one vector accumulator.
"""
from __future__ import annotations
from alloy.ir import symbolic as sym
from alloy.ir.ops import Op
from alloy.codegen.program import Instr, Kind

VECTOR_OPS = {Op.ADD, Op.SUB, Op.MUL}   # ops every vector language writes infix, exact lane by lane
FLOAT_VECTOR_OPS = {Op.DIV, Op.MAX, Op.EXP}   # float32 only: the renderer's vector helpers (exp: within 2 ulp)

def _split(flat: sym.Expr) -> tuple:
  """flat = sum of (term * coefficient) + a constant offset: (the terms, the offset)."""
  if isinstance(flat, sym.Const): return (), flat.v
  if isinstance(flat, sym.Sum): return tuple(flat.terms), flat.const
  return ((flat, 1),), 0

def _multiple_of(e: sym.Expr, width: int) -> bool:
  """Whether e is a multiple of width: here, a named index whose every term is."""
  if not (isinstance(e, sym.Opaque) and getattr(e.ref, "op", None) is Kind.INDEX): return False
  terms, off = _split(e.ref.arg)
  return off % width == 0 and all(c % width == 0 for _, c in terms)

def _scopes(instrs: list) -> list:
  """For each instruction, the block it sits in (a number per opened loop or if)."""
  out, stack, fresh = [], [0], 0
  for ins in instrs:
    if ins.op in (Kind.ENDRANGE, Kind.ENDIF): stack.pop()
    out.append(stack[-1])
    if ins.op in (Kind.RANGE, Kind.IF): fresh += 1; stack.append(fresh)
  return out

def vectorize(instrs: list, caps) -> tuple[list, tuple]:
  """(new instruction list, the vector widths used) under a device's DeviceCaps: its vector dtypes, and per dtype the
  widths that fit its widest vector (caps.widths_for), tried widest first."""
  aligned = caps.threads
  scopes = _scopes(instrs)
  groups: dict = {}
  for pos, ins in enumerate(instrs):
    d = ins.dtype if ins.op is Kind.LOAD else ins.src[0].dtype if ins.op is Kind.STORE else None
    if d is None or d.name not in caps.vector_dtypes or not (widths := caps.widths_for(d.itemsize)): continue
    flat, valid = ins.arg
    if not valid.is_true: continue
    terms, off = _split(flat)
    if aligned and not all(c % widths[-1] == 0 or _multiple_of(t, widths[-1]) for t, c in terms): continue
    groups.setdefault((ins.op, id(ins.src[0]), scopes[pos], terms), ({}, widths))[0].setdefault(off, pos)
  replace: dict[int, Instr] = {}    # position -> vector instruction placed there
  drop: set[int] = set()
  used = set()
  for width in sorted({w for _, widths in groups.values() for w in widths}, reverse=True):
    for (op, _, _, terms), (by_off, widths) in groups.items():
      if width not in widths: continue
      if aligned and not all(c % width == 0 or _multiple_of(t, width) for t, c in terms): continue
      # a GPU vector must start at a multiple of its width; a C vector anywhere (a row of 1001 floats: each row's
      # lanes start where the row does)
      for start in sorted(o for o in by_off if not aligned or o % width == 0):
        run = [by_off.get(start + k) for k in range(width)]
        if any(p is None or p in used for p in run): continue
        used.update(run)
        members = [instrs[p] for p in run]
        flat = members[0].arg[0]
        if op is Kind.LOAD:
          at = min(run)
          vec = Instr(Kind.VLOAD, members[0].dtype, (members[0].src[0],), (flat, width))
          replace[at] = vec
          for k, m in enumerate(members):   # each scalar load becomes a lane of the vector, in place
            m.op, m.src, m.arg = Kind.GEP, (vec,), k
        else:
          at = max(run)
          replace[at] = Instr(Kind.VSTORE, None, (members[0].src[0],) + tuple(m.src[1] for m in members), (flat, width))
          drop.update(p for p in run if p != at)
  if not replace: return instrs, ()
  out = []
  for pos, ins in enumerate(instrs):
    if pos in drop: continue
    if pos in replace:
      out.append(replace[pos])
      if replace[pos].op is Kind.VSTORE: continue
    out.append(ins)
  used_widths = tuple(sorted({ins.arg[1] for ins in replace.values()}, reverse=True))
  return (pack_arithmetic(out) if caps.vector_arithmetic else out), used_widths

def pack_arithmetic(instrs: list) -> list:
  """Like instructions on the lanes of vectors become vector instructions (see the module's docstring)."""
  pos = {id(ins): k for k, ins in enumerate(instrs)}
  scopes = _scopes(instrs)
  users: dict[int, list] = {}
  for ins in instrs:
    for k, s in enumerate(ins.src): users.setdefault(id(s), []).append((ins, k))
  lane_of: dict[int, tuple] = {}    # id(scalar) -> (its vector, lane)
  vectors = []
  for ins in instrs:
    if ins.op is Kind.GEP: lane_of[id(ins)] = (ins.src[0], ins.arg)
    if ins.op is Kind.VLOAD: vectors.append(ins)
  lanes_of = {id(v): [None] * v.arg[1] for v in vectors}
  for ins in instrs:
    if ins.op is Kind.GEP: lanes_of[id(ins.src[0])][ins.arg] = ins
  insert_before: dict[int, list] = {}   # position -> new instructions placed just before it
  insert_after: dict[int, list] = {}
  drop: set[int] = set()
  packed: set[int] = set()
  broadcasts: dict[int, Instr] = {}

  def operand(vals: list, width: int, broadcast=True):
    """The vector whose lanes are vals: an existing one, or (for `vector`) the one scalar all lanes share,
    to broadcast; None if neither."""
    first = lane_of.get(id(vals[0]))
    if first is not None and first[1] == 0 and first[0].arg[1] == width and \
       all(lane_of.get(id(v)) == (first[0], k) for k, v in enumerate(vals)):
      return first[0]
    if broadcast and all(v is vals[0] for v in vals) and vals[0].op not in (Kind.ACC, Kind.GEP) and id(vals[0]) in pos:
      return vals[0]
    return None

  def vector(src, width: int) -> Instr:
    if src.op in (Kind.VLOAD, Kind.VALU, Kind.VACC, Kind.VBROADCAST): return src
    if (b := broadcasts.get((id(src), width))) is None:   # placed right after src, wherever src ends up (below)
      b = broadcasts[(id(src), width)] = Instr(Kind.VBROADCAST, src.dtype, (src,), width)
    return b

  def try_pack(seed: Instr, width: int) -> Instr | None:
    """A vector instruction for the users of seed's lanes that are alike, one per lane; None if there is none."""
    lanes = lanes_of[id(seed)]
    for u0, k0 in users.get(id(lanes[0]), []):
      if id(u0) in packed or u0.op not in (Kind.ALU, Kind.UPDATE): continue
      if u0.arg not in VECTOR_OPS and not (u0.arg in FLOAT_VECTOR_OPS and u0.dtype.name == "float32"): continue
      members = [u0]
      for lane in lanes[1:]:
        match = next((u for u, k in users.get(id(lane), []) if k == k0 and u.op == u0.op and u.arg is u0.arg
                      and u.dtype == u0.dtype and id(u) not in packed and u not in members
                      and scopes[pos[id(u)]] == scopes[pos[id(u0)]]), None)
        if match is None: break
        members.append(match)
      if len(members) < width: continue
      at = max(pos[id(m)] for m in members)
      if u0.op is Kind.ALU:
        srcs = [operand([m.src[k] for m in members], width) for k in range(len(u0.src))]
        if any(s is None for s in srcs): continue
        # the members become lanes of the vector: every other user must come after it
        if any(pos[id(u)] <= at for m in members for u, _ in users.get(id(m), [])): continue
        vec = Instr(Kind.VALU, u0.dtype, tuple(vector(v, width) for v in srcs), (u0.arg, width))
        insert_after.setdefault(at, []).extend([vec] + members)   # its lanes, defined after it
        drop.update(pos[id(m)] for m in members)
      else:
        accs = [m.src[0] for m in members]
        if any(a.op is not Kind.ACC or a.arg != accs[0].arg or a.dtype != accs[0].dtype or id(a) in packed for a in accs): continue
        if any(sum(u.op is Kind.UPDATE for u, _ in users.get(id(a), [])) != 1 for a in accs): continue
        val = operand([m.src[1] for m in members], width)
        if val is None: continue
        vec = Instr(Kind.VACC, u0.dtype, (), (accs[0].arg, width))
        insert_before.setdefault(min(pos[id(a)] for a in accs), []).append(vec)
        insert_after.setdefault(at, []).append(Instr(Kind.VUPDATE, u0.dtype, (vec, vector(val, width)), u0.arg))
        drop.update(pos[id(m)] for m in members)
        packed.update(id(a) for a in accs)
        members = accs                        # the accumulators are now lanes of the vector one
      packed.update(id(m) for m in members)
      for k, m in enumerate(members):
        m.op, m.src, m.arg = Kind.GEP, (vec,), k
        lane_of[id(m)] = (vec, k)
      lanes_of[id(vec)] = members
      return vec
    return None

  work = list(vectors)
  while work:
    seed = work.pop()
    while (vec := try_pack(seed, seed.arg[1])) is not None:
      work.append(vec)
  for ins in instrs:   # a store of a whole vector's lanes in order stores the vector
    if ins.op is Kind.VSTORE and (v := operand(list(ins.src[1:]), ins.arg[1], broadcast=False)) is not None:
      ins.src = (ins.src[0], v)
  if not (insert_before or insert_after or drop): return instrs
  # a broadcast goes right after its scalar's final place: a scalar packed into a later vector moved to after that
  # vector (it is one of its lanes now), and a broadcast left at its old place would read it before it is defined
  after_src: dict[int, list] = {}
  for b in broadcasts.values(): after_src.setdefault(id(b.src[0]), []).append(b)
  out = []
  def emit(ins):
    out.append(ins)
    out.extend(after_src.get(id(ins), ()))
  for k, ins in enumerate(instrs):
    for x in insert_before.get(k, ()): emit(x)
    if k not in drop: emit(ins)
    for x in insert_after.get(k, ()): emit(x)
  return _fuse_multiply_add(out)

def _fuse_multiply_add(instrs: list) -> list:
  """acc += a*b on float32 vectors becomes one fused multiply-add when the product has no other use: one
  rounding instead of two, as BLAS does; elementwise a*b+c is left alone (it rounds twice, like NumPy)."""
  refs: dict[int, int] = {}
  for ins in instrs:
    for s in ins.src: refs[id(s)] = refs.get(id(s), 0) + 1
  lanes: dict[int, list] = {}
  for ins in instrs:
    if ins.op is Kind.GEP: lanes.setdefault(id(ins.src[0]), []).append(ins)
  gone: set[int] = set()
  for ins in instrs:
    if ins.op is not Kind.VUPDATE or ins.arg is not Op.ADD or ins.dtype.name != "float32": continue
    prod = ins.src[1]
    if prod.op is not Kind.VALU or prod.arg[0] is not Op.MUL or refs.get(id(prod), 0) != 1 + len(lanes.get(id(prod), [])): continue
    if any(refs.get(id(g), 0) for g in lanes.get(id(prod), [])): continue
    ins.src = (ins.src[0],) + prod.src
    gone.update([id(prod)] + [id(g) for g in lanes.get(id(prod), [])])
  return [ins for ins in instrs if id(ins) not in gone] if gone else instrs
