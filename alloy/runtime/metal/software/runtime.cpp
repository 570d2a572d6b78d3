// Software Metal runtime: launches an exported kernel entry over a grid of threadgroups.
// (One translation unit of about 500 lines, past the house's 400 lines: the fiber switch, barriers and dispatch share
// the per-threadgroup state, and splitting it would export that state across files.)
// One OS worker runs one whole threadgroup at a time. Kernels without barriers or simd-group
// functions run in loop mode (a plain call per GPU thread); the others run every GPU thread as a
// fiber with a hand-written x86-64 context switch (metal-software-device.md §2).
#include "shim/mtl_abi.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#if !defined(__x86_64__)
#error "the software Metal runtime's fiber switch is written for x86-64"
#endif

using mtl::ThreadCtx;

// ------------------------------------------------------------------------------------------------
// context switch: saves callee-saved registers, MXCSR and the x87 control word on the current stack,
// stores the stack pointer in *save and continues on `to`.
extern "C" void mtl_fiber_switch(void** save, void* to);
extern "C" void mtl_fiber_start();
asm(R"(
.text
.p2align 4
.globl mtl_fiber_switch
.hidden mtl_fiber_switch
.type mtl_fiber_switch,@function
mtl_fiber_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
.size mtl_fiber_switch, .-mtl_fiber_switch
.p2align 4
.globl mtl_fiber_start
.hidden mtl_fiber_start
.type mtl_fiber_start,@function
mtl_fiber_start:
    movq %r12, %rdi
    callq *%r13
    ud2
.size mtl_fiber_start, .-mtl_fiber_start
)");

// ------------------------------------------------------------------------------------------------
// launch description (mirrored by a ctypes Structure in worker.py)
struct Launch {
  void (*entry)(ThreadCtx*);
  void* (*tls_touch)();
  void* dl_handle;
  uint32_t groups[3];
  uint32_t tg[3];    // nominal threadgroup size
  uint32_t grid[3];  // threads per grid
  uint32_t nonuniform;
  uint32_t fiber;
  uint32_t order;  // 0 forward, 1 reverse, 2 shuffled
  uint32_t poison;
  uint32_t strict;
  uint32_t pad_;
  uint64_t seed;
  void* bufs[MTL_MAX_BINDINGS + 1];
};

enum { F_RUN = 0, F_BARRIER = 1, F_SIMD = 2, F_DONE = 3 };
enum { MAX_TG = 1024 };

struct Worker;
struct Fiber {
  ThreadCtx ctx;  // first member: the runtime callbacks cast ThreadCtx* back to Fiber*
  void* sp;
  Worker* W;
  int state, site, ssize;
  uint32_t mask, tid;
};

struct Job {
  const Launch* L;
  uint64_t ngroups;
  std::atomic<uint64_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex em;
  std::string err;
  size_t tls_size = 0;
  void fail(const std::string& m) {
    std::lock_guard<std::mutex> g(em);
    if (!failed.load()) { err = m; failed.store(true); }
  }
};

static size_t g_stack_size = 128 * 1024;
static const size_t kGuard = 4096;

struct Worker {
  Fiber* fibers = nullptr;
  char* stacks[MAX_TG] = {};
  unsigned char* stage = nullptr;     // MAX_TG * MTL_SIMD_SLOT
  unsigned char* released = nullptr;  // MAX_TG * MTL_SIMD_SLOT
  uint32_t order[MAX_TG];
  void* sched_sp = nullptr;
  int live = 0;
  uint32_t mxcsr_fcw[2];
  Worker() {
    fibers = new Fiber[MAX_TG];
    stage = new unsigned char[MAX_TG * MTL_SIMD_SLOT];
    released = new unsigned char[MAX_TG * MTL_SIMD_SLOT];
    memset(stage, 0, MAX_TG * MTL_SIMD_SLOT);
    memset(released, 0, MAX_TG * MTL_SIMD_SLOT);
  }
  char* stack(uint32_t i) {
    if (!stacks[i]) {
      void* p = mmap(nullptr, g_stack_size + kGuard, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) return nullptr;
      mprotect(p, kGuard, PROT_NONE);  // guard page below the stack
      stacks[i] = (char*)p;
    }
    return stacks[i];
  }
};

