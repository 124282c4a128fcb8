// Reductions: reduce_* (sum, mean, max, min, prod, l1, l2, log_sum,
// log_sum_exp, sum_square), global pools and argmax/argmin, with the CPU
// backend's semantics. Parameter struct: CudaReduceParams (rlx-gpu
// reduce.rs). Each row (the elements reduced into one output) is split into
// `splits` chunks; a warp (`warp` = 1) or a block reduces each chunk through
// shuffles. With one split the launch writes the outputs; otherwise it
// writes each chunk's state to scratch (48 bytes a state) and `*_final`
// combines a row's states, one warp per output.
//
// Entry points per dtype, `reduce_<sfx>` and `reduce_<sfx>_final`, take
// (x, y, p): T is the element type, V the type values combine in (float for
// f32/f16/bf16, double for f64, 64-bit integers for integers, wrapping like
// the CPU backend). Integer means of 64-bit elements sum in __int128
// (`_wide`), float-valued kinds of integers (l2, log_sum, log_sum_exp)
// compute in double (`_dbl`) and convert back like the CPU backend (through
// a saturating 128-bit integer, then wrapping). Kind codes as in
// ReduceParams: 0 sum, 1 mean, 2 max, 3 min, 4 prod, 5 l1, 6 l2, 7 log_sum,
// 8 log_sum_exp, 9 sum_square, 10 argmax, 11 argmin.

template <typename V> struct RdState {
    V v;          // the accumulated value (log_sum_exp: the running max)
    V s;          // log_sum_exp: the sum of exp(x - v)
    long long i;  // argmax/argmin: the index (-1: none yet)
};

template <typename T> struct RdFloat { static const bool value = false; };
template <> struct RdFloat<float> { static const bool value = true; };
template <> struct RdFloat<double> { static const bool value = true; };

__device__ __forceinline__ float rd_up(float x) { return x; }
__device__ __forceinline__ double rd_up(double x) { return x; }
__device__ __forceinline__ float rd_up(rlx_half x) { return rlx_h2f(x); }
__device__ __forceinline__ float rd_up(rlx_bf16 x) { return rlx_b2f(x); }
__device__ __forceinline__ long long rd_up(signed char x) { return x; }
__device__ __forceinline__ long long rd_up(short x) { return x; }
__device__ __forceinline__ long long rd_up(int x) { return x; }
__device__ __forceinline__ long long rd_up(long long x) { return x; }
__device__ __forceinline__ unsigned long long rd_up(unsigned char x) { return x; }
__device__ __forceinline__ unsigned long long rd_up(unsigned short x) { return x; }
__device__ __forceinline__ unsigned long long rd_up(unsigned int x) { return x; }
__device__ __forceinline__ unsigned long long rd_up(unsigned long long x) { return x; }

// The identities of max (lowest) and min (highest) for elements of T, as
// the CPU backend converts -inf and +inf to T.
template <typename T> struct RdLim {
    static __device__ __forceinline__ T lo() { return (T)0; }
    static __device__ __forceinline__ T hi() { return (T)0; }
};
#define RLX_LIM(T, U, LO, HI)                                     \
    template <> struct RdLim<T> {                                 \
        static __device__ __forceinline__ U lo() { return LO; }   \
        static __device__ __forceinline__ U hi() { return HI; }   \
    };
RLX_LIM(float, float, -__int_as_float(0x7f800000), __int_as_float(0x7f800000))
RLX_LIM(rlx_half, float, -__int_as_float(0x7f800000), __int_as_float(0x7f800000))
RLX_LIM(rlx_bf16, float, -__int_as_float(0x7f800000), __int_as_float(0x7f800000))
RLX_LIM(double, double, -__longlong_as_double(0x7ff0000000000000ll), __longlong_as_double(0x7ff0000000000000ll))
RLX_LIM(signed char, long long, -128ll, 127ll)
RLX_LIM(short, long long, -32768ll, 32767ll)
RLX_LIM(int, long long, -2147483648ll, 2147483647ll)
RLX_LIM(long long, long long, -9223372036854775807ll - 1ll, 9223372036854775807ll)
RLX_LIM(unsigned char, unsigned long long, 0ull, 255ull)
RLX_LIM(unsigned short, unsigned long long, 0ull, 65535ull)
RLX_LIM(unsigned int, unsigned long long, 0ull, 4294967295ull)
RLX_LIM(unsigned long long, unsigned long long, 0ull, 18446744073709551615ull)

