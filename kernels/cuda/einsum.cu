// einsum: y[o] = sum over the summed labels of the product of the
// operands, as the CPU backend's direct loop: floats multiply and sum in
// double, integers wrap (64-bit arithmetic, truncated when stored).
// EinsumParams is rlx-gpu's (kernels/einsum.rs): labels 0..n_out index the
// output, the rest are summed; per operand a stride along each label.
// Entries einsum_<T>; absent operands are never read.

template <typename T> struct EsAcc {
    typedef double type;
};
#define ES_INT(T, A) \
    template <> struct EsAcc<T> { typedef A type; };
ES_INT(i8, long long)
ES_INT(i16, long long)
ES_INT(i32, long long)
ES_INT(i64, long long)
ES_INT(u8, unsigned long long)
ES_INT(u16, unsigned long long)
ES_INT(u32, unsigned long long)
ES_INT(u64, unsigned long long)

template <typename A, typename T> __device__ __forceinline__ A es_up(T v) { return (A)v; }
template <> __device__ __forceinline__ double es_up<double, f16>(f16 v) { return to_f64(v); }
template <> __device__ __forceinline__ double es_up<double, bf16>(bf16 v) { return to_f64(v); }
template <typename T, typename A> __device__ __forceinline__ T es_down(A v) { return (T)v; }
template <> __device__ __forceinline__ f16 es_down<f16, double>(double v) { return from_f64<f16>(v); }
template <> __device__ __forceinline__ bf16 es_down<bf16, double>(double v) { return from_f64<bf16>(v); }

__device__ __forceinline__ const unsigned int* es_strides(const EinsumParams& p, unsigned int i) {
    return i == 0u ? p.s0 : (i == 1u ? p.s1 : (i == 2u ? p.s2 : p.s3));
}

template <typename T>
__device__ __forceinline__ void es_body(const T* x0, const T* x1, const T* x2, const T* x3,
                                        T* __restrict__ y, const EinsumParams& p) {
    typedef typename EsAcc<T>::type A;
    const T* xs[4] = {x0, x1, x2, x3};
    for (unsigned long long o = rlx_thread(); o < p.n; o += rlx_threads()) {
        // Each operand's offset from the output labels.
        unsigned long long base[4] = {0, 0, 0, 0};
        unsigned long long rem = o;
        for (int d = (int)p.n_out - 1; d >= 0; --d) {
            unsigned long long c = rem % p.sizes[d];
            rem /= p.sizes[d];
            for (unsigned int i = 0; i < p.operands; ++i) {
                base[i] += c * es_strides(p, i)[d];
            }
        }
        A acc = (A)0;
        for (unsigned long long s = 0; s < p.n_sum; ++s) {
            unsigned long long off[4] = {base[0], base[1], base[2], base[3]};
            unsigned long long r = s;
            for (int d = (int)p.labels - 1; d >= (int)p.n_out; --d) {
                unsigned long long c = r % p.sizes[d];
                r /= p.sizes[d];
                for (unsigned int i = 0; i < p.operands; ++i) {
                    off[i] += c * es_strides(p, i)[d];
                }
            }
            A prod = (A)1;
            for (unsigned int i = 0; i < p.operands; ++i) {
                prod *= es_up<A, T>(xs[i][off[i]]);
            }
            acc += prod;
        }
        y[o] = es_down<T, A>(acc);
    }
}

#define RLX_EINSUM(T)                                                                          \
    extern "C" __global__ void einsum_##T(const T* x0, const T* x1, const T* x2, const T* x3,  \
                                          T* y, EinsumParams p) {                              \
        rlx_grid_wait();                                                                       \
        es_body<T>(x0, x1, x2, x3, y, p);                                                      \
    }
RLX_EINSUM(f32)
RLX_EINSUM(f64)
RLX_EINSUM(f16)
RLX_EINSUM(bf16)
RLX_EINSUM(i8)
RLX_EINSUM(i16)
RLX_EINSUM(i32)
RLX_EINSUM(i64)
RLX_EINSUM(u8)
RLX_EINSUM(u16)
RLX_EINSUM(u32)
RLX_EINSUM(u64)
