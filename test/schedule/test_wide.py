"""schedule/wide.py: a kernel that would read more than MAX_KERNEL_INPUTS buffers (a cat, stack or sum of many
tensors) is split into kernels that each read at most that many, and the values are right on every device (the software
Metal device refused a cat of 47 buffers before: Metal binds 31)."""
import numpy as np
import alloy
from alloy import Tensor
from alloy.schedule.fusion import schedule
from alloy.schedule.wide import MAX_KERNEL_INPUTS

def _parts(device, n=60):
  arrays = [np.random.default_rng(i).standard_normal((3, 4)).astype(np.float32) for i in range(n)]
  return arrays, [Tensor(a, device=device).realize() for a in arrays]

def test_many_inputs_split_into_narrow_kernels(device):
  arrays, ts = _parts(device)
  total = ts[0]
  for t in ts[1:]: total = total + t
  cases = [(alloy.cat(ts), np.concatenate(arrays)), (alloy.stack(ts, 1), np.stack(arrays, 1)), (total, np.sum(arrays, 0)),
           ((alloy.cat(ts, 1) * 2).relu().sum(0), (np.concatenate(arrays, 1) * 2).clip(0).sum(0))]
  for got, want in cases:
    kernels = schedule([got.node])
    assert len(kernels) > 1 and all(len(inputs) - 1 <= MAX_KERNEL_INPUTS for _, _, inputs, _ in kernels)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)

def test_narrow_kernels_are_not_split(device):
  _, ts = _parts(device, MAX_KERNEL_INPUTS)
  assert len(schedule([alloy.cat(ts).node])) == 1
