// scatter: ScatterElements and ScatterND into a copy of the data (the
// output), with reductions none, add, mul, max and min, duplicate indices
// applied in order as the CPU backend does: each thread owns the outputs
// its writes can reach and loops over their updates in order (mode 0: one
// update line along the axis; mode 1: one element of the slice, over every
// index tuple). ScatterParams is rlx-gpu's (kernels/scatter.rs).
// Reductions: integers wrap, floats compute in double and round once (the
// CPU backend's f64), max
// and min propagate NaN. An index out of range (the CPU backend's error) is
// skipped: nothing is written for it.

template <typename T> __device__ __forceinline__ T sc_combine(unsigned int r, T a, T b);

template <typename T> __device__ __forceinline__ T sc_int(unsigned int r, T a, T b) {
    typedef unsigned long long U;
    switch (r) {
    case 1u:
        return (T)((U)(long long)a + (U)(long long)b);
    case 2u:
        return (T)((U)(long long)a * (U)(long long)b);
    case 3u:
        return b > a ? b : a;
    case 4u:
        return b < a ? b : a;
    default:
        return b;
    }
}

template <typename T> __device__ __forceinline__ T sc_float(unsigned int r, T a, T b) {
    if (r == 0u) {
        return b;
    }
    double x = to_f64(a), y = to_f64(b);
    double v;
    switch (r) {
    case 1u:
        v = x + y;
        break;
    case 2u:
        v = x * y;
        break;
    case 3u:
        if (x != x || y != y) {
            return from_f64<T>(__longlong_as_double(0x7ff8000000000000ll));
        }
        return y > x ? b : a;
    default:
        if (x != x || y != y) {
            return from_f64<T>(__longlong_as_double(0x7ff8000000000000ll));
        }
        return y < x ? b : a;
    }
    return from_f64<T>(v);
}

#define RLX_SC_INT(T)                                                                          \
    template <> __device__ __forceinline__ T sc_combine<T>(unsigned int r, T a, T b) {         \
        return sc_int<T>(r, a, b);                                                             \
    }
#define RLX_SC_FLOAT(T)                                                                        \
    template <> __device__ __forceinline__ T sc_combine<T>(unsigned int r, T a, T b) {         \
        return sc_float<T>(r, a, b);                                                           \
    }
RLX_SC_INT(i8)
RLX_SC_INT(i16)
RLX_SC_INT(i32)
RLX_SC_INT(i64)
RLX_SC_INT(u8)
RLX_SC_INT(u16)
RLX_SC_INT(u32)
RLX_SC_INT(u64)
RLX_SC_FLOAT(f32)
RLX_SC_FLOAT(f64)
RLX_SC_FLOAT(f16)
RLX_SC_FLOAT(bf16)

template <typename T>
__device__ __forceinline__ void scatter_body(const void* idx, const T* __restrict__ upd,
                                             T* __restrict__ y, const ScatterParams& p) {
    for (unsigned long long it = rlx_thread(); it < p.items; it += rlx_threads()) {
        if (p.mode == 0u) {
            unsigned int r = (unsigned int)it;
            unsigned long long ub = 0, yb = 0;
            for (int d = (int)p.rank - 1; d >= 0; --d) {
                if ((unsigned int)d == p.axis) {
                    continue;
                }
                unsigned int c = r % p.dims[d];
                r /= p.dims[d];
                ub += (unsigned long long)c * p.strides[d];
                yb += (unsigned long long)c * p.y_strides[d];
            }
            for (unsigned int j = 0; j < p.dims[p.axis]; ++j) {
                unsigned long long u = ub + (unsigned long long)j * p.strides[p.axis];
                long long k = rlx_index(idx, u, p.idx_wide, p.axis_len);
                if (k < 0) {
                    continue;
                }
                unsigned long long at = yb + (unsigned long long)k * p.y_strides[p.axis];
                y[at] = sc_combine<T>(p.reduction, y[at], upd[u]);
            }
        } else {
            for (unsigned int t = 0; t < p.tuples; ++t) {
                unsigned long long off = it;
                bool ok = true;
                for (unsigned int q = 0; q < p.k; ++q) {
                    long long v = rlx_index(idx, (unsigned long long)t * p.k + q, p.idx_wide,
                                            p.dims[q]);
                    ok = ok && v >= 0;
                    off += (unsigned long long)(v < 0 ? 0 : v) * p.strides[q];
                }
                if (ok) {
                    y[off] = sc_combine<T>(p.reduction, y[off],
                                           upd[(unsigned long long)t * p.slice + it]);
                }
            }
        }
    }
}

#define RLX_SCATTER(T)                                                                         \
    extern "C" __global__ void scatter_##T(const void* idx, const T* upd, T* y,                \
                                           ScatterParams p) {                                  \
        rlx_grid_wait();                                                                       \
        scatter_body<T>(idx, upd, y, p);                                                       \
    }
RLX_SCATTER(f32)
RLX_SCATTER(f64)
RLX_SCATTER(f16)
RLX_SCATTER(bf16)
RLX_SCATTER(i8)
RLX_SCATTER(i16)
RLX_SCATTER(i32)
RLX_SCATTER(i64)
RLX_SCATTER(u8)
RLX_SCATTER(u16)
RLX_SCATTER(u32)
RLX_SCATTER(u64)
