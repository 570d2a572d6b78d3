"""The node table: equal nodes are one object while alive; dropped nodes do not pile up in it."""
import alloy.dtype as dt
from alloy.ir import node as node_module
from alloy.ir.node import Node
from alloy.ir.ops import Op

def _const(v): return Node(Op.CONST, (), v, dt.float32, (4,))

def test_equal_nodes_are_one_object():
  a = _const(1.5)
  assert _const(1.5) is a
  assert Node(Op.EXP, (a,), None, dt.float32, (4,)) is Node(Op.EXP, (a,), None, dt.float32, (4,))
  assert _const(-0.0) is not _const(0.0)   # equal as floats, different constants
  assert Node(Op.EXP, (a,), None, dt.float16, (4,)) is not Node(Op.EXP, (a,), None, dt.float32, (4,))

def test_dropped_nodes_are_swept_and_live_ones_kept():
  keep = [Node(Op.EXP, (_const(float(i)),), None, dt.float32, (4,)) for i in range(100)]
  for round_ in range(5):
    for i in range(20000): _const(1e6 + round_ * 1e5 + i)   # made and dropped at once
    live = sum(1 for ref in node_module._table.values() if ref() is not None)
    assert len(node_module._table) <= max(4096, 2 * live) + 1, (len(node_module._table), live)
  # the live nodes are still found through the table after the sweeps
  for i, k in enumerate(keep):
    assert Node(Op.EXP, (_const(float(i)),), None, dt.float32, (4,)) is k

def test_ops_are_singletons_through_copies_and_pickles():
  import copy, pickle
  assert Op.ADD.name == "ADD" and repr(Op.ADD) == "Op.ADD"
  assert copy.deepcopy(Op.ADD) is Op.ADD and pickle.loads(pickle.dumps(Op.MUL)) is Op.MUL
  assert len({Op.ADD, Op.ADD, Op.MUL}) == 2 and Op.ADD is not Op.SUB
