/* The CUDA launch list's native loop (launch_list.py): built by the CPU device's C compiler and called through ctypes;
   it takes libcuda's cuLaunchKernel as a pointer, so it needs no CUDA header or library to build. */
#include <stdint.h>
typedef int (*launch_t)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra);
/* cuLaunchKernel (at `launch`) for n kernels in order; dims holds 7 per kernel (grid xyz, block xyz, shared bytes).
   Returns how many were launched; on a failure, the driver's error is in *err. */
int32_t alloy_cuda_launch_loop(void *launch, int32_t n, void *const *funcs, const uint32_t *dims, void *stream,
                               void *const *params, int32_t *err) {
  for (int32_t i = 0; i < n; i++) {
    const uint32_t *d = dims + 7 * i;
    int e = ((launch_t)launch)(funcs[i], d[0], d[1], d[2], d[3], d[4], d[5], d[6], stream, (void **)params[i], (void **)0);
    if (e != 0) { *err = e; return i; }
  }
  return n;
}
