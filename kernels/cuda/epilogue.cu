// Epilogue: `y = act(y + bias)` in place, after a library call (a cuDNN
// convolution, a cuBLASLt GEMM) whose own epilogue cannot do it. The bias is
// read through broadcast strides over y's collapsed dims (EpilogueParams:
// n elements, rank, dims, bias_s, flags bit 0: add the bias, act: 0 none,
// 1 relu, 2 sigmoid, 3 tanh, 4 gelu (erf), 5 gelu (tanh), 6 silu). The
// activations follow the CPU backend (relu keeps NaN; the sigmoids in the
// form 1 / (1 + e^-x)). f16 and bf16 compute in float, f64 in double.

template <typename C>
__device__ __forceinline__ C epi_act(C x, unsigned int act) {
    const C one = (C)1;
    switch (act) {
    case 1u: return x < (C)0 ? (C)0 : x;
    case 2u: return one / (one + exp(-x));
    case 3u: return tanh(x);
    case 4u: return (C)0.5 * x * (one + erf(x * (C)0.70710678118654752440));
    case 5u: return (C)0.5 * x * (one + tanh((C)0.79788456080286535588 * (x + (C)0.044715 * x * x * x)));
    case 6u: return x / (one + exp(-x));
    default: return x;
    }
}

template <typename T, typename C>
__device__ __forceinline__ void epilogue(T* y, const T* bias, const EpilogueParams& p) {
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
        y[i] = (T)(epi_act<C>(v, p.act));
    }
}

extern "C" __global__ void epilogue_f32(float* y, const float* bias, EpilogueParams p) {
    epilogue<float, float>(y, bias, p);
}
extern "C" __global__ void epilogue_f64(double* y, const double* bias, EpilogueParams p) {
    epilogue<double, double>(y, bias, p);
}
extern "C" __global__ void epilogue_f16(rlx_f16* y, const rlx_f16* bias, EpilogueParams p) {
    epilogue<rlx_f16, float>(y, bias, p);
}
extern "C" __global__ void epilogue_bf16(rlx_bf16* y, const rlx_bf16* bias, EpilogueParams p) {
    epilogue<rlx_bf16, float>(y, bias, p);
}