// ------------------------------------------------------------------------------------------------
// runtime callbacks used by the kernel object in fiber mode
static void rt_barrier(ThreadCtx* c, int site) {
  Fiber* f = reinterpret_cast<Fiber*>(c);
  f->state = F_BARRIER;
  f->site = site;
  mtl_fiber_switch(&f->sp, f->W->sched_sp);
}
static uint32_t rt_simd(ThreadCtx* c, const void* v, int size, int site, const unsigned char** slots) {
  Fiber* f = reinterpret_cast<Fiber*>(c);
  Worker* W = f->W;
  if (size > MTL_SIMD_SLOT) size = MTL_SIMD_SLOT;
  memcpy(W->stage + (size_t)f->tid * MTL_SIMD_SLOT, v, (size_t)size);
  f->ssize = size;
  f->state = F_SIMD;
  f->site = site;
  mtl_fiber_switch(&f->sp, W->sched_sp);
  *slots = W->released + (size_t)(f->tid & ~31u) * MTL_SIMD_SLOT;
  return f->mask;
}
static const mtl::RtTable g_fiber_rt = {rt_barrier, rt_simd};

// loop mode never reaches these: the host only picks loop mode when the kernel object has no
// sync marker.
static void rt_loop_barrier(ThreadCtx*, int) {
  fprintf(stderr, "software Metal: threadgroup_barrier reached in loop mode\n");
  abort();
}
static uint32_t rt_loop_simd(ThreadCtx*, const void*, int, int, const unsigned char**) {
  fprintf(stderr, "software Metal: simd-group function reached in loop mode\n");
  abort();
}
static const mtl::RtTable g_loop_rt = {rt_loop_barrier, rt_loop_simd};

thread_local const Launch* t_launch = nullptr;

static void fiber_main(Fiber* f) {
  Worker* W = f->W;
  t_launch->entry(&f->ctx);
  f->state = F_DONE;
  W->live--;
  mtl_fiber_switch(&f->sp, W->sched_sp);
  __builtin_trap();
}

// ------------------------------------------------------------------------------------------------
static uint64_t mix64(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
  return x;
}

static void make_order(uint32_t* order, uint32_t n, const Launch* L, uint64_t group) {
  for (uint32_t i = 0; i < n; i++) order[i] = (L->order == 1) ? n - 1 - i : i;
  if (L->order == 2) {
    uint64_t s = mix64(L->seed * 0x9e3779b97f4a7c15ULL + group + 1);
    for (uint32_t i = n; i > 1; i--) {
      s = mix64(s + 0x9e3779b97f4a7c15ULL);
      uint32_t j = (uint32_t)(s % i);
      uint32_t t = order[i - 1]; order[i - 1] = order[j]; order[j] = t;
    }
  }
}

static void fill_group(ThreadCtx& c, const Launch* L, const uint32_t g[3], const uint32_t a[3], uint32_t n) {
  for (int d = 0; d < 3; d++) {
    c.a[mtl::A_TGPIG][d] = g[d];
    c.a[mtl::A_TPTG][d] = a[d];
    c.a[mtl::A_DTPTG][d] = L->tg[d];
    c.a[mtl::A_TGPG][d] = L->groups[d];
    c.a[mtl::A_TPG][d] = L->grid[d];
  }
  for (int k : {mtl::A_SPTG, mtl::A_TEW, mtl::A_QPTG}) c.a[k][1] = c.a[k][2] = 0;
  c.a[mtl::A_SPTG][0] = (n + 31) / 32;
  c.a[mtl::A_TEW][0] = MTL_SIMD_WIDTH;
  c.a[mtl::A_QPTG][0] = (n + 3) / 4;
  for (int k : {mtl::A_TIITG, mtl::A_SIITG, mtl::A_TIISG, mtl::A_QIITG, mtl::A_TIIQG}) c.a[k][1] = c.a[k][2] = 0;
  memcpy(c.bufs, L->bufs, sizeof(c.bufs));
}

