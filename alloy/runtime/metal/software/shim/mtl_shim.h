// Software Metal shim: lets Metal Shading Language compute kernels compile as C++20.
// Types, vectors, keyword/attribute macros and the kernel export macro.
// No C library header is included on purpose (see metal-software-device.md §3.1).
#ifndef ALLOY_MTL_SHIM_H
#define ALLOY_MTL_SHIM_H
#pragma GCC system_header
#include <stdint.h>
#include <stddef.h>
#include "mtl_abi.h"

#if defined(__has_builtin)
#if __has_builtin(__builtin_COLUMN)
#define MTL_SITE (__builtin_LINE() * 4096 + __builtin_COLUMN())
#endif
#endif
#if !defined(MTL_SITE) && defined(__GNUC__) && !defined(__clang__)
// g++ has no __builtin_COLUMN, but source_location (a small header without C library names) has the column
#include <source_location>
#define MTL_SITE (int(std::source_location::current().line() * 4096 + std::source_location::current().column() % 4096))
#endif
#ifndef MTL_SITE
#define MTL_SITE (__builtin_LINE() * 4096)
#endif

// ---------------------------------------------------------------------------------------------
// scalar types
typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned char uchar;
typedef unsigned long ulong;

#if defined(__FLT16_MAX__) && !defined(MTL_SOFT_HALF)
typedef _Float16 half;
#else
#error "the software Metal shim needs a compiler with _Float16 (g++ >= 12 or clang >= 15 on x86-64)"
#endif

