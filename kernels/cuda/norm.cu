// LayerNorm (with the optional per-row mean and inverse standard deviation
// outputs), RmsNorm and ResidualNorm (`sum = x + residual`, rounded to the
// element type, then normalized), with the CPU backend's two-pass
// statistics: the mean, then the mean squared deviation from it, computed
// in float (double for f64). Parameter struct: NormParams (rlx-gpu
// norm.rs); helpers in rows.cuh. Rows are `len` contiguous elements; scale
// and bias repeat every `scale_len` / `bias_len` elements of a row. A warp
// (`norm_warp_<T>`, many rows of up to 32 * NM_HELD elements) or a block
// (`norm_held_<T>`, rows of up to NM_HELD * blockDim.x) holding its row in
// registers (one read), a warp holding up to 32 * N 16-byte vectors of its
// row (`norm_wide<N>_<T>`, many rows of up to 2,048 f16 or 1,024 f32), or a
// block reading it three times (`norm_block_<T>`, longer rows) per row; the
// residual forms are `residual_norm_{warp,held,wide<N>,block}_<T>`.

// Element k of a row's scale or bias repeating every `n` elements: no
// division where it spans the row (every LayerNorm over its last axis).
__device__ __forceinline__ unsigned int nm_wrap(unsigned int k, unsigned int n, unsigned int len) {
    return n == len ? k : k % n;
}

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
            A v = (nm_load<T, RES>(xr, rr, k) - mean) * inv * (A)rw_up(scale[nm_wrap(k, p.scale_len, p.len)]);
            if (p.has_bias) v += (A)rw_up(bias[nm_wrap(k, p.bias_len, p.len)]);
            rw_store(y + at + k, v);
        }
        if (!RES && p.stats && r.lane == 0u) {
            mean_out[row] = (float)mean;
            inv_out[row] = (float)inv;
        }
    }
}

// Elements a thread holds: a warp's rows up to 32 * NM_HELD elements, a
// block's up to NM_HELD * blockDim.x.
#define NM_HELD 4

// NM_HELD consecutive elements, moved as one (8 bytes of f16, 16 of f32).
template <typename T>
struct __align__(sizeof(T) * NM_HELD) NmVec {
    T e[NM_HELD];
};

template <typename T>
__device__ __forceinline__ bool nm_vec_aligned(const T* p) {
    return ((unsigned long long)p) % (sizeof(T) * NM_HELD) == 0u;
}

// nm_rows_held where every row and its scale and bias move NM_HELD
// elements at a time: thread lane holds elements NM_HELD*lane .. +NM_HELD-1,
// so each operand is one vector load or store a thread (a BERT-base norm
// of 128 x 768 f16 ran 500 instructions a warp, 44 of them 2-byte loads).
template <typename T, bool RES, bool BLOCK>
__device__ __forceinline__ void nm_rows_vec(const T* __restrict__ x, const T* __restrict__ res,
                                            const T* __restrict__ scale, const T* __restrict__ bias,
                                            T* __restrict__ y, T* __restrict__ sum, float* __restrict__ mean_out,
                                            float* __restrict__ inv_out, const NormParams& p) {
    typedef typename RwAcc<T>::type A;
    RwRows r(BLOCK ? RW_BLOCK : RW_WARP);
    const A len = (A)p.len;
    const unsigned int k0 = r.lane * NM_HELD;
    const bool in = k0 < p.len;
    NmVec<T> gv, bv;
    if (in) {
        gv = *(const NmVec<T>*)(scale + k0);
        if (p.has_bias) bv = *(const NmVec<T>*)(bias + k0);
    }
    for (unsigned long long row = r.first; row < p.rows; row += r.step) {
        const unsigned long long at = row * p.len + k0;
        A v[NM_HELD];
        A s = (A)0;
        if (in) {
            const NmVec<T> xv = *(const NmVec<T>*)(x + at);
            NmVec<T> rv;
            if (RES) rv = *(const NmVec<T>*)(res + at);
#pragma unroll
            for (int c = 0; c < NM_HELD; ++c) {
                if (RES) {
                    // The sum rounded to T, as it is stored.
                    T t;
                    rw_store(&t, (A)rw_up(xv.e[c]) + (A)rw_up(rv.e[c]));
                    rv.e[c] = t;
                    v[c] = (A)rw_up(t);
                } else {
                    v[c] = (A)rw_up(xv.e[c]);
                }
                s += v[c];
            }
            if (RES) *(NmVec<T>*)(sum + at) = rv;
        }
        A mean = (A)0;
        if (RES || p.rms == 0u) {
            s = BLOCK ? rw_sum_block(s) : rw_sum_warp(s);
            mean = p.rms ? (A)0 : s / len;
        }
        A q = (A)0;
        if (in) {
#pragma unroll
            for (int c = 0; c < NM_HELD; ++c) {
                const A d = v[c] - mean;
                q += d * d;
            }
        }
        q = BLOCK ? rw_sum_block(q) : rw_sum_warp(q);
        const A inv = rw_rsqrt(q / len + (A)p.eps);
        if (in) {
            NmVec<T> o;
#pragma unroll
            for (int c = 0; c < NM_HELD; ++c) {
                A w = (v[c] - mean) * inv * (A)rw_up(gv.e[c]);
                if (p.has_bias) w += (A)rw_up(bv.e[c]);
                rw_store(&o.e[c], w);
            }
            *(NmVec<T>*)(y + at) = o;
        }
        if (!RES && p.stats && r.lane == 0u) {
            mean_out[row] = (float)mean;
            inv_out[row] = (float)inv;
        }
    }
}