static inline void fill_thread(ThreadCtx& c, const Launch* L, const uint32_t g[3], const uint32_t a[3], uint32_t t) {
  uint32_t lx = t % a[0], ly = (t / a[0]) % a[1], lz = t / (a[0] * a[1]);
  c.a[mtl::A_TPITG][0] = lx; c.a[mtl::A_TPITG][1] = ly; c.a[mtl::A_TPITG][2] = lz;
  c.a[mtl::A_TPIG][0] = g[0] * L->tg[0] + lx;
  c.a[mtl::A_TPIG][1] = g[1] * L->tg[1] + ly;
  c.a[mtl::A_TPIG][2] = g[2] * L->tg[2] + lz;
  c.a[mtl::A_TIITG][0] = t;
  c.a[mtl::A_SIITG][0] = t / 32;
  c.a[mtl::A_TIISG][0] = t % 32;
  c.a[mtl::A_QIITG][0] = t / 4;
  c.a[mtl::A_TIIQG][0] = t % 4;
}

static std::string at_line(int site) { return "line " + std::to_string(site / 4096); }

// Runs one threadgroup with fibers. Returns false (after recording the error) on a strict-mode
// violation.
static bool run_group_fiber(Worker& W, Job& J, const uint32_t g[3], const uint32_t a[3], uint32_t n, uint64_t gi) {
  const Launch* L = J.L;
  make_order(W.order, n, L, gi);
  for (uint32_t t = 0; t < n; t++) {
    Fiber& f = W.fibers[t];
    if (t == 0) fill_group(f.ctx, L, g, a, n);
    else {
      memcpy(f.ctx.a, W.fibers[0].ctx.a, sizeof(f.ctx.a));
      memcpy(f.ctx.bufs, W.fibers[0].ctx.bufs, sizeof(f.ctx.bufs));
    }
    fill_thread(f.ctx, L, g, a, t);
    f.ctx.rt = &g_fiber_rt;
    f.W = &W;
    f.tid = t;
    f.state = F_RUN;
    f.mask = 0;
    char* st = W.stack(t);
    if (!st) { J.fail("software Metal: cannot allocate a fiber stack"); return false; }
    uintptr_t top = ((uintptr_t)st + kGuard + g_stack_size) & ~(uintptr_t)15;
    uint64_t* sp = (uint64_t*)top - 8;
    sp[0] = (uint64_t)W.mxcsr_fcw[0] | ((uint64_t)W.mxcsr_fcw[1] << 32);
    sp[1] = 0; sp[2] = 0;
    sp[3] = (uint64_t)(uintptr_t)&fiber_main;  // r13
    sp[4] = (uint64_t)(uintptr_t)&f;           // r12
    sp[5] = 0; sp[6] = 0;
    sp[7] = (uint64_t)(uintptr_t)&mtl_fiber_start;
    f.sp = sp;
  }
  W.live = (int)n;
  uint32_t nsg = (n + 31) / 32;
  for (;;) {
    for (uint32_t k = 0; k < n; k++) {
      Fiber& f = W.fibers[W.order[k]];
      if (f.state == F_RUN) mtl_fiber_switch(&W.sched_sp, f.sp);
    }
    if (W.live == 0) return true;
    // every live fiber is now blocked at a barrier or a simd-group exchange
    bool released = false;
    for (uint32_t s = 0; s < nsg; s++) {
      uint32_t lo = s * 32, hi = lo + 32 < n ? lo + 32 : n;
      int minsite = 0; bool any = false;
      for (uint32_t t = lo; t < hi; t++) {
        Fiber& f = W.fibers[t];
        if (f.state == F_SIMD && (!any || f.site < minsite)) { minsite = f.site; any = true; }
      }
      if (!any) continue;
      uint32_t mask = 0;
      for (uint32_t t = lo; t < hi; t++) {
        Fiber& f = W.fibers[t];
        if (f.state == F_SIMD && f.site == minsite) mask |= 1u << (t - lo);
      }
      if (L->strict) {
        uint32_t full = (hi - lo == 32) ? 0xffffffffu : ((1u << (hi - lo)) - 1u);
        if (mask != full) {
          J.fail("strict mode: simd-group function at " + at_line(minsite) + " in threadgroup " + std::to_string(gi) +
                 ", simdgroup " + std::to_string(s) + " ran with only " + std::to_string(__builtin_popcount(mask)) +
                 " of " + std::to_string(hi - lo) + " lanes active (divergent or partly exited simdgroup)");
          return false;
        }
      }
      for (uint32_t t = lo; t < hi; t++) {
        if (!((mask >> (t - lo)) & 1u)) continue;
        Fiber& f = W.fibers[t];
        memcpy(W.released + (size_t)t * MTL_SIMD_SLOT, W.stage + (size_t)t * MTL_SIMD_SLOT, (size_t)f.ssize);
        f.mask = mask;
        f.state = F_RUN;
      }
      released = true;
    }
    if (released) continue;
    // all live threads wait at a barrier
    int site0 = -1; bool mismatch = false;
    for (uint32_t t = 0; t < n; t++) {
      Fiber& f = W.fibers[t];
      if (f.state != F_BARRIER) continue;
      if (site0 < 0) site0 = f.site;
      else if (f.site != site0) mismatch = true;
    }
    if (L->strict && mismatch) {
      J.fail("strict mode: threads of threadgroup " + std::to_string(gi) +
             " wait at different threadgroup_barrier calls (" + at_line(site0) + " and others)");
      return false;
    }
    if (L->strict && (uint32_t)W.live != n) {
      J.fail("strict mode: threadgroup_barrier at " + at_line(site0) + " in threadgroup " + std::to_string(gi) +
             " reached by " + std::to_string(W.live) + " of " + std::to_string(n) +
             " threads; the others returned (divergent barrier)");
      return false;
    }
    for (uint32_t t = 0; t < n; t++)
      if (W.fibers[t].state == F_BARRIER) W.fibers[t].state = F_RUN;
  }
}

