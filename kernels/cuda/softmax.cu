// Softmax, log-softmax and hardmax over one axis, with the CPU backend's
// semantics (the maximum ignores NaN; hardmax marks the first maximum).
// Parameter struct: SoftmaxParams (rlx-gpu softmax.rs); helpers in
// rows.cuh. Rows of `len` elements `inner` apart:
// - `softmax_warp_<T>` / `softmax_block_<T>` (inner == 1): a warp or a
//   block per contiguous row: its maximum, the sum of exponentials, then
//   the write (three reads of the row, the later ones mostly from cache);
// - `softmax_col_<T>` (inner > 1): a thread per row, adjacent threads on
//   adjacent columns (coalesced).

template <typename T> __device__ __forceinline__ void sm_row(
    const T* __restrict__ x, T* __restrict__ y, unsigned long long stride, unsigned int len,
    unsigned int kind, unsigned int lane, unsigned int group, int mode) {
    typedef typename RwAcc<T>::type A;
    const A ninf = -(A)__int_as_float(0x7f800000);
    A m = ninf;
    for (unsigned int k = lane; k < len; k += group) m = rw_max(m, (A)rw_up(x[k * stride]));
    m = rw_maxg(m, mode);
    if (kind == 2u) {
        // The first index holding the maximum (0 when none does).
        unsigned int first = len;
        for (unsigned int k = lane; k < len; k += group) {
            if ((A)rw_up(x[k * stride]) == m) {
                first = k;
                break;
            }
        }
        A f = (A)first;
        f = -rw_maxg(-f, mode);
        unsigned int at = f < (A)len ? (unsigned int)f : 0u;
        for (unsigned int k = lane; k < len; k += group) rw_store(y + k * stride, (A)(k == at ? 1 : 0));
        return;
    }
    A s = (A)0;
    for (unsigned int k = lane; k < len; k += group) s += rw_exp((A)rw_up(x[k * stride]) - m);
    s = rw_sum(s, mode);
    const A ls = rw_log(s);
    for (unsigned int k = lane; k < len; k += group) {
        const A d = (A)rw_up(x[k * stride]) - m;
        rw_store(y + k * stride, kind == 0u ? rw_exp(d) / s : d - ls);
    }
}

template <typename T>
__device__ __forceinline__ void sm_rows(const T* __restrict__ x, T* __restrict__ y, const SoftmaxParams& p, int mode) {
    RwRows r(mode);
    for (unsigned long long row = r.first; row < p.rows; row += r.step) {
        const unsigned long long at = row * p.len;
        sm_row(x + at, y + at, 1ull, p.len, p.kind, r.lane, r.group, mode);
    }
}

template <typename T>
__device__ __forceinline__ void sm_cols(const T* __restrict__ x, T* __restrict__ y, const SoftmaxParams& p) {
    for (unsigned long long row = rlx_thread(); row < p.rows; row += rlx_threads()) {
        const unsigned long long o = row / p.inner, i = row % p.inner;
        const unsigned long long at = o * p.len * p.inner + i;
        sm_row(x + at, y + at, (unsigned long long)p.inner, p.len, p.kind, 0u, 1u, RW_THREAD);
    }
}

#define RLX_SOFTMAX(SFX, T)                                                                   \
    extern "C" __global__ void softmax_warp_##SFX(const T* x, T* y, SoftmaxParams p) {        \
        rlx_grid_wait();                                                                         \
        sm_rows<T>(x, y, p, RW_WARP);                                                            \
    }                                                                                         \
    extern "C" __global__ void softmax_block_##SFX(const T* x, T* y, SoftmaxParams p) {       \
        rlx_grid_wait();                                                                         \
        sm_rows<T>(x, y, p, RW_BLOCK);                                                           \
    }                                                                                         \
    extern "C" __global__ void softmax_col_##SFX(const T* x, T* y, SoftmaxParams p) {         \
        rlx_grid_wait();                                                                      \
        sm_cols<T>(x, y, p);                                                                  \
    }

RLX_SOFTMAX(f32, float)
RLX_SOFTMAX(f64, double)
RLX_SOFTMAX(f16, rlx_half)
RLX_SOFTMAX(bf16, rlx_bf16)
