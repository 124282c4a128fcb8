// Pooling: 3-D max, average and lp pooling (1-D and 2-D run with unit
// leading axes), one thread per output element (PoolParams, rlx-gpu
// kernels/pool.rs: per axis (depth, height, width) input dims, output dims,
// kernel, strides, dilations, begin pads and padded extents (input + end
// pad); kind 0 max, 1 avg, 2 lp; count_include_pad; lp the norm). Windows
// clipped by ceil mode count only the positions inside the padded extent.
// Max propagates NaN (a NaN in the window wins), computes integers natively;
// average and lp compute in float (double for f64). LRN across channels
// (LrnParams) after it.

// Visits the window of output `t`: f(offset in the plane) for each position
// inside the input; returns the positions inside the padded extent.
template <typename F>
__device__ __forceinline__ unsigned int pool_window(const PoolParams& p, unsigned long long t,
                                                    unsigned long long* plane, F f) {
    unsigned long long rem = t;
    unsigned int o[3];
    for (int d = 2; d >= 0; --d) {
        o[d] = (unsigned int)(rem % p.out_dims[d]);
        rem /= p.out_dims[d];
    }
    *plane = rem;
    unsigned int padded = 0;
    for (unsigned int a = 0; a < p.kernel[0]; ++a) {
        for (unsigned int b = 0; b < p.kernel[1]; ++b) {
            for (unsigned int c = 0; c < p.kernel[2]; ++c) {
                const unsigned int k[3] = {a, b, c};
                bool inside = true, in_pad = true;
                unsigned long long off = 0;
                for (int d = 0; d < 3; ++d) {
                    long long i = (long long)o[d] * p.strides[d] + (long long)k[d] * p.dilations[d] -
                                  (long long)p.pad_begin[d];
                    long long n = p.in_dims[d];
                    if (i < 0 || i >= n) inside = false;
                    if (i < -(long long)p.pad_begin[d] || i >= (long long)p.padded[d]) in_pad = false;
                    off = off * (unsigned long long)n + (unsigned long long)(i < 0 ? 0 : (i >= n ? n - 1 : i));
                }
                if (in_pad) padded++;
                if (inside) f(off);
            }
        }
    }
    return padded;
}

template <typename T, typename C>
__device__ __forceinline__ void pool_max(T* y, const T* x, const PoolParams& p, C lowest) {
    const unsigned long long size = (unsigned long long)p.in_dims[0] * p.in_dims[1] * p.in_dims[2];
    for (unsigned long long t = rlx_thread(); t < p.n; t += rlx_threads()) {
        unsigned long long plane;
        C best = lowest;
        bool any = false;
        const T* xs = x;
        pool_window(p, t, &plane, [&](unsigned long long off) {
            C v = (C)xs[plane * size + off];
            if (!any || v > best || v != v) best = v;
            any = true;
        });
        y[t] = (T)best;
    }
}

template <typename T, typename C>
__device__ __forceinline__ void pool_avg(T* y, const T* x, const PoolParams& p) {
    const unsigned long long size = (unsigned long long)p.in_dims[0] * p.in_dims[1] * p.in_dims[2];
    const C lp = (C)p.lp;
    for (unsigned long long t = rlx_thread(); t < p.n; t += rlx_threads()) {
        unsigned long long plane;
        C sum = (C)0;
        unsigned int count = 0;
        const T* xs = x;
        const unsigned int kind = p.kind;
        unsigned int padded = pool_window(p, t, &plane, [&](unsigned long long off) {
            C v = (C)xs[plane * size + off];
            sum += kind == 2u ? pow(fabs(v), lp) : v;
            count++;
        });
        C r;
        if (kind == 2u) {
            r = pow(sum, (C)1 / lp);
        } else {
            unsigned int div = p.count_include_pad ? padded : count;
            r = div == 0u ? (C)0 : sum / (C)div;
        }
        y[t] = (T)r;
    }
}

