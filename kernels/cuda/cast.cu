// cast: Cast where either side is a float8 (E4M3FN, E4M3FNUZ, E5M2,
// E5M2FNUZ), float4 (E2M1), E8M0 or 2-/4-bit integer dtype, as the CPU
// backend's generic path (kernels/cast.rs `read` / `write`, minifloat.rs)
// computes it: each element is read as an integer or a double, then
// written: minifloats encode with round to nearest even, overflow and
// saturation as ONNX defines; sub-byte integers keep their low bits
// (stored a byte each, signed ones sign-extended); wider integers wrap from
// integers and truncate with saturation from floats (NaN gives 0); bool is
// `!= 0`. Dtypes are ONNX codes (CastParams.src / .dst), switched on at run
// time (uniform across the grid). Also `bitcast_copy`, a byte copy.
// CastParams is rlx-gpu's (kernels/cast.rs); the minifloat formats are
// minifloat.cuh's.

// A value between dtypes: an integer (64 bits, signed or not) or a double.
struct CastVal {
    bool is_float;
    bool is_signed;
    unsigned long long bits;
    double f;
};

__device__ __forceinline__ CastVal cast_int(unsigned long long bits, bool is_signed) {
    CastVal v;
    v.is_float = false;
    v.is_signed = is_signed;
    v.bits = bits;
    v.f = 0.0;
    return v;
}

__device__ __forceinline__ CastVal cast_float(double f) {
    CastVal v;
    v.is_float = true;
    v.is_signed = true;
    v.bits = 0;
    v.f = f;
    return v;
}

__device__ __forceinline__ CastVal cast_read(unsigned int code, const void* x, unsigned long long i) {
    switch (code) {
    case 1u: return cast_float((double)((const float*)x)[i]);
    case 11u: return cast_float(((const double*)x)[i]);
    case 10u: return cast_float((double)rlx_h2f(((const rlx_half*)x)[i]));
    case 16u: return cast_float((double)rlx_b2f(((const rlx_bf16*)x)[i]));
    case 24u: {
        unsigned int c = ((const unsigned char*)x)[i];
        return cast_float(c == 0xffu ? __longlong_as_double(0x7ff8000000000000ll)
                                     : ldexp(1.0, (int)c - 127));
    }
    case 17u:
    case 18u:
    case 19u:
    case 20u:
    case 23u: return cast_float(mf_decode(mf_format(code), ((const unsigned char*)x)[i]));
    case 9u: return cast_int(((const unsigned char*)x)[i] != 0 ? 1ull : 0ull, true);
    case 3u:
    case 22u:
    case 26u: return cast_int((unsigned long long)(long long)((const signed char*)x)[i], true);
    case 5u: return cast_int((unsigned long long)(long long)((const short*)x)[i], true);
    case 6u: return cast_int((unsigned long long)(long long)((const int*)x)[i], true);
    case 7u: return cast_int((unsigned long long)((const long long*)x)[i], true);
    case 4u: return cast_int((unsigned long long)((const unsigned short*)x)[i], false);
    case 12u: return cast_int((unsigned long long)((const unsigned int*)x)[i], false);
    case 13u: return cast_int(((const unsigned long long*)x)[i], false);
    default: return cast_int((unsigned long long)((const unsigned char*)x)[i], false);
    }
}

__device__ __forceinline__ double cast_as_f64(const CastVal& v) {
    if (v.is_float) {
        return v.f;
    }
    return v.is_signed ? (double)(long long)v.bits : (double)v.bits;
}

// The low 64 bits of the value as an integer: floats truncate (NaN and
// infinities give 0), saturating at the i128 range as the CPU's `as i128`.
__device__ __forceinline__ unsigned long long cast_low_bits(const CastVal& v) {
    if (!v.is_float) {
        return v.bits;
    }
    double f = v.f;
    if (f != f || isinf(f)) {
        return 0ull;
    }
    if (f >= 170141183460469231731687303715884105728.0) {
        return ~0ull;  // i128::MAX
    }
    if (fabs(f) >= 18446744073709551616.0) {
        return 0ull;  // a multiple of 2^64 (i128::MIN too)
    }
    f = trunc(f);
    return f >= 0.0 ? (unsigned long long)f : 0ull - (unsigned long long)(-f);
}

