// LayerNorm (with the optional per-row mean and inverse standard deviation
// outputs), RmsNorm and ResidualNorm (`sum = x + residual`, rounded to the
// element type, then normalized), with the CPU backend's two-pass
// statistics: the mean, then the mean squared deviation from it, computed
// in float (double for f64). Parameter struct: NormParams (rlx-gpu
// norm.rs); helpers in rows.cuh. Rows are `len` contiguous elements; scale
// and bias repeat every `scale_len` / `bias_len` elements of a row. A warp
// (`norm_warp_<T>`) or a block (`norm_block_<T>`) per row; the residual
// forms are `residual_norm_{warp,block}_<T>`.

template <typename T, bool RES>
__device__ __forceinline__ typename RwAcc<T>::type nm_load(const T* __restrict__ x, const T* __restrict__ r,
                                                         unsigned long long k) {
    typedef typename RwAcc<T>::type A;
    if (!RES) return (A)rw_up(x[k]);
    T s;
    rw_store(&s, (A)rw_up(x[k]) + (A)rw_up(r[k]));
    return (A)rw_up(s);
}

template <typename T, bool RES>
__device__ __forceinline__ void nm_rows(const T* __restrict__ x, const T* __restrict__ res,
                                        const T* __restrict__ scale, const T* __restrict__ bias,
                                        T* __restrict__ y, T* __restrict__ sum, float* __restrict__ mean_out,
                                        float* __restrict__ inv_out, const NormParams& p, int mode) {
    typedef typename RwAcc<T>::type A;
    RwRows r(mode);
    const A len = (A)p.len;
    for (unsigned long long row = r.first; row < p.rows; row += r.step) {
        const unsigned long long at = row * p.len;
        const T* xr = x + at;
        const T* rr = RES ? res + at : xr;
        A mean = (A)0;
        if (RES || p.rms == 0u) {
            A s = (A)0;
            for (unsigned int k = r.lane; k < p.len; k += r.group) {
                const A v = nm_load<T, RES>(xr, rr, k);
                if (RES) rw_store(sum + at + k, v);
                s += v;
            }
            s = rw_sum(s, mode);
            mean = p.rms ? (A)0 : s / len;
        }
        A q = (A)0;
        for (unsigned int k = r.lane; k < p.len; k += r.group) {
            const A d = nm_load<T, RES>(xr, rr, k) - mean;
            q += d * d;
        }
        q = rw_sum(q, mode);
        const A inv = rw_rsqrt(q / len + (A)p.eps);
        for (unsigned int k = r.lane; k < p.len; k += r.group) {
            A v = (nm_load<T, RES>(xr, rr, k) - mean) * inv * (A)rw_up(scale[k % p.scale_len]);
            if (p.has_bias) v += (A)rw_up(bias[k % p.bias_len]);
            rw_store(y + at + k, v);
        }
        if (!RES && p.stats && r.lane == 0u) {
            mean_out[row] = (float)mean;
            inv_out[row] = (float)inv;
        }
    }
}

#define RLX_NORM(SFX, T)                                                                          \
    extern "C" __global__ void norm_warp_##SFX(const T* x, const T* scale, const T* bias, T* y,    \
                                               float* mean, float* inv_std, NormParams p) {       \
        nm_rows<T, false>(x, x, scale, bias, y, y, mean, inv_std, p, RW_WARP);                    \
    }                                                                                             \
    extern "C" __global__ void norm_block_##SFX(const T* x, const T* scale, const T* bias, T* y,   \
                                                float* mean, float* inv_std, NormParams p) {      \
        nm_rows<T, false>(x, x, scale, bias, y, y, mean, inv_std, p, RW_BLOCK);                   \
    }                                                                                             \
    extern "C" __global__ void residual_norm_warp_##SFX(const T* x, const T* residual,             \
                                                        const T* scale, const T* bias, T* y,      \
                                                        T* sum, NormParams p) {                   \
        nm_rows<T, true>(x, residual, scale, bias, y, sum, 0, 0, p, RW_WARP);                     \
    }                                                                                             \
    extern "C" __global__ void residual_norm_block_##SFX(const T* x, const T* residual,            \
                                                         const T* scale, const T* bias, T* y,     \
                                                         T* sum, NormParams p) {                  \
        nm_rows<T, true>(x, residual, scale, bias, y, sum, 0, 0, p, RW_BLOCK);                    \
    }

RLX_NORM(f32, float)
RLX_NORM(f64, double)
RLX_NORM(f16, rlx_half)
RLX_NORM(bf16, rlx_bf16)