template <typename T, typename V> __device__ __forceinline__ V rd_lo() { return (V)RdLim<T>::lo(); }
template <typename T, typename V> __device__ __forceinline__ V rd_hi() { return (V)RdLim<T>::hi(); }

template <typename V> __device__ __forceinline__ bool rd_isnan(V x) { return x != x; }

// exp(a - m), 1 where both are the same infinity (log_sum_exp runs on
// floats and doubles only).
template <typename V> __device__ __forceinline__ V rd_scale(V a, V m) { return (V)1; }
template <> __device__ __forceinline__ float rd_scale<float>(float a, float m) {
    return a == m ? 1.0f : expf(a - m);
}
template <> __device__ __forceinline__ double rd_scale<double>(double a, double m) {
    return a == m ? 1.0 : exp(a - m);
}

template <typename V> __device__ __forceinline__ RdState<V> rd_init(unsigned int kind, V lo, V hi) {
    RdState<V> st;
    st.i = -1;
    st.s = (V)0;
    switch (kind) {
        case 2: st.v = lo; break;
        case 3: st.v = hi; break;
        case 4: st.v = (V)1; break;
        case 8: st.v = lo; break;
        default: st.v = (V)0; break;
    }
    return st;
}

// Folds b into a.
template <typename V>
__device__ __forceinline__ void rd_combine(unsigned int kind, bool last, RdState<V>& a, const RdState<V>& b) {
    switch (kind) {
        case 2:
            if (!rd_isnan(a.v) && (rd_isnan(b.v) || b.v > a.v)) a.v = b.v;
            break;
        case 3:
            if (!rd_isnan(a.v) && (rd_isnan(b.v) || b.v < a.v)) a.v = b.v;
            break;
        case 4: a.v = a.v * b.v; break;
        case 8: {
            V m = b.v > a.v ? b.v : a.v;
            a.s = a.s * rd_scale(a.v, m) + b.s * rd_scale(b.v, m);
            a.v = m;
            break;
        }
        case 10:
        case 11: {
            // A NaN at index 0 wins (the CPU scan never leaves it); other
            // NaNs never enter a state.
            bool sticky_a = a.i == 0 && rd_isnan(a.v);
            bool sticky_b = b.i == 0 && rd_isnan(b.v);
            if (sticky_a || b.i < 0) break;
            if (sticky_b || a.i < 0) { a = b; break; }
            bool better = kind == 10 ? b.v > a.v : b.v < a.v;
            bool tie = b.v == a.v && (last ? b.i > a.i : b.i < a.i);
            if (better || tie) a = b;
            break;
        }
        default: a.v = a.v + b.v; break;
    }
}

// Folds element x (at reduced index r) into a.
template <typename V>
__device__ __forceinline__ void rd_add(unsigned int kind, bool last, RdState<V>& a, V x, long long r) {
    switch (kind) {
        case 0:
        case 1:
        case 7: a.v = a.v + x; break;
        case 5: a.v = a.v + (x < (V)0 ? (V)0 - x : x); break;
        case 6:
        case 9: a.v = a.v + x * x; break;
        case 4: a.v = a.v * x; break;
        default: {
            RdState<V> e;
            e.v = x;
            e.s = (V)1;
            e.i = r;
            if ((kind == 10 || kind == 11) && rd_isnan(x) && r != 0) break;
            rd_combine(kind, last, a, e);
        }
    }
}

template <typename S> __device__ __forceinline__ S rd_shfl_down(const S& a, int off) {
    S r;
    const int* src = (const int*)&a;
    int* dst = (int*)&r;
#pragma unroll
    for (int k = 0; k < (int)(sizeof(S) / 4); k++) {
        dst[k] = __shfl_down_sync(0xffffffffu, src[k], off);
    }
    return r;
}

template <typename V> __device__ __forceinline__ void rd_warp(unsigned int kind, bool last, RdState<V>& a) {
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
        RdState<V> b = rd_shfl_down(a, off);
        rd_combine(kind, last, a, b);
    }
}

// The block's state in thread 0 (every thread of the block calls it).
template <typename V>
__device__ __forceinline__ void rd_block(unsigned int kind, bool last, RdState<V>& a, V lo, V hi) {
    __shared__ RdState<V> part[32];
    rd_warp(kind, last, a);
    unsigned int warp = threadIdx.x / 32u, lane = threadIdx.x % 32u;
    if (lane == 0u) part[warp] = a;
    __syncthreads();
    if (warp == 0u) {
        a = lane < (blockDim.x + 31u) / 32u ? part[lane] : rd_init<V>(kind, lo, hi);
        rd_warp(kind, last, a);
    }
}