// A double truncated toward zero and saturated to [lo, hi] (NaN gives 0),
// as Rust's `as` does.
__device__ __forceinline__ long long cast_sat_signed(double f, double lo, double hi) {
    if (f != f) {
        return 0;
    }
    if (f <= lo) {
        return (long long)lo;
    }
    if (f >= hi) {
        return f >= 9223372036854775807.0 ? 9223372036854775807ll : (long long)hi;
    }
    return (long long)trunc(f);
}
__device__ __forceinline__ unsigned long long cast_sat_unsigned(double f, double hi) {
    if (f != f || f <= 0.0) {
        return 0;
    }
    if (f >= hi) {
        return f >= 18446744073709551615.0 ? ~0ull : (unsigned long long)hi;
    }
    return (unsigned long long)trunc(f);
}

__device__ __forceinline__ void cast_write(unsigned int code, void* y, unsigned long long i,
                                           const CastVal& v, const CastParams& p) {
    unsigned char* b = (unsigned char*)y;
    switch (code) {
    case 9u:
        b[i] = v.is_float ? (v.f != 0.0 ? 1 : 0) : (v.bits != 0ull ? 1 : 0);
        return;
    case 1u: ((float*)y)[i] = (float)cast_as_f64(v); return;
    case 11u: ((double*)y)[i] = cast_as_f64(v); return;
    case 10u: ((rlx_half*)y)[i] = rlx_f2h(rlx_f64_to_f32_odd(cast_as_f64(v))); return;
    case 16u: ((rlx_bf16*)y)[i] = rlx_f2b(rlx_f64_to_f32_odd(cast_as_f64(v))); return;
    case 24u: b[i] = e8m0_encode((float)cast_as_f64(v), p.saturate != 0u, p.round); return;
    case 17u:
    case 18u:
    case 19u:
    case 20u:
    case 23u: b[i] = mf_encode(mf_format(code), cast_as_f64(v), p.saturate != 0u); return;
    case 21u: b[i] = (unsigned char)(cast_low_bits(v) & 0xfull); return;
    case 25u: b[i] = (unsigned char)(cast_low_bits(v) & 0x3ull); return;
    case 22u:
    case 26u: {
        unsigned int bits = code == 22u ? 4u : 2u;
        long long x = (long long)(cast_low_bits(v) & ((1ull << bits) - 1ull));
        if (x >= (1ll << (bits - 1u))) {
            x -= 1ll << bits;
        }
        b[i] = (unsigned char)(signed char)x;
        return;
    }
    default:
        break;
    }
    // Standard integers: floats truncate and saturate, integers wrap.
    if (v.is_float) {
        double f = v.f;
        switch (code) {
        case 3u: ((signed char*)y)[i] = (signed char)cast_sat_signed(f, -128.0, 127.0); return;
        case 5u: ((short*)y)[i] = (short)cast_sat_signed(f, -32768.0, 32767.0); return;
        case 6u: ((int*)y)[i] = (int)cast_sat_signed(f, -2147483648.0, 2147483647.0); return;
        case 7u:
            ((long long*)y)[i] = cast_sat_signed(f, -9223372036854775808.0, 9223372036854775807.0);
            return;
        case 2u: b[i] = (unsigned char)cast_sat_unsigned(f, 255.0); return;
        case 4u: ((unsigned short*)y)[i] = (unsigned short)cast_sat_unsigned(f, 65535.0); return;
        case 12u: ((unsigned int*)y)[i] = (unsigned int)cast_sat_unsigned(f, 4294967295.0); return;
        default: ((unsigned long long*)y)[i] = cast_sat_unsigned(f, 18446744073709551615.0); return;
        }
    }
    unsigned long long x = v.bits;
    switch (code) {
    case 3u:
    case 2u: b[i] = (unsigned char)x; return;
    case 5u:
    case 4u: ((unsigned short*)y)[i] = (unsigned short)x; return;
    case 6u:
    case 12u: ((unsigned int*)y)[i] = (unsigned int)x; return;
    default: ((unsigned long long*)y)[i] = x; return;
    }
}

extern "C" __global__ void cast_any(const void* __restrict__ x, void* __restrict__ y, CastParams p) {
    rlx_grid_wait();
    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {
        cast_write(p.dst, y, i, cast_read(p.src, x, i), p);
    }
}

// BitCast: `n` bytes, a word at a time when both ends are 4-byte aligned.
extern "C" __global__ void bitcast_copy(const unsigned char* __restrict__ x,
                                        unsigned char* __restrict__ y, CastParams p) {
    rlx_grid_wait();
    unsigned long long n = p.n;
    if ((((unsigned long long)x | (unsigned long long)y | n) & 3ull) == 0ull) {
        for (unsigned long long i = rlx_thread(); i < n / 4ull; i += rlx_threads()) {
            ((unsigned int*)y)[i] = ((const unsigned int*)x)[i];
        }
        return;
    }
    for (unsigned long long i = rlx_thread(); i < n; i += rlx_threads()) {
        y[i] = x[i];
    }
}
