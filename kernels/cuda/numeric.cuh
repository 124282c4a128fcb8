// numeric: element types and conversions shared by the data-movement,
// indexing, scatter, resize, quant and loss modules. One typedef per rlx
// dtype (named as the dtype), float <-> element conversions (f16 and bf16
// through float), and saturating round-half-to-even casts to integers, like
// the CPU backend's `round_ties_even() as T` (NaN gives 0). f16 and bf16
// are their bits (NVRTC here has no <cuda_fp16.h>): converted by PTX `cvt`
// from and to float, and from double through float rounded to odd, which
// rounds once like a direct conversion.

typedef float f32;
typedef double f64;
struct f16 {
    unsigned short bits;
};
struct bf16 {
    unsigned short bits;
};
typedef signed char i8;
typedef short i16;
typedef int i32;
typedef long long i64;
typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;

// Element types by size, for kernels that only move bytes.
typedef u8 b1;
typedef u16 b2;
typedef u32 b4;
typedef u64 b8;

template <typename T> struct Num {
    static const bool is_float = false;
};
template <> struct Num<f32> { static const bool is_float = true; };
template <> struct Num<f64> { static const bool is_float = true; };
template <> struct Num<f16> { static const bool is_float = true; };
template <> struct Num<bf16> { static const bool is_float = true; };

__device__ __forceinline__ float rlx_f16_to_f32(unsigned short h) {
    float f;
    asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
    return f;
}
__device__ __forceinline__ unsigned short rlx_f32_to_f16(float f) {
    unsigned short h;
    asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
__device__ __forceinline__ unsigned short rlx_f32_to_bf16(float f) {
    unsigned short h;
    asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
    return h;
}
// `d` as a float rounded to odd: exact values stay, inexact ones get the
// lowest bit set, so a later rounding to a narrower format rounds once.
__device__ __forceinline__ float rlx_f64_to_f32_odd(double d) {
    float f = __double2float_rz(d);
    if (f == f && (double)f != d) {
        f = __uint_as_float(__float_as_uint(f) | 1u);
    }
    return f;
}

template <typename T> __device__ __forceinline__ double to_f64(T v) { return (double)v; }
template <> __device__ __forceinline__ double to_f64<f16>(f16 v) {
    return (double)rlx_f16_to_f32(v.bits);
}
template <> __device__ __forceinline__ double to_f64<bf16>(bf16 v) {
    return (double)__uint_as_float((unsigned int)v.bits << 16);
}
template <typename T> __device__ __forceinline__ float to_f32(T v) { return (float)v; }
template <> __device__ __forceinline__ float to_f32<f16>(f16 v) { return rlx_f16_to_f32(v.bits); }
template <> __device__ __forceinline__ float to_f32<bf16>(bf16 v) {
    return __uint_as_float((unsigned int)v.bits << 16);
}

// A float value stored as T: floats round to nearest, integers round half
// to even and saturate (NaN gives 0).
template <typename T> __device__ __forceinline__ T sat_int(double v, double lo, double hi) {
    if (v != v) {
        return (T)0;
    }
    v = rint(v);
    if (v <= lo) {
        return (T)lo;
    }
    if (v >= hi) {
        return (T)hi;
    }
    return (T)v;
}
template <typename T> __device__ __forceinline__ T from_f64(double v);
template <> __device__ __forceinline__ f32 from_f64<f32>(double v) { return (float)v; }
template <> __device__ __forceinline__ f64 from_f64<f64>(double v) { return v; }
template <> __device__ __forceinline__ f16 from_f64<f16>(double v) {
    f16 h;
    h.bits = rlx_f32_to_f16(rlx_f64_to_f32_odd(v));
    return h;
}
template <> __device__ __forceinline__ bf16 from_f64<bf16>(double v) {
    bf16 h;
    h.bits = rlx_f32_to_bf16(rlx_f64_to_f32_odd(v));
    return h;
}
template <> __device__ __forceinline__ i8 from_f64<i8>(double v) { return sat_int<i8>(v, -128.0, 127.0); }
template <> __device__ __forceinline__ u8 from_f64<u8>(double v) { return sat_int<u8>(v, 0.0, 255.0); }
template <> __device__ __forceinline__ i16 from_f64<i16>(double v) {
    return sat_int<i16>(v, -32768.0, 32767.0);
}
template <> __device__ __forceinline__ u16 from_f64<u16>(double v) {
    return sat_int<u16>(v, 0.0, 65535.0);
}
template <> __device__ __forceinline__ i32 from_f64<i32>(double v) {
    return sat_int<i32>(v, -2147483648.0, 2147483647.0);
}
template <> __device__ __forceinline__ u32 from_f64<u32>(double v) {
    return sat_int<u32>(v, 0.0, 4294967295.0);
}
template <> __device__ __forceinline__ i64 from_f64<i64>(double v) {
    if (v != v) {
        return 0;
    }
    v = rint(v);
    if (v <= -9223372036854775808.0) {
        return (i64)(-9223372036854775807ll - 1ll);
    }
    if (v >= 9223372036854775808.0) {
        return 9223372036854775807ll;
    }
    return (i64)v;
}
template <> __device__ __forceinline__ u64 from_f64<u64>(double v) {
    if (v != v || v <= 0.0) {
        return 0;
    }
    v = rint(v);
    if (v >= 18446744073709551616.0) {
        return 18446744073709551615ull;
    }
    return (u64)v;
}

// An index element (i64 when `wide`, else i32) wrapped into [0, n):
// negative counts from the end; -1 when out of range.
__device__ __forceinline__ long long rlx_index(const void* idx, unsigned long long j,
                                               unsigned int wide, unsigned long long n) {
    long long v = wide ? ((const long long*)idx)[j] : (long long)((const int*)idx)[j];
    if (v < 0) {
        v += (long long)n;
    }
    return (v >= 0 && (unsigned long long)v < n) ? v : -1;
}
