// one_hot: y[o, k, r] = values[1] where index[o, r] (negative counts from
// the end, floats truncated) is k, else values[0], as the CPU backend.
// OneHotParams is rlx-gpu's (kernels/one_hot.rs). Entries
// one_hot_<index dtype>_b<value bytes>: the values only move.

template <typename I> __device__ __forceinline__ long long oh_index(I v) { return (long long)v; }
__device__ __forceinline__ long long oh_float(double f) {
    if (f != f) {
        return 0;
    }
    if (f <= -9223372036854775808.0) {
        return (long long)(-9223372036854775807ll - 1ll);
    }
    if (f >= 9223372036854775807.0) {
        return 9223372036854775807ll;
    }
    return (long long)f;
}
template <> __device__ __forceinline__ long long oh_index<f32>(f32 v) { return oh_float(v); }
template <> __device__ __forceinline__ long long oh_index<f64>(f64 v) { return oh_float(v); }
template <> __device__ __forceinline__ long long oh_index<f16>(f16 v) { return oh_float(to_f64(v)); }
template <> __device__ __forceinline__ long long oh_index<bf16>(bf16 v) { return oh_float(to_f64(v)); }

template <typename I, typename V>
__device__ __forceinline__ void oh_body(const I* __restrict__ idx, const V* __restrict__ values,
                                        V* __restrict__ y, const OneHotParams& p) {
    const V off = values[0], on = values[1];
    const unsigned long long di = (unsigned long long)p.depth * p.inner;
    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {
        unsigned long long o = i / di, rest = i % di;
        unsigned long long k = rest / p.inner, r = rest % p.inner;
        long long j = oh_index<I>(idx[o * p.inner + r]);
        if (j < 0) {
            j += (long long)p.depth;
        }
        y[i] = (j >= 0 && (unsigned long long)j == k) ? on : off;
    }
}

#define RLX_ONE_HOT(I, W, V)                                                                  \
    extern "C" __global__ void one_hot_##I##_##W(const I* idx, const V* values, V* y,        \
                                                 OneHotParams p) {                           \
        rlx_grid_wait();                                                                     \
        oh_body<I, V>(idx, values, y, p);                                                    \
    }
#define RLX_ONE_HOT_ALL(I) \
    RLX_ONE_HOT(I, b1, b1) \
    RLX_ONE_HOT(I, b2, b2) \
    RLX_ONE_HOT(I, b4, b4) \
    RLX_ONE_HOT(I, b8, b8)

RLX_ONE_HOT_ALL(f32)
RLX_ONE_HOT_ALL(f64)
RLX_ONE_HOT_ALL(f16)
RLX_ONE_HOT_ALL(bf16)
RLX_ONE_HOT_ALL(i8)
RLX_ONE_HOT_ALL(i16)
RLX_ONE_HOT_ALL(i32)
RLX_ONE_HOT_ALL(i64)
RLX_ONE_HOT_ALL(u8)
RLX_ONE_HOT_ALL(u16)
RLX_ONE_HOT_ALL(u32)
RLX_ONE_HOT_ALL(u64)
