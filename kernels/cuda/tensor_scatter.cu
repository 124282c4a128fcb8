// tensor_scatter: a key/value cache write (ONNX TensorScatter). y is the
// cache with each batch row's update written along the axis from its write
// index (0 without indices), wrapping when circular; update positions past
// a linear cache's end are not written. One output element per thread.
// TensorScatterParams is rlx-gpu's (kernels/tensor_scatter.rs). Entries
// tensor_scatter_b<element bytes>: the values only move; tensor_update_b<...>
// where y is the cache's own buffer.

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

// The same write where y is the cache's own buffer (the memory plan gave
// the output its operand's slot): only the update's elements move, one a
// thread, to where ts_body puts them; positions past a linear cache's end
// are not written.
template <typename V>
__device__ __forceinline__ void ts_update(const V* __restrict__ upd, const long long* __restrict__ write,
                                          V* __restrict__ y, const TensorScatterParams& p) {
    const unsigned long long span = (unsigned long long)p.len * p.inner;
    const unsigned long long rows = p.per_batch / span;
    const unsigned long long per_batch = rows * p.upd_len * p.inner;
    const unsigned long long n = p.n / p.per_batch * per_batch;
    for (unsigned long long i = rlx_thread(); i < n; i += rlx_threads()) {
        const unsigned long long b = i / per_batch, rest = i % per_batch;
        const unsigned long long row = rest / ((unsigned long long)p.upd_len * p.inner);
        const unsigned long long at = rest % ((unsigned long long)p.upd_len * p.inner);
        const long long d = (long long)(at / p.inner);
        const unsigned long long r = at % p.inner;
        long long s = (p.has_indices ? write[b] : 0) + d;
        if (p.circular) {
            s %= (long long)p.len;
            if (s < 0) {
                s += (long long)p.len;
            }
        } else if (s < 0 || s >= (long long)p.len) {
            continue;
        }
        y[(b * rows + row) * span + (unsigned long long)s * p.inner + r] = upd[i];
    }
}

#define RLX_TENSOR_SCATTER(W, V)                                                              \
    extern "C" __global__ void tensor_scatter_##W(const V* past, const V* upd,               \
                                                  const long long* write, V* y,               \
                                                  TensorScatterParams p) {                    \
        rlx_grid_wait();                                                                      \
        ts_body<V>(past, upd, write, y, p);                                                   \
    }

#define RLX_TENSOR_UPDATE(W, V)                                                               \
    extern "C" __global__ void tensor_update_##W(const V* upd, const long long* write, V* y,   \
                                                 TensorScatterParams p) {                      \
        rlx_grid_wait();                                                                       \
        ts_update<V>(upd, write, y, p);                                                        \
    }

RLX_TENSOR_UPDATE(b1, b1)
RLX_TENSOR_UPDATE(b2, b2)
RLX_TENSOR_UPDATE(b4, b4)
RLX_TENSOR_UPDATE(b8, b8)
RLX_TENSOR_SCATTER(b1, b1)
RLX_TENSOR_SCATTER(b2, b2)
RLX_TENSOR_SCATTER(b4, b4)
RLX_TENSOR_SCATTER(b8, b8)
