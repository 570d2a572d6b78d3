"""alloy.linalg, torch.linalg's functions on float32 and float64 tensors, batched over leading dims:
- elimination.py: det, slogdet, logdet, solve, inv, inv_ex (Gaussian elimination with partial pivoting);
- factor.py: cholesky, qr (the Cholesky recurrence, Householder reflections);
- lu.py: lu_factor, lu, lu_solve, solve_triangular (and torch's cholesky_solve, cholesky_inverse);
- matrix_exp.py: matrix_exp (scaling and squaring, Pade 13);
- jacobi.py: eigh, eigvalsh, svd, svdvals (parallel cyclic Jacobi, two-sided and one-sided);
- least_squares.py: pinv, matrix_rank, lstsq (through the singular values);
- norms.py: matrix_norm, norm, cond, matrix_power, multi_dot, vecdot, diagonal (vector_norm is alloy.vector_norm's).

Each factorization is written in tensor ops, one step a column (or a round of rotations): a step reads its column and
row by selects against k rather than slices at k, so k is a kernel argument, and each step is realized, so a step's few
kernels are compiled once for every k (fused across steps, each depth of the chain was a kernel of its own to compile:
8.3 s against 3.2 for four functions at 2 x 5 x 5 the first time, 0.7 cached). Gradients come from autograd through
the steps. That suits the small and mid-size matrices models use (covariances, flows, whitening, 2x2 to a few
hundred); it is not a blocked LAPACK.

A singular matrix (an exactly zero pivot) makes inv and solve raise LinAlgError, as torch's do, and a matrix that is
not positive-definite makes cholesky raise; the check is bounds.in_bounds' (read on the host eagerly, on the device
under @jit)."""
from alloy.linalg.common import LinAlgError
from alloy.linalg.elimination import SlogdetResult, InvExResult, det, slogdet, logdet, solve, inv, inv_ex
from alloy.linalg.factor import QRResult, cholesky, qr
from alloy.linalg.jacobi import EighResult, SVDResult, eigh, eigvalsh, svd, svdvals
from alloy.linalg.least_squares import LstsqResult, pinv, matrix_rank, lstsq
from alloy.linalg.lu import LUFactorResult, LUResult, lu_factor, lu, lu_solve, solve_triangular
from alloy.linalg.matrix_exp import matrix_exp
from alloy.linalg.norms import matrix_norm, norm, cond, matrix_power, multi_dot, vecdot, diagonal
from alloy.vector_norm import vector_norm

__all__ = ["LinAlgError", "SlogdetResult", "InvExResult", "QRResult", "EighResult", "SVDResult", "LstsqResult", "det", "slogdet",
           "logdet", "solve", "inv", "inv_ex", "cholesky", "qr", "eigh", "eigvalsh", "svd", "svdvals", "pinv", "matrix_rank", "lstsq",
           "matrix_norm", "norm", "cond", "matrix_power", "multi_dot", "vecdot", "diagonal", "vector_norm", "LUFactorResult", "LUResult",
           "lu_factor", "lu", "lu_solve", "solve_triangular", "matrix_exp"]
