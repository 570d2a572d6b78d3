"""The passes after lowering (codegen/passes.py): index lowering, hoisting, pointer stepping, unrolling.

Each is checked on real kernels: the program keeps the addresses it touches, in the same order, whichever passes
ran (a small interpreter of the integer part of the program replays them), and kernels compiled with every pass on
give NumPy's values on the devices here."""
import collections, dataclasses
import numpy as np
import pytest
from alloy import Tensor, dtype as dt
from alloy.caps import DeviceCaps
from alloy.codegen.blocks import homes, nest
from alloy.codegen.hoist import hoist
from alloy.codegen.index import lower_indices
from alloy.codegen.lower import lower
from alloy.codegen.program import Instr, Kind, PURE
from alloy.codegen.strength import step_pointers
from alloy.codegen.unroll import unroll
from alloy.engine import compiled
from alloy.ir import symbolic as sym
from alloy.runtime.registry import get_device
from alloy.schedule.fusion import schedule

GPU = DeviceCaps(threads=True)
GPU_LOOPS = DeviceCaps(threads=True, codegen_loops=True)
CPU = DeviceCaps(threads=False, vector_widths=(8, 4), vector_arithmetic=True)

def _asts(t: Tensor) -> list: return [ast for _, ast, *_ in schedule([t.node])]

def _inputs() -> tuple:
  rng = np.random.default_rng(0)
  return tuple(rng.uniform(-1, 1, s).astype(np.float32) for s in [(64, 48), (48, 40), (30, 520)])

def _kernels(device: str = "CPU") -> dict:
  a, b, x = (Tensor(h, device=device) for h in _inputs())
  return {"matmul": a @ b, "row sums": x.sum(1), "softmax": x.softmax(1), "column sums": x.sum(0), "transpose": x.T + 1,
          "padded": x[:, 1:].pad(((0, 0), (2, 3))) * 2}

def _numpy(name: str) -> np.ndarray:
  a, b, x = (h.astype(np.float64) for h in _inputs())
  e = np.exp(x - x.max(1, keepdims=True))
  return {"matmul": lambda: a @ b, "row sums": lambda: x.sum(1), "softmax": lambda: e / e.sum(1, keepdims=True),
          "column sums": lambda: x.sum(0), "transpose": lambda: x.T + 1, "padded": lambda: np.pad(x[:, 1:], ((0, 0), (2, 3))) * 2}[name]()

def _is_symbolic(arg) -> bool:
  if isinstance(arg, (sym.Expr, sym.Cond)): return True
  return isinstance(arg, tuple) and any(_is_symbolic(a) for a in arg)

def _replay(instrs: list, thread: dict) -> list:
  """The (buffer slot, element, load or store) of every access the program makes, in order, for one thread (the values
  of its SPECIALs by variable name): the integer instructions evaluated, loops run, guards taken."""
  top, env, out = nest(instrs), {}, []
  def val(ins): return ins.arg if ins.op is Kind.CONST else env[id(ins)]
  def run(block):
    for item in block.items:
      if not hasattr(item, "op"):
        if item.is_loop:
          for k in range(item.head.arg[0].max + 1):
            env[id(item.head)] = k
            run(item)
        elif val(item.head.src[0]): run(item)
        continue
      op, s = item.op, item.src
      if op is Kind.SPECIAL: env[id(item)] = thread[item.arg[0].name]
      elif op is Kind.CAST and s[0].op in (Kind.RANGE, Kind.SPECIAL, Kind.IALU, Kind.CONST): env[id(item)] = int(val(s[0]))
      elif op is Kind.IALU:
        a = [val(x) for x in s]
        env[id(item)] = {"add": lambda: a[0] + a[1], "mul": lambda: a[0] * a[1], "mad": lambda: a[0] * a[1] + a[2],
                         "div": lambda: int(a[0] / a[1]), "mod": lambda: a[0] - a[1] * int(a[0] / a[1]), "lt": lambda: a[0] < a[1],
                         "ge": lambda: a[0] >= a[1], "and": lambda: a[0] and a[1]}[item.arg]()
      elif op is Kind.PTR: env[id(item)] = (s[0].arg if s[0].op is Kind.PARAM else s[0].arg[0], val(s[1]))
      elif op is Kind.STEP: env[id(s[0])] = (env[id(s[0])][0], env[id(s[0])][1] + item.arg)
      elif op in (Kind.LOAD, Kind.STORE, Kind.VLOAD, Kind.VSTORE):
        (slot, base), offset = env[id(s[0])], item.arg if op in (Kind.LOAD, Kind.STORE) else item.arg[0]
        valid = op is not Kind.LOAD or len(s) == 1 or val(s[1])
        if valid: out.append((slot, base + offset, op in (Kind.LOAD, Kind.VLOAD)))
  run(top)
  return out

