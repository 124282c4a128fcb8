// loss: negative log-likelihood over input (N, C, d...) and targets
// (N, d...), as the CPU backend computes it (in double): per target without
// a reduction, else summed (and divided by the summed weights of the
// targets not ignored, for mean) by one block. NllLossParams is rlx-gpu's
// (kernels/loss.rs). A target out of [0, C) that is not ignored (the CPU
// backend's error) counts as ignored.

template <typename T>
__device__ __forceinline__ bool nll_term(const T* x, const void* tg, const T* w,
                                         unsigned long long c, const NllLossParams& p,
                                         double* loss, double* weight) {
    long long t = p.idx_wide ? ((const long long*)tg)[c] : (long long)((const int*)tg)[c];
    if ((p.has_ignore && t == (long long)p.ignore) || t < 0 || t >= (long long)p.classes) {
        return false;
    }
    unsigned long long b = c / p.inner, d = c % p.inner;
    double wt = p.has_weight ? to_f64(w[t]) : 1.0;
    *loss = -to_f64(x[(b * p.classes + (unsigned long long)t) * p.inner + d]) * wt;
    *weight = wt;
    return true;
}

template <typename T>
__device__ __forceinline__ void nll_body(const T* __restrict__ x, const void* tg,
                                         const T* w, T* __restrict__ y,
                                         const NllLossParams& p) {
    if (p.mode == 0u) {
        for (unsigned long long c = rlx_thread(); c < p.count; c += rlx_threads()) {
            double l = 0.0, wt = 0.0;
            nll_term<T>(x, tg, w, c, p, &l, &wt);
            y[c] = from_f64<T>(l);
        }
        return;
    }
    __shared__ double ls[32], ws[32];
    double sl = 0.0, sw = 0.0;
    for (unsigned long long c = threadIdx.x; c < p.count; c += blockDim.x) {
        double l, wt;
        if (nll_term<T>(x, tg, w, c, p, &l, &wt)) {
            sl += l;
            sw += wt;
        }
    }
    for (int o = 16; o > 0; o >>= 1) {
        sl += __shfl_down_sync(0xffffffffu, sl, o);
        sw += __shfl_down_sync(0xffffffffu, sw, o);
    }
    unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    if (lane == 0u) {
        ls[warp] = sl;
        ws[warp] = sw;
    }
    __syncthreads();
    if (threadIdx.x == 0u) {
        double a = 0.0, b = 0.0;
        for (unsigned int i = 0; i < (blockDim.x >> 5); ++i) {
            a += ls[i];
            b += ws[i];
        }
        y[0] = from_f64<T>(p.mode == 2u ? a / b : a);
    }
}

#define RLX_NLL(T)                                                                             \
    extern "C" __global__ void nll_##T(const T* x, const void* tg, const T* w, T* y,           \
                                       NllLossParams p) {                                      \
        rlx_grid_wait();                                                                       \
        nll_body<T>(x, tg, w, y, p);                                                           \
    }
RLX_NLL(f32)
RLX_NLL(f64)
RLX_NLL(f16)
RLX_NLL(bf16)