static void run_group_loop(Worker& W, Job& J, const uint32_t g[3], const uint32_t a[3], uint32_t n, uint64_t gi) {
  const Launch* L = J.L;
  make_order(W.order, n, L, gi);
  ThreadCtx& c = W.fibers[0].ctx;
  fill_group(c, L, g, a, n);
  c.rt = &g_loop_rt;
  for (uint32_t k = 0; k < n; k++) {
    fill_thread(c, L, g, a, W.order[k]);
    L->entry(&c);
  }
}

static void run_worker(Worker& W, Job& J) {
  const Launch* L = J.L;
  t_launch = L;
  {
    uint32_t m; __asm__ volatile("stmxcsr %0" : "=m"(m));
    uint16_t cw; __asm__ volatile("fnstcw %0" : "=m"(cw));
    W.mxcsr_fcw[0] = m; W.mxcsr_fcw[1] = cw;
  }
  void* tls = nullptr;
  if (L->poison && J.tls_size) {
    if (L->tls_touch) L->tls_touch();  // makes glibc allocate this thread's block for the module
    if (dlinfo(L->dl_handle, RTLD_DI_TLS_DATA, &tls) != 0) tls = nullptr;
  }
  for (;;) {
    if (J.failed.load(std::memory_order_relaxed)) return;
    uint64_t gi = J.next.fetch_add(1);
    if (gi >= J.ngroups) return;
    uint32_t g[3];
    g[0] = (uint32_t)(gi % L->groups[0]);
    g[1] = (uint32_t)((gi / L->groups[0]) % L->groups[1]);
    g[2] = (uint32_t)(gi / ((uint64_t)L->groups[0] * L->groups[1]));
    uint32_t a[3];
    for (int d = 0; d < 3; d++) {
      a[d] = L->tg[d];
      if (L->nonuniform) {
        uint64_t rem = (uint64_t)L->grid[d] - (uint64_t)g[d] * L->tg[d];
        if (rem < a[d]) a[d] = (uint32_t)rem;
      }
    }
    uint32_t n = a[0] * a[1] * a[2];
    if (n == 0) continue;
    if (tls) memset(tls, 0xff, J.tls_size);
    if (L->fiber) {
      if (!run_group_fiber(W, J, g, a, n, gi)) return;
    } else {
      run_group_loop(W, J, g, a, n, gi);
    }
  }
}

// ------------------------------------------------------------------------------------------------
// persistent worker pool: worker 0 is the calling thread
struct Pool {
  std::mutex m;
  std::condition_variable cv, cv_done;
  std::vector<std::thread> threads;
  std::vector<Worker*> workers;
  uint64_t gen = 0;
  Job* job = nullptr;
  int want = 0;  // helpers taking part in the current job
  int finished = 0;
  int nthreads = 1;
};
static Pool* g_pool = nullptr;

