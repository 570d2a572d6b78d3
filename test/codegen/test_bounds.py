"""Every load a kernel makes stays inside its buffer, lanes a mask drops included (they evaluate their source and
then select 0, so an index out of the source would read past its buffer: a crash or a fault on a device)."""
import numpy as np
import pytest
from alloy import Tensor, cat
from alloy.codegen.lower import lower
from alloy.ir.ops import Op
from test_passes import CPU, GPU, _asts, _replay, _threads

def _cases() -> dict:
  rng = np.random.default_rng(1)
  x, y = (Tensor(rng.uniform(0.5, 1.5, s).astype(np.float32)) for s in [(7, 9), (7, 9)])
  v = Tensor(rng.uniform(0.5, 1.5, 10).astype(np.float32))
  return {"left pad of a computed value": (v * 2).pad(((3, 1),)),
          "2D pad of a computed value": (x * y).pad(((2, 1), (4, 2))),
          "cat of computed values": cat([v * 2, v + 1, v.exp()]),
          "window of a padded computed value": (x + 1).pad(((1, 1), (1, 1)))[1:, :-1].pad(((2, 0), (0, 0))) * 3}

def _buffer_sizes(ast) -> dict:
  return {n.arg: n.shape[0] for n in ast.root.toposort() if n.op is Op.INPUT}

@pytest.mark.parametrize("name", list(_cases()))
def test_every_load_inside_its_buffer(name):
  for ast in _asts(_cases()[name]):
    sizes = _buffer_sizes(ast)
    for caps in (CPU, GPU):
      prog = lower(ast, caps)
      for thread in (_threads(prog) if caps is GPU else [{}]):
        loads = [(slot, at) for slot, at, is_load in _replay(prog.instrs, thread) if is_load and slot in sizes]
        assert loads, name
        bad = [(slot, at) for slot, at in loads if not 0 <= at < sizes[slot]]
        assert not bad, f"{name}: loads outside their buffers {bad[:4]} (sizes {sizes})"
