// indexing: gather along an axis, gather_elements, gather_nd and trilu
// (instantiated per element size: they move bytes), and cumulative sums and
// products along an axis (per dtype). Parameter structs: GatherParams
// (rlx-gpu kernels/gather.rs), GatherElementsParams, TriluParams and
// CumulativeParams (kernels/indexing.rs), GatherNdParams (kernels/gather.rs).
// Indices are i32 or i64 (`idx_wide`), negative ones count from the end; an
// index out of range (the CPU backend's error) reads as a zero element.

template <typename T>
__device__ __forceinline__ void gather_body(const T* __restrict__ x, const void* idx,
                                            T* __restrict__ y, const GatherParams& p) {
    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {
        unsigned long long inner = i % p.inner;
        unsigned long long r = i / p.inner;
        unsigned long long j = r % p.n_idx;
        unsigned long long o = r / p.n_idx;
        long long k = rlx_index(idx, j, p.idx_wide, p.axis_len);
        y[i] = k < 0 ? T(0) : x[(o * p.axis_len + (unsigned long long)k) * p.inner + inner];
    }
}

template <typename T>
__device__ __forceinline__ void gather_elements_body(const T* __restrict__ x, const void* idx,
                                                     T* __restrict__ y,
                                                     const GatherElementsParams& p) {
    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {
        unsigned int r = (unsigned int)i;
        unsigned long long off = 0;
        for (int d = (int)p.rank - 1; d >= 0; --d) {
            unsigned int c = r % p.out_dims[d];
            r /= p.out_dims[d];
            if ((unsigned int)d != p.axis) {
                off += (unsigned long long)c * p.data_strides[d];
            }
        }
        long long k = rlx_index(idx, i, p.idx_wide, p.axis_len);
        y[i] = k < 0 ? T(0) : x[off + (unsigned long long)k * p.data_strides[p.axis]];
    }
}

template <typename T>
__device__ __forceinline__ void gather_nd_body(const T* __restrict__ x, const void* idx,
                                               T* __restrict__ y, const GatherNdParams& p) {
    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {
        unsigned long long e = i % p.slice;
        unsigned long long t = i / p.slice;
        unsigned long long off = (t / p.batch_tuples) * p.batch_elems;
        bool ok = true;
        for (unsigned int q = 0; q < p.k; ++q) {
            long long v = rlx_index(idx, t * p.k + q, p.idx_wide, p.dims[q]);
            ok = ok && v >= 0;
            off += (unsigned long long)(v < 0 ? 0 : v) * p.strides[q];
        }
        y[i] = ok ? x[off + e] : T(0);
    }
}

template <typename T>
__device__ __forceinline__ void trilu_body(const T* __restrict__ x, T* __restrict__ y,
                                           const TriluParams& p) {
    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {
        long long col = (long long)(i % p.cols);
        long long row = (long long)((i / p.cols) % p.rows);
        long long diff = col - row;
        bool keep = p.upper ? diff >= (long long)p.k : diff <= (long long)p.k;
        y[i] = keep ? x[i] : T(0);
    }
}

#define RLX_INDEXING(S)                                                                        \
    extern "C" __global__ void gather_##S(const b##S* x, const void* idx, b##S* y,             \
                                          GatherParams p) {                                    \
        rlx_grid_wait();                                                                       \
        gather_body<b##S>(x, idx, y, p);                                                       \
    }                                                                                          \
    extern "C" __global__ void gather_elements_##S(const b##S* x, const void* idx, b##S* y,    \
                                                   GatherElementsParams p) {                   \
        rlx_grid_wait();                                                                       \
        gather_elements_body<b##S>(x, idx, y, p);                                              \
    }                                                                                          \
    extern "C" __global__ void gather_nd_##S(const b##S* x, const void* idx, b##S* y,          \
                                             GatherNdParams p) {                               \
        rlx_grid_wait();                                                                       \
        gather_nd_body<b##S>(x, idx, y, p);                                                    \
    }                                                                                          \
    extern "C" __global__ void trilu_##S(const b##S* x, b##S* y, TriluParams p) {              \
        rlx_grid_wait();                                                                       \
        trilu_body<b##S>(x, y, p);                                                             \
    }                                                                                          \
    extern "C" __global__ void trilu_k_##S(const b##S* x, b##S* y, const long long* k,         \
                                           TriluParams p) {                                    \
        rlx_grid_wait();                                                                       \
        p.k = (int)max(min(k[0], 2147483647ll), -2147483647ll);                                \
        trilu_body<b##S>(x, y, p);                                                             \
    }
RLX_INDEXING(1)
RLX_INDEXING(2)
RLX_INDEXING(4)
RLX_INDEXING(8)

// ----- cumulative sums and products -----
// Floats accumulate in double and integers in u64 with wrapping (the CPU
// backend's f64 and wrapping i128, truncated to the element), so a parallel
// scan differs from the CPU's serial one only by float rounding order.

template <typename T, bool F> struct Acc;
template <typename T> struct Acc<T, true> {
    typedef double A;
    static __device__ __forceinline__ A load(T v) { return to_f64(v); }
    static __device__ __forceinline__ T store(A v) { return from_f64<T>(v); }
};
template <typename T> struct Acc<T, false> {
    typedef unsigned long long A;
    static __device__ __forceinline__ A load(T v) { return (A)(long long)v; }
    static __device__ __forceinline__ T store(A v) { return (T)v; }
};

template <typename A> __device__ __forceinline__ A cum_op(A a, A b, unsigned int prod) {
    return prod ? a * b : a + b;
}

