// quant: QuantizeLinear (float to integers: the quotient in the input's
// precision, round half to even, plus the zero point, saturated to the
// dtype's `bits`) and DequantizeLinear (`(x - zero_point) * scale` in f32,
// in f64 for 32-bit integers), per tensor, per axis or blocked, as the CPU
// backend computes them. QuantCudaParams is rlx-gpu's (kernels/quant.rs).
// Entries quantize_<float>_<int> (scales of the float dtype) and
// dequantize_<int>_<float> (scales and output of the float dtype); 4- and
// 2-bit integers are stored a byte each (u8 / i8 with their `bits`).

template <typename P>
__device__ __forceinline__ unsigned long long quant_scale(unsigned long long i, const P& p) {
    if (p.kind == 0u) {
        return 0;
    }
    unsigned long long in = i % p.inner;
    unsigned long long r = i / p.inner;
    unsigned long long a = r % p.axis_len;
    if (p.kind == 1u) {
        return a;
    }
    return ((r / p.axis_len) * p.scale_len + a / p.block) * p.inner + in;
}

template <typename X> __device__ __forceinline__ double quant_quotient(X x, X s) {
    return to_f64(from_f64<X>((double)(to_f32(x) / to_f32(s))));
}
template <> __device__ __forceinline__ double quant_quotient<f64>(f64 x, f64 s) { return x / s; }

template <typename Q> __device__ __forceinline__ double quant_zero(const Q* zp, unsigned long long k,
                                                                    const QuantCudaParams& p) {
    if (p.zp == 0u) {
        return 0.0;
    }
    return (double)zp[p.zp == 1u ? 0ull : k];
}

template <typename X, typename Q>
__device__ __forceinline__ void quantize_body(const X* __restrict__ x, const X* __restrict__ s,
                                              const Q* zp, Q* __restrict__ y,
                                              const QuantCudaParams& p) {
    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {
        unsigned long long k = quant_scale(i, p);
        double v = quant_quotient<X>(x[i], s[k]);
        double t = (v != v ? 0.0 : rint(v)) + quant_zero<Q>(zp, k, p);
        if (p.qsigned) {
            long long hi = p.bits >= 64u ? 9223372036854775807ll : (1ll << (p.bits - 1u)) - 1ll;
            long long lo = -hi - 1ll;
            long long r = t <= (double)lo ? lo : (t >= (double)hi ? hi : (long long)t);
            y[i] = (Q)r;
        } else {
            unsigned long long hi = p.bits >= 64u ? ~0ull : (1ull << p.bits) - 1ull;
            unsigned long long r = t <= 0.0 ? 0ull : (t >= (double)hi ? hi : (unsigned long long)t);
            y[i] = (Q)r;
        }
    }
}

template <typename Q, typename O>
__device__ __forceinline__ void dequantize_body(const Q* __restrict__ x, const O* __restrict__ s,
                                                const Q* zp, O* __restrict__ y,
                                                const QuantCudaParams& p) {
    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {
        unsigned long long k = quant_scale(i, p);
        double xv = (double)x[i], z = quant_zero<Q>(zp, k, p), sv = to_f64(s[k]);
        double r = sizeof(Q) == 4 ? (xv - z) * sv
                                  : (double)(((float)xv - (float)z) * (float)sv);
        y[i] = from_f64<O>(r);
    }
}

#define RLX_QUANT(F, Q)                                                                        \
    extern "C" __global__ void quantize_##F##_##Q(const F* x, const F* s, const Q* zp, Q* y,   \
                                                  QuantCudaParams p) {                         \
        rlx_grid_wait();                                                                       \
        quantize_body<F, Q>(x, s, zp, y, p);                                                   \
    }                                                                                          \
    extern "C" __global__ void dequantize_##Q##_##F(const Q* x, const F* s, const Q* zp, F* y, \
                                                    QuantCudaParams p) {                       \
        rlx_grid_wait();                                                                       \
        dequantize_body<Q, F>(x, s, zp, y, p);                                                 \
    }
#define RLX_QUANT_INTS(F)                                                                      \
    RLX_QUANT(F, i8)                                                                           \
    RLX_QUANT(F, u8)                                                                           \
    RLX_QUANT(F, i16)                                                                          \
    RLX_QUANT(F, u16)                                                                          \
    RLX_QUANT(F, i32)                                                                          \
    RLX_QUANT(F, u32)                                                                          \
    RLX_QUANT(F, i64)                                                                          \
    RLX_QUANT(F, u64)
RLX_QUANT_INTS(f32)
RLX_QUANT_INTS(f16)
RLX_QUANT_INTS(bf16)
RLX_QUANT_INTS(f64)

// Float8 and float4 (minifloat.cuh; format p.format): quantize converts the
// quotient (float4 plus the zero point) with round to nearest even,
// saturating when asked (float4 always clamps); dequantize computes
// `(x - zero_point) * scale` in f32. Entries quantize_<float>_mf and
// dequantize_mf_<float>.
template <typename X>
__device__ __forceinline__ void quantize_mf_body(const X* __restrict__ x, const X* __restrict__ s,
                                                 const u8* zp, u8* __restrict__ y,
                                                 const QuantFloatCudaParams& p) {
    const Minifloat m = mf_format(p.format);
    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {
        unsigned long long k = quant_scale(i, p);
        double v = quant_quotient<X>(x[i], s[k]);
        if (p.format == 23u && p.zp != 0u) {
            v += mf_decode(m, zp[p.zp == 1u ? 0ull : k]);
        }
        y[i] = mf_encode(m, v, p.saturate != 0u);
    }
}

template <typename O>
__device__ __forceinline__ void dequantize_mf_body(const u8* __restrict__ x, const O* __restrict__ s,
                                                   const u8* zp, O* __restrict__ y,
                                                   const QuantFloatCudaParams& p) {
    const Minifloat m = mf_format(p.format);
    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {
        unsigned long long k = quant_scale(i, p);
        double xv = mf_decode(m, x[i]);
        double z = p.zp != 0u ? mf_decode(m, zp[p.zp == 1u ? 0ull : k]) : 0.0;
        double r = (double)(((float)xv - (float)z) * (float)to_f64(s[k]));
        y[i] = from_f64<O>(r);
    }
}

#define RLX_QUANT_MF(F)                                                                        \
    extern "C" __global__ void quantize_##F##_mf(const F* x, const F* s, const u8* zp, u8* y,  \
                                                 QuantFloatCudaParams p) {                     \
        rlx_grid_wait();                                                                       \
        quantize_mf_body<F>(x, s, zp, y, p);                                                   \
    }                                                                                          \
    extern "C" __global__ void dequantize_mf_##F(const u8* x, const F* s, const u8* zp, F* y,  \
                                                 QuantFloatCudaParams p) {                     \
        rlx_grid_wait();                                                                       \
        dequantize_mf_body<F>(x, s, zp, y, p);                                                 \
    }
RLX_QUANT_MF(f32)
RLX_QUANT_MF(f16)
RLX_QUANT_MF(bf16)
RLX_QUANT_MF(f64)
