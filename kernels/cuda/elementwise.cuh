// elementwise: helper functions of the generated element-wise CUDA kernels
// (rlx-gpu `kernels::elementwise::cuda`), with the CPU backend's semantics:
// integer arithmetic wraps (computed through unsigned types), integer division
// and remainder by zero give 0 (INT_MIN / -1 wraps), `mod` takes the divisor's
// sign and `fmod` the dividend's, shifts by a negative amount or past the
// width give 0, integer `pow` multiplies (wrapping) at most 128 times,
// float max/min propagate NaN, float-to-integer casts truncate and saturate
// like Rust's `as` (NaN gives 0). Narrow integers compute in 32 bits and wrap
// when stored; f16 and bf16 compute in float, f64 in double. Plain CUDA C++ for NVRTC:
// overloads, no templates, no includes.

__device__ __forceinline__ float ew_nanf() { return __int_as_float(0x7fc00000); }

// ----- float -----

__device__ __forceinline__ float ew_sign(float x) {
    return x != x ? x : (x > 0.0f ? 1.0f : (x < 0.0f ? -1.0f : 0.0f));
}
__device__ __forceinline__ float ew_relu(float x) { return x < 0.0f ? 0.0f : x; }
__device__ __forceinline__ float ew_sigmoid(float x) {
    if (x >= 0.0f) {
        return 1.0f / (1.0f + expf(-x));
    }
    float e = expf(x);
    return e / (1.0f + e);
}
__device__ __forceinline__ float ew_softplus(float x) {
    return x > 0.0f ? x + log1pf(expf(-x)) : log1pf(expf(x));
}
__device__ __forceinline__ bool ew_is_pos_inf(float x) { return x == __int_as_float(0x7f800000); }
__device__ __forceinline__ bool ew_is_neg_inf(float x) { return x == __int_as_float(0xff800000); }
__device__ __forceinline__ float ew_max(float a, float b) {
    return (a != a || b != b) ? ew_nanf() : (a > b ? a : b);
}
__device__ __forceinline__ float ew_min(float a, float b) {
    return (a != a || b != b) ? ew_nanf() : (a < b ? a : b);
}
// Floor modulo: the divisor's sign, a zero result too (numpy's `mod`).
__device__ __forceinline__ float ew_mod(float a, float b) {
    float r = fmodf(a, b);
    if (r == 0.0f) return copysignf(0.0f, b);
    return ((r < 0.0f) != (b < 0.0f)) ? r + b : r;
}
__device__ __forceinline__ float ew_gelu(float x) {
    return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
}
__device__ __forceinline__ float ew_gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}
__device__ __forceinline__ float ew_clip(float x, float lo, float hi) {
    float v = x < lo ? lo : x;
    return v > hi ? hi : v;
}

// Float to integer: truncate, saturate, NaN gives 0. `_in` clamps to a
// narrow range first (i8, i16, u8, u16).
__device__ __forceinline__ int ew_f2i(float x) {
    return x != x ? 0 : (x >= 2147483648.0f ? 2147483647 : (x <= -2147483648.0f ? (-2147483647 - 1) : (int)x));
}
__device__ __forceinline__ int ew_f2i_in(float x, float lo, float hi) {
    return x != x ? 0 : (int)(x < lo ? lo : (x > hi ? hi : x));
}
__device__ __forceinline__ unsigned int ew_f2u(float x) {
    return !(x > 0.0f) ? 0u : (x >= 4294967296.0f ? 4294967295u : (unsigned int)x);
}
__device__ __forceinline__ unsigned int ew_f2u_in(float x, float hi) {
    return !(x > 0.0f) ? 0u : (unsigned int)(x > hi ? hi : x);
}
__device__ __forceinline__ long long ew_f2ll(float x) {
    return x != x ? 0ll : (x >= 9223372036854775808.0f ? 9223372036854775807ll : (x <= -9223372036854775808.0f ? (-9223372036854775807ll - 1ll) : (long long)x));
}
__device__ __forceinline__ unsigned long long ew_f2ull(float x) {
    return !(x > 0.0f) ? 0ull : (x >= 18446744073709551616.0f ? 18446744073709551615ull : (unsigned long long)x);
}

// ----- double -----

__device__ __forceinline__ double ew_nan() { return __longlong_as_double(0x7ff8000000000000ll); }
__device__ __forceinline__ double ew_sign(double x) {
    return x != x ? x : (x > 0.0 ? 1.0 : (x < 0.0 ? -1.0 : 0.0));
}
__device__ __forceinline__ double ew_relu(double x) { return x < 0.0 ? 0.0 : x; }
__device__ __forceinline__ double ew_sigmoid(double x) {
    if (x >= 0.0) {
        return 1.0 / (1.0 + exp(-x));
    }
    double e = exp(x);
    return e / (1.0 + e);
}
__device__ __forceinline__ double ew_softplus(double x) {
    return x > 0.0 ? x + log1p(exp(-x)) : log1p(exp(x));
}
__device__ __forceinline__ bool ew_is_pos_inf(double x) { return isinf(x) && x > 0.0; }
__device__ __forceinline__ bool ew_is_neg_inf(double x) { return isinf(x) && x < 0.0; }
__device__ __forceinline__ double ew_max(double a, double b) {
    return (a != a || b != b) ? ew_nan() : (a > b ? a : b);
}
__device__ __forceinline__ double ew_min(double a, double b) {
    return (a != a || b != b) ? ew_nan() : (a < b ? a : b);
}
__device__ __forceinline__ double ew_mod(double a, double b) {
    double r = fmod(a, b);
    if (r == 0.0) return copysign(0.0, b);
    return ((r < 0.0) != (b < 0.0)) ? r + b : r;
}
__device__ __forceinline__ double ew_gelu(double x) {
    return 0.5 * x * (1.0 + erf(x * 0.70710678118654752));
}
__device__ __forceinline__ double ew_gelu_tanh(double x) {
    return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}
