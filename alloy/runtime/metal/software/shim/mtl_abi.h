// ABI shared by kernel shared objects (through the shim) and the software Metal runtime.
// Keep this file free of any include other than <stdint.h>.
#ifndef ALLOY_MTL_ABI_H
#define ALLOY_MTL_ABI_H
#include <stdint.h>

#define MTL_ABI_VERSION 1
#define MTL_MAX_BINDINGS 31
#define MTL_SIMD_WIDTH 32
#define MTL_SIMD_SLOT 64  // bytes per lane in a simd-group exchange

namespace mtl {
// Attribute indices: ThreadCtx::a[K] holds up to 3 components.
enum AttrKind : int {
  A_TPIG = 0,   // thread_position_in_grid
  A_TGPIG,      // threadgroup_position_in_grid
  A_TPITG,      // thread_position_in_threadgroup
  A_TPTG,       // threads_per_threadgroup (actual size of this group)
  A_DTPTG,      // dispatch_threads_per_threadgroup (nominal size)
  A_TGPG,       // threadgroups_per_grid
  A_TPG,        // threads_per_grid
  A_TIITG,      // thread_index_in_threadgroup
  A_SIITG,      // simdgroup_index_in_threadgroup
  A_TIISG,      // thread_index_in_simdgroup
  A_SPTG,       // simdgroups_per_threadgroup
  A_TEW,        // thread_execution_width / threads_per_simdgroup
  A_QIITG,      // quadgroup_index_in_threadgroup
  A_TIIQG,      // thread_index_in_quadgroup
  A_QPTG,       // quadgroups_per_threadgroup
  A_COUNT
};

struct ThreadCtx;

// Functions the kernel object calls back into the runtime (fiber mode only).
struct RtTable {
  void (*barrier)(ThreadCtx* c, int site);
  // Publishes `size` bytes of `val` for this lane, waits until the simdgroup is released,
  // stores a pointer to the 32 released lane slots (MTL_SIMD_SLOT bytes each) in *slots
  // and returns the mask of lanes that took part.
  uint32_t (*simd)(ThreadCtx* c, const void* val, int size, int site, const unsigned char** slots);
};

struct ThreadCtx {
  uint32_t a[A_COUNT][3];
  void* bufs[MTL_MAX_BINDINGS + 1];
  const RtTable* rt;
};
}  // namespace mtl
#endif