// One thread per line (lines `inner` apart read coalesced): for inner >= 32.
template <typename T>
__device__ __forceinline__ void cum_line_body(const T* __restrict__ x, T* __restrict__ y,
                                              const CumulativeParams& p) {
    typedef Acc<T, Num<T>::is_float> C;
    typedef typename C::A A;
    for (unsigned long long l = rlx_thread(); l < p.lines; l += rlx_threads()) {
        unsigned long long base = (l / p.inner) * p.len * p.inner + l % p.inner;
        A acc = p.prod ? (A)1 : (A)0;
        for (unsigned int s = 0; s < p.len; ++s) {
            unsigned int k = p.reverse ? p.len - 1u - s : s;
            unsigned long long at = base + (unsigned long long)k * p.inner;
            A v = C::load(x[at]);
            A next = cum_op(acc, v, p.prod);
            y[at] = C::store(p.exclusive ? acc : next);
            acc = next;
        }
    }
}

// One block per line: chunks of blockDim elements, a warp-shuffle scan per
// warp, a scan of the warp totals, and a carry across chunks.
template <typename T>
__device__ __forceinline__ void cum_block_body(const T* __restrict__ x, T* __restrict__ y,
                                               const CumulativeParams& p) {
    typedef Acc<T, Num<T>::is_float> C;
    typedef typename C::A A;
    __shared__ A warp_tot[32];
    unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const A id = p.prod ? (A)1 : (A)0;
    unsigned long long block =
        (unsigned long long)blockIdx.x + (unsigned long long)blockIdx.y * gridDim.x;
    for (unsigned long long l = block; l < p.lines;
         l += (unsigned long long)gridDim.x * gridDim.y) {
        unsigned long long base = (l / p.inner) * p.len * p.inner + l % p.inner;
        A carry = id;
        for (unsigned int c0 = 0; c0 < p.len; c0 += blockDim.x) {
            unsigned int s = c0 + threadIdx.x;
            unsigned int k = p.reverse ? p.len - 1u - s : s;
            unsigned long long at = base + (unsigned long long)k * p.inner;
            A v = s < p.len ? C::load(x[at]) : id;
            A incl = v;
            for (unsigned int o = 1; o < 32u; o <<= 1) {
                A n = __shfl_up_sync(0xffffffffu, incl, o);
                if (lane >= o) {
                    incl = cum_op(n, incl, p.prod);
                }
            }
            A excl = __shfl_up_sync(0xffffffffu, incl, 1);
            if (lane == 0u) {
                excl = id;
            }
            if (lane == 31u) {
                warp_tot[warp] = incl;
            }
            __syncthreads();
            if (warp == 0u) {
                A t = lane < warps ? warp_tot[lane] : id;
                for (unsigned int o = 1; o < 32u; o <<= 1) {
                    A n = __shfl_up_sync(0xffffffffu, t, o);
                    if (lane >= o) {
                        t = cum_op(n, t, p.prod);
                    }
                }
                warp_tot[lane] = t;
            }
            __syncthreads();
            A prefix = warp == 0u ? carry : cum_op(carry, warp_tot[warp - 1u], p.prod);
            if (s < p.len) {
                y[at] = C::store(cum_op(prefix, p.exclusive ? excl : incl, p.prod));
            }
            carry = cum_op(carry, warp_tot[warps - 1u], p.prod);
            __syncthreads();
        }
    }
}

// The line geometry of an axis read on the device (normalized, clamped into
// the rank: the CPU backend's error for an axis out of range cannot be
// raised here).
__device__ __forceinline__ CumulativeParams cum_axis_params(const void* axis,
                                                            const CumulativeAxisParams& q) {
    long long a = q.axis_wide ? ((const long long*)axis)[0] : (long long)((const int*)axis)[0];
    if (a < 0) {
        a += q.rank;
    }
    a = a < 0 ? 0 : (a >= (long long)q.rank ? (long long)q.rank - 1 : a);
    unsigned long long len = q.dims[a], inner = 1, total = 1;
    for (unsigned int d = 0; d < q.rank; ++d) {
        total *= q.dims[d];
        if ((long long)d > a) {
            inner *= q.dims[d];
        }
    }
    CumulativeParams p;
    p.lines = (unsigned int)(len == 0ull ? 0ull : total / len);
    p.len = (unsigned int)len;
    p.inner = (unsigned int)inner;
    p.exclusive = q.exclusive;
    p.reverse = q.reverse;
    p.prod = q.prod;
    return p;
}

#define RLX_CUMULATIVE(T)                                                                      \
    extern "C" __global__ void cum_line_##T(const T* x, T* y, CumulativeParams p) {            \
        rlx_grid_wait();                                                                       \
        cum_line_body<T>(x, y, p);                                                             \
    }                                                                                          \
    extern "C" __global__ void cum_axis_##T(const T* x, T* y, const void* axis,                \
                                            CumulativeAxisParams q) {                          \
        rlx_grid_wait();                                                                       \
        cum_line_body<T>(x, y, cum_axis_params(axis, q));                                      \
    }                                                                                          \
    extern "C" __global__ void cum_block_##T(const T* x, T* y, CumulativeParams p) {           \
        rlx_grid_wait();                                                                       \
        cum_block_body<T>(x, y, p);                                                            \
    }
RLX_CUMULATIVE(f32)
RLX_CUMULATIVE(f64)
RLX_CUMULATIVE(f16)
RLX_CUMULATIVE(bf16)
RLX_CUMULATIVE(i8)
RLX_CUMULATIVE(i16)
RLX_CUMULATIVE(i32)
RLX_CUMULATIVE(i64)
RLX_CUMULATIVE(u8)
RLX_CUMULATIVE(u16)
RLX_CUMULATIVE(u32)
RLX_CUMULATIVE(u64)