// One row per warp (BLOCK false) or per block (BLOCK true), held in
// registers (element k in thread k % group, slot k / group): the sums of
// nm_rows in its order, one read. Every load comes before any store: the
// compiler does not move a load above a store that may alias it, so loads
// between the stores of `sum` or `y` ran one memory latency at a time (a
// 128 x 768 residual norm took 22 us, one warp per row on 128 of 132
// multiprocessors). A warp held 32 slots a lane once, and spilled them.
template <typename T, bool RES, bool BLOCK>
__device__ __forceinline__ void nm_rows_held(const T* __restrict__ x, const T* __restrict__ res,
                                             const T* __restrict__ scale, const T* __restrict__ bias,
                                             T* __restrict__ y, T* __restrict__ sum, float* __restrict__ mean_out,
                                             float* __restrict__ inv_out, const NormParams& p) {
    typedef typename RwAcc<T>::type A;
    const bool vec = p.len % NM_HELD == 0u && p.scale_len == p.len && (!p.has_bias || p.bias_len == p.len) &&
                     nm_vec_aligned(x) && nm_vec_aligned(y) && nm_vec_aligned(scale) &&
                     (!p.has_bias || nm_vec_aligned(bias)) && (!RES || (nm_vec_aligned(res) && nm_vec_aligned(sum)));
    if (vec) {
        nm_rows_vec<T, RES, BLOCK>(x, res, scale, bias, y, sum, mean_out, inv_out, p);
        return;
    }
    RwRows r(BLOCK ? RW_BLOCK : RW_WARP);
    const A len = (A)p.len;
    for (unsigned long long row = r.first; row < p.rows; row += r.step) {
        const unsigned long long at = row * p.len;
        A v[NM_HELD];
        A g[NM_HELD];
        A b[NM_HELD];
#pragma unroll
        for (int c = 0; c < NM_HELD; ++c) {
            const unsigned int k = r.lane + r.group * c;
            v[c] = (A)0;
            g[c] = (A)0;
            b[c] = (A)0;
            if (k < p.len) {
                v[c] = nm_load<T, RES>(x + at, RES ? res + at : x + at, k);
                g[c] = (A)rw_up(scale[nm_wrap(k, p.scale_len, p.len)]);
                if (p.has_bias) b[c] = (A)rw_up(bias[nm_wrap(k, p.bias_len, p.len)]);
            }
        }
        A s = (A)0;
#pragma unroll
        for (int c = 0; c < NM_HELD; ++c) {
            const unsigned int k = r.lane + r.group * c;
            if (k < p.len) {
                if (RES) rw_store(sum + at + k, v[c]);
                s += v[c];
            }
        }
        A mean = (A)0;
        if (RES || p.rms == 0u) {
            s = BLOCK ? rw_sum_block(s) : rw_sum_warp(s);
            mean = p.rms ? (A)0 : s / len;
        }
        A q = (A)0;
#pragma unroll
        for (int c = 0; c < NM_HELD; ++c) {
            if (r.lane + r.group * c < p.len) {
                const A d = v[c] - mean;
                q += d * d;
            }
        }
        q = BLOCK ? rw_sum_block(q) : rw_sum_warp(q);
        const A inv = rw_rsqrt(q / len + (A)p.eps);
#pragma unroll
        for (int c = 0; c < NM_HELD; ++c) {
            const unsigned int k = r.lane + r.group * c;
            if (k < p.len) {
                A o = (v[c] - mean) * inv * g[c];
                if (p.has_bias) o += b[c];
                rw_store(y + at + k, o);
            }
        }
        if (!RES && p.stats && r.lane == 0u) {
            mean_out[row] = (float)mean;
            inv_out[row] = (float)inv;
        }
    }
}