extern "C" __global__ void pool_max_f32(float* y, const float* x, PoolParams p) {
    rlx_grid_wait();
    pool_max<float, float>(y, x, p, -__int_as_float(0x7f800000));
}
extern "C" __global__ void pool_max_f64(double* y, const double* x, PoolParams p) {
    rlx_grid_wait();
    pool_max<double, double>(y, x, p, -__longlong_as_double(0x7ff0000000000000ll));
}
extern "C" __global__ void pool_max_f16(rlx_f16* y, const rlx_f16* x, PoolParams p) {
    rlx_grid_wait();
    pool_max<rlx_f16, float>(y, x, p, -__int_as_float(0x7f800000));
}
extern "C" __global__ void pool_max_bf16(rlx_bf16* y, const rlx_bf16* x, PoolParams p) {
    rlx_grid_wait();
    pool_max<rlx_bf16, float>(y, x, p, -__int_as_float(0x7f800000));
}
extern "C" __global__ void pool_max_i8(signed char* y, const signed char* x, PoolParams p) {
    rlx_grid_wait();
    pool_max<signed char, int>(y, x, p, -128);
}
extern "C" __global__ void pool_max_u8(unsigned char* y, const unsigned char* x, PoolParams p) {
    rlx_grid_wait();
    pool_max<unsigned char, unsigned int>(y, x, p, 0u);
}
extern "C" __global__ void pool_avg_f32(float* y, const float* x, PoolParams p) {
    rlx_grid_wait();
    pool_avg<float, float>(y, x, p);
}
extern "C" __global__ void pool_avg_f64(double* y, const double* x, PoolParams p) {
    rlx_grid_wait();
    pool_avg<double, double>(y, x, p);
}
extern "C" __global__ void pool_avg_f16(rlx_f16* y, const rlx_f16* x, PoolParams p) {
    rlx_grid_wait();
    pool_avg<rlx_f16, float>(y, x, p);
}
extern "C" __global__ void pool_avg_bf16(rlx_bf16* y, const rlx_bf16* x, PoolParams p) {
    rlx_grid_wait();
    pool_avg<rlx_bf16, float>(y, x, p);
}

// LRN: channel c of element t sums squares over channels c - lo ..= c + hi.
template <typename T, typename C>
__device__ __forceinline__ void lrn(T* y, const T* x, const LrnParams& p) {
    const unsigned long long S = p.spatial, Ch = p.channels;
    for (unsigned long long t = rlx_thread(); t < p.n; t += rlx_threads()) {
        unsigned long long s = t % S;
        unsigned long long ch = (t / S) % Ch;
        unsigned long long b = t / (S * Ch);
        unsigned long long c0 = ch >= p.lo ? ch - p.lo : 0;
        unsigned long long c1 = ch + p.hi < Ch - 1 ? ch + p.hi : Ch - 1;
        C sq = (C)0;
        for (unsigned long long k = c0; k <= c1; ++k) {
            C v = (C)x[(b * Ch + k) * S + s];
            sq += v * v;
        }
        C v = (C)x[t];
        y[t] = (T)(v / pow((C)p.bias + (C)p.alpha * sq, (C)p.beta));
    }
}

extern "C" __global__ void lrn_f32(float* y, const float* x, LrnParams p) {
    rlx_grid_wait();
    lrn<float, float>(y, x, p);
}
extern "C" __global__ void lrn_f64(double* y, const double* x, LrnParams p) {
    rlx_grid_wait();
    lrn<double, double>(y, x, p);
}
extern "C" __global__ void lrn_f16(rlx_f16* y, const rlx_f16* x, LrnParams p) {
    rlx_grid_wait();
    lrn<rlx_f16, float>(y, x, p);
}
extern "C" __global__ void lrn_bf16(rlx_bf16* y, const rlx_bf16* x, LrnParams p) {
    rlx_grid_wait();
    lrn<rlx_bf16, float>(y, x, p);
}
