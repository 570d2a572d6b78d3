// Software Metal shim: the `metal` namespace (math, integer, relational, as_type, barriers,
// simd-group functions, atomics, numeric_limits, constants). Included by mtl_shim.h.
// (About 550 lines, past the house's 400 lines: it mirrors one header of Apple's, metal_stdlib, name for name.)
#ifndef ALLOY_MTL_LIB_H
#define ALLOY_MTL_LIB_H
#pragma GCC system_header

namespace metal {
namespace detail {
typedef signed char schar; typedef long long llong; typedef unsigned long long ullong;
template <class T> struct id_t { using t = T; };
template <class T> using id = typename id_t<T>::t;
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// floating-point math (float computes in float; half and bfloat compute in float and round once)
#define MTL_VMAP1(name)                                                                               \
  template <class T, int N> inline vec<T, N> name(const vec<T, N>& v) {                               \
    vec<T, N> r; for (int i = 0; i < N; i++) r.d[i] = name(v.d[i]); return r; }
#define MTL_F1(name, expr)                                                                            \
  inline float name(float x) { return expr; }                                                         \
  inline float name(double xd) { float x = float(xd); return expr; }                                  \
  inline half name(half xh) { float x = float(xh); return half(expr); }                               \
  inline bfloat name(bfloat xb) { float x = float(xb); return bfloat(expr); }                         \
  MTL_VMAP1(name)
MTL_F1(exp, __builtin_expf(x)) MTL_F1(exp2, __builtin_exp2f(x)) MTL_F1(exp10, __builtin_powf(10.0f, x))
MTL_F1(log, __builtin_logf(x)) MTL_F1(log2, __builtin_log2f(x)) MTL_F1(log10, __builtin_log10f(x))
MTL_F1(sqrt, __builtin_sqrtf(x)) MTL_F1(rsqrt, 1.0f / __builtin_sqrtf(x))
MTL_F1(sin, __builtin_sinf(x)) MTL_F1(cos, __builtin_cosf(x)) MTL_F1(tan, __builtin_tanf(x))
MTL_F1(asin, __builtin_asinf(x)) MTL_F1(acos, __builtin_acosf(x)) MTL_F1(atan, __builtin_atanf(x))
MTL_F1(sinh, __builtin_sinhf(x)) MTL_F1(cosh, __builtin_coshf(x)) MTL_F1(tanh, __builtin_tanhf(x))
MTL_F1(asinh, __builtin_asinhf(x)) MTL_F1(acosh, __builtin_acoshf(x)) MTL_F1(atanh, __builtin_atanhf(x))
MTL_F1(floor, __builtin_floorf(x)) MTL_F1(ceil, __builtin_ceilf(x)) MTL_F1(round, __builtin_roundf(x))
MTL_F1(rint, __builtin_rintf(x)) MTL_F1(trunc, __builtin_truncf(x)) MTL_F1(fabs, __builtin_fabsf(x))
MTL_F1(fract, __builtin_fminf(x - __builtin_floorf(x), 0x1.fffffep-1f))
MTL_F1(saturate, __builtin_fminf(__builtin_fmaxf(x, 0.0f), 1.0f))
MTL_F1(sign, (x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : x)))
MTL_F1(erf, __builtin_erff(x))
#undef MTL_F1
inline float sincos(float x, thread float& c) { c = __builtin_cosf(x); return __builtin_sinf(x); }

#define MTL_VMAP2(name)                                                                               \
  template <class T, int N> inline vec<T, N> name(const vec<T, N>& a, const vec<T, N>& b) {           \
    vec<T, N> r; for (int i = 0; i < N; i++) r.d[i] = name(a.d[i], b.d[i]); return r; }               \
  template <class T, int N> inline vec<T, N> name(const vec<T, N>& a, detail::id<T> b) {              \
    vec<T, N> r; for (int i = 0; i < N; i++) r.d[i] = name(a.d[i], b); return r; }
#define MTL_F2(name, expr)                                                                            \
  inline float name(float x, float y) { return expr; }                                                \
  inline half name(half xh, half yh) { float x = float(xh), y = float(yh); return half(expr); }       \
  inline bfloat name(bfloat xb, bfloat yb) { float x = float(xb), y = float(yb); return bfloat(expr); } \
  MTL_VMAP2(name)
MTL_F2(pow, __builtin_powf(x, y)) MTL_F2(powr, __builtin_powf(x, y)) MTL_F2(fmod, __builtin_fmodf(x, y))
MTL_F2(fmin, __builtin_fminf(x, y)) MTL_F2(fmax, __builtin_fmaxf(x, y)) MTL_F2(atan2, __builtin_atan2f(x, y))
MTL_F2(copysign, __builtin_copysignf(x, y)) MTL_F2(fdim, __builtin_fdimf(x, y))
MTL_F2(step, (y < x ? 0.0f : 1.0f)) MTL_F2(divide, x / y)
MTL_F2(min, __builtin_fminf(x, y)) MTL_F2(max, __builtin_fmaxf(x, y))
#undef MTL_F2

#define MTL_VMAP3(name)                                                                               \
  template <class T, int N>                                                                           \
  inline vec<T, N> name(const vec<T, N>& a, const vec<T, N>& b, const vec<T, N>& c) {                 \
    vec<T, N> r; for (int i = 0; i < N; i++) r.d[i] = name(a.d[i], b.d[i], c.d[i]); return r; }
#define MTL_F3(name, expr)                                                                            \
  inline float name(float x, float y, float z) { return expr; }                                       \
  inline half name(half xh, half yh, half zh) {                                                       \
    float x = float(xh), y = float(yh), z = float(zh); return half(expr); }                           \
  inline bfloat name(bfloat xb, bfloat yb, bfloat zb) {                                               \
    float x = float(xb), y = float(yb), z = float(zb); return bfloat(expr); }                         \
  MTL_VMAP3(name)
MTL_F3(fma, __builtin_fmaf(x, y, z)) MTL_F3(mad, x * y + z)
MTL_F3(mix, x + (y - x) * z)
MTL_F3(smoothstep, ([](float e0, float e1, float v) {
         float t = __builtin_fminf(__builtin_fmaxf((v - e0) / (e1 - e0), 0.0f), 1.0f);
         return t * t * (3.0f - 2.0f * t); })(x, y, z))
MTL_F3(fmin3, __builtin_fminf(__builtin_fminf(x, y), z)) MTL_F3(fmax3, __builtin_fmaxf(__builtin_fmaxf(x, y), z))
#undef MTL_F3
template <class T, int N> inline vec<T, N> mix(const vec<T, N>& a, const vec<T, N>& b, detail::id<T> t) {
  return mix(a, b, vec<T, N>(t)); }

// ---------------------------------------------------------------------------------------------
// integer functions and min/max/clamp for every scalar type
#define MTL_INT_MINMAX(T)                                                                             \
  inline T min(T a, T b) { return b < a ? b : a; }                                                    \
  inline T max(T a, T b) { return a < b ? b : a; }
MTL_INT_MINMAX(char) MTL_INT_MINMAX(detail::schar) MTL_INT_MINMAX(uchar) MTL_INT_MINMAX(short)
MTL_INT_MINMAX(ushort) MTL_INT_MINMAX(int) MTL_INT_MINMAX(uint) MTL_INT_MINMAX(long) MTL_INT_MINMAX(ulong)
MTL_INT_MINMAX(detail::llong) MTL_INT_MINMAX(detail::ullong)
#undef MTL_INT_MINMAX
template <class T> requires detail::is_scalar<T> inline T clamp(T x, detail::id<T> lo, detail::id<T> hi) {
  return min(max(x, lo), hi); }
template <class T, int N> inline vec<T, N> clamp(const vec<T, N>& x, const vec<T, N>& lo, const vec<T, N>& hi) {
  vec<T, N> r; for (int i = 0; i < N; i++) r.d[i] = clamp(x.d[i], lo.d[i], hi.d[i]); return r; }
template <class T, int N> inline vec<T, N> clamp(const vec<T, N>& x, detail::id<T> lo, detail::id<T> hi) {
  vec<T, N> r; for (int i = 0; i < N; i++) r.d[i] = clamp(x.d[i], lo, hi); return r; }
#define MTL_IABS(T) inline T abs(T x) { return T(x < 0 ? -x : x); }                                   \
  inline T absdiff(T a, T b) { return T(a > b ? a - b : b - a); }
MTL_IABS(char) MTL_IABS(detail::schar) MTL_IABS(short) MTL_IABS(int) MTL_IABS(long) MTL_IABS(detail::llong)
#undef MTL_IABS
#define MTL_UABS(T) inline T abs(T x) { return x; }                                                   \
  inline T absdiff(T a, T b) { return T(a > b ? a - b : b - a); }
MTL_UABS(uchar) MTL_UABS(ushort) MTL_UABS(uint) MTL_UABS(ulong) MTL_UABS(detail::ullong)
#undef MTL_UABS
inline float abs(float x) { return __builtin_fabsf(x); }
inline float abs(double x) { return __builtin_fabsf(float(x)); }
inline half abs(half x) { return half(__builtin_fabsf(float(x))); }
inline bfloat abs(bfloat x) { return bfloat::from_bits(uint16_t(x.bits & 0x7fffu)); }
MTL_VMAP1(abs)

namespace detail {
template <class T> inline constexpr int ibits = int(sizeof(T) * 8);
template <class T> using uns = cond<sizeof(T) == 1, uint8_t, cond<sizeof(T) == 2, uint16_t,
                                   cond<sizeof(T) == 4, uint32_t, uint64_t>>>;
}  // namespace detail
template <class T> requires (detail::is_arith<T> && !detail::is_float_like<T>)
inline T clz(T x) {
  auto u = (detail::uns<T>)x;
  if (u == 0) return T(detail::ibits<T>);
  return T(__builtin_clzll((unsigned long long)u) - (64 - detail::ibits<T>));
}
template <class T> requires (detail::is_arith<T> && !detail::is_float_like<T>)
inline T ctz(T x) {
  auto u = (detail::uns<T>)x;
  if (u == 0) return T(detail::ibits<T>);
  return T(__builtin_ctzll((unsigned long long)u));
}
template <class T> requires (detail::is_arith<T> && !detail::is_float_like<T>)
inline T popcount(T x) { return T(__builtin_popcountll((unsigned long long)(detail::uns<T>)x)); }
template <class T> requires (detail::is_arith<T> && !detail::is_float_like<T>)
inline T reverse_bits(T x) {
  auto u = (detail::uns<T>)x; detail::uns<T> r = 0;
  for (int i = 0; i < detail::ibits<T>; i++) { r = detail::uns<T>((r << 1) | (u & 1)); u = detail::uns<T>(u >> 1); }
  return T(r);
}
template <class T> requires (detail::is_arith<T> && !detail::is_float_like<T>)
inline T rotate(T v, detail::id<T> s) {
  auto u = (detail::uns<T>)v; int k = int((detail::uns<T>)s % detail::ibits<T>);
  if (k == 0) return v;
  return T(detail::uns<T>((u << k) | (u >> (detail::ibits<T> - k))));
}
inline int mulhi(int a, int b) { return int(((long long)a * (long long)b) >> 32); }
inline uint mulhi(uint a, uint b) { return uint(((unsigned long long)a * (unsigned long long)b) >> 32); }
inline long mulhi(long a, long b) { return long(((__int128)a * (__int128)b) >> 64); }
inline ulong mulhi(ulong a, ulong b) { return ulong(((unsigned __int128)a * (unsigned __int128)b) >> 64); }
inline short mulhi(short a, short b) { return short((int(a) * int(b)) >> 16); }
inline ushort mulhi(ushort a, ushort b) { return ushort((uint(a) * uint(b)) >> 16); }
inline char mulhi(char a, char b) { return char((int(a) * int(b)) >> 8); }
inline uchar mulhi(uchar a, uchar b) { return uchar((uint(a) * uint(b)) >> 8); }
inline int mul24(int a, int b) { return a * b; }
inline uint mul24(uint a, uint b) { return a * b; }
inline int mad24(int a, int b, int c) { return a * b + c; }
inline uint mad24(uint a, uint b, uint c) { return a * b + c; }
MTL_VMAP1(clz) MTL_VMAP1(ctz) MTL_VMAP1(popcount) MTL_VMAP1(reverse_bits) MTL_VMAP2(mulhi)

// ---------------------------------------------------------------------------------------------
// relational
inline bool isnan(float x) { return __builtin_isnan(x); }
inline bool isnan(half x) { return __builtin_isnan(float(x)); }
inline bool isnan(bfloat x) { return __builtin_isnan(float(x)); }
inline bool isinf(float x) { return __builtin_isinf(x); }
inline bool isinf(half x) { return __builtin_isinf(float(x)); }
inline bool isinf(bfloat x) { return __builtin_isinf(float(x)); }
inline bool isfinite(float x) { return __builtin_isfinite(x); }
inline bool isfinite(half x) { return __builtin_isfinite(float(x)); }
inline bool isfinite(bfloat x) { return __builtin_isfinite(float(x)); }
inline bool signbit(float x) { return __builtin_signbit(x); }
inline bool signbit(half x) { return __builtin_signbit(float(x)); }
inline bool signbit(bfloat x) { return (x.bits >> 15) != 0; }
#define MTL_VREL(name)                                                                                \
  template <class T, int N> inline vec<bool, N> name(const vec<T, N>& v) {                            \
    vec<bool, N> r; for (int i = 0; i < N; i++) r.d[i] = name(v.d[i]); return r; }
MTL_VREL(isnan) MTL_VREL(isinf) MTL_VREL(isfinite) MTL_VREL(signbit)
#undef MTL_VREL
inline bool any(bool b) { return b; }
inline bool all(bool b) { return b; }
template <int N> inline bool any(const vec<bool, N>& v) { bool r = false; for (int i = 0; i < N; i++) r = r || v.d[i]; return r; }
template <int N> inline bool all(const vec<bool, N>& v) { bool r = true; for (int i = 0; i < N; i++) r = r && v.d[i]; return r; }
template <class T> requires detail::is_scalar<T> inline T select(T a, detail::id<T> b, bool c) { return c ? b : a; }
template <class T, int N> inline vec<T, N> select(const vec<T, N>& a, const vec<T, N>& b, const vec<bool, N>& c) {
  vec<T, N> r; for (int i = 0; i < N; i++) r.d[i] = c.d[i] ? b.d[i] : a.d[i]; return r; }
template <class T, int N> inline vec<T, N> select(const vec<T, N>& a, const vec<T, N>& b, bool c) { return c ? b : a; }

// geometric
template <class T, int N> inline T dot(const vec<T, N>& a, const vec<T, N>& b) {
  T r = a.d[0] * b.d[0]; for (int i = 1; i < N; i++) r = T(r + a.d[i] * b.d[i]); return r; }
template <class T, int N> inline T length(const vec<T, N>& a) { return sqrt(dot(a, a)); }
template <class T, int N> inline T length_squared(const vec<T, N>& a) { return dot(a, a); }
template <class T, int N> inline T distance(const vec<T, N>& a, const vec<T, N>& b) { return length(a - b); }
template <class T, int N> inline vec<T, N> normalize(const vec<T, N>& a) { return a * rsqrt(dot(a, a)); }
template <class T> inline vec<T, 3> cross(const vec<T, 3>& a, const vec<T, 3>& b) {
  return vec<T, 3>(a.y * b.z - a.z * b.y, a.z * b.x - a.x * b.z, a.x * b.y - a.y * b.x); }

// ---------------------------------------------------------------------------------------------
// as_type
template <class To, class From> inline To as_type(const From& f) {
  static_assert(sizeof(To) == sizeof(From), "as_type: source and destination sizes differ");
  return __builtin_bit_cast(To, f);
}

// ---------------------------------------------------------------------------------------------
// numeric_limits
template <class T> struct numeric_limits { static constexpr bool is_specialized = false; };
#define MTL_ILIM(T, lo, hi)                                                                          \
  template <> struct numeric_limits<T> {                                                              \
    static constexpr bool is_specialized = true, is_signed = (T(-1) < T(0)), is_integer = true;       \
    static constexpr int digits = int(sizeof(T) * 8) - (T(-1) < T(0) ? 1 : 0);                         \
    static constexpr T min() { return lo; } static constexpr T max() { return hi; }                   \
    static constexpr T lowest() { return lo; } static constexpr T epsilon() { return 0; } };
MTL_ILIM(bool, false, true) MTL_ILIM(char, char(-128), char(127)) MTL_ILIM(detail::schar, -128, 127)
MTL_ILIM(uchar, 0, 255) MTL_ILIM(short, -32768, 32767) MTL_ILIM(ushort, 0, 65535)
MTL_ILIM(int, -2147483647 - 1, 2147483647) MTL_ILIM(uint, 0u, 4294967295u)
MTL_ILIM(long, -9223372036854775807L - 1, 9223372036854775807L) MTL_ILIM(ulong, 0ul, 18446744073709551615ul)
#undef MTL_ILIM
template <> struct numeric_limits<float> {
  static constexpr bool is_specialized = true, is_signed = true, is_integer = false, has_infinity = true;
  static constexpr int digits = 24;
  static constexpr float min() { return __FLT_MIN__; } static constexpr float max() { return __FLT_MAX__; }
  static constexpr float lowest() { return -__FLT_MAX__; } static constexpr float epsilon() { return __FLT_EPSILON__; }
  static constexpr float infinity() { return __builtin_huge_valf(); }
  static constexpr float quiet_NaN() { return __builtin_nanf(""); }
  static constexpr float denorm_min() { return __FLT_DENORM_MIN__; }
};
template <> struct numeric_limits<half> {
  static constexpr bool is_specialized = true, is_signed = true, is_integer = false, has_infinity = true;
  static constexpr int digits = 11;
  static constexpr half min() { return half(6.103515625e-05f); } static constexpr half max() { return half(65504.0f); }
  static constexpr half lowest() { return half(-65504.0f); } static constexpr half epsilon() { return half(0.0009765625f); }
  static constexpr half infinity() { return half(__builtin_huge_valf()); }
  static constexpr half quiet_NaN() { return half(__builtin_nanf("")); }
  static constexpr half denorm_min() { return half(5.9604644775390625e-08f); }
};
template <> struct numeric_limits<bfloat> {
  static constexpr bool is_specialized = true, is_signed = true, is_integer = false, has_infinity = true;
  static constexpr int digits = 8;
  static constexpr bfloat min() { return bfloat::from_bits(0x0080); }
  static constexpr bfloat max() { return bfloat::from_bits(0x7f7f); }
  static constexpr bfloat lowest() { return bfloat::from_bits(0xff7f); }
  static constexpr bfloat epsilon() { return bfloat::from_bits(0x3c00); }
  static constexpr bfloat infinity() { return bfloat::from_bits(0x7f80); }
  static constexpr bfloat quiet_NaN() { return bfloat::from_bits(0x7fc0); }
  static constexpr bfloat denorm_min() { return bfloat::from_bits(0x0001); }
};

// ---------------------------------------------------------------------------------------------
// barriers and simd-group functions (exchange points, fiber mode)
enum class mem_flags : int {
  mem_none = 0, mem_device = 1, mem_threadgroup = 2, mem_texture = 4,
  mem_threadgroup_imageblock = 8, mem_object_data = 16
};
constexpr mem_flags operator|(mem_flags a, mem_flags b) { return mem_flags(int(a) | int(b)); }
constexpr mem_flags operator&(mem_flags a, mem_flags b) { return mem_flags(int(a) & int(b)); }

namespace detail {
inline void use_sync_marker() { __asm__ volatile("" : : "r"(&mtl_uses_sync_marker)); }
struct SimdX { uint32_t mask; uint32_t lane; const unsigned char* slots; };
template <class T> inline SimdX sx(const T& v, int site) {
  static_assert(sizeof(T) <= MTL_SIMD_SLOT, "simd-group function argument too large");
  ::mtl::ThreadCtx* c = ::mtl::detail::cur;
  use_sync_marker();
  SimdX r;
  r.mask = c->rt->simd(c, &v, int(sizeof(T)), site, &r.slots);
  ::mtl::detail::cur = c;
  r.lane = c->a[::mtl::A_TIISG][0];
  return r;
}
template <class T> inline T sget(const SimdX& r, uint32_t l) {
  T t; __builtin_memcpy((void*)&t, r.slots + l * MTL_SIMD_SLOT, sizeof(T)); return t; }
template <class T, class F> inline T sreduce(const T& x, int site, F f) {
  SimdX r = sx(x, site);
  T acc = x; bool first = true;
  for (uint32_t l = 0; l < MTL_SIMD_WIDTH; l++) {
    if (!((r.mask >> l) & 1u)) continue;
    T v = sget<T>(r, l);
    if (first) { acc = v; first = false; } else acc = f(acc, v);
  }
  return acc;
}
template <class T, class F> inline T sprefix(const T& x, int site, F f, bool inclusive, T identity) {
  SimdX r = sx(x, site);
  T acc = identity;
  for (uint32_t l = 0; l < r.lane; l++)
    if ((r.mask >> l) & 1u) acc = f(acc, sget<T>(r, l));
  return inclusive ? f(acc, x) : acc;
}
template <class T> inline T sfrom(const SimdX& r, const T& own, uint32_t src) {
  if (src >= MTL_SIMD_WIDTH || !((r.mask >> src) & 1u)) return own;
  return sget<T>(r, src);
}
}  // namespace detail

inline void threadgroup_barrier(mem_flags = mem_flags::mem_none, int site = MTL_SITE) {
  ::mtl::ThreadCtx* c = ::mtl::detail::cur;
  detail::use_sync_marker();
  c->rt->barrier(c, site);
  ::mtl::detail::cur = c;
}
inline void simdgroup_barrier(mem_flags = mem_flags::mem_none, int site = MTL_SITE) {
  char dummy = 0; (void)detail::sx(dummy, site);
}

#define MTL_SIMD_RED(name, expr)                                                                    \
  template <class T> inline T name(T x, int site = MTL_SITE) {                                      \
    return detail::sreduce(x, site, [](const T& a, const T& b) -> T { return expr; }); }
MTL_SIMD_RED(simd_sum, T(a + b)) MTL_SIMD_RED(simd_product, T(a * b)) MTL_SIMD_RED(simd_prod, T(a * b))
MTL_SIMD_RED(simd_min, min(a, b)) MTL_SIMD_RED(simd_max, max(a, b))
MTL_SIMD_RED(simd_and, T(a & b)) MTL_SIMD_RED(simd_or, T(a | b)) MTL_SIMD_RED(simd_xor, T(a ^ b))
#undef MTL_SIMD_RED
template <class T> inline T simd_prefix_exclusive_sum(T x, int site = MTL_SITE) {
  return detail::sprefix(x, site, [](const T& a, const T& b) -> T { return T(a + b); }, false, T(0)); }
template <class T> inline T simd_prefix_inclusive_sum(T x, int site = MTL_SITE) {
  return detail::sprefix(x, site, [](const T& a, const T& b) -> T { return T(a + b); }, true, T(0)); }
template <class T> inline T simd_prefix_exclusive_product(T x, int site = MTL_SITE) {
  return detail::sprefix(x, site, [](const T& a, const T& b) -> T { return T(a * b); }, false, T(1)); }
template <class T> inline T simd_prefix_inclusive_product(T x, int site = MTL_SITE) {
  return detail::sprefix(x, site, [](const T& a, const T& b) -> T { return T(a * b); }, true, T(1)); }
template <class T> inline T simd_shuffle(T x, ushort lane, int site = MTL_SITE) {
  detail::SimdX r = detail::sx(x, site); return detail::sfrom(r, x, lane); }
template <class T> inline T simd_broadcast(T x, ushort lane, int site = MTL_SITE) {
  detail::SimdX r = detail::sx(x, site); return detail::sfrom(r, x, lane); }
template <class T> inline T simd_shuffle_down(T x, ushort delta, int site = MTL_SITE) {
  detail::SimdX r = detail::sx(x, site); return detail::sfrom(r, x, r.lane + delta); }
template <class T> inline T simd_shuffle_up(T x, ushort delta, int site = MTL_SITE) {
  detail::SimdX r = detail::sx(x, site);
  return delta > r.lane ? x : detail::sfrom(r, x, r.lane - delta); }
template <class T> inline T simd_shuffle_xor(T x, ushort mask, int site = MTL_SITE) {
  detail::SimdX r = detail::sx(x, site); return detail::sfrom(r, x, r.lane ^ mask); }
template <class T> inline T simd_shuffle_rotate_down(T x, ushort delta, int site = MTL_SITE) {
  detail::SimdX r = detail::sx(x, site); return detail::sfrom(r, x, (r.lane + delta) % MTL_SIMD_WIDTH); }
template <class T> inline T simd_shuffle_rotate_up(T x, ushort delta, int site = MTL_SITE) {
  detail::SimdX r = detail::sx(x, site);
  return detail::sfrom(r, x, (r.lane + MTL_SIMD_WIDTH - delta % MTL_SIMD_WIDTH) % MTL_SIMD_WIDTH); }
template <class T> inline T simd_broadcast_first(T x, int site = MTL_SITE) {
  detail::SimdX r = detail::sx(x, site); return detail::sfrom(r, x, uint32_t(__builtin_ctz(r.mask))); }
inline bool simd_is_first(int site = MTL_SITE) {
  char dummy = 0; detail::SimdX r = detail::sx(dummy, site);
  return uint32_t(__builtin_ctz(r.mask)) == r.lane; }
inline bool simd_all(bool v, int site = MTL_SITE) {
  return detail::sreduce(v, site, [](const bool& a, const bool& b) -> bool { return a && b; }); }
inline bool simd_any(bool v, int site = MTL_SITE) {
  return detail::sreduce(v, site, [](const bool& a, const bool& b) -> bool { return a || b; }); }
struct simd_vote {
  ulong v;
  explicit constexpr operator ulong() const { return v; }
  bool all() const { return v == 0xffffffffu; }
  bool any() const { return v != 0; }
};
inline simd_vote simd_ballot(bool v, int site = MTL_SITE) {
  detail::SimdX r = detail::sx(v, site); ulong m = 0;
  for (uint32_t l = 0; l < MTL_SIMD_WIDTH; l++)
    if (((r.mask >> l) & 1u) && detail::sget<bool>(r, l)) m |= (1ul << l);
  return simd_vote{m};
}
inline simd_vote simd_active_threads_mask(int site = MTL_SITE) {
  char dummy = 0; detail::SimdX r = detail::sx(dummy, site); return simd_vote{ulong(r.mask)}; }

// ---------------------------------------------------------------------------------------------
// simdgroup_matrix<T, 8, 8>: each lane holds two elements, in the hardware's layout (MLX's get_coord):
// row = (q & 4) + ((lane >> 1) & 3), col = (q & 2) * 2 + (lane & 1) * 2 with q = lane >> 2;
// the lane holds (row, col) and (row, col + 1).
namespace detail {
inline uint32_t sg_lane() { return ::mtl::detail::cur->a[::mtl::A_TIISG][0] & 31u; }
inline uint32_t sg_row(uint32_t l) { return ((l >> 2) & 4u) + ((l >> 1) & 3u); }
inline uint32_t sg_col(uint32_t l) { return ((l >> 2) & 2u) * 2u + (l & 1u) * 2u; }
}  // namespace detail
template <class T, int R, int C> struct simdgroup_matrix {
  static_assert(R == 8 && C == 8, "software Metal: only 8x8 simdgroup matrices are supported");
  vec<T, 2> e;
  constexpr simdgroup_matrix() : e() {}
  explicit simdgroup_matrix(T diag) : e() {  // diagonal matrix, as in MSL
    uint32_t l = detail::sg_lane(), r = detail::sg_row(l), c = detail::sg_col(l);
    e.d[0] = r == c ? diag : T(0);
    e.d[1] = r == c + 1 ? diag : T(0);
  }
  thread vec<T, 2>& thread_elements() { return e; }
  const thread vec<T, 2>& thread_elements() const { return e; }
};
typedef simdgroup_matrix<float, 8, 8> simdgroup_float8x8;
typedef simdgroup_matrix<half, 8, 8> simdgroup_half8x8;
typedef simdgroup_matrix<bfloat, 8, 8> simdgroup_bfloat8x8;
template <class T, int R, int C> inline simdgroup_matrix<T, R, C> make_filled_simdgroup_matrix(T v) {
  simdgroup_matrix<T, R, C> m; m.e.d[0] = v; m.e.d[1] = v; return m; }
template <class T, class U, int R, int C>
inline void simdgroup_load(thread simdgroup_matrix<T, R, C>& m, const U* src, ulong elements_per_row = C,
                           ulong2 matrix_origin = ulong2(0), bool transpose_matrix = false) {
  uint32_t l = detail::sg_lane(), r = detail::sg_row(l), c = detail::sg_col(l);
  for (int k = 0; k < 2; k++) {
    ulong rr = transpose_matrix ? c + k : r, cc = transpose_matrix ? r : c + k;
    m.e.d[k] = T(src[(matrix_origin.y + rr) * elements_per_row + matrix_origin.x + cc]);
  }
}
template <class T, class U, int R, int C>
inline void simdgroup_store(const thread simdgroup_matrix<T, R, C>& m, U* dst, ulong elements_per_row = C,
                            ulong2 matrix_origin = ulong2(0), bool transpose_matrix = false) {
  uint32_t l = detail::sg_lane(), r = detail::sg_row(l), c = detail::sg_col(l);
  for (int k = 0; k < 2; k++) {
    ulong rr = transpose_matrix ? c + k : r, cc = transpose_matrix ? r : c + k;
    dst[(matrix_origin.y + rr) * elements_per_row + matrix_origin.x + cc] = U(m.e.d[k]);
  }
}
template <class TD, class TA, class TB, class TC>
inline void simdgroup_multiply_accumulate(thread simdgroup_matrix<TD, 8, 8>& d, const thread simdgroup_matrix<TA, 8, 8>& a,
                                          const thread simdgroup_matrix<TB, 8, 8>& b,
                                          const thread simdgroup_matrix<TC, 8, 8>& c, int site = MTL_SITE) {
  struct P { float a[2], b[2], c[2]; } mine;
  for (int k = 0; k < 2; k++) { mine.a[k] = float(a.e.d[k]); mine.b[k] = float(b.e.d[k]); mine.c[k] = float(c.e.d[k]); }
  detail::SimdX x = detail::sx(mine, site);
  float A[8][8] = {}, B[8][8] = {}, Cm[8][8] = {};
  for (uint32_t l = 0; l < MTL_SIMD_WIDTH; l++) {
    if (!((x.mask >> l) & 1u)) continue;
    P p = detail::sget<P>(x, l);
    uint32_t r = detail::sg_row(l), col = detail::sg_col(l);
    for (int k = 0; k < 2; k++) { A[r][col + k] = p.a[k]; B[r][col + k] = p.b[k]; Cm[r][col + k] = p.c[k]; }
  }
  uint32_t r = detail::sg_row(x.lane), col = detail::sg_col(x.lane);
  for (int k = 0; k < 2; k++) {
    float acc = Cm[r][col + k];
    for (int i = 0; i < 8; i++) acc = __builtin_fmaf(A[r][i], B[i][col + k], acc);
    d.e.d[k] = TD(acc);
  }
}
template <class TD, class TA, class TB>
inline void simdgroup_multiply(thread simdgroup_matrix<TD, 8, 8>& d, const thread simdgroup_matrix<TA, 8, 8>& a,
                               const thread simdgroup_matrix<TB, 8, 8>& b, int site = MTL_SITE) {
  simdgroup_matrix<TD, 8, 8> zero;
  simdgroup_multiply_accumulate(d, a, b, zero, site);
}

// ---------------------------------------------------------------------------------------------
// atomics (device and threadgroup memory; memory_order is accepted and treated as relaxed)
enum memory_order { memory_order_relaxed = 0, memory_order_acquire = 2, memory_order_release = 3,
                    memory_order_acq_rel = 4, memory_order_seq_cst = 5 };
template <class T> struct atomic { T __v; };
typedef atomic<int> atomic_int; typedef atomic<uint> atomic_uint; typedef atomic<bool> atomic_bool;
typedef atomic<float> atomic_float; typedef atomic<ulong> atomic_ulong; typedef atomic<long> atomic_long;
namespace detail {
template <class T, class F> inline T atomic_rmw(volatile atomic<T>* o, F f) {
  T* p = const_cast<T*>(&o->__v);
  T old = __atomic_load_n(p, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(p, &old, f(old), true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {}
  return old;
}
inline float atomic_rmw_f(volatile atomic<float>* o, float v, int op) {
  uint32_t* p = (uint32_t*)const_cast<float*>(&o->__v);
  uint32_t old = __atomic_load_n(p, __ATOMIC_RELAXED);
  for (;;) {
    float of = __builtin_bit_cast(float, old);
    float nf = op == 0 ? of + v : op == 1 ? of - v : op == 2 ? __builtin_fminf(of, v) : op == 3 ? __builtin_fmaxf(of, v) : v;
    uint32_t nu = __builtin_bit_cast(uint32_t, nf);
    if (__atomic_compare_exchange_n(p, &old, nu, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return of;
  }
}
}  // namespace detail
template <class T> inline void atomic_store_explicit(volatile atomic<T>* o, detail::id<T> v, memory_order) {
  __atomic_store(const_cast<T*>(&o->__v), &v, __ATOMIC_SEQ_CST); }
template <class T> inline T atomic_load_explicit(volatile atomic<T>* o, memory_order) {
  T r; __atomic_load(const_cast<T*>(&o->__v), &r, __ATOMIC_SEQ_CST); return r; }
template <class T> inline T atomic_exchange_explicit(volatile atomic<T>* o, detail::id<T> v, memory_order) {
  T r; __atomic_exchange(const_cast<T*>(&o->__v), &v, &r, __ATOMIC_SEQ_CST); return r; }
template <class T>
inline bool atomic_compare_exchange_weak_explicit(volatile atomic<T>* o, thread T* expected, detail::id<T> desired,
                                                  memory_order, memory_order) {
  return __atomic_compare_exchange(const_cast<T*>(&o->__v), expected, &desired, false, __ATOMIC_SEQ_CST,
                                   __ATOMIC_SEQ_CST); }
template <class T>
inline bool atomic_compare_exchange_strong_explicit(volatile atomic<T>* o, thread T* expected, detail::id<T> desired,
                                                    memory_order a, memory_order b) {
  return atomic_compare_exchange_weak_explicit(o, expected, desired, a, b); }
#define MTL_ATOMIC_INT(name, builtin)                                                                 \
  template <class T> requires (!detail::same<T, float>)                                               \
  inline T atomic_fetch_##name##_explicit(volatile atomic<T>* o, detail::id<T> v, memory_order) {     \
    return builtin(const_cast<T*>(&o->__v), v, __ATOMIC_SEQ_CST); }
MTL_ATOMIC_INT(add, __atomic_fetch_add) MTL_ATOMIC_INT(sub, __atomic_fetch_sub)
MTL_ATOMIC_INT(and, __atomic_fetch_and) MTL_ATOMIC_INT(or, __atomic_fetch_or) MTL_ATOMIC_INT(xor, __atomic_fetch_xor)
#undef MTL_ATOMIC_INT
template <class T> requires (!detail::same<T, float>)
inline T atomic_fetch_min_explicit(volatile atomic<T>* o, detail::id<T> v, memory_order) {
  return detail::atomic_rmw(o, [v](T a) { return a < v ? a : v; }); }
template <class T> requires (!detail::same<T, float>)
inline T atomic_fetch_max_explicit(volatile atomic<T>* o, detail::id<T> v, memory_order) {
  return detail::atomic_rmw(o, [v](T a) { return a > v ? a : v; }); }
inline float atomic_fetch_add_explicit(volatile atomic<float>* o, float v, memory_order) { return detail::atomic_rmw_f(o, v, 0); }
inline float atomic_fetch_sub_explicit(volatile atomic<float>* o, float v, memory_order) { return detail::atomic_rmw_f(o, v, 1); }
inline float atomic_fetch_min_explicit(volatile atomic<float>* o, float v, memory_order) { return detail::atomic_rmw_f(o, v, 2); }
inline float atomic_fetch_max_explicit(volatile atomic<float>* o, float v, memory_order) { return detail::atomic_rmw_f(o, v, 3); }

// precise:: and fast:: variants (the software device always computes the precise result)
#define MTL_MATH_NAMES                                                                                \
  using metal::exp; using metal::exp2; using metal::exp10; using metal::log; using metal::log2;       \
  using metal::log10; using metal::sqrt; using metal::rsqrt; using metal::sin; using metal::cos;      \
  using metal::tan; using metal::asin; using metal::acos; using metal::atan; using metal::sinh;       \
  using metal::cosh; using metal::tanh; using metal::asinh; using metal::acosh; using metal::atanh;   \
  using metal::floor; using metal::ceil; using metal::round; using metal::rint; using metal::trunc;   \
  using metal::fabs; using metal::fract; using metal::saturate; using metal::sign; using metal::pow;  \
  using metal::powr; using metal::fmod; using metal::fmin; using metal::fmax; using metal::atan2;     \
  using metal::copysign; using metal::fdim; using metal::step; using metal::divide; using metal::min; \
  using metal::max; using metal::fma; using metal::mix; using metal::smoothstep; using metal::clamp;  \
  using metal::normalize; using metal::length; using metal::distance; using metal::abs;               \
  using metal::sincos; using metal::fmin3; using metal::fmax3;
namespace precise { MTL_MATH_NAMES }
namespace fast { MTL_MATH_NAMES }
#undef MTL_MATH_NAMES
#undef MTL_VMAP1
#undef MTL_VMAP2
#undef MTL_VMAP3
}  // namespace metal

// MSL constants
#define MAXFLOAT __FLT_MAX__
#define HUGE_VALF __builtin_huge_valf()
#define HUGE_VALH ((half)__builtin_huge_valf())
#define INFINITY __builtin_inff()
#define NAN __builtin_nanf("")
#define FLT_MAX __FLT_MAX__
#define FLT_MIN __FLT_MIN__
#define FLT_EPSILON __FLT_EPSILON__
#define FLT_DIG 6
#define FLT_MANT_DIG 24
#define HALF_MAX ((half)65504.0f)
#define HALF_MIN ((half)6.103515625e-05f)
#define HALF_EPSILON ((half)0.0009765625f)
#define M_E_F 2.71828182845904523536f
#define M_LOG2E_F 1.44269504088896340736f
#define M_LOG10E_F 0.434294481903251827651f
#define M_LN2_F 0.693147180559945309417f
#define M_LN10_F 2.30258509299404568402f
#define M_PI_F 3.14159265358979323846f
#define M_PI_2_F 1.57079632679489661923f
#define M_PI_4_F 0.785398163397448309616f
#define M_1_PI_F 0.318309886183790671538f
#define M_2_PI_F 0.636619772367581343076f
#define M_2_SQRTPI_F 1.12837916709551257390f
#define M_SQRT2_F 1.41421356237309504880f
#define M_SQRT1_2_F 0.707106781186547524401f
#define M_E_H ((half)M_E_F)
#define M_PI_H ((half)M_PI_F)
#ifndef CHAR_BIT
#define CHAR_BIT 8
#endif
#ifndef SCHAR_MAX
#define SCHAR_MAX 127
#define SCHAR_MIN (-128)
#define UCHAR_MAX 255
#define CHAR_MAX 127
#define CHAR_MIN (-128)
#define SHRT_MAX 32767
#define SHRT_MIN (-32768)
#define USHRT_MAX 65535
#define INT_MAX 2147483647
#define INT_MIN (-2147483647 - 1)
#define UINT_MAX 4294967295u
#define LONG_MAX 9223372036854775807L
#define LONG_MIN (-9223372036854775807L - 1)
#define ULONG_MAX 18446744073709551615ul
#endif
#endif
