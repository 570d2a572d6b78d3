"""The seed example: transpose, pad with zeros on both sides of both axes, sum over one axis -> 5 numbers.

Run with DEBUG=4 to see the generated kernel source, DEBUG=2 for one line per launched kernel.
"""
import numpy as np
from alloy import Tensor

rng = np.random.default_rng(0)
a_np = rng.uniform(0.5, 2.0, size=(4, 3)).astype(np.float32)   # random, non-zero

a = Tensor(a_np)
# (4, 3) -> transpose (3, 4) -> pad 1 on both sides of both axes (5, 6) -> sum over axis 1 -> (5,)
out = a.T.pad(((1, 1), (1, 1))).sum(1)
result = out.numpy()

expected = np.pad(a_np.T, ((1, 1), (1, 1))).sum(axis=1)
print("alloy :", result)
print("numpy :", expected)
print("max abs difference from NumPy:", float(np.abs(result - expected).max()))