// The output value of a row's state, in V (float-valued kinds on integers
// are instantiated with V = double).
template <typename V> __device__ __forceinline__ V rd_finish(unsigned int kind, unsigned int count, const RdState<V>& a) {
    return kind == 1u ? a.v / (V)(count > 0u ? count : 1u) : a.v;
}
template <> __device__ __forceinline__ float rd_finish<float>(unsigned int kind, unsigned int count, const RdState<float>& a) {
    switch (kind) {
        case 1: return a.v / (float)(count > 0u ? count : 1u);
        case 6: return sqrtf(a.v);
        case 7: return logf(a.v);
        case 8: return a.v + logf(a.s);
        default: return a.v;
    }
}
template <> __device__ __forceinline__ double rd_finish<double>(unsigned int kind, unsigned int count, const RdState<double>& a) {
    switch (kind) {
        case 1: return a.v / (double)(count > 0u ? count : 1u);
        case 6: return sqrt(a.v);
        case 7: return log(a.v);
        case 8: return a.v + log(a.s);
        default: return a.v;
    }
}

// f64 to a 64-bit integer as the CPU backend does it: saturate to i128,
// then keep the low 64 bits.
__device__ __forceinline__ unsigned long long rd_wrap_bits(double r) {
    if (r != r) return 0ull;
    if (r >= 1.7014118346046923e38) return 18446744073709551615ull;
    if (r <= -1.7014118346046923e38) return 0ull;
    double t = trunc(r);
    if (fabs(t) < 9223372036854775808.0) return (unsigned long long)(long long)t;
    double m = fmod(fabs(t), 18446744073709551616.0);
    unsigned long long u = (unsigned long long)m;
    return t < 0.0 ? 0ull - u : u;
}

__device__ __forceinline__ void rd_store(float* y, float v) { *y = v; }
__device__ __forceinline__ void rd_store(double* y, double v) { *y = v; }
__device__ __forceinline__ void rd_store(rlx_half* y, float v) { *y = rlx_f2h(v); }
__device__ __forceinline__ void rd_store(rlx_bf16* y, float v) { *y = rlx_f2b(v); }
template <typename T> __device__ __forceinline__ void rd_store(T* y, long long v) { *y = (T)v; }
template <typename T> __device__ __forceinline__ void rd_store(T* y, unsigned long long v) { *y = (T)v; }
template <typename T> __device__ __forceinline__ void rd_store(T* y, __int128 v) { *y = (T)v; }
template <typename T> __device__ __forceinline__ void rd_store(T* y, double v) { *y = (T)rd_wrap_bits(v); }

// Writes a finished row: the index for argmax/argmin (0 when none), else the value.
template <typename T, typename V>
__device__ __forceinline__ void rd_write(void* y, unsigned long long o, const CudaReduceParams& p, const RdState<V>& a) {
    if (p.kind >= 10u) {
        ((long long*)y)[o] = a.i < 0 ? 0ll : a.i;
    } else {
        rd_store(((T*)y) + o, rd_finish<V>(p.kind, p.count, a));
    }
}

__device__ __forceinline__ unsigned long long rd_kept(const CudaReduceParams& p, unsigned long long o) {
    unsigned long long off = 0ull;
#pragma unroll
    for (int a = 5; a >= 0; a--) {
        if (a < (int)p.kept_rank) {
            unsigned long long d = p.kept_dims[a];
            off += (o % d) * p.kept_strides[a];
            o /= d;
        }
    }
    return off;
}

__device__ __forceinline__ unsigned long long rd_reduced(const CudaReduceParams& p, unsigned long long r) {
    if (p.reduced_rank == 1u) return r * p.reduced_strides[0];
    unsigned long long off = 0ull;
#pragma unroll
    for (int a = 5; a >= 0; a--) {
        if (a < (int)p.reduced_rank) {
            unsigned long long d = p.reduced_dims[a];
            off += (r % d) * p.reduced_strides[a];
            r /= d;
        }
    }
    return off;
}

