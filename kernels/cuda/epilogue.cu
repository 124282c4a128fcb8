// Epilogue: `y = act(y + bias + residual)` in place, after a library call (a
// cuDNN convolution, a cuBLASLt GEMM) whose own epilogue cannot do it. The
// activations are activation.cuh's. f16 and bf16 compute in float, f64 in
// double.
//
// Two forms:
// - `epilogue_*` (EpilogueParams): any bias broadcast, read through strides
//   over y's collapsed dims (n elements, rank, dims, bias_s); flags bit 0:
//   add the bias, bit 1: add the residual (y's shape, contiguous); act: 0
//   none, 1 relu, 2 sigmoid, 3 tanh, 4 gelu (erf), 5 gelu (tanh), 6 silu.
// - `channel_epilogue_*` (ChannelEpilogueParams): 16-byte vectors of y (and
//   of the residual), a bias per channel of `y [outer, channels, inner]`.
//   Bit 2 clear: inner is at least the vector, so a vector meets at most
//   two channels; set: inner is 1, channels a multiple of the vector, and a
//   vector reads as many biases. The planner checks sizes and alignment.

template <typename T, typename C>
__device__ __forceinline__ void epilogue(T* y, const T* bias, const T* res, const EpilogueParams& p) {
    for (unsigned long long i = rlx_thread(); i < p.n; i += rlx_threads()) {
        C v = (C)y[i];
        if (p.flags & 1u) {
            // n fits in 32 bits: 32-bit division is several times cheaper.
            unsigned int rem = (unsigned int)i, at = 0;
            for (int d = (int)p.rank - 1; d >= 0; --d) {
                unsigned int c = rem % p.dims[d];
                rem /= p.dims[d];
                at += c * p.bias_s[d];
            }
            v += (C)bias[at];
        }
        if (p.flags & 2u) {
            v += (C)res[i];
        }
        y[i] = (T)(epi_act<C>(v, p.act));
    }
}

template <typename T, int V>
struct __align__(16) rlx_pack {
    T v[V];
};

template <typename T, typename C>
__device__ __forceinline__ void channel_epilogue(T* y, const T* bias, const T* res,
                                                 const ChannelEpilogueParams& p) {
    constexpr int V = 16 / sizeof(T);
    rlx_pack<T, V>* yv = reinterpret_cast<rlx_pack<T, V>*>(y);
    const rlx_pack<T, V>* rv = reinterpret_cast<const rlx_pack<T, V>*>(res);
    for (unsigned long long i = rlx_thread(); i < p.vectors; i += rlx_threads()) {
        rlx_pack<T, V> a = yv[i];
        C v[V];
#pragma unroll
        for (int j = 0; j < V; ++j) v[j] = (C)a.v[j];
        if (p.flags & 1u) {
            unsigned int e = (unsigned int)i * V;
            if (p.flags & 4u) {
                // A vector's biases, one 16-byte load where they are
                // aligned as one (V 2-byte loads a thread before).
                unsigned int c = e % p.channels;
                if (((unsigned long long)(bias + c)) % 16u == 0u) {
                    const rlx_pack<T, V> b = *reinterpret_cast<const rlx_pack<T, V>*>(bias + c);
#pragma unroll
                    for (int j = 0; j < V; ++j) v[j] += (C)b.v[j];
                } else {
#pragma unroll
                    for (int j = 0; j < V; ++j) v[j] += (C)bias[c + j];
                }
            } else {
                // At most one channel boundary in a vector (inner >= V).
                unsigned int run = e / p.inner, at = e - run * p.inner, c = run % p.channels;
                C b0 = (C)bias[c];
                C b1 = at + V > p.inner ? (C)bias[c + 1 == p.channels ? 0u : c + 1] : b0;
#pragma unroll
                for (int j = 0; j < V; ++j) v[j] += at + j < p.inner ? b0 : b1;
            }
        }
        if (p.flags & 2u) {
            rlx_pack<T, V> r = rv[i];
#pragma unroll
            for (int j = 0; j < V; ++j) v[j] += (C)r.v[j];
        }
        epi_act_vec<C, V>(v, p.act);
#pragma unroll
        for (int j = 0; j < V; ++j) a.v[j] = (T)v[j];
        yv[i] = a;
    }
}

#define RLX_EPILOGUE(NAME, T, C)                                                                \
    extern "C" __global__ void epilogue_##NAME(T* y, const T* bias, const T* res,               \
                                               EpilogueParams p) {                              \
        rlx_grid_wait();                                                                        \
        epilogue<T, C>(y, bias, res, p);                                                        \
    }                                                                                           \
    extern "C" __global__ void channel_epilogue_##NAME(T* y, const T* bias, const T* res,       \
                                                       ChannelEpilogueParams p) {               \
        rlx_grid_wait();                                                                        \
        channel_epilogue<T, C>(y, bias, res, p);                                                \
    }

RLX_EPILOGUE(f32, float, float)
RLX_EPILOGUE(f64, double, double)
RLX_EPILOGUE(f16, rlx_f16, float)
RLX_EPILOGUE(bf16, rlx_bf16, float)