static void helper_main(int idx) {
  Pool& P = *g_pool;
  uint64_t seen = 0;
  for (;;) {
    Job* J;
    {
      std::unique_lock<std::mutex> lk(P.m);
      P.cv.wait(lk, [&] { return P.gen != seen; });
      seen = P.gen;
      if (idx > P.want) continue;
      J = P.job;
    }
    run_worker(*P.workers[idx], *J);
    {
      std::lock_guard<std::mutex> lk(P.m);
      P.finished++;
    }
    P.cv_done.notify_one();
  }
}

extern "C" __attribute__((visibility("default"))) int mtl_runtime_init(int nthreads, int stack_kb) {
  if (g_pool) return g_pool->nthreads;
  if (stack_kb > 0) g_stack_size = (size_t)stack_kb * 1024;
  if (nthreads <= 0) {
    nthreads = (int)std::thread::hardware_concurrency();
    if (nthreads <= 0) nthreads = 1;
  }
  g_pool = new Pool();
  g_pool->nthreads = nthreads;
  for (int i = 0; i < nthreads; i++) g_pool->workers.push_back(new Worker());
  for (int i = 1; i < nthreads; i++) {
    g_pool->threads.emplace_back(helper_main, i);
    g_pool->threads.back().detach();
  }
  return nthreads;
}

extern "C" __attribute__((visibility("default"))) int mtl_runtime_abi_version() { return MTL_ABI_VERSION; }

static size_t tls_size_of(void* handle) {
  static std::mutex m;
  static std::unordered_map<void*, size_t> cache;
  std::lock_guard<std::mutex> g(m);
  auto it = cache.find(handle);
  if (it != cache.end()) return it->second;
  size_t modid = 0;
  size_t size = 0;
  if (dlinfo(handle, RTLD_DI_TLS_MODID, &modid) == 0 && modid != 0) {
    struct Q { size_t modid, size; } q{modid, 0};
    dl_iterate_phdr(
        [](struct dl_phdr_info* info, size_t, void* data) -> int {
          Q* q = (Q*)data;
          if (info->dlpi_tls_modid != q->modid) return 0;
          for (int i = 0; i < info->dlpi_phnum; i++)
            if (info->dlpi_phdr[i].p_type == PT_TLS) q->size = info->dlpi_phdr[i].p_memsz;
          return 1;
        },
        &q);
    size = q.size;
  }
  cache[handle] = size;
  return size;
}

// Runs one dispatch to completion. Returns 0, or -1 with a message in err.
extern "C" __attribute__((visibility("default"))) int mtl_launch(const Launch* L, char* err, int errlen) {
  if (!g_pool) mtl_runtime_init(0, 0);
  Pool& P = *g_pool;
  Job J;
  J.L = L;
  J.ngroups = (uint64_t)L->groups[0] * L->groups[1] * L->groups[2];
  uint64_t tgn = (uint64_t)L->tg[0] * L->tg[1] * L->tg[2];
  if (J.ngroups == 0 || tgn == 0) return 0;
  if (tgn > MAX_TG) {
    snprintf(err, (size_t)errlen, "threadgroup size %llu exceeds the limit of %d threads",
             (unsigned long long)tgn, MAX_TG);
    return -1;
  }
  if (L->poison && L->dl_handle) J.tls_size = tls_size_of(L->dl_handle);
  int helpers = P.nthreads - 1;
  if ((uint64_t)helpers > J.ngroups - 1) helpers = (int)(J.ngroups - 1);
  if (helpers > 0) {
    std::lock_guard<std::mutex> lk(P.m);
    P.job = &J;
    P.want = helpers;
    P.finished = 0;
    P.gen++;
  }
  if (helpers > 0) P.cv.notify_all();
  run_worker(*P.workers[0], J);
  if (helpers > 0) {
    std::unique_lock<std::mutex> lk(P.m);
    P.cv_done.wait(lk, [&] { return P.finished == helpers; });
    P.job = nullptr;
  }
  if (J.failed.load()) {
    snprintf(err, (size_t)errlen, "%s", J.err.c_str());
    return -1;
  }
  return 0;
}