namespace metal {
using ::uint; using ::ushort; using ::uchar; using ::ulong; using ::half;

// bfloat: 16-bit storage, arithmetic in float, round-to-nearest-even after every operation.
struct bfloat;
namespace detail {
constexpr inline uint16_t f2bf(float f) {
  uint32_t u = __builtin_bit_cast(uint32_t, f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
constexpr inline float bf2f(uint16_t b) { return __builtin_bit_cast(float, uint32_t(b) << 16); }
template <class T> struct is_arith_t { static constexpr bool v = false; };
#define MTL_ARITH(T) template <> struct is_arith_t<T> { static constexpr bool v = true; };
MTL_ARITH(bool) MTL_ARITH(char) MTL_ARITH(signed char) MTL_ARITH(unsigned char) MTL_ARITH(short)
MTL_ARITH(unsigned short) MTL_ARITH(int) MTL_ARITH(unsigned int) MTL_ARITH(long) MTL_ARITH(unsigned long)
MTL_ARITH(long long) MTL_ARITH(unsigned long long) MTL_ARITH(float) MTL_ARITH(double) MTL_ARITH(_Float16)
#undef MTL_ARITH
template <class T> inline constexpr bool is_arith = is_arith_t<T>::v;
template <class T> struct rm_cvref_t { using t = T; };
template <class T> struct rm_cvref_t<const T> { using t = T; };
template <class T> struct rm_cvref_t<volatile T> { using t = T; };
template <class T> struct rm_cvref_t<const volatile T> { using t = T; };
template <class T> struct rm_cvref_t<T&> { using t = typename rm_cvref_t<T>::t; };
template <class T> using rm_cvref = typename rm_cvref_t<T>::t;
template <class A, class B> struct same_t { static constexpr bool v = false; };
template <class A> struct same_t<A, A> { static constexpr bool v = true; };
template <class A, class B> inline constexpr bool same = same_t<A, B>::v;
template <bool C, class A, class B> struct cond_t { using t = A; };
template <class A, class B> struct cond_t<false, A, B> { using t = B; };
template <bool C, class A, class B> using cond = typename cond_t<C, A, B>::t;
template <class T> inline constexpr bool is_float_like = same<T, float> || same<T, double> || same<T, _Float16>;
}  // namespace detail

struct bfloat {
  uint16_t bits;
  constexpr bfloat() : bits(0) {}
  template <class S> requires detail::is_arith<S>
  constexpr bfloat(S s) : bits(detail::f2bf(float(s))) {}
  constexpr operator float() const { return detail::bf2f(bits); }
  static constexpr bfloat from_bits(uint16_t b) { bfloat r; r.bits = b; return r; }
  constexpr bfloat operator-() const { return from_bits(uint16_t(bits ^ 0x8000u)); }
  constexpr bfloat operator+() const { return *this; }
  template <class B> bfloat& operator+=(const B& b) { return *this = bfloat(float(*this) + float(b)); }
  template <class B> bfloat& operator-=(const B& b) { return *this = bfloat(float(*this) - float(b)); }
  template <class B> bfloat& operator*=(const B& b) { return *this = bfloat(float(*this) * float(b)); }
  template <class B> bfloat& operator/=(const B& b) { return *this = bfloat(float(*this) / float(b)); }
  bfloat& operator++() { return *this += 1.0f; }
  bfloat& operator--() { return *this -= 1.0f; }
};
namespace detail {
template <class T> inline constexpr bool is_scalar = is_arith<T> || same<T, bfloat>;
// result of bfloat (op) X
template <class O> using bf_res = cond<same<O, bfloat>, bfloat,
    cond<same<O, float> || same<O, double> || same<O, _Float16>, float, bfloat>>;
}  // namespace detail
#define MTL_BF_BIN(op)                                                                             \
  inline bfloat operator op(bfloat a, bfloat b) { return bfloat(float(a) op float(b)); }          \
  template <class O> requires detail::is_arith<O>                                                   \
  inline detail::bf_res<O> operator op(bfloat a, O b) { return detail::bf_res<O>(float(a) op float(b)); } \
  template <class O> requires detail::is_arith<O>                                                   \
  inline detail::bf_res<O> operator op(O a, bfloat b) { return detail::bf_res<O>(float(a) op float(b)); }
MTL_BF_BIN(+) MTL_BF_BIN(-) MTL_BF_BIN(*) MTL_BF_BIN(/)
#undef MTL_BF_BIN
#define MTL_BF_CMP(op)                                                                             \
  inline bool operator op(bfloat a, bfloat b) { return float(a) op float(b); }                    \
  template <class O> requires detail::is_arith<O>                                                   \
  inline bool operator op(bfloat a, O b) { return float(a) op b; }                                \
  template <class O> requires detail::is_arith<O>                                                   \
  inline bool operator op(O a, bfloat b) { return a op float(b); }
MTL_BF_CMP(<) MTL_BF_CMP(>) MTL_BF_CMP(<=) MTL_BF_CMP(>=) MTL_BF_CMP(==) MTL_BF_CMP(!=)
#undef MTL_BF_CMP

// ---------------------------------------------------------------------------------------------
// vectors
template <class T, int N> struct vec;
namespace detail {
template <class T> struct vinfo { static constexpr int n = 1; static constexpr bool is_vec = false; using elem = T; };
template <class T, int N> struct vinfo<vec<T, N>> { static constexpr int n = N; static constexpr bool is_vec = true; using elem = T; };
template <class T> inline constexpr bool is_vec = vinfo<rm_cvref<T>>::is_vec;
template <class T> inline constexpr int ncomp = vinfo<rm_cvref<T>>::n;

template <class T, int N> struct vstore;
template <class T> struct alignas(sizeof(T) * 2) vstore<T, 2> {
  union { T d[2]; struct { T x, y; }; struct { T r, g; }; };
  constexpr vstore() : d{} {}
};
template <class T> struct alignas(sizeof(T) * 4) vstore<T, 3> {
  union { T d[3]; struct { T x, y, z; }; struct { T r, g, b; }; };
  constexpr vstore() : d{} {}
};
template <class T> struct alignas(sizeof(T) * 4) vstore<T, 4> {
  union { T d[4]; struct { T x, y, z, w; }; struct { T r, g, b, a; }; };
  constexpr vstore() : d{} {}
};
}  // namespace detail

template <class T, int N> struct vec : detail::vstore<T, N> {
  using detail::vstore<T, N>::d;
  using value_type = T;
  constexpr vec() : detail::vstore<T, N>() {}
  constexpr vec(const vec&) = default;
  constexpr vec& operator=(const vec&) = default;
  // broadcast
  template <class S> requires detail::is_scalar<S>
  constexpr vec(S s) { for (int i = 0; i < N; i++) d[i] = T(s); }
  // element conversion
  template <class U> requires (!detail::same<U, T>)
  explicit constexpr vec(const vec<U, N>& o) { for (int i = 0; i < N; i++) d[i] = T(o.d[i]); }
  // flattening constructor: float4(a, b, c, d), float4(v.xy..., z, w), float4(float3, w)
  template <class A0, class A1, class... As>
    requires (detail::ncomp<A0> + detail::ncomp<A1> + (0 + ... + detail::ncomp<As>) == N)
  constexpr vec(const A0& a0, const A1& a1, const As&... as) {
    int i = 0;
    put(i, a0); put(i, a1); (put(i, as), ...);
  }
  constexpr T& operator[](int i) { return d[i]; }
  constexpr const T& operator[](int i) const { return d[i]; }
  template <class B> constexpr vec& operator+=(const B& b) { return *this = *this + b; }
  template <class B> constexpr vec& operator-=(const B& b) { return *this = *this - b; }
  template <class B> constexpr vec& operator*=(const B& b) { return *this = *this * b; }
  template <class B> constexpr vec& operator/=(const B& b) { return *this = *this / b; }
  template <class B> constexpr vec& operator%=(const B& b) { return *this = *this % b; }
  template <class B> constexpr vec& operator&=(const B& b) { return *this = *this & b; }
  template <class B> constexpr vec& operator|=(const B& b) { return *this = *this | b; }
  template <class B> constexpr vec& operator^=(const B& b) { return *this = *this ^ b; }
  template <class B> constexpr vec& operator<<=(const B& b) { return *this = *this << b; }
  template <class B> constexpr vec& operator>>=(const B& b) { return *this = *this >> b; }
 private:
  template <class X> constexpr void put(int& i, const X& x) {
    if constexpr (detail::is_vec<X>) { for (int k = 0; k < detail::ncomp<X>; k++) d[i++] = T(x.d[k]); }
    else d[i++] = T(x);
  }
};

#define MTL_VEC_BIN(op)                                                                                 \
  template <class T, int N>                                                                             \
  constexpr vec<T, N> operator op(const vec<T, N>& a, const vec<T, N>& b) {                             \
    vec<T, N> r; for (int i = 0; i < N; i++) r.d[i] = T(a.d[i] op b.d[i]); return r; }                 \
  template <class T, int N, class S> requires detail::is_scalar<S>                                      \
  constexpr vec<T, N> operator op(const vec<T, N>& a, const S& b) {                                     \
    vec<T, N> r; const T bb = T(b); for (int i = 0; i < N; i++) r.d[i] = T(a.d[i] op bb); return r; }  \
  template <class T, int N, class S> requires detail::is_scalar<S>                                      \
  constexpr vec<T, N> operator op(const S& a, const vec<T, N>& b) {                                     \
    vec<T, N> r; const T aa = T(a); for (int i = 0; i < N; i++) r.d[i] = T(aa op b.d[i]); return r; }
MTL_VEC_BIN(+) MTL_VEC_BIN(-) MTL_VEC_BIN(*) MTL_VEC_BIN(/) MTL_VEC_BIN(%)
MTL_VEC_BIN(&) MTL_VEC_BIN(|) MTL_VEC_BIN(^) MTL_VEC_BIN(<<) MTL_VEC_BIN(>>)
#undef MTL_VEC_BIN
#define MTL_VEC_CMP(op)                                                                                 \
  template <class T, int N>                                                                             \
  constexpr vec<bool, N> operator op(const vec<T, N>& a, const vec<T, N>& b) {                          \
    vec<bool, N> r; for (int i = 0; i < N; i++) r.d[i] = a.d[i] op b.d[i]; return r; }                 \
  template <class T, int N, class S> requires detail::is_scalar<S>                                      \
  constexpr vec<bool, N> operator op(const vec<T, N>& a, const S& b) {                                  \
    vec<bool, N> r; const T bb = T(b); for (int i = 0; i < N; i++) r.d[i] = a.d[i] op bb; return r; }  \
  template <class T, int N, class S> requires detail::is_scalar<S>                                      \
  constexpr vec<bool, N> operator op(const S& a, const vec<T, N>& b) {                                  \
    vec<bool, N> r; const T aa = T(a); for (int i = 0; i < N; i++) r.d[i] = aa op b.d[i]; return r; }
MTL_VEC_CMP(<) MTL_VEC_CMP(>) MTL_VEC_CMP(<=) MTL_VEC_CMP(>=) MTL_VEC_CMP(==) MTL_VEC_CMP(!=)
MTL_VEC_CMP(&&) MTL_VEC_CMP(||)
#undef MTL_VEC_CMP
template <class T, int N> constexpr vec<T, N> operator-(const vec<T, N>& a) {
  vec<T, N> r; for (int i = 0; i < N; i++) r.d[i] = T(-a.d[i]); return r; }
template <class T, int N> constexpr vec<T, N> operator+(const vec<T, N>& a) { return a; }
template <class T, int N> constexpr vec<T, N> operator~(const vec<T, N>& a) {
  vec<T, N> r; for (int i = 0; i < N; i++) r.d[i] = T(~a.d[i]); return r; }
template <class T, int N> constexpr vec<bool, N> operator!(const vec<T, N>& a) {
  vec<bool, N> r; for (int i = 0; i < N; i++) r.d[i] = !a.d[i]; return r; }

#define MTL_VEC_TYPES(T, name) \
  typedef vec<T, 2> name##2; typedef vec<T, 3> name##3; typedef vec<T, 4> name##4;
MTL_VEC_TYPES(bool, bool) MTL_VEC_TYPES(char, char) MTL_VEC_TYPES(uchar, uchar)
MTL_VEC_TYPES(short, short) MTL_VEC_TYPES(ushort, ushort) MTL_VEC_TYPES(int, int)
MTL_VEC_TYPES(uint, uint) MTL_VEC_TYPES(long, long) MTL_VEC_TYPES(ulong, ulong)
MTL_VEC_TYPES(float, float) MTL_VEC_TYPES(half, half) MTL_VEC_TYPES(bfloat, bfloat)
#undef MTL_VEC_TYPES
// packed vectors: element alignment (only the types; arithmetic through conversion to vec)
template <class T, int N> struct packed_vec {
  T d[N];
  constexpr packed_vec() : d{} {}
  constexpr packed_vec(const vec<T, N>& v) : d{} { for (int i = 0; i < N; i++) d[i] = v.d[i]; }
  constexpr operator vec<T, N>() const { vec<T, N> v; for (int i = 0; i < N; i++) v.d[i] = d[i]; return v; }
  constexpr T& operator[](int i) { return d[i]; }
  constexpr const T& operator[](int i) const { return d[i]; }
};
typedef packed_vec<float, 2> packed_float2; typedef packed_vec<float, 3> packed_float3;
typedef packed_vec<float, 4> packed_float4; typedef packed_vec<half, 2> packed_half2;
typedef packed_vec<half, 3> packed_half3; typedef packed_vec<half, 4> packed_half4;

// literals: 0.5h, 1.0bf
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wliteral-suffix"
constexpr half operator""h(long double v) { return half(v); }
constexpr half operator""h(unsigned long long v) { return half(v); }
constexpr bfloat operator""bf(long double v) { return bfloat(float(v)); }
constexpr bfloat operator""bf(unsigned long long v) { return bfloat(float(v)); }
#pragma GCC diagnostic pop
}  // namespace metal

// Types are visible without `using namespace metal`, as in MSL.
using metal::bfloat; using metal::vec;
using metal::bool2; using metal::bool3; using metal::bool4;
using metal::char2; using metal::char3; using metal::char4;
using metal::uchar2; using metal::uchar3; using metal::uchar4;
using metal::short2; using metal::short3; using metal::short4;
using metal::ushort2; using metal::ushort3; using metal::ushort4;
using metal::int2; using metal::int3; using metal::int4;
using metal::uint2; using metal::uint3; using metal::uint4;
using metal::long2; using metal::long3; using metal::long4;
using metal::ulong2; using metal::ulong3; using metal::ulong4;
using metal::float2; using metal::float3; using metal::float4;
using metal::half2; using metal::half3; using metal::half4;
using metal::bfloat2; using metal::bfloat3; using metal::bfloat4;
using metal::packed_float2; using metal::packed_float3; using metal::packed_float4;
using metal::packed_half2; using metal::packed_half3; using metal::packed_half4;
using metal::operator""h; using metal::operator""bf;

// ---------------------------------------------------------------------------------------------
// thread context, attributes, buffers
namespace mtl { namespace detail {
inline thread_local constinit ::mtl::ThreadCtx* cur = nullptr;

template <int K> struct AttrVal {
  template <class T> operator T() const {
    const uint32_t* p = cur->a[K];
    if constexpr (::metal::detail::is_vec<T>) {
      T r;
      for (int i = 0; i < ::metal::detail::ncomp<T>; i++) r.d[i] = typename ::metal::detail::vinfo<T>::elem(p[i]);
      return r;
    } else {
      return T(p[0]);
    }
  }
};
template <int K> inline constexpr AttrVal<K> attr_arr[1] = {};
inline constexpr int zz[1] = {0};

template <int... I> struct iseq {};
template <int N, int... I> struct mkseq : mkseq<N - 1, N - 1, I...> {};
template <int... I> struct mkseq<0, I...> { using type = iseq<I...>; };

// Positional argument slot I: a pointer parameter binds to the slot as a pointer, a reference
// parameter (constant int& n) binds to the bytes the slot points at.
template <int I> struct PosArg {
  template <class T> operator T*() const { return reinterpret_cast<T*>(cur->bufs[I]); }
  template <class T> operator T&() const { return *reinterpret_cast<T*>(cur->bufs[I]); }
};
template <int I> inline constexpr PosArg<I> buf_arr[1] = {};
template <class C, int... I> constexpr bool can_call(iseq<I...>) {
  return requires(C c) { c(PosArg<I>{}...); };
}
template <class C, int K = 0> constexpr int npos() {
  if constexpr (K > MTL_MAX_BINDINGS) return -1;
  else if constexpr (can_call<C>(typename mkseq<K>::type{})) return K;
  else return npos<C, K + 1>();
}
template <class C, int... I> inline void call_pos(C c, iseq<I...>) { c(PosArg<I>{}...); }

// Which positional slots the kernel may write: slot J is read-only when the kernel still takes a ConstArg there,
// which converts only to pointers and references to const (device const float*, constant int&).
template <class T> inline constexpr bool is_const_target = false;
template <class T> inline constexpr bool is_const_target<const T> = true;
struct ConstArg {
  template <class T> requires is_const_target<T> operator T*() const { return nullptr; }
  template <class T> requires is_const_target<T> operator T&() const { return *reinterpret_cast<T*>(cur->bufs[0]); }
};
template <int J, int I> struct ArgAt { using type = PosArg<I>; };
template <int I> struct ArgAt<I, I> { using type = ConstArg; };
template <class C, int J, int... I> constexpr bool reads_only(iseq<I...>) {
  return requires(C c) { c(typename ArgAt<J, I>::type{}...); };
}
template <class C, int N, int... J> constexpr uint32_t writes_mask(iseq<J...>) {
  return (0u | ... | (reads_only<C, J>(typename mkseq<N>::type{}) ? 0u : 1u << J));
}
}}  // namespace mtl::detail

// Marker: emitted into the kernel object only if live code uses a barrier or simd-group function.
extern "C" inline __attribute__((noinline, visibility("default"))) void mtl_uses_sync_marker() {
  __asm__ volatile("");
}
extern "C" inline __attribute__((noinline, used, visibility("default"))) void* mtl_tls_touch() {
  return &::mtl::detail::cur;
}

#define MTL_EXPORT_AS(sym, ...)                                                                        \
  namespace mtl_export_ns_##sym {                                                                      \
  struct Caller {                                                                                      \
    template <class... A> auto operator()(A... a) const -> decltype(__VA_ARGS__(a...)) {               \
      return __VA_ARGS__(a...);                                                                        \
    }                                                                                                  \
  };                                                                                                   \
  constexpr int nargs = ::mtl::detail::npos<Caller>();                                                 \
  static_assert(nargs >= 0, "software Metal: cannot call kernel " #sym " with positional arguments");  \
  }                                                                                                    \
  extern "C" __attribute__((visibility("default"))) const int mtl_nargs_##sym = mtl_export_ns_##sym::nargs; \
  extern "C" __attribute__((visibility("default"))) const int mtl_writes_##sym = (int)::mtl::detail::writes_mask<\
      mtl_export_ns_##sym::Caller, mtl_export_ns_##sym::nargs>(typename ::mtl::detail::mkseq<mtl_export_ns_##sym::nargs>::type{}); \
  extern "C" __attribute__((visibility("default"))) void mtl_entry_##sym(::mtl::ThreadCtx* c) {        \
    ::mtl::detail::cur = c;                                                                            \
    ::mtl::detail::call_pos(mtl_export_ns_##sym::Caller{},                                             \
                            typename ::mtl::detail::mkseq<mtl_export_ns_##sym::nargs>::type{});        \
  }
#define MTL_EXPORT(name) MTL_EXPORT_AS(name, name)
// the [[buffer(n)]] arguments a kernel may write, as the compiler found them in its signature (compiler.buffer_writes)
#define MTL_BUFFER_WRITES(sym, mask) extern "C" __attribute__((visibility("default"))) const int mtl_buffer_writes_##sym = (mask);
// the [[buffer(n)]] slots a kernel declares (compiler.buffer_uses): its dispatches access these and its positional ones
#define MTL_BUFFER_USES(sym, mask) extern "C" __attribute__((visibility("default"))) const int mtl_buffer_uses_##sym = (mask);

// ---------------------------------------------------------------------------------------------
// keywords and attributes
#define device
#define constant const
#define thread
#define kernel static inline
#ifndef MTL_TG_GUARD
#define MTL_TG_GUARD constinit
#endif
#define threadgroup static thread_local MTL_TG_GUARD
#define threadgroup_imageblock static thread_local

#define MTL_ATTR(K) maybe_unused]] = ::mtl::detail::attr_arr<::mtl::K>[::mtl::detail::zz[0
#define thread_position_in_grid MTL_ATTR(A_TPIG)
#define threadgroup_position_in_grid MTL_ATTR(A_TGPIG)
#define thread_position_in_threadgroup MTL_ATTR(A_TPITG)
#define threads_per_threadgroup MTL_ATTR(A_TPTG)
#define dispatch_threads_per_threadgroup MTL_ATTR(A_DTPTG)
#define threadgroups_per_grid MTL_ATTR(A_TGPG)
#define threads_per_grid MTL_ATTR(A_TPG)
#define thread_index_in_threadgroup MTL_ATTR(A_TIITG)
#define simdgroup_index_in_threadgroup MTL_ATTR(A_SIITG)
#define thread_index_in_simdgroup MTL_ATTR(A_TIISG)
#define simdgroups_per_threadgroup MTL_ATTR(A_SPTG)
#define dispatch_simdgroups_per_threadgroup MTL_ATTR(A_SPTG)
#define thread_execution_width MTL_ATTR(A_TEW)
#define threads_per_simdgroup MTL_ATTR(A_TEW)
#define quadgroup_index_in_threadgroup MTL_ATTR(A_QIITG)
#define thread_index_in_quadgroup MTL_ATTR(A_TIIQG)
#define quadgroups_per_threadgroup MTL_ATTR(A_QPTG)
#define buffer(n) maybe_unused]] = ::mtl::detail::buf_arr<n>[::mtl::detail::zz[0

#include "mtl_lib.h"
#endif
