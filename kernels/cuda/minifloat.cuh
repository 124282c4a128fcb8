// minifloat: the float8 (E4M3FN, E4M3FNUZ, E5M2, E5M2FNUZ), float4 (E2M1)
// and E8M0 formats as the CPU backend defines them (rlx-cpu minifloat.rs):
// exact decoding, and encoding with round to nearest even, overflow to NaN,
// infinity or the largest value, and saturation. Formats are named by
// their ONNX dtype codes (17, 18, 19, 20, 23). Shared by the cast and
// quant modules.

// One minifloat format (rlx-cpu minifloat.rs `Format`).
struct Minifloat {
    int mbits;
    int bias;
    int code;
    bool ieee;
    bool uz;
    // 0 NaN, 1 infinity, 2 clamp.
    int overflow;
    unsigned int sign_bit;
    unsigned int nan_code;
};

__device__ __forceinline__ Minifloat mf_format(unsigned int code) {
    Minifloat m;
    m.code = (int)code;
    m.ieee = false;
    m.uz = false;
    m.overflow = 0;
    m.sign_bit = 0x80u;
    switch (code) {
    case 17u:  // f8e4m3fn
        m.mbits = 3; m.bias = 7; m.nan_code = 0x7fu;
        break;
    case 18u:  // f8e4m3fnuz
        m.mbits = 3; m.bias = 8; m.uz = true; m.nan_code = 0x80u;
        break;
    case 19u:  // f8e5m2
        m.mbits = 2; m.bias = 15; m.ieee = true; m.overflow = 1; m.nan_code = 0x7eu;
        break;
    case 20u:  // f8e5m2fnuz
        m.mbits = 2; m.bias = 16; m.uz = true; m.nan_code = 0x80u;
        break;
    default:  // 23: f4e2m1
        m.mbits = 1; m.bias = 1; m.overflow = 2; m.sign_bit = 0x8u; m.nan_code = 0x8u;
        break;
    }
    return m;
}

__device__ __forceinline__ bool mf_is_nan(const Minifloat& m, unsigned int c) {
    switch (m.code) {
    case 17: return (c & 0x7fu) == 0x7fu;
    case 18:
    case 20: return c == 0x80u;
    case 19: return (c & 0x7fu) > 0x7cu;
    default: return false;
    }
}

// The value of a positive magnitude code.
__device__ __forceinline__ double mf_positive(const Minifloat& m, unsigned int mag) {
    int e = (int)(mag >> m.mbits);
    double frac = (double)(mag & ((1u << m.mbits) - 1u));
    double scale = (double)(1u << m.mbits);
    if (e == 0) {
        return ldexp(frac / scale, 1 - m.bias);
    }
    return ldexp(1.0 + frac / scale, e - m.bias);
}

__device__ __forceinline__ double mf_decode(const Minifloat& m, unsigned int c) {
    if (mf_is_nan(m, c)) {
        return __longlong_as_double(0x7ff8000000000000ll);
    }
    bool neg = (c & m.sign_bit) != 0u;
    unsigned int mag = c & (m.sign_bit - 1u);
    if (m.ieee && mag == 0x7cu) {
        return neg ? -__longlong_as_double(0x7ff0000000000000ll)
                   : __longlong_as_double(0x7ff0000000000000ll);
    }
    double v = mf_positive(m, mag);
    return neg ? -v : v;
}

__device__ __forceinline__ unsigned int mf_max_code(const Minifloat& m) {
    unsigned int c = m.sign_bit - 1u;
    while (mf_is_nan(m, c) || (m.ieee && c >= 0x7cu)) {
        c -= 1u;
    }
    return c;
}

// Round to nearest even; overflow to NaN, infinity or the largest value
// (float4) unless saturating.
__device__ unsigned char mf_encode(const Minifloat& m, double x, bool saturate) {
    if (x != x) {
        return (unsigned char)m.nan_code;
    }
    unsigned int sign = signbit(x) ? m.sign_bit : 0u;
    unsigned int max_code = mf_max_code(m);
    double maxv = mf_positive(m, max_code);
    double a = fabs(x);
    if (saturate || m.overflow == 2) {
        a = fmin(a, maxv);
    }
    double ulp = maxv - mf_positive(m, max_code - 1u);
    double limit = maxv + ulp / 2.0;
    if (a > limit || (a == limit && (max_code & 1u) == 1u)) {
        if (m.overflow == 0) {
            return (unsigned char)(m.uz ? m.nan_code : (sign | m.nan_code));
        }
        if (m.overflow == 1) {
            return (unsigned char)(sign | 0x7cu);
        }
        return (unsigned char)(sign | max_code);
    }
    unsigned int lo = 0u, hi = max_code;
    while (lo < hi) {
        unsigned int mid = lo + (hi - lo + 1u) / 2u;
        if (mf_positive(m, mid) <= a) {
            lo = mid;
        } else {
            hi = mid - 1u;
        }
    }
    unsigned int code = lo;
    if (code < max_code) {
        double db = a - mf_positive(m, code);
        double da = mf_positive(m, code + 1u) - a;
        if (da < db || (da == db && (code & 1u) == 1u)) {
            code += 1u;
        }
    }
    if (code == 0u && m.uz) {
        return 0;
    }
    return (unsigned char)(sign | code);
}

// E8M0 (rlx-cpu minifloat.rs `e8m0_encode`): the f32 exponent, rounded
// nearest (0), up (1) or down (2).
__device__ __forceinline__ unsigned char e8m0_encode(float x, bool saturate, unsigned int mode) {
    unsigned int bits = __float_as_uint(x);
    unsigned int exp = (bits >> 23) & 0xffu;
    if (exp == 0xffu) {
        return 0xff;
    }
    unsigned int frac = bits & 0x7fffffu;
    bool up;
    if (mode == 2u) {
        up = false;
    } else if (mode == 1u) {
        up = frac > 0u;
    } else {
        bool g = (bits & 0x400000u) != 0u;
        bool r = (bits & 0x200000u) != 0u;
        bool s = (bits & 0x1fffffu) != 0u;
        up = g && (r || s || exp > 0u);
    }
    if (up && !(saturate && exp == 0xfeu)) {
        exp += 1u;
    }
    return (unsigned char)exp;
}

