"""The passes after lowering and vectorize.py, in their order: what every renderer's program goes through.

unroll.py (where the caps ask) works on the symbolic form; index.py lowers it to integer instructions; hoist.py moves
what is loop-invariant out; strength.py (where the caps ask) steps the addresses affine in a loop's counter.
"""
from __future__ import annotations
from alloy.codegen.hoist import hoist
from alloy.codegen.index import lower_indices
from alloy.codegen.strength import step_pointers
from alloy.codegen.unroll import unroll

def after_lowering(instrs: list, caps) -> list:
  if caps.codegen_loops: instrs = unroll(instrs)
  instrs = hoist(lower_indices(instrs))
  return step_pointers(instrs) if caps.codegen_loops else instrs