// A warp per row of up to 32 * N 16-byte vectors (BERT-base's 768 f16 are
// 96: three a lane), held in registers: vector j of the row in lane j % 32,
// slot j / 32. Sums by shuffles only; no barrier, and a block of four rows
// where a block per row launched six warps for each (1024 x 768 residual
// norms: 5.5 us a step against Triton's 2.3 on an H200). A row the vectors
// do not fit (its length, an operand's alignment, a scale or bias shorter
// than the row) runs nm_rows by the warp instead.
template <typename T>
struct __align__(16) NmWide {
    T e[16 / sizeof(T)];
};

__device__ __forceinline__ bool nm_al16(const void* q) { return ((unsigned long long)q) % 16u == 0u; }

template <typename T, bool RES, int N>
__device__ __forceinline__ void nm_rows_wide(const T* __restrict__ x, const T* __restrict__ res,
                                             const T* __restrict__ scale, const T* __restrict__ bias,
                                             T* __restrict__ y, T* __restrict__ sum, float* __restrict__ mean_out,
                                             float* __restrict__ inv_out, const NormParams& p) {
    typedef typename RwAcc<T>::type A;
    constexpr int E = 16 / (int)sizeof(T);
    const bool fits = p.len % E == 0u && p.len / E <= 32u * N && p.scale_len == p.len &&
                      (!p.has_bias || p.bias_len == p.len) && nm_al16(x) && nm_al16(y) && nm_al16(scale) &&
                      (!p.has_bias || nm_al16(bias)) && (!RES || (nm_al16(res) && nm_al16(sum)));
    if (!fits) {
        nm_rows<T, RES>(x, res, scale, bias, y, sum, mean_out, inv_out, p, RW_WARP);
        return;
    }
    RwRows r(RW_WARP);
    const unsigned int nv = p.len / E;
    const A len = (A)p.len;
    for (unsigned long long row = r.first; row < p.rows; row += r.step) {
        const unsigned long long at = row * p.len;
        const NmWide<T>* xr = (const NmWide<T>*)(x + at);
        const NmWide<T>* rr = (const NmWide<T>*)(RES ? res + at : x + at);
        // Every load before any store (see nm_rows_held).
        NmWide<T> xv[N], rv[N];
#pragma unroll
        for (int c = 0; c < N; ++c) {
            const unsigned int j = r.lane + 32u * c;
            if (j < nv) {
                xv[c] = xr[j];
                if (RES) rv[c] = rr[j];
            }
        }
        A v[N][E];
        A s = (A)0;
#pragma unroll
        for (int c = 0; c < N; ++c) {
            const unsigned int j = r.lane + 32u * c;
#pragma unroll
            for (int e = 0; e < E; ++e) {
                v[c][e] = (A)0;
                if (j < nv) {
                    if (RES) {
                        // The sum rounded to T, as it is stored.
                        T t;
                        rw_store(&t, (A)rw_up(xv[c].e[e]) + (A)rw_up(rv[c].e[e]));
                        rv[c].e[e] = t;
                        v[c][e] = (A)rw_up(t);
                    } else {
                        v[c][e] = (A)rw_up(xv[c].e[e]);
                    }
                }
                s += v[c][e];
            }
            if (RES && j < nv) ((NmWide<T>*)(sum + at))[j] = rv[c];
        }
        A mean = (A)0;
        if (RES || p.rms == 0u) {
            s = rw_sum_warp(s);
            mean = p.rms ? (A)0 : s / len;
        }
        A q = (A)0;
#pragma unroll
        for (int c = 0; c < N; ++c) {
            if (r.lane + 32u * c < nv) {
#pragma unroll
                for (int e = 0; e < E; ++e) {
                    const A d = v[c][e] - mean;
                    q += d * d;
                }
            }
        }
        q = rw_sum_warp(q);
        const A inv = rw_rsqrt(q / len + (A)p.eps);
#pragma unroll
        for (int c = 0; c < N; ++c) {
            const unsigned int j = r.lane + 32u * c;
            if (j >= nv) continue;
            const NmWide<T> g = ((const NmWide<T>*)scale)[j];
            NmWide<T> b;
            if (p.has_bias) b = ((const NmWide<T>*)bias)[j];
            NmWide<T> o;
#pragma unroll
            for (int e = 0; e < E; ++e) {
                A w = (v[c][e] - mean) * inv * (A)rw_up(g.e[e]);
                if (p.has_bias) w += (A)rw_up(b.e[e]);
                rw_store(&o.e[e], w);
            }
            ((NmWide<T>*)(y + at))[j] = o;
        }
        if (!RES && p.stats && r.lane == 0u) {
            mean_out[row] = (float)mean;
            inv_out[row] = (float)inv;
        }
    }
}

