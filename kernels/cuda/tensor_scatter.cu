// tensor_scatter: a key/value cache write (ONNX TensorScatter). y is the
// cache with each batch row's update written along the axis from its write
// index (0 without indices), wrapping when circular; update positions past
// a linear cache's end are not written. One output element per thread.
// TensorScatterParams is rlx-gpu's (kernels/tensor_scatter.rs). Entries
// tensor_scatter_b<element bytes>: the values only move.

template <typename V>
__device__ __forceinline__ void ts_body(const V* __restrict__ past, const V* __restrict__ upd,
                                        const long long* __restrict__ write, V* __restrict__ y,
                                        const TensorScatterParams& p) {
    const unsigned long long span = (unsigned long long)p.len * p.inner;
    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {
        unsigned long long b = i / p.per_batch, rest = i % p.per_batch;
        unsigned long long row = rest / span, at = rest % span;
        long long s = (long long)(at / p.inner);
        unsigned long long r = at % p.inner;
        long long w = p.has_indices ? write[b] : 0;
        long long d = s - w;
        if (p.circular) {
            d %= (long long)p.len;
            if (d < 0) {
                d += (long long)p.len;
            }
        }
        V v = past[i];
        if (d >= 0 && d < (long long)p.upd_len) {
            unsigned long long rows = p.per_batch / span;
            v = upd[((b * rows + row) * p.upd_len + (unsigned long long)d) * p.inner + r];
        }
        y[i] = v;
    }
}

#define RLX_TENSOR_SCATTER(W, V)                                                              \
    extern "C" __global__ void tensor_scatter_##W(const V* past, const V* upd,               \
                                                  const long long* write, V* y,               \
                                                  TensorScatterParams p) {                    \
        ts_body<V>(past, upd, write, y, p);                                                   \
    }

RLX_TENSOR_SCATTER(b1, b1)
RLX_TENSOR_SCATTER(b2, b2)
RLX_TENSOR_SCATTER(b4, b4)
RLX_TENSOR_SCATTER(b8, b8)
