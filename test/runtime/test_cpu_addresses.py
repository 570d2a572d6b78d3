"""The CPU device's table of buffer addresses (runtime/cpu/program.py `address`): right for every array, holding
more arrays than its starting size while they live, and swept of the dead only once it has doubled, so a program
holding thousands of buffers does not rescan the table at every launch (it did: 480 µs a launch past 4096 buffers)."""
import gc
import numpy as np
from alloy.runtime.cpu import program

def test_addresses_of_many_live_arrays_are_kept_and_right():
  start = program._sweeps.at
  arrays = [np.empty(16, np.uint8) for _ in range(start + 1000)]
  for a in arrays: assert program.address(a) == a.ctypes.data
  assert len(program._addresses) >= len(arrays)       # all cached: the table grew past its starting size
  assert program._sweeps.at > len(arrays)              # and the next sweep waits for it to double
  for a in arrays[:100]: assert program.address(a) == a.ctypes.data   # hits

def test_dead_arrays_are_swept_once_the_table_doubles():
  arrays = [np.empty(16, np.uint8) for _ in range(program._sweeps.at + 10)]
  for a in arrays: program.address(a)
  del arrays
  gc.collect()
  at, kept = program._sweeps.at, []
  while program._sweeps.at == at:   # new live arrays until the table reaches the size that sweeps it
    kept.append(np.empty(16, np.uint8))
    assert program.address(kept[-1]) == kept[-1].ctypes.data
  assert all(ref() is not None for ref, _ in program._addresses.values())   # the dead went, the live stayed
  assert program._sweeps.at == max(program._sweeps.floor, 2 * (len(program._addresses) - 1))