__device__ __forceinline__ double ew_clip(double x, double lo, double hi) {
    double v = x < lo ? lo : x;
    return v > hi ? hi : v;
}
__device__ __forceinline__ int ew_f2i(double x) {
    return x != x ? 0 : (x >= 2147483647.0 ? 2147483647 : (x <= -2147483648.0 ? (-2147483647 - 1) : (int)x));
}
__device__ __forceinline__ int ew_f2i_in(double x, double lo, double hi) {
    return x != x ? 0 : (int)(x < lo ? lo : (x > hi ? hi : x));
}
__device__ __forceinline__ unsigned int ew_f2u(double x) {
    return !(x > 0.0) ? 0u : (x >= 4294967295.0 ? 4294967295u : (unsigned int)x);
}
__device__ __forceinline__ unsigned int ew_f2u_in(double x, double hi) {
    return !(x > 0.0) ? 0u : (unsigned int)(x > hi ? hi : x);
}
__device__ __forceinline__ long long ew_f2ll(double x) {
    return x != x ? 0ll : (x >= 9223372036854775808.0 ? 9223372036854775807ll : (x <= -9223372036854775808.0 ? (-9223372036854775807ll - 1ll) : (long long)x));
}
__device__ __forceinline__ unsigned long long ew_f2ull(double x) {
    return !(x > 0.0) ? 0ull : (x >= 18446744073709551616.0 ? 18446744073709551615ull : (unsigned long long)x);
}

// ----- signed integers (int: i8, i16, i32; long long: i64) -----