// The wide-row entries: `norm_wide<N>_<T>` and `residual_norm_wide<N>_<T>`,
// N vectors a lane (the host's `WIDE` in norm.rs names the same).
#define RLX_NORM_WIDE(SFX, T, N)                                                                  \
    extern "C" __global__ void norm_wide##N##_##SFX(const T* x, const T* scale, const T* bias,    \
                                                    T* y, float* mean, float* inv_std,            \
                                                    NormParams p) {                               \
        rlx_grid_wait();                                                                          \
        nm_rows_wide<T, false, N>(x, x, scale, bias, y, y, mean, inv_std, p);                     \
    }                                                                                             \
    extern "C" __global__ void residual_norm_wide##N##_##SFX(const T* x, const T* residual,       \
                                                             const T* scale, const T* bias, T* y, \
                                                             T* sum, NormParams p) {              \
        rlx_grid_wait();                                                                          \
        nm_rows_wide<T, true, N>(x, residual, scale, bias, y, sum, 0, 0, p);                      \
    }
#define RLX_NORM_WIDES(SFX, T) RLX_NORM_WIDE(SFX, T, 2) RLX_NORM_WIDE(SFX, T, 4) RLX_NORM_WIDE(SFX, T, 8)

#define RLX_NORM(SFX, T)                                                                          \
    extern "C" __global__ void norm_warp_##SFX(const T* x, const T* scale, const T* bias, T* y,   \
                                               float* mean, float* inv_std, NormParams p) {       \
        rlx_grid_wait();                                                                          \
        nm_rows_held<T, false, false>(x, x, scale, bias, y, y, mean, inv_std, p);                 \
    }                                                                                             \
    extern "C" __global__ void norm_block_##SFX(const T* x, const T* scale, const T* bias, T* y,  \
                                                float* mean, float* inv_std, NormParams p) {      \
        rlx_grid_wait();                                                                          \
        nm_rows<T, false>(x, x, scale, bias, y, y, mean, inv_std, p, RW_BLOCK);                   \
    }                                                                                             \
    extern "C" __global__ void norm_held_##SFX(const T* x, const T* scale, const T* bias, T* y,   \
                                               float* mean, float* inv_std, NormParams p) {       \
        rlx_grid_wait();                                                                          \
        nm_rows_held<T, false, true>(x, x, scale, bias, y, y, mean, inv_std, p);                  \
    }                                                                                             \
    extern "C" __global__ void residual_norm_held_##SFX(const T* x, const T* residual,            \
                                                        const T* scale, const T* bias, T* y,      \
                                                        T* sum, NormParams p) {                   \
        rlx_grid_wait();                                                                          \
        nm_rows_held<T, true, true>(x, residual, scale, bias, y, sum, 0, 0, p);                   \
    }                                                                                             \
    extern "C" __global__ void residual_norm_warp_##SFX(const T* x, const T* residual,            \
                                                        const T* scale, const T* bias, T* y,      \
                                                        T* sum, NormParams p) {                   \
        rlx_grid_wait();                                                                          \
        nm_rows_held<T, true, false>(x, residual, scale, bias, y, sum, 0, 0, p);                  \
    }                                                                                             \
    extern "C" __global__ void residual_norm_block_##SFX(const T* x, const T* residual,           \
                                                         const T* scale, const T* bias, T* y,     \
                                                         T* sum, NormParams p) {                  \
        rlx_grid_wait();                                                                          \
        nm_rows<T, true>(x, residual, scale, bias, y, sum, 0, 0, p, RW_BLOCK);                    \
    }

RLX_NORM(f32, float)
RLX_NORM(f64, double)
RLX_NORM(f16, rlx_half)
RLX_NORM(bf16, rlx_bf16)
RLX_NORM_WIDES(f32, float)
RLX_NORM_WIDES(f16, rlx_half)
RLX_NORM_WIDES(bf16, rlx_bf16)