template <typename T, typename V>
__device__ __forceinline__ void rd_rows(const T* __restrict__ x, void* __restrict__ y, const CudaReduceParams& p) {
    const bool last = p.select_last != 0u;
    const V lo = rd_lo<T, V>(), hi = rd_hi<T, V>();
    const unsigned long long items = (unsigned long long)p.n_out * p.splits;
    const unsigned int group = p.warp ? 32u : blockDim.x;
    const unsigned int lane = threadIdx.x % group;
    const unsigned long long per_block = blockDim.x / group;
    const unsigned long long chunk = ((unsigned long long)p.count + p.splits - 1ull) / p.splits;
    const unsigned long long block =
        (unsigned long long)blockIdx.x + (unsigned long long)blockIdx.y * gridDim.x;
    for (unsigned long long it = block * per_block + threadIdx.x / group; it < items;
         it += (unsigned long long)gridDim.x * gridDim.y * per_block) {
        const unsigned long long o = it / p.splits, sp = it % p.splits;
        const unsigned long long start = sp * chunk;
        const unsigned long long end = start + chunk < p.count ? start + chunk : p.count;
        const T* row = x + rd_kept(p, o);
        RdState<V> a = rd_init<V>(p.kind, lo, hi);
        for (unsigned long long r = start + lane; r < end; r += group) {
            rd_add<V>(p.kind, last, a, (V)rd_up(row[rd_reduced(p, r)]), (long long)r);
        }
        if (p.warp) {
            rd_warp(p.kind, last, a);
        } else {
            rd_block(p.kind, last, a, lo, hi);
        }
        if (lane == 0u) {
            if (p.splits == 1u) {
                rd_write<T, V>(y, o, p, a);
            } else {
                *(RdState<V>*)((unsigned char*)y + it * 48ull) = a;
            }
        }
        if (!p.warp) __syncthreads();
    }
}

// One warp per output combines the output's `splits` states.
template <typename T, typename V>
__device__ __forceinline__ void rd_final(const unsigned char* __restrict__ parts, void* __restrict__ y, const CudaReduceParams& p) {
    const bool last = p.select_last != 0u;
    const unsigned int lane = threadIdx.x % 32u;
    for (unsigned long long o = rlx_thread() / 32ull; o < p.n_out; o += rlx_threads() / 32ull) {
        RdState<V> a = rd_init<V>(p.kind, rd_lo<T, V>(), rd_hi<T, V>());
        for (unsigned int s = lane; s < p.splits; s += 32u) {
            rd_combine(p.kind, last, a, *(const RdState<V>*)(parts + (o * p.splits + s) * 48ull));
        }
        rd_warp(p.kind, last, a);
        if (lane == 0u) rd_write<T, V>(y, o, p, a);
    }
}

#define RLX_REDUCE(SFX, T, V)                                                                   \
    extern "C" __global__ void reduce_##SFX(const T* x, unsigned char* y, CudaReduceParams p) { \
        rlx_grid_wait();                                                                        \
        rd_rows<T, V>(x, y, p);                                                                 \
    }                                                                                           \
    extern "C" __global__ void reduce_##SFX##_final(const unsigned char* x, unsigned char* y,   \
                                                    CudaReduceParams p) {                       \
        rlx_grid_wait();                                                                        \
        rd_final<T, V>(x, y, p);                                                                \
    }

RLX_REDUCE(f32, float, float)
RLX_REDUCE(f64, double, double)
RLX_REDUCE(f16, rlx_half, float)
RLX_REDUCE(bf16, rlx_bf16, float)
RLX_REDUCE(i8, signed char, long long)
RLX_REDUCE(i16, short, long long)
RLX_REDUCE(i32, int, long long)
RLX_REDUCE(i64, long long, long long)
RLX_REDUCE(u8, unsigned char, unsigned long long)
RLX_REDUCE(u16, unsigned short, unsigned long long)
RLX_REDUCE(u32, unsigned int, unsigned long long)
RLX_REDUCE(u64, unsigned long long, unsigned long long)
RLX_REDUCE(i64_wide, long long, __int128)
RLX_REDUCE(u64_wide, unsigned long long, __int128)
RLX_REDUCE(i8_dbl, signed char, double)
RLX_REDUCE(i16_dbl, short, double)
RLX_REDUCE(i32_dbl, int, double)
RLX_REDUCE(i64_dbl, long long, double)
RLX_REDUCE(u8_dbl, unsigned char, double)
RLX_REDUCE(u16_dbl, unsigned short, double)
RLX_REDUCE(u32_dbl, unsigned int, double)
RLX_REDUCE(u64_dbl, unsigned long long, double)