__device__ __forceinline__ int ew_add(int a, int b) { return (int)((unsigned int)a + (unsigned int)b); }
__device__ __forceinline__ int ew_sub(int a, int b) { return (int)((unsigned int)a - (unsigned int)b); }
__device__ __forceinline__ int ew_mul(int a, int b) { return (int)((unsigned int)a * (unsigned int)b); }
__device__ __forceinline__ int ew_neg(int a) { return (int)(0u - (unsigned int)a); }
__device__ __forceinline__ int ew_abs(int a) { return a < 0 ? ew_neg(a) : a; }
__device__ __forceinline__ int ew_sign(int a) { return a > 0 ? 1 : (a < 0 ? -1 : 0); }
__device__ __forceinline__ int ew_relu(int a) { return a > 0 ? a : 0; }
__device__ __forceinline__ int ew_max(int a, int b) { return a > b ? a : b; }
__device__ __forceinline__ int ew_min(int a, int b) { return a < b ? a : b; }
__device__ __forceinline__ int ew_div(int a, int b) { return b == 0 ? 0 : (b == -1 ? ew_neg(a) : a / b); }
__device__ __forceinline__ int ew_fmod(int a, int b) { return (b == 0 || b == -1) ? 0 : a % b; }
__device__ __forceinline__ int ew_mod(int a, int b) {
    int r = ew_fmod(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ int ew_shl(int a, int b, int w) { return (b < 0 || b >= w) ? 0 : (int)((unsigned int)a << b); }
// A shift at or past the width (or negative) leaves only the sign fill.
__device__ __forceinline__ int ew_shr(int a, int b, int w) { return (b < 0 || b >= w) ? (a < 0 ? -1 : 0) : (a >> b); }
__device__ __forceinline__ int ew_clip(int x, int lo, int hi) {
    int v = x < lo ? lo : x;
    return v > hi ? hi : v;
}

__device__ __forceinline__ long long ew_add(long long a, long long b) { return (long long)((unsigned long long)a + (unsigned long long)b); }
__device__ __forceinline__ long long ew_sub(long long a, long long b) { return (long long)((unsigned long long)a - (unsigned long long)b); }
__device__ __forceinline__ long long ew_mul(long long a, long long b) { return (long long)((unsigned long long)a * (unsigned long long)b); }
__device__ __forceinline__ long long ew_neg(long long a) { return (long long)(0ull - (unsigned long long)a); }
__device__ __forceinline__ long long ew_abs(long long a) { return a < 0 ? ew_neg(a) : a; }
__device__ __forceinline__ long long ew_sign(long long a) { return a > 0 ? 1ll : (a < 0 ? -1ll : 0ll); }
__device__ __forceinline__ long long ew_relu(long long a) { return a > 0 ? a : 0ll; }
__device__ __forceinline__ long long ew_max(long long a, long long b) { return a > b ? a : b; }
__device__ __forceinline__ long long ew_min(long long a, long long b) { return a < b ? a : b; }
__device__ __forceinline__ long long ew_div(long long a, long long b) { return b == 0 ? 0ll : (b == -1 ? ew_neg(a) : a / b); }
__device__ __forceinline__ long long ew_fmod(long long a, long long b) { return (b == 0 || b == -1) ? 0ll : a % b; }
__device__ __forceinline__ long long ew_mod(long long a, long long b) {
    long long r = ew_fmod(a, b);
    return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
__device__ __forceinline__ long long ew_shl(long long a, long long b, int w) { return (b < 0 || b >= w) ? 0ll : (long long)((unsigned long long)a << b); }
__device__ __forceinline__ long long ew_shr(long long a, long long b, int w) { return (b < 0 || b >= w) ? (a < 0 ? -1ll : 0ll) : (a >> b); }
__device__ __forceinline__ long long ew_clip(long long x, long long lo, long long hi) {
    long long v = x < lo ? lo : x;
    return v > hi ? hi : v;
}

// a^e with wrapping products; a negative e gives 1 for a == 1, +-1 for
// a == -1 and 0 otherwise (numpy), e is capped at 128 (the CPU backend's loop).
__device__ __forceinline__ long long ew_pow(long long a, long long e) {
    if (e < 0) {
        return a == 1 ? 1ll : (a == -1 ? ((e & 1) ? -1ll : 1ll) : 0ll);
    }
    unsigned long long acc = 1ull, b = (unsigned long long)a;
    long long n = e < 128 ? e : 128;
    while (n > 0) {
        if (n & 1) {
            acc *= b;
        }
        b *= b;
        n >>= 1;
    }
    return (long long)acc;
}
__device__ __forceinline__ int ew_pow(int a, int e) { return (int)ew_pow((long long)a, (long long)e); }

// ----- unsigned integers (unsigned int: u8, u16, u32; unsigned long long: u64) -----

__device__ __forceinline__ unsigned int ew_neg(unsigned int a) { return 0u - a; }
__device__ __forceinline__ unsigned int ew_sign(unsigned int a) { return a > 0u ? 1u : 0u; }
__device__ __forceinline__ unsigned int ew_max(unsigned int a, unsigned int b) { return a > b ? a : b; }
__device__ __forceinline__ unsigned int ew_min(unsigned int a, unsigned int b) { return a < b ? a : b; }
__device__ __forceinline__ unsigned int ew_div(unsigned int a, unsigned int b) { return b == 0u ? 0u : a / b; }
__device__ __forceinline__ unsigned int ew_fmod(unsigned int a, unsigned int b) { return b == 0u ? 0u : a % b; }
__device__ __forceinline__ unsigned int ew_shl(unsigned int a, unsigned int b, int w) { return b >= (unsigned int)w ? 0u : a << b; }
__device__ __forceinline__ unsigned int ew_shr(unsigned int a, unsigned int b, int w) { return b >= (unsigned int)w ? 0u : a >> b; }
__device__ __forceinline__ unsigned int ew_clip(unsigned int x, unsigned int lo, unsigned int hi) {
    unsigned int v = x < lo ? lo : x;
    return v > hi ? hi : v;
}

__device__ __forceinline__ unsigned long long ew_neg(unsigned long long a) { return 0ull - a; }
__device__ __forceinline__ unsigned long long ew_sign(unsigned long long a) { return a > 0ull ? 1ull : 0ull; }
__device__ __forceinline__ unsigned long long ew_max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
__device__ __forceinline__ unsigned long long ew_min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
__device__ __forceinline__ unsigned long long ew_div(unsigned long long a, unsigned long long b) { return b == 0ull ? 0ull : a / b; }
__device__ __forceinline__ unsigned long long ew_fmod(unsigned long long a, unsigned long long b) { return b == 0ull ? 0ull : a % b; }
__device__ __forceinline__ unsigned long long ew_shl(unsigned long long a, unsigned long long b, int w) { return b >= (unsigned long long)w ? 0ull : a << b; }
__device__ __forceinline__ unsigned long long ew_shr(unsigned long long a, unsigned long long b, int w) { return b >= (unsigned long long)w ? 0ull : a >> b; }
__device__ __forceinline__ unsigned long long ew_clip(unsigned long long x, unsigned long long lo, unsigned long long hi) {
    unsigned long long v = x < lo ? lo : x;
    return v > hi ? hi : v;
}

__device__ __forceinline__ unsigned long long ew_pow(unsigned long long a, unsigned long long e) {
    unsigned long long acc = 1ull, b = a;
    unsigned long long n = e < 128ull ? e : 128ull;
    while (n > 0ull) {
        if (n & 1ull) {
            acc *= b;
        }
        b *= b;
        n >>= 1;
    }
    return acc;
}
__device__ __forceinline__ unsigned int ew_pow(unsigned int a, unsigned int e) {
    return (unsigned int)ew_pow((unsigned long long)a, (unsigned long long)e);
}