def _threads(prog) -> list:
  """A few threads of a GPU program (first, middle, last), as SPECIAL values by variable name."""
  specials = [ins.arg[0] for ins in prog.instrs if ins.op is Kind.SPECIAL]
  return [{v.name: min(v.max, max(0, int(f * v.max))) for v in specials} for f in (0, 0.5, 1)]

@pytest.mark.parametrize("name", list(_kernels()))
def test_renderers_see_no_symbolic_index(name):
  for caps in (GPU, GPU_LOOPS, CPU):
    for ast in _asts(_kernels()[name]):
      prog = lower(ast, caps)
      assert not any(ins.op in (Kind.INDEX, Kind.COND) or (ins.op not in (Kind.RANGE, Kind.SPECIAL) and _is_symbolic(ins.arg))
                     for ins in prog.instrs), name

@pytest.mark.parametrize("name", list(_kernels()))
def test_hoisting_leaves_each_pure_instruction_at_its_operands_loop(name):
  for caps in (GPU, CPU):
    for ast in _asts(_kernels()[name]):
      prog = lower(ast, caps)
      home = homes(nest(prog.instrs))
      for ins in prog.instrs:
        if ins.op not in PURE or not ins.src or any(s.op in (Kind.ACC, Kind.VACC) for s in ins.src): continue
        deepest = max((home[id(s)] for s in ins.src), key=lambda b: b.depth())
        assert home[id(ins)] is deepest, f"{name}: {ins} sits deeper than its operands"

def test_hoisting_moves_an_invariant_out_and_merges_equals():
  i, j = sym.Var("i0", 0, 9), sym.Var("i1", 0, 7)
  g = sym.Var("gidx", 0, 99)
  param = Instr(Kind.PARAM, dt.float32, (), 0)
  special = Instr(Kind.SPECIAL, dt.int32, (), (g, "global"))
  outer, inner = Instr(Kind.RANGE, dt.int32, (), (i, False)), Instr(Kind.RANGE, dt.int32, (), (j, False))
  stores = [Instr(Kind.STORE, None, (param, Instr(Kind.CONST, dt.float32, (), 1.0)), (g * 80 + i * 8 + j + k, sym.Cond()))
            for k in range(2)]
  prog = [param, special, outer, inner, *stores, Instr(Kind.ENDRANGE, None), Instr(Kind.ENDRANGE, None)]
  out = hoist(lower_indices(prog))
  at = {id(ins): k for k, ins in enumerate(out)}
  mul = next(ins for ins in out if ins.op is Kind.IALU and ins.src[0] is special)
  assert at[id(mul)] < at[id(outer)], "gidx*80 depends on no loop: it is computed before both"
  in_inner = [ins for ins in out[at[id(inner)]:] if ins.op is Kind.IALU]
  assert len(in_inner) == 1 and in_inner[0].arg == "add", "the inner loop adds its counter, once for both stores"
  assert stores[0].src[0] is stores[1].src[0] and [s.arg for s in stores] == [0, 1], "one address, two offsets"
  assert _replay(out, {"gidx": 3}) == [(0, 3 * 80 + a * 8 + b + k, False) for a in range(10) for b in range(8) for k in range(2)]

