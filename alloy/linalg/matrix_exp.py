"""torch.linalg.matrix_exp: scaling and squaring with the [13/13] Pade approximant (Higham 2005): A scaled by 2^-s so
its 1-norm is at most theta_13, exp(A / 2^s) = (V - U)^-1 (V + U) from six matrix products and one solve, then squared
s times. s is chosen from the batch's largest 1-norm, read on the host (one sync; a @jit capture refuses it), since the
number of squarings shapes the graph."""
from __future__ import annotations
import math
from alloy.linalg.common import check_square
from alloy.linalg.elimination import solve
from alloy.tensor import Tensor

PADE_13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0, 129060195264000.0, 10559470521600.0,
           670442572800.0, 33522128640.0, 1323241920.0, 40840800.0, 960960.0, 16380.0, 182.0, 1.0)
THETA_13 = 5.371920351148152   # the largest 1-norm for which the [13/13] approximant is exact to double precision

def matrix_exp(A: Tensor) -> Tensor:
  n = check_square(A, "linalg.matrix_exp")
  if n == 0: return A
  norm = float(A.abs().sum(-2).amax().item()) if A.numel() else 0.0
  if not math.isfinite(norm): return A + float("nan")   # inf or nan in: nan out, as torch
  s = max(0, math.ceil(math.log2(norm / THETA_13))) if norm > 0 else 0
  X = A * (0.5 ** s)
  eye = Tensor.eye(n, dtype=A.dtype, device=A.device).expand(A.shape)
  b = PADE_13
  X2 = X @ X
  X4 = X2 @ X2
  X6 = X4 @ X2
  U = X @ (X6 @ (b[13] * X6 + b[11] * X4 + b[9] * X2) + b[7] * X6 + b[5] * X4 + b[3] * X2 + b[1] * eye)
  V = X6 @ (b[12] * X6 + b[10] * X4 + b[8] * X2) + b[6] * X6 + b[4] * X4 + b[2] * X2 + b[0] * eye
  out = solve(V - U, V + U)
  for _ in range(s): out = out @ out
  return out