@pytest.mark.parametrize("name", list(_kernels()))
def test_stepped_pointers_and_unrolling_keep_every_address_in_order(name):
  for ast in _asts(_kernels()[name]):
    plain, stepped = lower(ast, GPU), lower(ast, GPU_LOOPS)
    for thread in _threads(plain):
      want = _replay(plain.instrs, thread)
      assert want and _replay(stepped.instrs, thread) == want, name

def test_matmul_inner_loop_steps_pointers_and_unrolls():
  (ast,) = _asts(_kernels()["matmul"])
  plain, looped = lower(ast, GPU), lower(ast, GPU_LOOPS)
  def inner_loop(instrs):
    start = max(k for k, ins in enumerate(instrs) if ins.op is Kind.RANGE)
    return instrs[start:start + [ins.op for ins in instrs[start:]].index(Kind.ENDRANGE)]
  body = inner_loop(looped.instrs)
  assert body[0].arg[0].max + 1 == (inner_loop(plain.instrs)[0].arg[0].max + 1) // 4, "unrolled by 4"
  steps = [ins for ins in body if ins.op is Kind.STEP]
  assert steps and not any(ins.op in (Kind.IALU, Kind.PTR) for ins in body), "no address arithmetic left in the loop"
  counts = collections.Counter(ins.op for ins in body)
  assert counts[Kind.LOAD] + counts[Kind.VLOAD] == 4 * sum(ins.op in (Kind.LOAD, Kind.VLOAD) for ins in inner_loop(plain.instrs))

def test_unroll_needs_a_divisor():
  v = sym.Var("i0", 0, 6)   # 7 iterations: neither 4 nor 2 divides them
  param = Instr(Kind.PARAM, dt.float32, (), 0)
  prog = [param, Instr(Kind.RANGE, dt.int32, (), (v, False)),
          Instr(Kind.STORE, None, (param, Instr(Kind.CONST, dt.float32, (), 1.0)), (v * 1, sym.Cond())), Instr(Kind.ENDRANGE, None)]
  assert unroll(prog) == prog
  assert step_pointers(hoist(lower_indices(list(prog)))) is not None

@pytest.mark.parametrize("name", list(_kernels()))
def test_every_pass_on_gives_numpy_values(device, name, monkeypatch):
  dev = get_device(device)
  monkeypatch.setattr(dev, "caps", dataclasses.replace(dev.caps, codegen_loops=True))
  monkeypatch.setattr(compiled, "_compiled", collections.OrderedDict())
  np.testing.assert_allclose(_kernels(device)[name].numpy(), _numpy(name), rtol=2e-5, atol=2e-5)

def test_guards_that_always_hold_are_dropped():
  i = sym.Var("i0", 0, 9)
  out, x = Instr(Kind.PARAM, dt.float32, (), 0), Instr(Kind.PARAM, None, (), 1)
  holds, sometimes = sym.Cond((("lt", sym.Const(3), 5),)), sym.lt(i * 1, 5)   # an unrolled copy's guard; a real one
  load = Instr(Kind.LOAD, dt.float32, (x,), (i * 1, holds))
  prog = [out, x, Instr(Kind.RANGE, dt.int32, (), (i, False)), Instr(Kind.IF, None, (), holds), load,
          Instr(Kind.IF, None, (), sometimes), Instr(Kind.STORE, None, (out, load), (i * 1, sym.Cond())), Instr(Kind.ENDIF, None),
          Instr(Kind.ENDIF, None), Instr(Kind.ENDRANGE, None)]
  lowered = lower_indices(prog)
  assert [ins.op for ins in lowered].count(Kind.IF) == 1 and [ins.op for ins in lowered].count(Kind.ENDIF) == 1
  assert load.src == (load.src[0],), "no valid operand: the load always reads"
  assert _replay(lowered, {}) == [access for k in range(10) for access in [(1, k, True)] + ([(0, k, False)] if k < 5 else [])]
